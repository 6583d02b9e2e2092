"""Memory layout: strides, tracked the way PyTorch tracks them.

Used by the shape rules to decide whether `view` is legal, exactly as
`at::detail::computeStride` does, with symbolic sizes treated generically (a
symbolic size is not assumed to be 1).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp


@dataclass(frozen=True)
class TensorType:
    shape: tuple
    strides: tuple
    dtype: str = "float"

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_shape(self, shape, strides=None, dtype=None) -> TensorType:
        shape = tuple(shape)
        return TensorType(shape, tuple(strides) if strides is not None else contiguous(shape),
                          dtype or self.dtype)

    @property
    def is_contiguous(self) -> bool:
        return self.strides == contiguous(self.shape)


def contiguous(shape) -> tuple:
    strides, acc = [], sp.Integer(1)
    for size in reversed(tuple(shape)):
        strides.append(acc)
        acc = acc * size
    return tuple(reversed(strides))


def fresh(shape, dtype="float") -> TensorType:
    shape = tuple(shape)
    return TensorType(shape, contiguous(shape), dtype)


def view_strides(old: TensorType, new_shape, same) -> tuple | None:
    """Strides of `old.view(new_shape)`, or None where PyTorch refuses the view.

    `same(a, b)` decides symbolic equality. A port of computeStride.
    """
    oldshape, oldstride = list(old.shape), list(old.strides)
    newshape = list(new_shape)
    if not oldshape:
        return tuple(sp.Integer(1) for _ in newshape)
    newstride = [sp.Integer(0)] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = sp.Integer(1)
    view_numel = sp.Integer(1)
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel = tensor_numel * oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1 and
                             not same(oldstride[tensor_d - 1], tensor_numel * chunk_base_stride)):
            while view_d >= 0 and (not same(view_numel, tensor_numel) or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel = view_numel * newshape[view_d]
                view_d -= 1
            if not same(view_numel, tensor_numel):
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = sp.Integer(1)
                view_numel = sp.Integer(1)
    if view_d != -1:
        return None
    return tuple(newstride)
