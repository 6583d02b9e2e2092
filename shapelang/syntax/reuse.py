"""Parsing a text again after an edit: the statements whose lines did not change are
taken from the last parse instead of being parsed again.

A statement's nodes depend only on its own lines and on where they start (spans are
those of the whole text), so a statement is reused when the same lines of text start
at the same line as before. A one-line edit re-parses one statement; an inserted or
deleted line re-parses the statements at and below it. The text is cut into
statements as recovery cuts it (recovery.statements_of: a line with text and its
`->` lines; a `block` to its `end`); a text with a syntax error, an unclosed block or
an over-long line is parsed whole by `parse_recovering`, so every result, diagnostics
included, is the one a fresh parse gives.
"""
from __future__ import annotations

from .grammar import NotParsed, run
from .limits import ParseFailure
from .nodes import Spec
from .parser import _long_lines, _prepare, parse_recovering
from .recovery import _BLOCK, _END, statements_of


class ParseMemo:
    """The statements of the last text parsed: (first line, its lines' text) -> nodes."""

    def __init__(self):
        self.units: dict[tuple[int, str], tuple] = {}
        self.parsed = 0    # statements parsed (not reused) so far: what tests count

    def parse(self, text: str, path: str = "<input>", *, remember: bool = True):
        """`parse_recovering(text, path)`'s result, reusing unchanged statements.
        `remember`: keep this text's statements for the next parse (off for texts
        that are tried once, such as a candidate fix)."""
        try:
            text, source = _prepare(text)
        except ParseFailure:
            return parse_recovering(text, path)
        if _long_lines(source):
            return parse_recovering(text, path)
        lines = source.lines[:-1]
        units = _units(lines)
        if units is None:
            return parse_recovering(text, path)
        out, seen = [], {}
        for first, last in units:
            key = (first, "\n".join(lines[first - 1:last]))
            nodes = self.units.get(key)
            if nodes is None:
                try:
                    nodes = tuple(run(source, "start", first, last, lark=False))
                except (NotParsed, ParseFailure):
                    return parse_recovering(text, path)
                self.parsed += 1
            seen[key] = nodes
            out += nodes
        if remember:
            self.units = seen
        return Spec(path, text, tuple(out)), [], set()


def _units(lines: list[str]) -> list[tuple[int, int]] | None:
    """(first, last) line of each top-level statement, a block with its body; None when a
    block has no `end` (recovery reports that)."""
    stmts = statements_of(lines)
    out, k = [], 0
    while k < len(stmts):
        first = lines[stmts[k][0] - 1]
        if _END(first):
            return None
        if not _BLOCK(first):
            out.append(stmts[k])
            k += 1
            continue
        j = k + 1
        while j < len(stmts) and not _END(lines[stmts[j][0] - 1]):
            if _BLOCK(lines[stmts[j][0] - 1]):
                return None
            j += 1
        if j == len(stmts):
            return None
        out.append((stmts[k][0], stmts[j][1]))
        k = j + 1
    return out
