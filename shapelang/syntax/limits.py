"""What the syntax stage refuses: limits on untrusted text, and the one exception it raises.

Every refusal is a `ParseFailure` carrying one `Diagnostic` with a line and a column.
"""
from __future__ import annotations

from .diagnostics import Diagnostic
from .nodes import Span

MAX_BYTES = 256 * 1024
MAX_LINES = 5000        # lines with text: blank lines and comments do not count
MAX_DEPTH = 64
MAX_LINE_CHARS = 2000  # a longer line is refused unread (its statement, when recovering)
MAX_DIGITS = 18
MAX_RANK = 32


class ParseFailure(Exception):
    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def fail(code: str, message: str, line: int, col: int, help: str | None = None,
         end_col: int | None = None) -> ParseFailure:
    span = Span(line, col, line, end_col if end_col is not None else col + 1)
    return ParseFailure(Diagnostic(code, message, span, help))


def line_too_long(line: int) -> ParseFailure:
    return fail("E004", f"line {line} is longer than {MAX_LINE_CHARS} characters", line, 1,
                "break the statement into steps with names, or continue it on lines "
                "that start with `->`")
