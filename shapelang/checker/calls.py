"""Calls in an expression: a block applied as a function, the call forms of the operation
table (`concat(-1, A, B)`, `einsum("..", A, B)`, `arange(S)`, ...; shapelang.checker.ops.calls)
and the scalar functions of sizes."""
from __future__ import annotations

from dataclasses import replace

from ..syntax.comments import code_of
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
        vals = outputs(c, node)
        if len(vals) != 1:
            raise ShapeError("E110", f"`{node.func}` gives {len(vals)} tensors; name them first",
                             span=node.span, help=f"write it on its own line: "
                                                  f"`{', '.join('abcdefgh'[:min(len(vals), 8)])}: {text}`")
        return vals[0]
    if node.func == "stack":
        raise ShapeError("E002", "`stack(..)` is not a function: `stack N Block` repeats a block",
                         span=node.func_span, help="torch.stack of tensors is `stack_tensors(-1, A, B)`")
    if node.func in ops.TABLE and node.args:     # `softmax(x, -1)`: an operation written as a call
        raise _operation_called(c, node)
    known = list(c.blocks) + list(ops.CALLS) + list(dimlib.SCALAR_FUNCTIONS)
    raise ShapeError("E002", f"unknown function or block `{node.func}`", span=node.func_span,
                     help=c._did_you_mean(node.func, known))


def _operation_called(c, node: Call) -> ShapeError:
    """E002 for `softmax(x, -1)`: the operations of the table take the piped tensor, so the
    candidate is `x -> softmax -1` (in brackets inside a larger expression), shown once proved."""
    def arg(a) -> str:
        text = c.source_of(a)
        text = text.strip()
        return f"({text})" if " " in text and text[0] not in "[(\"" else text

    first = c.source_of(node.args[0])
    rest = [arg(a) for a in node.args[1:]] + [f"{k.name}={arg(k.value)}" for k in node.kwargs]
    piped = " ".join([f"{first} -> {node.func}"] + rest)
    line = c.spec.source.split("\n")[node.span.line - 1] if node.span.line == node.span.end_line else ""
    before, after = line[:node.span.column - 1], line[node.span.end_column - 1:]
    whole = before.rstrip().endswith(":") and not code_of(after).strip()
    text = piped if whole else f"({piped})"
    return ShapeError("E002", f"`{node.func}` is an operation, not a function: the tensor is piped into it",
                      span=node.func_span, help=f"write `{text}`",
                      fixes=((node.span, text, "pipe the tensor into it"),)
                      if node.span.line == node.span.end_line else ())


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


def outputs(c, node: Call) -> list:
    """Every tensor a call of the operation table gives (`gy, gx: meshgrid(ys, xs)` gives two)."""
    op, refs, res = ops.CALLS[node.func](c.ctx, node)
    _keywords(node, op, res)
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
