"""Calls in an expression: `concat(-1, A, B)`, `einsum("..", A, B)`, a block applied
as a function, and the scalar functions of sizes."""
from __future__ import annotations

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Call, Str
from . import dims as dimlib
from . import ops
from .scope import Poisoned
from .suggest import int_literal


def call(c, node: Call):
    if node.func in dimlib.SCALAR_FUNCTIONS:
        return c.build(node, allow_real=True)
    text = c.source_of(node)
    if node.func in ("concat", "cat"):
        if len(node.args) < 2:
            raise ShapeError("E110", "`concat` takes an axis and tensors: concat(-1, A, B)",
                             span=node.span)
        axis_node = node.args[0]
        axis = int_literal(axis_node)
        if axis is None:
            raise ShapeError("E110", "the first argument of concat is an axis", span=axis_node.span)
        vals = [c.tensor_value(a) for a in node.args[1:]]
        t = ops.concat_types(c.ctx, [v[0] for v in vals], axis, node.span, axis_node.span)
        res = ops.Result((t,), detail={"dim": axis + t.rank if axis < 0 else axis})
        return c.emit("concat", text, node.span, [v[1] for v in vals], res)[0]
    if node.func == "einsum":
        if not node.args or not isinstance(node.args[0], Str):
            raise ShapeError("E110", 'einsum takes an equation first: einsum("ij,jk->ik", A, B)',
                             span=node.span)
        vals = [c.tensor_value(a) for a in node.args[1:]]
        if not vals:
            raise ShapeError("E110", "einsum needs at least one tensor", span=node.span)
        out, flops = ops.einsum_types(c.ctx, node.args[0].value, [v[0] for v in vals],
                                      node.args[0].span)
        res = ops.Result((out,), flops=flops, detail={"equation": node.args[0].value})
        return c.emit("einsum", text, node.span, [v[1] for v in vals], res)[0]
    if node.func in c.skipped:
        raise Poisoned()
    if node.func in c.blocks:
        vals = [c.tensor_value(a) for a in node.args]
        return c.block_calls.block_step(c.blocks[node.func], vals, text, node.span)[0]
    known = list(c.blocks) + ["concat", "einsum", "sqrt", "min", "max"]
    raise ShapeError("E002", f"unknown function or block `{node.func}`", span=node.func_span,
                     help=c._did_you_mean(node.func, known))
