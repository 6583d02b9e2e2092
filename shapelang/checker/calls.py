"""Calls in an expression: a block applied as a function, the call forms of the operation
table (`concat(-1, A, B)`, `einsum("..", A, B)`, `arange(S)`, ...; shapelang.checker.ops.calls)
and the scalar functions of sizes."""
from __future__ import annotations

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Call
from . import dims as dimlib
from . import ops
from .scope import Poisoned


def call(c, node: Call):
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
        outs = c.emit(op, text, node.span, refs, res)
        if len(outs) > 1:   # `slot, tok: where(hit)`: only as the head of a binding
            if id(node) not in c.several_ok:
                raise ShapeError("E110", f"`{text}` gives {len(outs)} tensors; name them first: "
                                 f"`{', '.join(f'i{k}' for k in range(len(outs)))}: {text}`", span=node.span)
            c.several[id(node)] = outs
        return outs[0]
    known = list(c.blocks) + list(ops.CALLS) + ["sqrt", "min", "max"]
    raise ShapeError("E002", f"unknown function or block `{node.func}`", span=node.func_span,
                     help=c._did_you_mean(node.func, known))
