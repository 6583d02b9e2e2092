"""`python -m shapelang.checker.ops`: print the operation tables of docs/language.md."""
from .table import markdown

print(markdown(), end="")
