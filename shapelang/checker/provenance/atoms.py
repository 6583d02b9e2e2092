"""Atoms and axes: what a tensor's provenance is made of."""
from __future__ import annotations

import sympy as sp

from .. import dims as dimlib


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
    keys cancels it)."""
    __slots__ = ("axes", "contracted", "flat_bias", "keys")

    def __init__(self, axes: tuple, keys: Axis | None = None, contracted: Axis | None = None,
                 flat_bias=None):
        self.axes, self.keys, self.contracted, self.flat_bias = axes, keys, contracted, flat_bias

    def carry(self, axes) -> TP:
        """Same scores markers if the key axis survives."""
        axes = tuple(axes)
        if self.keys is None or self.keys not in axes:
            return TP(axes)
        return TP(axes, self.keys, self.contracted, self.flat_bias)


def label_of(axis: Axis) -> str:
    return "1" if not axis else "·".join(a.label for a in axis)


def _size(axis):
    return sp.Mul(*[a.size for a in axis])


def _sizes(t: TP):
    return [_size(ax) if ax else sp.Integer(1) for ax in t.axes]
