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
        vals = outputs(c, node)
        if len(vals) != 1:
            raise ShapeError("E110", f"`{node.func}` gives {len(vals)} tensors; name them first",
                             span=node.span, help=f"write it on its own line: "
                                                  f"`{', '.join('abcdefgh'[:min(len(vals), 8)])}: {text}`")
        return vals[0]
    if node.func == "stack":
        raise ShapeError("E002", "`stack(..)` is not a function: `stack N Block` repeats a block",
                         span=node.func_span, help="torch.stack of tensors is `stack_tensors(-1, A, B)`")
    known = list(c.blocks) + list(ops.CALLS) + ["sqrt", "min", "max"]
    raise ShapeError("E002", f"unknown function or block `{node.func}`", span=node.func_span,
                     help=c._did_you_mean(node.func, known))


def outputs(c, node: Call) -> list:
    """Every tensor a call of the operation table gives (`gy, gx: meshgrid(ys, xs)` gives two)."""
    op, refs, res = ops.CALLS[node.func](c.ctx, node)
    return c.emit(op, c.source_of(node), node.span, refs, res)


def head(c, node) -> list:
    """The tensors at the head of a pipeline: one, or several from a call such as meshgrid."""
    if isinstance(node, Call) and node.func in ops.CALLS and node.func not in c.blocks \
            and node.func not in c.skipped:
        vals = outputs(c, node)
        if len(vals) == 1:
            c._tensor_refs[id(node)] = vals[0][1]     # as value() records a call's tensor
        return vals
    return [c.tensor_value(node)]
