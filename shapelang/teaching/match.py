"""Matching an exercise statement's node tree against a submission's.

Both sides come from the shapelang parser. The trees must be equal apart from
spans, except where the exercise has a blank: a `Hole` stands for any one node;
a blank in an operation's place (`-> ?split`) and a blank at the head of a
pipeline stand for one or more steps of the pipeline; a blank as the last
argument of an operation also takes any further arguments. The result is, per
blank, the span of the submission text that sits where the blank is.

A statement that does not parse has no nodes; `salvage` then cuts its answers
out between the exercise's fixed tokens (the grammar's own lexer), so that the
learner is told which answer does not parse. The work of both is bounded.
"""
from __future__ import annotations

import dataclasses

from ..syntax.nodes import Call, Hole, KwArg, Num, Op, Pipeline, Span
from .template import MATCH_BUDGET, Stmt, lex

_SKIP = {"span", "name_span", "func_span", "dtype_span", "end_span", "text"}


class _Budget(Exception):
    pass


def _key(span: Span) -> tuple:
    return span.line, span.column


def _cover(first: Span, last: Span) -> Span:
    return Span(first.line, first.column, last.end_line, last.end_column)


def _flexible(t, i: int) -> bool:
    """A pipeline element that a blank stands for, and that may cover several steps."""
    if i == 0:
        return isinstance(t, Hole)
    return isinstance(t, Op) and t.name.startswith("?") and not t.args and not t.kwargs


def _contiguous(taken: list, kept: list) -> bool:
    """Whether no span of `kept` sits between the first and the last of `taken`."""
    first = min(_key(sp) for sp in taken)
    last = max((sp.end_line, sp.end_column) for sp in taken)
    return not any(first < _key(sp) < last for sp in kept)


def _hole_key(t, i: int) -> tuple:
    return _key(t.span) if i == 0 else _key(t.name_span)


class Matcher:
    """One structural match, with a budget of steps."""

    def __init__(self, budget: int = MATCH_BUDGET):
        self.budget = budget
        self.steps = 0

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise _Budget

    def run(self, tmpl: tuple, sub: tuple) -> dict | None:
        """Blank position in the exercise -> Span in the submission, or None."""
        out: dict = {}
        try:
            return out if self.same(tmpl, sub, out) else None
        except (_Budget, RecursionError):
            return None

    def same(self, t, s, out: dict, call: Span | None = None) -> bool:
        """`call`: the name of the call whose argument `s` is (its brackets are not the
        answer's)."""
        self.tick()
        if isinstance(t, Hole):
            out[_key(t.span)] = (s.span, call)
            return True
        if type(t) is not type(s):
            return False
        if isinstance(t, Call):
            if t.func == s.func and self.takes_rest(t, s):
                return self.rest(t, s, out, s.func_span, None)
            return t.func == s.func and self.items(t.args, s.args, 0, 0, out, s.func_span) \
                and len(t.kwargs) == len(s.kwargs) \
                and all(self.kwarg(a, b, out) for a, b in zip(t.kwargs, s.kwargs))
        if isinstance(t, tuple):
            return self.items(t, s, 0, 0, out, None)
        if isinstance(t, Pipeline):
            return self.steps_of([t.head, *t.ops], [s.head, *s.ops], 0, 0, out, s.span)
        if isinstance(t, Op):
            return self.op(t, s, out)
        if isinstance(t, Num):
            return t.text == s.text
        if dataclasses.is_dataclass(t):
            for f in dataclasses.fields(t):
                if f.name in _SKIP:
                    continue
                a, b = getattr(t, f.name), getattr(s, f.name)
                if isinstance(a, (str, int, float, type(None))):
                    if a != b:
                        return False
                elif not self.same(a, b, out):
                    return False
            return True
        return t == s

    def items(self, t: tuple, s: tuple, i: int, j: int, out: dict, call: Span | None) -> bool:
        """The elements t[i:] against s[j:] (the dims of a shape, the arguments of a call):
        a blank stands for one or more consecutive elements (`[?table]` answered `V, D`),
        the fewest that let the rest match."""
        self.tick()
        if i == len(t):
            return j == len(s)
        if j == len(s):
            return False
        if not isinstance(t[i], Hole):
            trial = dict(out)
            if self.same(t[i], s[j], trial, call) and self.items(t, s, i + 1, j + 1, trial, call):
                out.clear()
                out.update(trial)
                return True
            return False
        for k in range(j + 1, len(s) - (len(t) - i - 1) + 1):
            trial = dict(out)
            if self.items(t, s, i + 1, k, trial, call):
                span = s[j].span if k == j + 1 else _cover(s[j].span, s[k - 1].span)
                trial[_key(t[i].span)] = (span, call)
                out.clear()
                out.update(trial)
                return True
        return False

    def steps_of(self, te: list, se: list, i: int, j: int, out: dict, whole: Span) -> bool:
        """Pipeline elements te[i:] against se[j:] (`whole`: the submission pipeline's span);
        a flexible blank takes the fewest steps that let the rest match."""
        self.tick()
        if i == len(te):
            return j == len(se)
        t = te[i]
        if _flexible(t, i):
            for k in range(j + 1, len(se) - (len(te) - i - 1) + 1):
                trial = dict(out)
                if self.steps_of(te, se, i + 1, k, trial, whole):
                    out.clear()
                    out.update(trial)
                    first = whole if j == 0 else se[j].span
                    out[_hole_key(t, i)] = (_cover(first, se[k - 1].span), None)
                    return True
            return False
        if j >= len(se) or (i == 0) != (j == 0):
            return False
        trial = dict(out)
        if not self.same(t, se[j], trial):
            return False
        if self.steps_of(te, se, i + 1, j + 1, trial, whole):
            out.clear()
            out.update(trial)
            return True
        if i > 0 and t.args and isinstance(t.args[-1], Hole) and not t.kwargs:
            # a blank as the last argument also takes the steps written after it
            key = _key(t.args[-1].span)
            start = trial[key][0]
            for k in range(j + 2, len(se) - (len(te) - i - 1) + 1):
                rest = dict(trial)
                if self.steps_of(te, se, i + 1, k, rest, whole):
                    rest[key] = (_cover(start, se[k - 1].span), None)
                    out.clear()
                    out.update(rest)
                    return True
        return False

    def op(self, t: Op, s: Op, out: dict) -> bool:
        if t.name.startswith("?"):
            out[_key(t.name_span)] = (s.name_span, None)
        elif t.name != s.name:
            return False
        targs, sargs = t.args, s.args
        if self.takes_rest(t, s):
            return self.rest(t, s, out, None, s.span)
        if not self.same(targs, sargs, out) or len(t.kwargs) != len(s.kwargs):
            return False
        return all(self.kwarg(a, b, out) for a, b in zip(t.kwargs, s.kwargs))

    @staticmethod
    def takes_rest(t, s) -> bool:
        """Whether the last argument of `t` (an operation or a call) is a blank that takes
        `s`'s further arguments and keywords."""
        return bool(t.args) and isinstance(t.args[-1], Hole) and \
            (len(s.args) != len(t.args) or len(s.kwargs) != len(t.kwargs))

    def rest(self, t, s, out: dict, call: Span | None, end: Span | None) -> bool:
        """The last blank of `t` takes the remaining arguments and the keywords the exercise
        does not write (`conv2d D P stride=P ?t` answered `bias=false`), when they are
        written together; `end`: where an empty answer sits (None: one is needed)."""
        targs, sargs = t.args, s.args
        k = len(targs) - 1
        if len(sargs) < k or not self.items(targs[:k], sargs[:k], 0, 0, out, call):
            return False
        named = {kw.name: kw for kw in s.kwargs}
        if any(kw.name not in named or not self.kwarg(kw, named[kw.name], out)
               for kw in t.kwargs):
            return False
        fixed = {kw.name for kw in t.kwargs}
        rest = [a.span for a in sargs[k:]] + [kw.span for kw in s.kwargs if kw.name not in fixed]
        if rest and not _contiguous(rest, [kw.span for kw in s.kwargs if kw.name in fixed]):
            return False
        if rest:
            first = min(rest, key=_key)
            last = max(rest, key=lambda sp: (sp.end_line, sp.end_column))
            out[_key(targs[-1].span)] = (_cover(first, last), call)
        elif end is not None:
            out[_key(targs[-1].span)] = (Span(end.end_line, end.end_column, end.end_line,
                                              end.end_column), None)
        else:
            return False
        return True

    def kwarg(self, a: KwArg, b: KwArg, out: dict) -> bool:
        return a.name == b.name and self.same(a.value, b.value, out)


def match(st: Stmt, nodes: tuple, budget: int = MATCH_BUDGET) -> tuple:
    """Per blank of `st` (in order), (Span of `nodes`' text that answers it, the name span
    of the call it is an argument of or None), or None; and the steps it took."""
    m = Matcher(min(budget, MATCH_BUDGET))
    found = m.run(st.nodes, nodes)
    return _ordered(st, found), m.steps


def _ordered(st: Stmt, found: dict | None) -> list | None:
    if found is None:
        return None
    keys = [_key(h) for h in _hole_positions(st)]
    if any(k not in found for k in keys):
        return None
    return [found[k] for k in keys]


def _hole_positions(st: Stmt) -> list:
    from .template import hole_spans
    return [span for _, span in hole_spans(st.nodes)]


_INFIX = {"*", "/", "+", "%", "//", "**", "@"}
_OPEN, _CLOSE = "([", ")]"


def salvage(st: Stmt, code: str, budget: int = MATCH_BUDGET) -> list | None:
    """Per blank of `st`, the (start, end) offsets into `code` (a statement that does not
    parse, so has no nodes) of the text between the exercise's fixed tokens around it,
    or None. The tokens are the grammar's own (its lexer). A blank followed by fixed
    text ends where that text appears at bracket depth 0 (the shortest choice that lets
    the rest match); two blanks in a row are split at whitespace, as operation arguments
    are. The work is bounded by `budget`."""
    tmpl, sub = lex(st.code), lex(code)
    gap = [t.start > 0 and code[t.start - 1] in " \t" for t in sub]
    steps = [0]

    def tick():
        steps[0] += 1
        if steps[0] > budget:
            raise _Budget

    def ends(j, nxt):
        if nxt is None:
            yield len(sub)
            return
        depth, k = 0, j
        if nxt.kind == "hole":
            while k < len(sub):
                tick()
                t = sub[k]
                if k > j and depth == 0 and gap[k] and sub[k - 1].text not in _INFIX | {"-"} \
                        and t.text not in _INFIX:
                    break
                if t.text in _OPEN:
                    depth += 1
                elif t.text in _CLOSE:
                    depth -= 1
                    if depth < 0:
                        break
                k += 1
            yield k
            return
        while k < len(sub):
            tick()
            t = sub[k]
            if depth == 0 and t.text == nxt.text:
                yield k
            if t.text in _OPEN:
                depth += 1
            elif t.text in _CLOSE:
                depth -= 1
                if depth < 0:
                    return
            k += 1

    def go(i, j):
        tick()
        if i == len(tmpl):
            return [] if j == len(sub) else None
        t = tmpl[i]
        if t.kind != "hole":
            if j < len(sub) and sub[j].text == t.text:
                return go(i + 1, j + 1)
            return None
        for k in ends(j, tmpl[i + 1] if i + 1 < len(tmpl) else None):
            rest = go(i + 1, k)
            if rest is not None:
                return [(j, k)] + rest
        return None

    try:
        spans = go(0, 0)
    except (_Budget, RecursionError):
        return None
    if spans is None:
        return None
    return [(sub[a].start, sub[b - 1].end) if b > a else
            ((sub[a].start,) * 2 if a < len(sub) else (len(code),) * 2) for a, b in spans]
