"""Feedback from the reference's structure: a wrong answer is named by what differs from
the reference, operation by operation (the factor a size is off by, the axis an operation
runs along, the keyword that is missing), for every transpose, repeat and conv alike.

The reproductions are the issue's exercises that were graded "dims 2 and 3 wrong": a
grouped-query attention (GQA) and a ViT patch embedding, made here with `exercise make`.
The sweep changes one axis argument of every answer of the course that has one (the
operation's table entry says which arguments are axes) to every other axis, and asks that
the feedback names the axis (or the pair of axes) in at least 95% of them.
"""
from __future__ import annotations

import functools
import re

import pytest
import tiers
from exercise_kit import grader
from test_grading_feedback import NAMES, graded, reference

from shapelang.checker.ops.table import TABLE
from shapelang.syntax.nodes import Neg, Num, Op
from shapelang.syntax.parser import parse
from shapelang.teaching.exercise import make
from shapelang.teaching.grader import Grader, text_report
from shapelang.teaching.structure import AXIS_PARAMETERS
from shapelang.teaching.template import walk

GQA = """\
dim B, S, D, H, G
dim Dh = D / H
dim Nrep = H / G
assume D % H == 0
assume H % G == 0
example B=1, S=4, D=512, H=8, G=2
input x: [B, S, D]
q: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2
# ?kv = linear G*Dh; 2 points; hint: one key head per group
k: x -> linear G*Dh -> view [B, S, G, Dh] -> transpose 1 2
# ?rep = repeat_interleave Nrep 1; 2 points; hint: each key head serves Nrep query heads
kr: k -> repeat_interleave Nrep 1
# ?kt = transpose 2 3; 2 points; hint: keys transposed for the product
kt: kr -> transpose 2 3
scores: q @ kt
expect scores: [B, H, S, S]
"""

VIT = """\
dim B, C, D, P, G
example B=1, C=3, D=64, P=4, G=8
input img: [B, C, P*G, P*G]
# ?patch = conv2d D P stride=P; 2 points; hint: one vector per patch
patches: img -> conv2d D P stride=P
# ?grid = [B, D, G, G]; 2 points; hint: a grid of patches
expect patches: [B, D, G, G]
tokens: patches -> flatten 2 -> transpose 1 2
expect tokens: [B, G*G, D]
"""


@functools.cache
def _grader(solution: str) -> Grader:
    exercise, _ = make(solution, "solution.shape")
    return Grader(exercise, solution, "exercise.shape", "solution.shape")


def _feedback(solution: str, blank: str, wrong: str, right: str) -> str:
    lines = solution.split("\n")
    k = next(i for i, line in enumerate(lines) if right in line and not line.startswith("#"))
    lines[k] = lines[k].replace(right, wrong, 1)
    res = _grader(solution).grade_text("\n".join(lines))
    b = next(b for b in res.blanks if b.name == blank)
    assert b.status == "wrong", text_report(res)
    assert all(o.status == "correct" for o in res.blanks if o.name != blank), text_report(res)
    return b.feedback


@pytest.mark.parametrize("solution, blank, right, wrong, words", [
    (GQA, "kv", "linear G*Dh", "linear H*Dh", ["H/G times too big"]),
    (GQA, "kv", "linear G*Dh", "linear D", ["H/G times too big"]),
    (GQA, "rep", "repeat_interleave Nrep 1", "repeat_interleave Nrep 2",
     ["runs along dim 2 (`S`)", "must run along dim 1 (`G`)"]),
    (GQA, "rep", "repeat_interleave Nrep 1", "repeat_interleave Nrep 3",
     ["runs along dim 3 (`Dh`)", "must run along dim 1 (`G`)"]),
    (GQA, "kt", "transpose 2 3", "transpose 1 2", ["must change places are `S` and `Dh`"]),
    (VIT, "patch", "conv2d D P stride=P", "conv2d D P", ["no `stride=`"]),
    (VIT, "patch", "conv2d D P stride=P", "conv2d D P stride=P*P", ["`stride=P*P` is P times too big"]),
    (VIT, "patch", "conv2d D P stride=P", "conv2d D 2*P stride=P", ["`2*P`", "2 times too big"]),
    (VIT, "patch", "conv2d D P stride=P", "conv2d D P stride=P bias=false",
     ["`bias=false` is not needed"]),
    (VIT, "grid", "expect patches: [B, D, G, G]", "expect patches: [B, D, P*G, P*G]",
     ["dims 2 and 3", "P times too big"]),
], ids=lambda v: v if isinstance(v, str) and len(v) < 40 and "\n" not in v else None)
def test_the_issues_wrong_answers_are_named(solution, blank, right, wrong, words):
    got = _feedback(solution, blank, wrong, right)
    for w in words:
        assert w in got, (w, got)


# ------------------------------------------------------------------ every axis argument

def _ops(answer: str) -> list:
    """The operations of an answer that is a pipeline's steps, parsed."""
    try:
        spec = parse(f"dim A\ninput a: [A]\nz: a -> {answer}\n")
    except Exception:  # noqa: BLE001 - an answer that is not steps
        return []
    return [n for n in walk(spec.statements) if isinstance(n, Op)]


def _int(node) -> int | None:
    if isinstance(node, Num) and isinstance(node.value, int):
        return node.value
    if isinstance(node, Neg) and isinstance(node.operand, Num):
        return -node.operand.value
    return None


def axis_variants() -> list:
    """(exercise, blank, answer with one axis argument changed, that argument's new and old
    axis) for every axis argument of every answer of the course."""
    out = []
    for name in NAMES:
        g = grader(name)
        for blank, ref in reference(name).items():
            st = g.tmpl.stmts[g.tmpl.blanks[blank].stmt]
            if st.kind != "binding":
                continue
            for op in _ops(ref):
                entry = TABLE.get(op.name)
                if entry is None or entry.provenance == "unsqueeze":
                    continue
                for i, arg in enumerate(op.args):
                    if i >= len(entry.positional) or entry.positional[i] not in AXIS_PARAMETERS:
                        continue
                    k = _int(arg)
                    if k is None:
                        continue
                    for new in range(-4, 4):
                        if new == k:
                            continue
                        text = re.sub(rf"(?<![\w-]){re.escape(str(k))}(?![\w])", str(new),
                                      op.text, count=1) if op.args.index(arg) == i else None
                        if text is None or text == op.text:
                            continue
                        changed = ref.replace(op.text, text, 1)
                        out.append((name, blank, changed, new, k))
    return out


@functools.cache
def _axis_cases() -> list:
    return axis_variants()


def test_the_axis_variants_cover_the_course():
    cases = _axis_cases()
    assert len({c[0] for c in cases}) >= 5 and len(cases) >= 50, len(cases)


@pytest.mark.parametrize("count", tiers.sweep(10**6, 30))
def test_a_changed_axis_is_named(count):
    """A changed axis argument either breaks the statement (the checker says why: an axis out
    of range, sizes that do not fit) or is named: the axis it runs along, the pair of axes to
    exchange, or the dim of the result that is wrong. At least 95% are named."""
    cases = _axis_cases()
    cases = cases[::max(len(cases) // count, 1)]
    named, rest = 0, []
    for name, blank, answer, new, old in cases:
        b, _res = graded(name, {blank: answer}, blank)
        if b.status == "correct":      # the same axis spelled another way (-1 for 3)
            named += 1
            continue
        fb = b.feedback
        if re.search(r"\bdims? \d", fb) or "out of range" in fb or "has no axis" in fb or \
                "must change places" in fb or "runs along" in fb:
            named += 1
        else:
            rest.append((name, blank, answer, fb))
    assert named >= 0.95 * len(cases), "\n".join(map(repr, rest))
