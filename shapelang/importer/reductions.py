"""Import, reductions and running operations: an ATen operation that reduces or scans axes ->
the spec's operation of that name, with its keywords (`mean -1 keepdim`, `std -1
correction=0`, `norm -1 p=1 keepdim`, `cumsum 1 dtype=float64`).

A reduction over several axes that the language states over one (sum, mean, amax, amin,
logsumexp, any, all, nansum, a p-norm) is written as one step per axis, the last axis
first so the others keep their numbers: `x.sum((1, 2))` is `sum -1 -> sum 1`, and over
every axis each axis in turn. The reductions that do not compose so (a variance over
several axes) stay opaque. torch.max/min along an axis give two tensors, bound to two
names (`vals, idx: x -> max -1`). Registered in the operation table beside the layout
steps of translate.py.
"""
from __future__ import annotations

import math
import operator

import torch

from ..checker.ops.table import TABLE as OPS
from .graph import arg, num_text, target_name, val
from .translate import TABLE, Piece

# reductions whose result over several axes is the same reduction applied axis by axis
CHAINED = frozenset(name for name, d in OPS.items() if d.composes)
# the dtype names the language's `dtype=` reads (docs/language.md, Dtypes)
DTYPE_WORDS = {torch.float32: "float", torch.float64: "float64", torch.float16: "float16",
               torch.bfloat16: "bfloat16", torch.int64: "int", torch.int32: "int32", torch.int16: "int16",
               torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool"}


def axis_text(d: int, rank: int) -> str:
    """An axis as the spec writes it: the last one as -1, the others counted from 0."""
    d = d + rank if d < 0 else d
    return "-1" if d == rank - 1 else str(d)


def _axes(dims, rank: int) -> list[int]:
    """The axes a reduction names (an int, a list, or None and [] for every axis), from 0."""
    if dims is None or dims == [] or dims == ():
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted({d + rank if d < 0 else d for d in dims})


def _over(op: str, axes: list[int], rank: int, keep: bool, extra: str = "") -> str:
    """`op A [keepdim]` per axis, the last axis first (so the others keep their numbers)."""
    if len(axes) == 1:
        return f"{op} {axis_text(axes[0], rank)}" + (" keepdim" if keep else "") + extra
    return " -> ".join(f"{op} {d}" + (" keepdim" if keep else "") + extra for d in sorted(axes, reverse=True))


def _reduce(t, node, leaf):
    """mean, sum, amax, amin, logsumexp, any, all, nansum over one axis, several or all."""
    name = target_name(node)
    op = name.split(".")[1]
    x = val(node.args[0])
    if name in ("aten.max.default", "aten.min.default"):
        op, dims, keep = "a" + op, None, False
    elif name in ("aten.sum.default", "aten.any.default", "aten.all.default"):
        dims, keep = None, False
    else:
        dims, keep = arg(node, 1, "dim", None), bool(arg(node, 2, "keepdim", False))
    if node.kwargs.get("dtype") is not None or len(node.args) > 3:
        return t.opaque(node, f"a {op} with a dtype")
    axes = _axes(dims, x.dim())
    if not axes:
        return None                      # a number reduced over no axis: itself
    if len(axes) > 1 and op not in CHAINED:
        return t.opaque(node, f"a {op} over several axes")
    return Piece(node.name, _over(op, axes, x.dim(), keep), node.args[0].name, hint=op)


def _spread(t, node, leaf):
    """var and std: over one axis (std: or every axis), with their correction."""
    op = target_name(node).split(".")[1]
    x = val(node.args[0])
    if target_name(node).endswith(".dim"):          # var(x, dim, unbiased, keepdim)
        dims = arg(node, 1, "dim", None)
        correction = 1 if arg(node, 2, "unbiased", True) else 0
        keep = arg(node, 3, "keepdim", False)
    elif target_name(node).endswith(".correction"):
        dims = arg(node, 1, "dim", None)
        correction = node.kwargs.get("correction", 1)
        keep = node.kwargs.get("keepdim", False)
    else:                                           # std(x, unbiased)
        dims, correction, keep = None, 1 if arg(node, 1, "unbiased", True) else 0, False
    correction = 1 if correction is None else correction
    if isinstance(correction, float) and correction.is_integer():
        correction = int(correction)
    axes = _axes(dims, x.dim())
    if len(axes) == 1:
        text = f"{op} {axis_text(axes[0], x.dim())}" + (" keepdim" if keep else "")
    elif op == "std" and len(axes) == x.dim() and not keep:
        text = "std"                                # of every element
    else:
        return t.opaque(node, f"a {op} over several axes")
    if not isinstance(correction, int):
        return t.opaque(node, f"a {op} with correction {correction}")
    if correction != 1:
        text += f" correction={correction}"
    return Piece(node.name, text, node.args[0].name, hint=op)


def _dtype(t, node, text: str):
    dtype = node.kwargs.get("dtype")
    if dtype is None:
        return text
    if dtype not in DTYPE_WORDS:
        return None
    return text + f" dtype={DTYPE_WORDS[dtype]}"


def _prod(t, node, leaf):
    x = val(node.args[0])
    if target_name(node) == "aten.prod.default":
        text = "prod"
    else:
        text = f"prod {axis_text(node.args[1], x.dim())}" + (" keepdim" if arg(node, 2, "keepdim", False) else "")
    text = _dtype(t, node, text)
    if text is None:
        return t.opaque(node, f"a product in {node.kwargs['dtype']}")
    return Piece(node.name, text, node.args[0].name, hint="prod")


def _arg_extremum(t, node, leaf):
    """argmax / argmin: along an axis, or of the flattened tensor."""
    op = target_name(node).split(".")[1]
    x = val(node.args[0])
    d, keep = arg(node, 1, "dim", None), arg(node, 2, "keepdim", False)
    if d is None:
        if keep:
            return t.opaque(node, f"an {op} of every element with keepdim")
        return Piece(node.name, op, node.args[0].name, hint=op)
    return Piece(node.name, f"{op} {axis_text(d, x.dim())}" + (" keepdim" if keep else ""), node.args[0].name,
                 hint=op)


def _norm(t, node, leaf):
    """torch.linalg.vector_norm (Tensor.norm, F.normalize's denominator): `norm A p=.. keepdim`;
    over several axes one p-norm per axis, which is the same norm."""
    x = val(node.args[0])
    p, dims, keep = arg(node, 1, "ord", 2), arg(node, 2, "dim", None), bool(arg(node, 3, "keepdim", False))
    if node.kwargs.get("dtype") is not None:
        return t.opaque(node, "a norm with a dtype")
    p = float(p)
    p_text = "" if p == 2 else " p=" + ({math.inf: "inf", -math.inf: "(-inf)"}.get(p) or
                                         (num_text(p) if p >= 0 else f"({num_text(p)})"))
    axes = _axes(dims, x.dim())
    if dims is None and not keep or len(axes) == 1:
        text = "norm" + p_text if len(axes) != 1 else _over("norm", axes, x.dim(), keep, p_text)
        return Piece(node.name, text, node.args[0].name, hint="norm")
    if p == 0:
        return t.opaque(node, "a count of nonzero elements over several axes")
    return Piece(node.name, _over("norm", axes, x.dim(), keep, p_text), node.args[0].name, hint="norm")


def _scan(t, node, leaf):
    """cumsum, cumprod (with a dtype), logcumsumexp along one axis."""
    op = target_name(node).split(".")[1]
    text = _dtype(t, node, f"{op} {axis_text(node.args[1], val(node.args[0]).dim())}")
    if text is None:
        return t.opaque(node, f"a {op} in {node.kwargs['dtype']}")
    return Piece(node.name, text, node.args[0].name, hint=op)


def _pair(t, node, leaf):
    """torch.max/min along an axis: the values and the indices, two names; `amax`/`argmax`
    where the module reads only one of them."""
    op = target_name(node).split(".")[1]
    x = val(node.args[0])
    keep = arg(node, 2, "keepdim", False)
    where = f" {axis_text(node.args[1], x.dim())}" + (" keepdim" if keep else "")
    users = {u.args[1]: u.name for u in node.users if u.target is operator.getitem and u.users}
    if len(users) == 2:
        return Piece(node.name, op + where, node.args[0].name, outs=[users[0], users[1]], hint=op)
    return [Piece(key, ("a" if k == 0 else "arg") + op + where, node.args[0].name, hint=op)
            for k, key in users.items()]


def _running_extremum(t, node, leaf):
    """cummax / cummin: the language gives the running values; their indices, where the
    module reads them, stay an opaque step of their own."""
    op = target_name(node).split(".")[1]
    x = node.args[0]
    users = {u.args[1]: u for u in node.users if u.target is operator.getitem and u.users}
    pieces = []
    if 0 in users:
        pieces.append(Piece(users[0].name, f"{op} {axis_text(node.args[1], val(x).dim())}", x.name, hint=op))
    if 1 in users:
        what = target_name(node)
        pieces.append(Piece(users[1].name, f'opaque "{what}" {t.shape(users[1])} int', x.name, hint="idx",
                            opaque=True, comment=f"opaque: {what} (the indices of a running {op[3:]}imum)"))
    return pieces


TABLE.update({
    **{f"aten.{op}.{kind}": _reduce for op, kind in (
        ("mean", "dim"), ("sum", "dim_IntList"), ("sum", "default"), ("amax", "default"), ("amin", "default"),
        ("logsumexp", "default"), ("any", "dim"), ("any", "dims"), ("any", "default"), ("all", "dim"),
        ("all", "dims"), ("all", "default"), ("nansum", "default"), ("max", "default"), ("min", "default"))},
    "aten.var.correction": _spread, "aten.var.dim": _spread,
    "aten.std.correction": _spread, "aten.std.dim": _spread, "aten.std.default": _spread,
    "aten.prod.dim_int": _prod, "aten.prod.default": _prod,
    "aten.argmax.default": _arg_extremum, "aten.argmin.default": _arg_extremum,
    "aten.linalg_vector_norm.default": _norm,
    "aten.cumsum.default": _scan, "aten.cumprod.default": _scan, "aten.logcumsumexp.default": _scan,
    "aten.max.dim": _pair, "aten.min.dim": _pair,
    "aten.cummax.default": _running_extremum, "aten.cummin.default": _running_extremum,
})
