"""Codegen, layout: lines as `ruff format` (black's style) writes them.

The generated module must pass `ruff format --check`: a statement and its trailing
comment fit in 88 columns, or the comment goes on its own line above; a statement
longer than that is split at its last bracket, the way black splits it (the
arguments on one indented line, or one per line with a trailing comma).
"""
from __future__ import annotations

from ..syntax import brackets
from ..syntax.comments import comment_start

WIDTH = 88


def fit(code: str, comment: str | None, indent: int) -> list[str]:
    """`code` (which may start with its own relative indentation) with its trailing
    `comment`, as lines that black leaves alone; `indent` is the column the enclosing
    block adds (8 in a method body)."""
    inner = len(code) - len(code.lstrip(" "))
    pad = code[:inner]
    col = indent + inner
    stmt = code[inner:]
    lines = _split(stmt, col)
    if comment:
        if len(lines) == 1 and col + len(lines[0]) + 2 + len(comment) + 2 <= WIDTH:
            lines[0] += f"  # {comment}"
        else:
            lines.insert(0, f"# {comment}")
    return [pad + line for line in lines]


def _split(stmt: str, col: int) -> list[str]:
    if col + len(stmt) <= WIDTH or stmt.startswith("#") or not stmt.endswith((")", "]", "}")):
        return [stmt]
    open_at = _opening(stmt)
    if open_at is None:
        return [stmt]
    head, body = stmt[:open_at + 1], stmt[open_at + 1:-1]
    close = stmt[-1]
    if not body.strip():
        return [stmt]
    # a dict literal that does not fit is one item a line (as ruff and black write it)
    if col + 4 + len(body) <= WIDTH and not body.rstrip().endswith(",") and close != "}":
        return [head, "    " + body, close]
    parts = _top_level(body)
    return [head] + ["    " + p.strip() + "," for p in parts if p.strip()] + [close]


def _opening(stmt: str) -> int | None:
    """Where the bracket that closes the statement opens."""
    return brackets.last_opening(stmt, "\"'", escapes=True)


def _top_level(body: str) -> list[str]:
    """`body` split at its top-level commas (not inside brackets or strings)."""
    return [body[a:b] for a, b in brackets.pieces(body, (",",), "\"'", escapes=True)]


# ------------------------------------------------------------------ the spec's comments

def comments_above(lines: list[str], line: int) -> list[str]:
    """The comment lines directly above source line `line` (1-based), without blank lines
    between, as written after their `#`."""
    out = []
    k = line - 2
    while 0 <= k < len(lines):
        text = lines[k].strip()
        if not text.startswith("#"):
            break
        out.append(text[1:])
        k -= 1
    return out[::-1]


def trailing_comment(text: str) -> str | None:
    """The text after the `#` of a spec line's comment (None: no comment)."""
    k = comment_start(text)
    return None if k is None else text[k + 1:]


def comment_line(text: str) -> str:
    """A spec comment (the text after its `#`) as a Python comment line, `# text`."""
    text = text.rstrip()
    if not text:
        return "#"
    return "#" + (text if text.startswith(" ") else " " + text)


def signature(indent: int, head: str, args: list[str], tail: str) -> list[str]:
    """`def name(args) -> T:` as black writes it when it is too long for one line."""
    one = f"{head}({', '.join(args)}){tail}"
    if indent + len(one) <= WIDTH or not args:
        return [one]
    body = ", ".join(args)
    if indent + 4 + len(body) <= WIDTH:
        return [f"{head}(", "    " + body, f"){tail}"]
    return [f"{head}("] + [f"    {a}," for a in args] + [f"){tail}"]
