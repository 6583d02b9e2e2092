"""Calls in an expression: a block applied as a function, the call forms of the operation
table (`concat(-1, A, B)`, `einsum("..", A, B)`, `arange(S)`, ...; shapelang.checker.ops.calls)
and the scalar functions of sizes."""
from __future__ import annotations

from dataclasses import replace

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Call
from . import dims as dimlib
from . import ops
from .scope import Poisoned


def call(c, node: Call):
    if node.func in ("min", "max") and any(c._mentions_tensor(a) for a in node.args):
        node = replace(node, func="minimum" if node.func == "min" else "maximum")
    if node.func in dimlib.SCALAR_FUNCTIONS:
        return c.build(node, allow_real=True)
    text = c.source_of(node)
    if node.func in c.skipped:
        raise Poisoned()
    if node.func in c.blocks:
        vals = [c.tensor_value(a) for a in node.args]
        return c.block_calls.block_step(c.blocks[node.func], vals, text, node.span)[0]
    if node.func in ops.CALLS:      # concat(..), einsum(..), arange(..), where(..), ...
        op, refs, res = ops.CALLS[node.func](c.ctx, node)
        return c.emit(op, text, node.span, refs, res)[0]
    known = list(c.blocks) + list(ops.CALLS) + ["sqrt", "min", "max"]
    raise ShapeError("E002", f"unknown function or block `{node.func}`", span=node.func_span,
                     help=c._did_you_mean(node.func, known))
