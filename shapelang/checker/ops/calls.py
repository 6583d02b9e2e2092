"""Operations written as calls, `name(args)`: the ones that combine several tensors
(`concat(-1, A, B)`, `stack_tensors(-1, A, B)`, `einsum("ij,jk->ik", A, B)`, `where(M, A, B)`,
`outer(a, b)`, `meshgrid(a, b)`) and
the ones that make new tensors from sizes alone (`arange(S)`, `full([S, S], true)`).

Each takes the checker context and the Call node and returns the IR operation name,
the refs of its tensor inputs, and the Result.
"""
from __future__ import annotations

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import Hole, Neg, Num, Str
from ..dims import unfilled
from . import norms, tables
from .args import Result
from .combine import concat_types, einsum_types, stack_types


def _int_literal(node) -> int | None:
    if isinstance(node, Hole):
        raise unfilled(node)
    if isinstance(node, Num) and isinstance(node.value, int):
        return node.value
    if isinstance(node, Neg) and isinstance(node.operand, Num) and isinstance(node.operand.value, int):
        return -node.operand.value
    return None


def concat(c, node):
    if len(node.args) < 2:
        raise ShapeError("E110", "`concat` takes an axis and tensors: concat(-1, A, B)", span=node.span)
    axis_node = node.args[0]
    axis = _int_literal(axis_node)
    if axis is None:
        raise ShapeError("E110", "the first argument of concat is an axis", span=axis_node.span)
    vals = [c.tensor_value(a) for a in node.args[1:]]
    types = tuple(v[0] for v in vals)
    t = c.rules.result(c, ("concat()", axis, types, tuple(x.why for x in types)), lambda: Result((
        concat_types(c, list(types), axis, node.span, axis_node.span),))).outputs[0]
    return "concat", [v[1] for v in vals], Result((t,), detail={"dim": axis + t.rank if axis < 0 else axis})


def einsum(c, node):
    if node.args and isinstance(node.args[0], Hole):
        raise unfilled(node.args[0])
    if not node.args or not isinstance(node.args[0], Str):
        raise ShapeError("E110", 'einsum takes an equation first: einsum("ij,jk->ik", A, B)', span=node.span)
    vals = [c.tensor_value(a) for a in node.args[1:]]
    if not vals:
        raise ShapeError("E110", "einsum needs at least one tensor", span=node.span)
    out, flops = einsum_types(c, node.args[0].value, [v[0] for v in vals], node.args[0].span)
    return "einsum", [v[1] for v in vals], Result((out,), flops=flops, detail={"equation": node.args[0].value})


def stack_tensors(c, node):
    if len(node.args) < 2:
        raise ShapeError("E110", "`stack_tensors` takes an axis and tensors: stack_tensors(-1, A, B)",
                         span=node.span)
    axis_node = node.args[0]
    axis = _int_literal(axis_node)
    if axis is None:
        raise ShapeError("E110", "the first argument of stack_tensors is an axis", span=axis_node.span)
    vals = [c.tensor_value(a) for a in node.args[1:]]
    t, d = stack_types(c, [v[0] for v in vals], axis, node.span, axis_node.span)
    return "stack_tensors", [v[1] for v in vals], Result((t,), detail={"dim": d})


CALLS = {"concat": concat, "cat": concat, "einsum": einsum, "stack_tensors": stack_tensors, "eye": norms.eye_call,
         **tables.CALLS}
