"""Positions between the language and LSP.

A `Span` of the parser is 1-based: line, column (characters), with an exclusive
end column. LSP counts lines from 0 and characters in UTF-16 code units, so a
character outside the Basic Multilingual Plane (an emoji in a comment) counts
twice there. `LineMap` converts both ways for one text.
"""
from __future__ import annotations

from .. import api


def normalise(text: str) -> str:
    """The text as `shapelang check` reads a file: universal newlines."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def utf16_len(s: str) -> int:
    return sum(2 if ord(ch) > 0xFFFF else 1 for ch in s)


class LineMap:
    def __init__(self, text: str):
        self.lines = normalise(text).split("\n")

    def line(self, line: int) -> str:
        """Line `line` (1-based), empty past the end."""
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def to_lsp(self, line: int, column: int) -> tuple[int, int]:
        """(0-based line, UTF-16 character) of a 1-based line and column, clamped to the text."""
        line = min(max(line, 1), len(self.lines))
        text = self.lines[line - 1]
        col = min(max(column, 1), len(text) + 1)
        return line - 1, utf16_len(text[:col - 1])

    def from_lsp(self, line: int, character: int) -> tuple[int, int]:
        """1-based (line, column) of an LSP position; a character inside a surrogate pair
        or past the end of the line is clamped."""
        line = min(max(line, 0), len(self.lines) - 1)
        text = self.lines[line]
        units = 0
        for k, ch in enumerate(text):
            units += 2 if ord(ch) > 0xFFFF else 1
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
