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


ONE = sp.Integer(1)


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
        if tensor_d == 0 or (not same(oldshape[tensor_d - 1], ONE) and
                             not same(oldstride[tensor_d - 1], tensor_numel * chunk_base_stride)):
            while view_d >= 0 and (not same(view_numel, tensor_numel) or same(newshape[view_d], ONE)):
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


def _stride_key(stride):
    """Generic magnitude of a symbolic stride. The strides of a dense tensor are products
    of sizes, a larger one a multiple of a smaller one, so evaluating with every size set
    to the same large value orders them as they are ordered for all sizes."""
    try:
        return float(stride.xreplace({s: sp.Integer(101) for s in stride.free_symbols}))
    except (TypeError, ValueError):
        return None


def dense_like(x: TensorType, canon) -> TensorType:
    """The output of an elementwise op, as TensorIterator lays it out: dense, with the
    dims in the input's memory order (a transposed input gives a transposed output)."""
    if x.is_contiguous or any(s == 0 for s in x.strides):
        return fresh(x.shape, x.dtype)
    keys = [_stride_key(canon(s)) for s in x.strides]
    if any(k is None for k in keys):
        return fresh(x.shape, x.dtype)
    order = sorted(range(x.rank), key=lambda d: (-keys[d], d))
    dense = contiguous([x.shape[d] for d in order])
    strides = [ONE] * x.rank
    for position, d in enumerate(order):
        strides[d] = dense[position]
    return TensorType(x.shape, tuple(strides), x.dtype)
