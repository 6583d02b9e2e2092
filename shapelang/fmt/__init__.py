"""Formatter: the canonical layout of a `.shape` file (`shapelang fmt`).

Works on the token stream of the language's own grammar, one physical line at a
time: it changes only the spaces between tokens, the indentation and the column
of trailing comments, never a token, a comment's text or the line structure.
"""
from .layout import FormatError, LayoutBug, format_text

__all__ = ["FormatError", "LayoutBug", "format_text"]
