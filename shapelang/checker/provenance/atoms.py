"""Atoms and axes: what a tensor's provenance is made of."""
from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class TP:
    """A tensor's provenance: one Axis per dim, plus what attention scores carry."""
    axes: tuple
    keys: Axis | None = None          # the key axis of attention scores
    contracted: Axis | None = None    # the axis the score product summed over

    def carry(self, axes) -> TP:
        """Same scores markers if the key axis survives."""
        axes = tuple(axes)
        keep = self.keys is not None and self.keys in axes
        return TP(axes, self.keys if keep else None, self.contracted if keep else None)


def label_of(axis: Axis) -> str:
    return "1" if not axis else "·".join(a.label for a in axis)


def _size(axis):
    return sp.Mul(*[a.size for a in axis])


def _sizes(t: TP):
    return [_size(ax) if ax else sp.Integer(1) for ax in t.axes]
