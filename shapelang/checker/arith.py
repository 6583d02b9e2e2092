"""Arithmetic of values in an expression: `-x`, `a + b`, `q @ k`, comparisons. Sizes with
sizes stay sizes; with a tensor, the shapes broadcast and the dtypes promote as PyTorch's."""
from __future__ import annotations

from dataclasses import replace

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import BinOp, Neg
from . import causes, dtypes, ops
from .layout import Geometry, dense_like, elementwise


def negate(c, node: Neg):
    v = c.value(node.operand)
    if not isinstance(v, tuple):
        return -v
    dt = dtypes.negate(v[0], node.span, c.source_of(node.operand))
    return c.emit("neg", c.source_of(node), node.span, [v[1]],
                     ops.Result((replace(dense_like(v[0], c.prover.canon), dtype=dt),)))[0]

def binop(c, node: BinOp):
    a, b = c.value(node.left), c.value(node.right)
    ta, tb = isinstance(a, tuple), isinstance(b, tuple)
    texts = (c.source_of(node.left), c.source_of(node.right))
    text = c.source_of(node)
    if node.op in ops.COMPARISONS:
        res, refs = ops.compare(c.ctx, a, b, texts, node.span, node.op)
        return c.emit(ops.COMPARISONS[node.op], text, node.span, refs, res)[0]
    if not ta and not tb:
        return c.build(node, allow_real=True)
    if node.op == "@":
        if not (ta and tb):
            raise ShapeError("E112", "`@` multiplies two tensors; use `*` or `scale` for a "
                             "number", span=node.span)
        try:
            res = ops.matmul(c.ctx, a[0], b[0], texts, node.span)
        except ShapeError as err:
            raise c.suggest.matmul(causes.operands(c, err, node, a, b), node) from None
        dtypes.set_outputs(res, [dtypes.matmul(a[0], b[0], node.span, texts)])
        ref = c._tensor_refs
        ref[id(node.left)], ref[id(node.right)] = a[1], b[1]
        return c.emit("matmul", text, node.span, [a[1], b[1]], res)[0]
    names = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow", "//": "floordiv",
             "%": "mod"}
    if ta and tb:
        try:
            shape = ops.broadcast(c.ctx, [a[0].shape, b[0].shape],
                                  [f"`{texts[0]}`", f"`{texts[1]}`"], node.span)
        except ShapeError as err:
            raise causes.operands(c, err, node, a, b) from None
        out = elementwise([a[0], b[0]], shape, Geometry(c.prover.canon, c.same))
        res = ops.Result((replace(out, dtype=dtypes.binary(names[node.op], a[0], b[0], node.span,
                                                           texts)),))
        return c.emit(names[node.op], text, node.span, [a[1], b[1]], res)[0]
    t, s = (a, b) if ta else (b, a)
    dt = dtypes.with_scalar(names[node.op], t[0], s, not ta, node.span, texts)
    res = ops.Result((replace(dense_like(t[0], c.prover.canon), dtype=dt),),
                     detail={"scalar": s, "scalar_left": not ta})
    return c.emit(names[node.op], text, node.span, [t[1]], res)[0]

