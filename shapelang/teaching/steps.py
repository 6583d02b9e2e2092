"""Pairing the steps of a learner's statement with the reference's.

Input: a statement's checked steps (shapelang.checker.ir.Step, spans in the
statement's filled code) with the learner's answers in it, and the same for
the reference answers. Output: for each learner step, the reference step in the
same place, so that feedback can name the first step whose shape differs
("after your `linear D` ...") or the input a fixed operation gets.

A step outside the answers is fixed text: it is the k-th step of its stretch
between answers on both sides. A step inside an answer is paired with the
reference step of the same kind (a regrouping, a move of axes, or the same
operation) and the same rank among those in that answer.
"""
from __future__ import annotations

from ..checker.ops.table import moving

FAMILIES = {**dict.fromkeys(moving("regroup", "rearrange"), "regroup"), **dict.fromkeys(moving("move"), "move")}


def answer_ranges(st, texts: dict, judged) -> list:
    """(start, end) offsets in the filled code of the holes named in `judged` (hole
    indices), `texts`: hole index -> the text put in each hole."""
    out, shift = [], 0
    for k, (_, start, end) in enumerate(st.holes):
        text = texts.get(k, st.holes[k][0])
        if k in judged:
            out.append((start + shift, start + shift + len(text)))
        shift += len(text) - (end - start)
    return out


def _span(step) -> tuple:
    return step.span.column - 1, step.span.end_column - 1 \
        if step.span.end_line == step.span.line else 10 ** 9


def region(span: tuple, ranges: list) -> tuple:
    """("answer", a) for a span that overlaps answer a, else ("fixed", stretch)."""
    a, b = span
    for k, (s, e) in enumerate(ranges):
        if a < e and b > s:
            return ("answer", k)
    return ("fixed", sum(1 for s, e in ranges if e <= a))


def keys(steps, ranges: list) -> list:
    """A key per step; equal keys mark the same place in the learner's and the reference's
    statement."""
    counts: dict = {}
    out = []
    for s in steps:
        if s.op == "input":
            out.append(None)
            continue
        where = region(_span(s), ranges)
        kind = where + ((FAMILIES.get(s.op, s.op),) if where[0] == "answer" else ())
        n = counts.get(kind, 0)
        counts[kind] = n + 1
        out.append(kind + (n,))
    return out


def key_of_next(before, span: tuple, ranges: list, op: str) -> tuple:
    """The key an operation at `span` would get after the steps `before`."""
    where = region(span, ranges)
    kind = where + ((FAMILIES.get(op, op),) if where[0] == "answer" else ())
    n = sum(1 for s in before if s.op != "input" and
            region(_span(s), ranges) + ((FAMILIES.get(s.op, s.op),) if
                                        region(_span(s), ranges)[0] == "answer" else ()) == kind)
    return kind + (n,)


def pairs(mine, my_ranges, ref, ref_ranges) -> list:
    """(learner step, reference step or None) in the learner's order."""
    by_key = {k: s for k, s in zip(keys(ref, ref_ranges), ref) if k is not None}
    return [(s, by_key.get(k)) for k, s in zip(keys(mine, my_ranges), mine) if k is not None]


def lookup(steps, key):
    for k, s in zip(keys(steps[0], steps[1]), steps[0]):
        if k == key:
            return s
    return None


def input_shape(steps, step):
    """The shape of the first tensor `step` reads, when a step of `steps` made it."""
    if not step.inputs:
        return None
    ref = step.inputs[0]
    for s in steps:
        if s.ref == ref:
            return s.out.shape
        for k, t in enumerate(s.outputs):
            if f"{s.ref}.{k}" == ref:
                return t.shape
    return None


def in_answer(step, ranges: list) -> bool:
    return region(_span(step), ranges)[0] == "answer"
