"""Advice on what the checker found: the labels that point back at a finding's cause
(causes.py), the candidate rewrites (suggest.py, causes.py), the rewrites proved by
checking again before they are shown (fixes.py), and the warnings a comment acknowledges
(acknowledged.py). The checker calls these; none of them checks a shape itself."""
