"""Where an error comes from, not only where it shows: secondary labels and candidate
fixes that point back at the cause.

- The shape under each operand of a failing `@`, `+`, `-`, `*`, ...
- An operand that lost an axis earlier (`mu: X -> mean -1`, then `X - mu`): the step
  where it lost it is labelled, and `keepdim` is proposed there.
- A mask that does not line up with the scores (`[B, S]` on `[B, H, S, S]`): the mask
  reshaped so that its axes meet the scores' axes of the same sizes (`[B, 1, 1, S]`).
- "first declared here" for a name declared twice, with the duplicate removed.
- A missing assumption: the `assume` line added below the other assumptions.

Every fix here is a candidate (span, text, why): shapelang.checker.advice.fixes re-checks the
whole spec with it and shows it only when it is proved.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace

from ...syntax.comments import code_of
from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import Assume, DimDecl, Name, Span
from ..lazysympy import sympy as sp

MAX_MASK_CANDIDATES = 3


def _name(checker, node) -> str:
    text = checker.suggest.text(node.span)
    return text if text is not None and len(text) <= 40 else "this operand"


def operands(checker, err: ShapeError, node, a, b) -> ShapeError:
    """A failing binary operation: each operand's shape under it, and for an operand with
    fewer dims than the other, the step where it lost one."""
    wide = checker.suggest._paren_span
    labels = [(wide(node.left.span)[0], checker.show(a[0])),
              (wide(node.right.span)[0], checker.show(b[0]))]
    fixes = []
    for (t, ref), other, side in ((a, b, node.left), (b, a, node.right)):
        if t.rank < other[0].rank:
            lost = lost_axis(checker, ref, _name(checker, side))
            if lost is not None:
                labels.append(lost[0])
                fixes += lost[1]
    return replace(err, labels=tuple(err.labels) + tuple(labels),
                   fixes=tuple(fixes) + tuple(err.fixes))


def lost_axis(checker, ref: str, name: str):
    """The label at the step where the tensor `ref` lost an axis, and candidate fixes."""
    seen = 0
    step = checker.step_of.get(ref)
    while step is not None and seen < 64:
        seen += 1
        src = _type(checker, step.inputs[0]) if step.inputs else None
        if src is not None and src.rank > step.out.rank:
            break
        step = checker.step_of.get(step.inputs[0]) if step.inputs else None
    if step is None or src is None or step.span.line < 1:
        return None
    d = step.detail.get("dim")
    where = "its last axis" if d == src.rank - 1 else f"axis {d}" if isinstance(d, int) else "an axis"
    label = (step.span, (f"{name} loses {where} here: {checker.show_shape(src.shape)} becomes "
                        f"{checker.show_shape(step.out.shape)}"))
    fixes = []
    if checker.takes_axis_away(step.op) and "keepdim" not in step.text:
        fixes.append((step.span, f"{step.text} keepdim",
                      f"keep the reduced axis as size 1 with `keepdim`, so that `{name}` lines up"))
    return label, fixes


def _type(checker, ref: str):
    step = checker.step_of.get(ref)
    if step is None:
        v = checker.scope.values.get(ref)
        return v[0] if v else None
    return step.outputs[int(ref.rsplit(".", 1)[1])] if "." in ref else step.out


def mask(checker, err: ShapeError, x, m, node) -> ShapeError:
    """A mask that does not broadcast to the scores: its shape under it, and the mask
    given size-1 axes so that each of its axes meets the scores' axis of the same size."""
    labels = ((node.span, f"the mask is {checker.show(m)}"),)
    err = replace(err, notes=((f"the input is {checker.show(x)}; a mask is lined up with it from the "
                              "right, as PyTorch broadcasts"),) + tuple(err.notes))
    fixes = []
    text = checker.suggest.text(node.span)
    if text is not None and m.rank < x.rank:
        for target in mask_shapes(checker, x.shape, m.shape):
            dims = ", ".join(checker.sz(d) for d in target)
            inner = text if isinstance(node, Name) else f"({text})"
            fixes.append((node.span, f"({inner} -> view [{dims}])",
                          f"give the mask size-1 axes where the input has axes it lacks: [{dims}]"))
    return replace(err, labels=tuple(err.labels) + labels, fixes=tuple(fixes) + tuple(err.fixes))


def mask_shapes(checker, shape, mask_shape) -> list[tuple]:
    """Shapes of the rank of `shape` that keep the mask's axes in order, each at an axis of
    `shape` of the same size, 1 elsewhere; those using the last axes first."""
    out = []
    n, k = len(shape), len(mask_shape)
    if n > 8:
        return out
    for pos in sorted(itertools.combinations(range(n), k), key=lambda p: [-q for q in reversed(p)]):
        if all(checker.same(shape[p], mask_shape[j]) for j, p in enumerate(pos)):
            target = [1] * n
            for j, p in enumerate(pos):
                target[p] = mask_shape[j]
            out.append(tuple(target))
        if len(out) >= MAX_MASK_CANDIDATES:
            break
    return out


# ------------------------------------------------------------ declared twice

def first_declared(span: Span, what: str = "first declared here") -> tuple:
    return ((span, what),)


def remove_item(lines: list[str], span: Span) -> tuple | None:
    """A candidate that deletes one item of a `dim` line (with its comma), or the whole
    statement when it is the only item."""
    if span.line != span.end_line or not 0 < span.line <= len(lines):
        return None
    line = lines[span.line - 1]
    a, b = span.column - 1, span.end_column - 1
    after = re.match(r"\s*,\s*", line[b:])
    before = re.search(r",\s*$", line[:a])
    if after:
        return Span(span.line, span.column, span.line, span.end_column + after.end()), ""
    if before:
        return Span(span.line, before.start() + 1, span.line, span.end_column), ""
    head = re.match(r"\s*dim\s+$", line[:a])
    if head and not code_of(line[b:]).strip():
        return Span(span.line, 1, span.line, len(line) + 1), ""
    return None


def duplicate_dim(checker, first: DimDecl, again: DimDecl) -> tuple:
    """Fix candidates for a dim declared twice: drop the declaration without a value."""
    lines = checker.spec.source.split("\n")
    drop = first if again.value is not None and first.value is None else again
    got = remove_item(lines, drop.span)
    if got is None:
        return ()
    return ((got[0], got[1], "declare each dim once"),)


# ------------------------------------------------------------ missing assumptions

def assume_line(checker, relation: str, why: str = "if that is intended, say so") -> tuple:
    """A candidate that adds `assume <relation>` as a line after the top-level `dim` and
    `assume` lines."""
    last = 0
    for s in checker.spec.statements:
        if isinstance(s, (DimDecl, Assume)):
            last = max(last, s.span.end_line)
    if last == 0:
        return ()
    return ((Span(last + 1, 1, last + 1, 1), f"assume {relation}\n", why),)


def positive_relation(e, show) -> str:
    """`e >= 1` as a learner writes it: the terms with a minus sign moved to the right and the
    numbers gathered there (`L - 1` gives `L >= 2`, `S - 2*K` gives `S >= 2*K + 1`), and
    fractions multiplied out (`(S - K)/2` gives `S >= K + 2`)."""
    try:
        return _relation(e, show)
    except (TypeError, ValueError, ArithmeticError):   # a size sympy cannot split: as it is
        return f"{show(e)} >= 1"


def _relation(e, show) -> str:
    den = math.lcm(*[int(c.q) for c in (t.as_coeff_Mul()[0] for t in sp.Add.make_args(sp.expand(e)))
                     if c.is_Rational])
    const, terms = sp.expand(e * den).as_coeff_Add()
    left = [t for t in sp.Add.make_args(terms) if not t.could_extract_minus_sign()]
    right = [-t for t in sp.Add.make_args(terms) if t.could_extract_minus_sign()]
    if not left or terms == 0:
        return f"{show(e)} >= 1"
    return f"{show(sp.Add(*left))} >= {show(sp.Add(*right) + den - const)}"
