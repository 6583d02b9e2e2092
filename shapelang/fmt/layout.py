"""The canonical layout, computed from the grammar's tokens.

Rules (docs/editors.md, "Formatting"):
- a statement starts at its block's indentation: 0 at the top, 2 inside `block ... end`;
  a line that continues a pipeline (starts with `->`) is indented 2 more;
- one space around `->`, none before and one after `,` and `:`, none inside brackets,
  none between a name and the `(` of its call (a name, a space and `(` are two arguments
  of an operation, `slice 1 H (H + 1)`, and stay apart);
  anywhere else a run of spaces becomes one and tokens written together stay together
  (operators in sizes and shapes keep the learner's spacing);
- trailing comments of consecutive lines line up at column 16, or one space after
  the longest code of the run when that is further right;
- a comment line takes the indentation of the code line after it; blank lines stay,
  trailing spaces and blank lines at the end go; the file ends with one newline.
Tokens, comment texts (exercise directives like `# ?name: 2 points` included) and
the line structure never change: the result is checked to have exactly the same
tokens on the same lines before it is returned.
"""
from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass

from lark.exceptions import LarkError

from ..syntax.diagnostics import Diagnostic
from ..syntax.parser import ParseFailure, grammar_text, parse

INDENT = "  "
COMMENT_COLUMN = 16   # 1-based: where trailing comments start unless code is longer
_LAYOUT = {"_NL", "CONTINUATION", "COMMENT"}
_NO_SPACE_BEFORE = {",", ":", ")", "]"}
_NO_SPACE_AFTER = {"(", "["}


class FormatError(Exception):
    """The text does not parse: `diagnostic` says where and why."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class LayoutBug(Exception):
    """The layout would change a token: the file is left alone (please report it)."""


@dataclass
class _Tok:
    kind: str
    value: str
    column: int   # 0-based
    end: int

    @property
    def punct(self) -> str | None:
        return None if self.kind in ("STRING", "NAME", "HOLE") else self.value


@dataclass
class _Line:
    tokens: list
    comment: str | None
    indent: str        # as written
    text: str = ""     # the formatted code, without indentation
    new_indent: str = ""


@functools.cache
def _lexer():
    import lark

    grammar = lark.Lark(grammar_text(), parser="lalr")
    comment = grammar.get_terminal("COMMENT").pattern.to_regexp()
    return grammar, re.compile(comment)


def _lines(source: str) -> list[_Line]:
    """Each physical line's code tokens and comment, from the grammar's own lexer."""
    grammar, comment_re = _lexer()
    raw = source.split("\n")
    lines = [_Line([], None, r[: len(r) - len(r.lstrip(" \t"))]) for r in raw]
    for tok in grammar.lex(source, dont_ignore=True):
        line = tok.line - 1
        if tok.type in ("_NL", "CONTINUATION", "COMMENT"):
            # layout tokens carry the comments of the lines they span
            for m in comment_re.finditer(tok.value):
                at = line + tok.value.count("\n", 0, m.start())
                lines[at].comment = m.group(0).rstrip()
        elif not tok.type.startswith("__IGNORE"):
            col = tok.column - 1
            lines[line].tokens.append(_Tok(tok.type, tok.value, col, col + len(tok.value)))
    return lines


def _join(tokens: list[_Tok], raw: str) -> str:
    out = [tokens[0].value]
    for a, b in itertools.pairwise(tokens):
        gap = raw[a.end:b.column]
        if a.punct == "->" or b.punct == "->" or a.punct in (",", ":"):
            sep = " "
        elif (b.punct in _NO_SPACE_BEFORE or a.punct in _NO_SPACE_AFTER
              or b.kind == "CALL_OPEN"):   # a call: `sqrt(Dk)`, `stack N Block(x)`
            sep = ""
        else:
            sep = " " if gap else ""
        out.append(sep + b.value)
    return "".join(out)


def _indent(lines: list[_Line]) -> None:
    depth = 0
    for line in lines:
        if not line.tokens:
            continue
        first = line.tokens[0].punct
        if first == "end":
            depth = max(0, depth - 1)
        line.new_indent = INDENT * (depth + (first == "->"))
        if first == "block":
            depth += 1
    # a comment line belongs to the code after it (a comment before `end`: to the body)
    following = ""
    for line in reversed(lines):
        if line.tokens:
            following = line.new_indent
            if line.tokens[0].punct == "end":
                following += INDENT
        elif line.comment is not None:
            line.new_indent = following


def _align(lines: list[_Line]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.tokens:
            out.append(line.new_indent + line.comment if line.comment is not None else "")
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].tokens and lines[j].comment is not None:
            j += 1
        if j == i:   # code without a comment
            out.append(line.new_indent + line.text)
            i += 1
            continue
        width = max(COMMENT_COLUMN - 2, *(len(x.new_indent + x.text) for x in lines[i:j]))
        for x in lines[i:j]:
            out.append((x.new_indent + x.text).ljust(width) + " " + x.comment)
        i = j
    return out


def format_text(text: str, path: str = "<input>") -> str:
    """The canonical layout of a spec; FormatError when it does not parse."""
    try:
        parse(text, path)
    except ParseFailure as err:
        raise FormatError(err.diagnostic) from None
    source = text.replace("\r\n", "\n")
    if not source.endswith("\n"):
        source += "\n"
    raw = source.split("\n")
    try:
        lines = _lines(source)
    except LarkError as err:   # the grammar's plain lexer disagrees with the parser's
        raise LayoutBug(f"cannot split the file into tokens: {err}") from None
    for n, line in enumerate(lines):
        if line.tokens:
            line.text = _join(line.tokens, raw[n])
    _indent(lines)
    out = _align(lines)
    while out and not out[-1]:
        out.pop()
    result = "\n".join(x.rstrip() for x in out) + "\n" if out else ""
    _same_tokens(lines, result)
    return result


def _same_tokens(before: list[_Line], result: str) -> None:
    """The layout must not change a token or move one to another line."""
    try:
        after = _lines(result)
    except LarkError as err:
        raise LayoutBug(f"the layout does not split into tokens: {err}") from None
    want = [[(t.kind, t.value) for t in x.tokens] for x in before]
    got = [[(t.kind, t.value) for t in x.tokens] for x in after]
    while want and not want[-1]:
        want.pop()
    while got and not got[-1]:
        got.pop()
    if want != got:   # a bug in the rules above, never the user's: write nothing
        line = next(n for n, (w, g) in enumerate(zip([*want, []], [*got, []]), 1) if w != g)
        raise LayoutBug(f"the layout would change the tokens of line {line}; left unchanged")
