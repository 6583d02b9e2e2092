"""Calls in an expression: a block applied as a function, the call forms of the operation
table (`concat(-1, A, B)`, `einsum("..", A, B)`, `arange(S)`, ...; shapelang.checker.ops.calls)
and the scalar functions of sizes."""
from __future__ import annotations

from dataclasses import replace

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Call
from . import dims as dimlib
from . import dtypes, ops
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
        return c.block_calls.block_step(c.blocks[node.func], vals, text, node.span, node.kwargs)[0]
    if node.func in ops.CALLS:      # concat(..), einsum(..), arange(..), where(..), ...
        op, refs, res = ops.CALLS[node.func](c.ctx, node)
        _keywords(node, op, res)
        return c.emit(op, text, node.span, refs, res)[0]
    known = list(c.blocks) + list(ops.CALLS) + ["sqrt", "min", "max"]
    raise ShapeError("E002", f"unknown function or block `{node.func}`", span=node.func_span,
                     help=c._did_you_mean(node.func, known))


# the call forms that make a new tensor take `dtype=` as torch.arange / torch.full do
_NO_BOOL = ("arange", "linspace")


def _keywords(node: Call, op: str, res) -> None:
    """A call's keywords mean what they mean after `-> op`: each is honoured or refused (E110),
    none is dropped. `arange(S, dtype=float)`: the new tensor has that dtype."""
    d = ops.TABLE.get(op)
    accepted = tuple(getattr(d, "kwargs", ()) or ()) if d is not None else ()
    for k in node.kwargs:
        if k.name != "dtype" or "dtype" not in accepted:
            help = ("it takes " + ", ".join(f"`{n}=`" for n in accepted)) if accepted else \
                f"`{node.func}(..)` takes no keyword arguments"
            raise ShapeError("E110", f"`{node.func}` has no keyword `{k.name}=`", span=k.span,
                             help=help + " (docs/language.md lists the keywords of every operation)")
        dt = dtypes.from_node(k.value, "`dtype=`")
        if dt == "bool" and op in _NO_BOOL:
            raise dtypes.refuse(f"`{op}(.., dtype=bool)`: PyTorch has no bool {op}", k.span,
                                "compare the result instead, e.g. `arange(S) < N`")
        res.outputs = tuple(replace(t, dtype=dt) for t in res.outputs)
        res.detail["dtype"] = dt


def tuple_keywords(c, node) -> None:
    """`-> softmax(dim=-1)`, `-> mean(-1, keepdim=True)`: keywords in parentheses are for
    block calls (`-> Mlp(F=4*D)`); after an operation they are the PyTorch habit of
    calling it, reported as the syntax error it was before blocks took them."""
    for op in node.ops:
        if not op.tuple_kwargs or op.name in c.blocks or op.name == "stack":
            continue
        k = next(k for k in op.kwargs if k.eq_span is not None)
        lines = c.spec.source.split("\n")
        line = lines[k.span.line - 1] if k.span.line <= len(lines) else ""
        col = k.span.column - 2
        while col >= 0 and line[col] in " \t":
            col -= 1
        if col >= 0 and line[col] == ",":
            raise ShapeError("E001", "unexpected `,`", span=replace(k.span, column=col + 1,
                                                                  end_line=k.span.line, end_column=col + 2))
        raise ShapeError("E001", "unexpected `=`", span=k.eq_span)
