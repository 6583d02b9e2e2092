"""Finding the answers to an exercise's blanks in a submission.

The submission is cut into statements where the grammar ends one (its `_NL`
terminal: a newline not followed by a `->` line), and each statement is parsed
on its own, so that a syntax error costs only the blanks of its statement.
Each exercise statement is paired with a submission statement (in order, the
first that matches), their node trees are matched (shapelang.teaching.match),
and each answer is the submission text under the node where the blank is.
Nothing here evaluates submission text; every step is bounded.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from itertools import chain

from ..syntax.nodes import Block
from ..syntax.parser import ParseFailure, parse
from .match import match, salvage
from .respell import op_call_keywords
from .template import (
    MATCH_BUDGET,
    MAX_ANSWER,
    MAX_STATEMENT,
    Stmt,
    Template,
    head_of,
    joined_code,
    offset_of,
    statement_end,
)

_CACHE_LIMIT = 20000
# The work one submission may cause (memoised parses and matches are free): statements
# compared with one statement of the exercise (the right one is normally among the
# first few), matcher steps, and characters parsed (a course submission has 2-5 KB).
MAX_COMPARISONS = 50
MAX_STEPS = 100_000
MAX_PARSED = 30_000


@dataclass
class Budget:
    comparisons: int = MAX_COMPARISONS
    steps: int = MAX_STEPS
    chars: int = MAX_PARSED


_PARSED: dict = {}     # (statement text, its first word) -> (nodes or None, lines added)


@dataclass
class Answer:
    text: str | None          # the learner's answer, whitespace collapsed
    status: str               # given | unfilled | empty | missing | changed | too long
    line: int | None = None   # line in the submission
    message: str | None = None
    respelled: object = None  # how its statement was rewritten to read it (respell.Respelling)


@dataclass
class Extraction:
    answers: dict                              # blank name -> Answer
    notes: list = field(default_factory=list)  # (line, message) for the learner
    matched: int = 0                           # template statements found


@dataclass
class Piece:
    """One statement of a submission."""
    index: int
    first: int            # the line it starts on
    text: str             # as written, comments and continuation lines included
    code: str             # comments removed, lines joined with single spaces
    segments: list        # (offset in code, line counted from 0 in `text`, columns cut)
    head: tuple
    _parsed: tuple | None = None
    respelled: object = None      # a rewrite of the learner's text (respell.Respelling)

    @property
    def line(self) -> int:
        return self.first + self.segments[0][1]

    @property
    def nodes(self) -> tuple | None:
        """Its nodes (None: it does not parse), parsed when first asked for."""
        if self._parsed is None:
            self._parsed = _parsed(self.text, self.head[0]) if len(self.code) <= MAX_STATEMENT \
                else (None, 0)
        return self._parsed[0]

    @property
    def unparsed(self) -> bool:
        """Not parsed yet, here or in an earlier submission."""
        return self._parsed is None and (self.text, self.head[0]) not in _PARSED

    @property
    def shift(self) -> int:
        """Lines put in front of it to parse it (a `return` is parsed inside a block)."""
        return self._parsed[1] if self._parsed is not None else 0

    @property
    def has_hole(self) -> bool:
        return "?" in re.sub(r'"[^"\n]*"', "", self.code)

    def position(self, offset: int) -> int:
        """The line in the file of an offset into `code`."""
        k = bisect.bisect_right([s[0] for s in self.segments], offset) - 1
        return self.first + self.segments[max(k, 0)][1]


_CHUNKS: dict = {}


def pieces(text: str) -> list[Piece]:
    """The submission's statements, each parsed on its own when first needed."""
    out: list[Piece] = []
    pos, line = 0, 1
    ends = [(m.start(), m.end()) for m in statement_end().finditer(text)]
    ends.append((len(text), len(text)))
    for start, end in ends:
        chunk = text[pos:start]
        first = line
        line += text.count("\n", pos, end)
        pos = end
        hit = _CHUNKS.get(chunk)
        if hit is None:
            code, segments = joined_code(chunk.split("\n"), 0)
            hit = (code, segments, head_of(code))
            if len(chunk) <= 2000:
                if len(_CHUNKS) > _CACHE_LIMIT:
                    _CHUNKS.clear()
                _CHUNKS[chunk] = hit
        if hit[0]:
            out.append(Piece(len(out), first, chunk, *hit))
    return out


def _parsed(chunk: str, kind: str) -> tuple:
    key = (chunk, kind)
    hit = _PARSED.get(key)
    if hit is not None:
        return hit
    hit = (None, 0)
    try:
        if kind == "end":
            hit = ((), 0)
        elif kind == "block":        # a block's first line: parsed as an empty block
            spec = parse(chunk + "\nend")
            if len(spec.statements) == 1 and isinstance(spec.statements[0], Block):
                hit = ((spec.statements[0],), 0)
        elif kind == "return":       # only in a block
            spec = parse("block B():\n" + chunk + "\nend")
            hit = (spec.statements[0].body, 1)
        else:
            spec = parse(chunk)
            # `-> softmax(dim=-1)`: keywords in parentheses are for block calls; after an
            # operation they are the PyTorch habit, read as the learner meant it (respell)
            if not any(op_call_keywords(st) for st in spec.statements):
                hit = (spec.statements, 0)
    except (ParseFailure, RecursionError, IndexError, AttributeError):
        pass
    if len(chunk) <= 2000:
        if len(_PARSED) > _CACHE_LIMIT:
            _PARSED.clear()
        _PARSED[key] = hit
    return hit


def _found(tmpl: Template, st: Stmt, piece: Piece, budget: Budget):
    """The answers' text ranges in `piece` if it is `st` (memoised), else None; for a
    statement without blanks, [] when it is the same. Once the submission's `budget`
    is spent, the statements left are taken as different."""
    key = (st.index, piece.text, piece.head)
    hit = tmpl.memo.get(key, False)
    if hit is not False:
        return hit
    if budget.comparisons <= 0 or budget.steps <= 0:
        return None
    budget.comparisons -= 1
    if piece.unparsed:
        if budget.chars < len(piece.text):
            return None
        budget.chars -= len(piece.text)
    hit = None
    if piece.nodes is None:
        if st.holes:
            hit = salvage(st, piece.code)
    elif st.kind == "end":
        hit = []
    else:
        cuts, steps = match(st, _comparable(st, piece), budget.steps)
        budget.steps -= steps
        if cuts is not None:
            hit = [_offsets(piece, span, call) for span, call in cuts]
        if steps > MATCH_BUDGET or budget.steps < 0:
            return None                 # out of steps: not an answer, and not memoised
    if len(tmpl.memo) > _CACHE_LIMIT:
        tmpl.memo.clear()
    tmpl.memo[key] = hit
    return hit


def _comparable(st: Stmt, piece: Piece) -> tuple:
    if st.kind == "block":
        return tuple(n for n in piece.nodes if isinstance(n, Block))
    return piece.nodes


def _offsets(piece: Piece, span, call) -> tuple:
    """(start, end) in `piece.code` of a span of its nodes, widened to the brackets
    written around it (but not those of the call it is an argument of)."""
    code = piece.code
    lift = -1 - piece.shift        # span lines count from 1, segment lines from 0
    a = offset_of(piece.segments, span.line + lift, span.column)
    b = offset_of(piece.segments, span.end_line + lift, span.end_column)
    stop = -1
    if call is not None:
        stop = offset_of(piece.segments, call.end_line + lift, call.end_column)
        while stop < len(code) and code[stop] in " \t":
            stop += 1
    return _balanced(code, a, b, stop)


def _balanced(code: str, a: int, b: int, stop: int) -> tuple:
    depth, low, in_str = 0, 0, False
    for ch in code[a:b]:
        if ch == '"':
            in_str = not in_str
        elif not in_str and ch == "(":
            depth += 1
        elif not in_str and ch == ")":
            depth -= 1
            low = min(low, depth)
    a = _widen_left(code, a, -low)
    b = _widen_right(code, b, depth - low)
    while True:                      # brackets around the whole answer
        i, j = a - 1, b
        while i >= 0 and code[i] in " \t":
            i -= 1
        while j < len(code) and code[j] in " \t":
            j += 1
        if i < 0 or j >= len(code) or code[i] != "(" or code[j] != ")" or i == stop:
            return a, b
        a, b = i, j + 1


def _widen_left(code: str, a: int, n: int) -> int:
    while n > 0 and a > 0:
        a -= 1
        if code[a] == "(":
            n -= 1
        elif code[a] == ")":
            n += 1
    return a


def _widen_right(code: str, b: int, n: int) -> int:
    while n > 0 and b < len(code):
        if code[b] == ")":
            n -= 1
        elif code[b] == "(":
            n += 1
        b += 1
    return b


def extract(tmpl: Template, sub_text: str) -> Extraction:
    """Locate the answer to every blank of `tmpl` in a submission, statement by statement."""
    sub = pieces(sub_text)
    out = Extraction({})
    used: set[int] = set()
    explained: set[int] = set()
    by_head: dict[tuple, list[Piece]] = {}
    for s in sub:
        by_head.setdefault(s.head, []).append(s)
    pos, n = 0, len(sub)
    budget = Budget()
    for st in tmpl.stmts:
        budget.comparisons = MAX_COMPARISONS
        kind, name = st.head[0], st.head[1] if len(st.head) > 1 else None
        found = None
        for q in chain(range(pos, n), range(min(pos, n))):
            cand = sub[q]
            if cand.head[0] != kind or (name and cand.head[1] != name) or q in used \
                    or len(cand.code) > MAX_STATEMENT:
                continue
            cuts = _found(tmpl, st, cand, budget)
            if cuts is None and st.holes and cand._parsed is not None and \
                    cand._parsed[0] is None and budget.chars >= 2 * len(cand.text) and \
                    budget.comparisons > 0:
                budget.chars -= 2 * len(cand.text)
                cand = _respelled(cand)    # a PyTorch spelling: read it as shapelang
                cuts = _found(tmpl, st, cand, budget) if cand is not None else None
            if cuts is not None:
                found = (q, cuts, cand)
                break
        if found is None:
            alike = _missing(tmpl, st, by_head, used, out)
            if alike is not None:
                explained.add(alike.index)
            continue
        q, cuts, piece = found
        used.add(q)
        pos = q + 1
        out.matched += 1
        for k, (a, b) in enumerate(cuts):
            ans = _answer(piece, a, b)
            if piece is not sub[q]:
                ans.respelled = piece.respelled
            out.answers[_blank_name(tmpl, st, k)] = ans
    for q, s in enumerate(sub):
        if q not in used and q not in explained:
            out.notes.append((s.line, "this line is not part of the exercise, so it was not "
                                      "graded" if not s.has_hole else
                              "this line has a blank that is not in the exercise"))
    return out


def _respelled(piece: Piece) -> Piece | None:
    """A statement that does not parse, rewritten in shapelang (`Q.view(B, S, D)` as
    `Q -> view [B, S, D]`), as a piece on the same line; None if no rewrite parses."""
    from .respell import respell
    if len(piece.code) > MAX_STATEMENT:
        return None
    r = respell(piece.code)
    if r is None:
        return None
    alt = Piece(piece.index, piece.line, r.code, r.code, [(0, 0, 0)], head_of(r.code))
    alt.respelled = r
    return alt if alt.nodes is not None else None


def _blank_name(tmpl: Template, st: Stmt, k: int) -> str:
    for b in tmpl.blanks.values():
        if b.stmt == st.index and b.hole == k:
            return b.name
    raise KeyError(k)


def _answer(piece: Piece, a: int, b: int) -> Answer:
    line = piece.position(a)
    if a == b:
        return Answer(None, "empty", line, "the blank was deleted and nothing written in its place")
    text = " ".join(piece.code[a:b].split())
    if len(text) > MAX_ANSWER:
        return Answer(None, "too long", line,
                      f"the answer is longer than {MAX_ANSWER} characters; answers are short")
    if text[0] == "?" and (len(text) == 1 or text[1:].replace("_", "a").isalnum()) and \
            text.isascii():
        return Answer(None, "unfilled", line, "the blank is not filled in")
    return Answer(text, "given", line)


def _missing(tmpl, st, by_head, used, out):
    """Explain a statement of the exercise that the submission lacks; returns the
    submission statement that looks like a changed version of it, if any."""
    alike = [s for s in by_head.get(st.head, []) if s.index not in used] \
        if st.head[0] != "other" else []
    if not st.holes:
        line = alike[0].line if alike else None
        what = "was changed" if alike else "is missing"
        out.notes.append((line, (f"the exercise line `{_short(st.code)}` {what}; it was graded "
                                 "as written in the exercise")))
        return alike[0] if alike else None
    long = [s for s in alike if len(s.code) > MAX_STATEMENT]
    for k in range(len(st.holes)):
        name = _blank_name(tmpl, st, k)
        if long:
            out.answers[name] = Answer(None, "too long", long[0].line,
                                       f"line {long[0].line} is too long to grade (more than "
                                       f"{MAX_STATEMENT} characters)")
        elif alike:
            out.answers[name] = Answer(None, "changed", alike[0].line,
                                       "the text around this blank was changed, so the answer "
                                       f"could not be found; keep the exercise line as it was: "
                                       f"`{_short(st.code)}`")
        else:
            out.answers[name] = Answer(None, "missing", None,
                                       f"the line with this blank (`{_short(st.code)}`) is "
                                       "missing from the submission")
    return alike[0] if alike else None


def _short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def reread(tmpl: Template, st: Stmt, code: str) -> dict | None:
    """The answers (blank name -> text) in `code`, a rewritten version of statement `st`
    that must parse and match the exercise's statement; None if it does not."""
    found = pieces(code)
    if len(found) != 1 or found[0].nodes is None:
        return None
    cuts = _found(tmpl, st, found[0], Budget())
    if cuts is None:
        return None
    out = {}
    for k, (a, b) in enumerate(cuts):
        ans = _answer(found[0], a, b)
        if ans.status != "given":
            return None
        out[_blank_name(tmpl, st, k)] = ans.text
    return out
