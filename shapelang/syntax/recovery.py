"""Syntax error recovery: every broken statement reported, the rest parsed, in linear time.

The text is cut into statements once by a line scanner that follows the grammar's
statement rule: a statement is a line with text plus the lines after it that start
with `->` (blank and comment lines in between), and a `block` runs to its `end`
line. A run of statements is parsed in one piece; where that stops, the line names
the broken statement, lark parses that statement alone for its error message, the
statements before it are parsed again as one piece, and parsing resumes after it.
So each statement is parsed at most twice (three times if broken), whatever the
number of errors. After MAX_NOTES errors the rest are only counted, in one last
diagnostic. A block whose whole does not parse is parsed as its first line (with
an `end` supplied) and its statements; a broken first line leaves it out whole.
"""
from __future__ import annotations

import re
from bisect import bisect_right

from .comments import code_of
from .diagnostics import Diagnostic
from .grammar import NotParsed, Text, run
from .limits import ParseFailure, line_too_long
from .nodes import Block, Span

MAX_NOTES = 20
_AT_END = "the file ends in the middle of a statement"

_BLANK = re.compile(r"[\t ]*(?:#.*|\r)?").fullmatch
_CONTINUATION = re.compile(r"[\t ]*->").match
_BLOCK = re.compile(r"[\t ]*block(?![A-Za-z0-9_'])").match
_END = re.compile(r"[\t ]*end(?![A-Za-z0-9_'])").match
_DEFINES = re.compile(r"^\s*(?:(?:input|param|buffer)\s+([A-Za-z_]\w*)|dim\s+(.*)|"
                      r"block\s+([A-Za-z_]\w*)|([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*:)")


def statements_of(lines: list[str], long_lines=frozenset()) -> list[tuple[int, int]]:
    """(first, last) line numbers (1-based) of each statement, blocks' statements included.

    A line in `long_lines` is a statement of its own (to be refused), even a comment."""
    out: list[list[int]] = []
    for i, ln in enumerate(lines, 1):
        if i in long_lines:
            out.append([i, i])
            continue
        if _BLANK(ln):
            continue
        if out and _CONTINUATION(ln):
            out[-1][1] = i
        else:
            out.append([i, i])
    return [(a, b) for a, b in out]


def defined_names(line: str) -> set[str]:
    """Names a statement line would define (so that later uses do not cascade)."""
    m = _DEFINES.match(code_of(line))
    if not m:
        return set()
    if m.group(2) is not None:
        # `dim B S D` (commas forgotten) defines B, S and D as much as `dim B, S, D`
        return {name for part in m.group(2).split(",") for name in part.split("=")[0].split()
                if re.fullmatch(r"[A-Za-z_]\w*'?", name)}
    return {n.strip() for g in (m.group(1), m.group(3), m.group(4)) if g for n in g.split(",")}


class Recovery:
    def __init__(self, text: Text, long_lines=()):
        self.text = text
        self.long_lines = sorted(long_lines)     # refused unread
        self.lines = text.lines[:-1]          # the text ends in a newline
        self.diagnostics: list[Diagnostic] = []
        self.more = 0                         # errors after the first MAX_NOTES
        self.first_unreported: Span | None = None
        self.skipped: set[str] = set()

    def run(self):
        stmts = statements_of(self.lines, set(self.long_lines))
        out, run_start, k = [], 0, 0
        while k < len(stmts):
            long = self.long_line_in(*stmts[k])
            if long and not _BLOCK(self.lines[stmts[k][0] - 1]):
                out += self.parse_run(stmts[run_start:k], "start")
                self.report(line_too_long(long).diagnostic, *stmts[k])
                k = run_start = k + 1
            elif _BLOCK(self.lines[stmts[k][0] - 1]):
                out += self.parse_run(stmts[run_start:k], "start")
                j = k + 1
                while j < len(stmts) and not _END(self.lines[stmts[j][0] - 1]) \
                        and not _BLOCK(self.lines[stmts[j][0] - 1]):
                    j += 1
                closed = j < len(stmts) and _END(self.lines[stmts[j][0] - 1])
                out += self.parse_block(stmts[k:j + 1] if closed else stmts[k:j], closed,
                                        j == len(stmts))
                k = run_start = j + 1 if closed else j
            else:
                k += 1
        out += self.parse_run(stmts[run_start:], "start")
        if self.more:
            self.diagnostics.append(Diagnostic(
                "E001", f"and {self.more} more syntax error{'s' if self.more > 1 else ''}",
                self.first_unreported,
                f"only the first {MAX_NOTES} syntax errors are listed; "
                "lines that do not parse are left out of the check"))
        return out, self.diagnostics, self.skipped

    def long_line_in(self, first: int, last: int) -> int | None:
        i = bisect_right(self.long_lines, last) - 1
        return self.long_lines[i] if i >= 0 and self.long_lines[i] >= first else None

    # ---- reporting
    def report(self, diagnostic: Diagnostic, first: int, last: int) -> None:
        if len(self.diagnostics) < MAX_NOTES:
            if diagnostic not in self.diagnostics:
                self.diagnostics.append(diagnostic)
        else:
            self.more += 1
            self.first_unreported = self.first_unreported or diagnostic.span
        for n in range(first, last + 1):
            self.skipped |= defined_names(self.lines[n - 1])

    # ---- parsing
    def parse_run(self, stmts: list[tuple[int, int]], start: str) -> list:
        """The statements that parse among `stmts`; the others are reported."""
        out, i = [], 0
        firsts = [a for a, _ in stmts]
        while i < len(stmts):
            try:
                return out + run(self.text, start, stmts[i][0], stmts[-1][1], lark=False)
            except NotParsed as stop:
                # lark's message for the statement where the fast path stopped, parsed alone;
                # if that one parses alone after all, lark reads the whole run. Past the
                # listed errors only the count matters, and the line is enough.
                here = stop.line is not None and stop.line >= firsts[i]
                if here and self.first_unreported is not None:
                    d = Diagnostic("E001", "does not parse", Span(stop.line, 1, stop.line, 2))
                else:
                    d = self.error_alone(stmts[bisect_right(firsts, stop.line) - 1], start) \
                        if here else None
                if d is None:
                    try:
                        return out + run(self.text, start, stmts[i][0], stmts[-1][1])
                    except ParseFailure as failure:
                        d = failure.diagnostic
            except ParseFailure as failure:       # a limit (E004) met while building nodes
                d = failure.diagnostic
            bad = max(i, min(len(stmts) - 1, bisect_right(firsts, d.span.line) - 1))
            if bad > i:
                try:
                    out += run(self.text, start, stmts[i][0], stmts[bad - 1][1])
                except ParseFailure:               # not expected: go one statement at a time
                    out += self.one_by_one(stmts[i:bad], start)
            self.report(d, *stmts[bad])
            i = bad + 1
        return out

    def error_alone(self, stmt: tuple[int, int], start: str) -> Diagnostic | None:
        try:
            run(self.text, start, *stmt)
        except ParseFailure as failure:
            return failure.diagnostic
        return None

    def one_by_one(self, stmts, start) -> list:
        out = []
        for a, b in stmts:
            try:
                out += run(self.text, start, a, b)
            except ParseFailure as failure:
                self.report(failure.diagnostic, a, b)
        return out

    def parse_block(self, stmts: list[tuple[int, int]], closed: bool, at_eof: bool) -> list:
        """A `block` ... `end`: whole if it parses, else its header and its good statements."""
        head, last = stmts[0], stmts[-1][1]
        long = self.long_line_in(head[0], last)
        if long:
            self.report(line_too_long(long).diagnostic, head[0], last)
            return []
        try:
            return run(self.text, "start", head[0], last)
        except ParseFailure as failure:
            whole = failure.diagnostic
        if not closed:
            line = self.lines[head[0] - 1]
            col = len(line) - len(line.lstrip(" \t")) + 1
            no_end = Diagnostic("E001", "this block has no `end` line" +
                                ("" if at_eof else " before the next `block`"),
                                Span(head[0], col, head[0], col + 5),
                                "a `block` needs a closing `end` line")
            if whole.message == _AT_END and not at_eof:
                whole = no_end                    # the text goes on: name the block, not the end
            self.report(whole, head[0], last)
            if whole.span.line > head[1] and whole is not no_end and whole.message != _AT_END:
                self.report(no_end, head[0], head[0])
            return []
        header = self.header(head)
        if header is None:
            return []
        before = len(self.diagnostics) + self.more
        body = self.parse_run(stmts[1:-1], "block_body")
        if len(self.diagnostics) + self.more == before:
            # every part parses alone but the whole does not (e.g. text after `end`)
            self.report(whole, head[0], last)
            return []
        end_line = self.lines[last - 1]
        col = len(end_line) - len(end_line.lstrip(" \t")) + 1
        return [Block(header.span, header.name, header.inputs, tuple(body),
                      Span(last, col, last, col + 3))]

    def header(self, head: tuple[int, int]) -> Block | None:
        """The block's header on its own (with an `end` supplied), or None if it is broken."""
        a, b = head
        piece = Text("\n".join(self.lines[a - 1:b]) + "\nend\n")
        try:
            (block,) = run(piece, "start", offset=a - 1)
            return block
        except ParseFailure as failure:
            self.report(failure.diagnostic, a, b)
            return None
