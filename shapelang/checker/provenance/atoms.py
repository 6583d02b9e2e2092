"""Atoms and axes: what a tensor's provenance is made of."""
from __future__ import annotations

from .. import dims as dimlib
from ..lazysympy import sympy as sp


class Atom:
    """A logical axis (or a piece of one); compared by identity.

    size: in the prover's canonical form; name: the size as the learner names it (for
    messages and traces); feature: an axis of features (model width, heads, their width);
    parent, index, pieces: for a piece, the atom it was cut from, its position among the
    pieces (outermost first) and how many there are."""
    __slots__ = ("feature", "index", "name", "parent", "pieces", "size")

    def __init__(self, size, name, feature=False, parent=None, index=0, pieces=1):
        self.size, self.name, self.feature = size, name, feature
        self.parent, self.index, self.pieces = parent, index, pieces

    @property
    def label(self) -> str:
        text = _LABELS.get(self.name)
        if text is None:
            text = _LABELS[self.name] = dimlib.show(self.name)
        return text

    def __repr__(self) -> str:
        return self.label


_LABELS: dict = {}   # size expression -> its text: printing sympy is slow, labels repeat


Axis = tuple  # of Atom, outermost first; () for an axis of size 1


class TP:
    """A tensor's provenance: one Axis per dim, plus what attention scores carry:
    `keys`, their key axis, `contracted`, the axis the score product summed over, and
    `flat_bias`, the step that added a term constant along the keys (a softmax over the
    keys cancels it). `marks` holds the facts the contracts of later steps read (see
    contracts.py): `dist` (axis, step): the values add up to 1 along that axis (a softmax);
    `weighted`: a product of such weights with other values; `stat` (axis, step, source):
    a statistic taken over that axis of the tensor `source` (a mean, a variance);
    `centred` (axis, step): the tensor minus its mean over that axis; `tri`: where a
    mask over the last two axes is True (or non-zero): "lower" (row >= column), "slower"
    (row > column), "upper", "supper"; `index` (axis, end): the values count 0..end-1
    along that axis (an arange)."""
    __slots__ = ("axes", "contracted", "flat_bias", "keys", "marks")

    def __init__(self, axes: tuple, keys: Axis | None = None, contracted: Axis | None = None,
                 flat_bias=None, marks: dict | None = None):
        self.axes, self.keys, self.contracted, self.flat_bias = axes, keys, contracted, flat_bias
        self.marks = marks or {}

    def carry(self, axes) -> TP:
        """Same scores markers if the key axis survives; the marks whose axes survive."""
        axes = tuple(axes)
        marks = _carried(self, axes) if self.marks else None
        if self.keys is None or self.keys not in axes:
            return TP(axes, marks=marks)
        return TP(axes, self.keys, self.contracted, self.flat_bias, marks)

    def mark(self, **marks) -> TP:
        """A copy with these marks set (None removes one)."""
        out = TP(self.axes, self.keys, self.contracted, self.flat_bias, dict(self.marks))
        for k, v in marks.items():
            if v is None:
                out.marks.pop(k, None)
            else:
                out.marks[k] = v
        return out


# a mask's triangle (TP.marks["tri"]) with its two axes swapped, and with True and False swapped
TRANSPOSED = {"lower": "upper", "upper": "lower", "slower": "supper", "supper": "slower"}
NEGATED = {"lower": "supper", "supper": "lower", "upper": "slower", "slower": "upper"}


def root_base(factor):
    """X when a scale factor is X**(-1/2), `1/sqrt(X)`; else None."""
    if factor is None:
        return None
    f = factor if isinstance(factor, sp.Basic) else sp.sympify(factor)
    if not f.is_Pow:
        return None
    e = f.exp
    return f.base if (e.p == -1 and e.q == 2 if e.is_Rational else e == sp.Rational(-1, 2)) else None


def _carried(t: TP, axes: tuple) -> dict:
    out = {}
    for key in ("dist", "index"):
        v = t.marks.get(key)
        if v is not None and v[0] in axes:
            out[key] = v
    tri = t.marks.get("tri")
    if tri and len(t.axes) >= 2 and len(axes) >= 2:
        if axes[-2:] == t.axes[-2:]:
            out["tri"] = tri
        elif axes[-2:] == t.axes[-2:][::-1]:
            out["tri"] = TRANSPOSED.get(tri)
    return out


def label_of(axis: Axis) -> str:
    return "1" if not axis else "·".join(a.label for a in axis)


def _size(axis):
    return axis[0].size if len(axis) == 1 else sp.Mul(*[a.size for a in axis])


def _sizes(t: TP):
    return [_size(ax) if ax else sp.Integer(1) for ax in t.axes]
