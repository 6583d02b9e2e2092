"""Positions between the language and LSP.

A `Span` of the parser is 1-based: line, column (characters), with an exclusive
end column. LSP counts lines from 0 and characters in the units of the position
encoding the server announced: UTF-16 code units unless the client offered UTF-8
or UTF-32 first (pygls chooses it), so a character outside the Basic Multilingual
Plane (an emoji in a comment) counts two UTF-16 units, four UTF-8 bytes, one
UTF-32 unit. `LineMap` converts both ways for one text.
"""
from __future__ import annotations

from .. import api


def normalise(text: str) -> str:
    """The text as `shapelang check` reads a file: universal newlines."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _utf8(ch: str) -> int:
    code = ord(ch)
    return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4


UNITS = {"utf-16": lambda ch: 2 if ord(ch) > 0xFFFF else 1, "utf-8": _utf8, "utf-32": lambda ch: 1}


def length(s: str, encoding: str = "utf-16") -> int:
    """`s` measured in the units of a position encoding."""
    unit = UNITS[encoding]
    return sum(map(unit, s))


class LineMap:
    def __init__(self, text: str, encoding: str = "utf-16"):
        self.lines = normalise(text).split("\n")
        self.encoding = encoding

    def line(self, line: int) -> str:
        """Line `line` (1-based), empty past the end."""
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def to_lsp(self, line: int, column: int) -> tuple[int, int]:
        """(0-based line, character in the encoding's units) of a 1-based line and column,
        clamped to the text."""
        line = min(max(line, 1), len(self.lines))
        text = self.lines[line - 1]
        col = min(max(column, 1), len(text) + 1)
        return line - 1, length(text[:col - 1], self.encoding)

    def from_lsp(self, line: int, character: int) -> tuple[int, int]:
        """1-based (line, column) of an LSP position; a position inside a character (a
        surrogate pair, a UTF-8 sequence) or past the end of the line is clamped."""
        line = min(max(line, 0), len(self.lines) - 1)
        text = self.lines[line]
        unit = UNITS[self.encoding]
        units = 0
        for k, ch in enumerate(text):
            units += unit(ch)
            if units > character:
                return line + 1, k + 1
        return line + 1, len(text) + 1

    def span_range(self, span: api.Span) -> tuple[tuple[int, int], tuple[int, int]]:
        start = self.to_lsp(span.line, span.column)
        end = self.to_lsp(span.end_line, span.end_column)
        return start, max(start, end)


def contains(span: api.Span, line: int, column: int) -> bool:
    """Whether 1-based (line, column) lies in `span` (its end column included, so that a
    cursor just after a name still finds it)."""
    if (line, column) < (span.line, span.column):
        return False
    return (line, column) <= (span.end_line, span.end_column)


def size(span: api.Span) -> tuple[int, int]:
    """A sort key: smaller spans first."""
    return span.end_line - span.line, span.end_column - span.column if span.line == span.end_line else 10**6
