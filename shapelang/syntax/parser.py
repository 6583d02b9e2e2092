"""Parse stage: `.shape` text -> nodes (shapelang.syntax.nodes).

The grammar lives in grammars/shapelang.lark; grammar.py compiles it and build.py
makes the nodes while lark parses, in one pass. Untrusted text is bounded before
lark sees it: size, lines with text, nesting. Syntax errors become friendly
diagnostics; `parse_recovering` reports every broken statement (recovery.py).
"""
from __future__ import annotations

import re
from itertools import accumulate

from .grammar import KEYWORDS, Text, grammar_text, lark_parser, run
from .limits import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_LINE_CHARS,
    MAX_LINES,
    MAX_RANK,
    ParseFailure,
    fail,
    line_too_long,
)
from .nodes import Spec

__all__ = [
    "KEYWORDS",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "MAX_RANK",
    "ParseFailure",
    "grammar_text",
    "parse",
    "parse_recovering",
]

_lark = lark_parser     # the compiled grammar (bench times its build)

_CONTENT_LINE = re.compile(r"^[\t ]*[^\t \r\n#]", re.MULTILINE)
_BRACKETS = re.compile(r"[(\[]+|[)\]]+")
_LONG_LINE = re.compile(rf"^[^\n]{{{MAX_LINE_CHARS + 1}}}", re.MULTILINE)


def _long_lines(text: Text) -> list[int]:
    """Lines (1-based) longer than MAX_LINE_CHARS."""
    source = text.source
    if len(source) <= MAX_LINE_CHARS:
        return []
    return [source.count("\n", 0, m.start()) + 1 for m in _LONG_LINE.finditer(source)]


def _check_bounds(text: str) -> None:
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise fail("E004", f"file is larger than {MAX_BYTES // 1024} KB", 1, 1,
                   "a spec is a few hundred lines; split it or remove generated text")
    if text.count("\n") >= MAX_LINES:          # else it cannot have more lines with text
        for k, m in enumerate(_CONTENT_LINE.finditer(text)):
            if k == MAX_LINES:
                line = text.count("\n", 0, m.start()) + 1
                raise fail("E004", f"file has more than {MAX_LINES} lines", line, 1,
                           "a spec is a few hundred lines; split it or remove generated text")
    if not _nested_within(text):
        _check_depth(text)


_NOT_BRACKET = re.compile(r"[^()\[\]]+")
_BRACKET_STEP = {"(": 1, "[": 1, ")": -1, "]": -1}


def _nested_within(text: str) -> bool:
    """Whether the brackets are nested at most MAX_DEPTH deep and never close more than
    they opened (then _check_depth finds nothing): the common case, counted in C."""
    depths = list(accumulate(map(_BRACKET_STEP.__getitem__, _NOT_BRACKET.sub("", text))))
    return not depths or (max(depths) <= MAX_DEPTH and min(depths) >= 0)


def _check_depth(text: str) -> None:
    depth = 0
    for m in _BRACKETS.finditer(text):              # runs of openers or of closers
        n = m.end() - m.start()
        if m.group()[0] in "([":
            if depth + n > MAX_DEPTH:
                at = m.start() + MAX_DEPTH - depth
                line_start = text.rfind("\n", 0, at) + 1
                raise fail("E004", f"brackets are nested more than {MAX_DEPTH} deep",
                           text.count("\n", 0, at) + 1, at - line_start + 1,
                           "simplify the expression or give parts of it names")
            depth += n
        else:
            depth = max(0, depth - n)


def _prepare(text: str) -> tuple[str, Text]:
    """The text without a byte-order mark, checked against the limits, and ending in a newline."""
    text = text.removeprefix("\ufeff")
    _check_bounds(text)
    return text, Text(text if text.endswith("\n") else text + "\n")


def parse(text: str, path: str = "<input>") -> Spec:
    """Parse spec text; raises ParseFailure with one diagnostic on a syntax error: the
    first one `check` reports (statement by statement recovery often names the cause
    better than the whole-file parse, e.g. a block without its `end`)."""
    original = text
    text, source = _prepare(text)
    long = _long_lines(source)
    if long:
        raise line_too_long(long[0])
    try:
        return Spec(path, text, tuple(run(source)))
    except ParseFailure as failure:
        _, diagnostics, _ = parse_recovering(original, path)
        if diagnostics and failure.diagnostic not in diagnostics:
            raise ParseFailure(diagnostics[0]) from None
        raise


def parse_recovering(text: str, path: str = "<input>"):
    """Parse, skipping statements with syntax errors so that every one is reported.

    Returns (spec or None, diagnostics, names defined by the skipped statements).
    Line numbers stay those of the original text. The work is linear in the text:
    each statement is parsed at most twice, and after a fixed number of syntax
    errors the rest are counted in one last diagnostic.
    """
    try:
        text, source = _prepare(text)
    except ParseFailure as failure:
        return None, [failure.diagnostic], set()
    long = _long_lines(source)
    if not long:
        try:
            return Spec(path, text, tuple(run(source))), [], set()
        except ParseFailure:
            pass
    from .recovery import Recovery  # only for text with errors

    statements, diagnostics, skipped = Recovery(source, long).run()
    return Spec(path, text, tuple(statements)), diagnostics, skipped
