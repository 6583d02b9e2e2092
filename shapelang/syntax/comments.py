"""Where a line's comment starts, by the grammar's own rule: `#` to the end of the line,
except inside a quoted pattern (`STRING: /"[^"\\n]*"/`, e.g. an einsum equation). Every
stage that reads comments (acknowledged warnings, exercise tags, fixes that rewrite a line,
generated code that keeps the spec's comments) asks here, so that they all agree with the
parser.
"""
from __future__ import annotations


def comment_start(line: str) -> int | None:
    """The index of the `#` that starts the line's comment, or None."""
    k = line.find("#")
    if k < 0:
        return None
    if '"' not in line[:k]:
        return k
    quoted = False
    for k, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            return k
    return None


def split_comment(line: str) -> tuple[str, str | None]:
    """The code of a line (right-stripped) and its comment from the `#` (None: no comment)."""
    k = comment_start(line)
    return (line.rstrip(), None) if k is None else (line[:k].rstrip(), line[k:])


def code_of(line: str) -> str:
    """The line without its comment (right-stripped)."""
    return split_comment(line)[0]


def comment_of(line: str) -> str:
    """The text after the comment's `#`, or '' when the line has none."""
    k = comment_start(line)
    return "" if k is None else line[k + 1:]
