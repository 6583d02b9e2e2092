"""`python -m shapelang.checker.explanations`: print docs/diagnostics.md's "Every code explained"."""
from ...syntax.diagnostics import CODES
from . import markdown

print(markdown(CODES), end="")
