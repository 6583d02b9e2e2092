"""Arithmetic of values in an expression: `-x`, `a + b`, `q @ k`, comparisons. Sizes with
sizes stay sizes; with a tensor, the shapes broadcast and the dtypes promote as PyTorch's."""
from __future__ import annotations

from dataclasses import replace

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import BinOp, Neg
from . import dtypes, ops
from .advice import causes
from .layout import Geometry, dense_like, elementwise

# an operator of an expression -> the step it makes (shapelang.codegen and the renderers
# write the operator back from this table)
OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow", "//": "floordiv",
             "%": "mod", "@": "matmul", "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor"}
SYMBOLS = {name: sym for sym, name in OPERATORS.items()}
ELEMENTWISE = tuple(name for name in SYMBOLS if name != "matmul")
BITWISE = tuple(dtypes.BITWISE.values())     # `&`, `|`, `^`


def _precedence(c, node: BinOp, texts) -> None:
    """W203 on `q - k < W & m`: Python (and so PyTorch) reads it as `q - k < (W & m)`, where a
    learner meant `(q - k < W) & m`. Parentheses around the operand say it is meant."""
    for side, text in ((node.left, texts[0]), (node.right, texts[1])):
        if not (isinstance(side, BinOp) and side.op in BITWISE) or _wrapped(side, node):
            continue
        a, b = (f"({c.source_of(n)})" if _wrapped(n, side) else c.source_of(n) for n in (side.left, side.right))
        split = f"({texts[0]} {node.op} {a}) {side.op} {b}" if side is node.right else \
            f"{a} {side.op} ({b} {node.op} {texts[1]})"
        c.error("W203", f"`{c.source_of(node)}` compares `{text}`: `{side.op}` binds tighter than "
                        f"`{node.op}` in Python and PyTorch", node.span,
                help=f"if the comparison is one side of the `{side.op}`, write `{split}`; if the "
                     f"`{side.op}` comes first, write `({text})` to say so", severity="warning")


def _wrapped(inner, outer: BinOp) -> bool:
    """Whether operand `inner` of `outer` is written in parentheses: the nodes keep the spans
    of what they are made of, and the parent's span takes in the parentheses."""
    start, end = (inner.span.line, inner.span.column), (inner.span.end_line, inner.span.end_column)
    if inner is outer.left:
        return (outer.span.line, outer.span.column) < start
    return (outer.span.end_line, outer.span.end_column) > end


def negate(c, node: Neg):
    v = c.value(node.operand)
    if not isinstance(v, tuple):
        return -v
    dt = dtypes.negate(v[0], node.span, c.source_of(node.operand))
    return c.emit("neg", c.source_of(node), node.span, [v[1]],
                     ops.Result((replace(_dense(c, v[0]), dtype=dt),)))[0]


def _dense(c, t):
    """The layout of a new tensor made from `t` element by element (`-x`, `x * 2`), as
    TensorIterator lays it out: worked out once per type (a strided input, such as a
    rotary half, costs a sort of its strides)."""
    return c.rules.result(c, ("dense_like", t, t.why),
                          lambda: ops.Result((dense_like(t, c.prover.canon, c.same),))).outputs[0]

def _matmul(c, x, y, texts, span) -> ops.Result:
    res = ops.matmul(c.ctx, x, y, texts, span)
    dtypes.set_outputs(res, [dtypes.matmul(x, y, span, texts)])
    return res


def _elementwise(c, name: str, x, y, texts, span) -> ops.Result:
    """Two tensors combined element by element (`a + b`): shapes broadcast, dtypes promote."""
    shape = ops.broadcast(c.ctx, [x.shape, y.shape], [f"`{texts[0]}`", f"`{texts[1]}`"], span)
    out = elementwise([x, y], shape, Geometry(c.prover.canon, c.same))
    return ops.Result((replace(out, dtype=dtypes.binary(name, x, y, span, texts)),))


def _texts(c, node: BinOp) -> tuple:
    return c.source_of(node.left), c.source_of(node.right)


def binop(c, node: BinOp):
    a, b = c.value(node.left), c.value(node.right)
    ta, tb = isinstance(a, tuple), isinstance(b, tuple)
    text = c.source_of(node)
    if node.op in ops.COMPARISONS:
        texts = _texts(c, node)
        _precedence(c, node, texts)
        res, refs = ops.compare(c.ctx, a, b, texts, node.span, node.op)
        return c.emit(ops.COMPARISONS[node.op], text, node.span, refs, res)[0]
    if not ta and not tb:
        if node.op in BITWISE:
            raise ShapeError("E112", f"`{text}` combines two sizes; `{node.op}` combines bool masks or "
                             "int tensors", span=node.span)
        return c.build(node, allow_real=True)
    if node.op == "@":
        if not (ta and tb):
            raise ShapeError("E112", "`@` multiplies two tensors; use `*` or `scale` for a "
                             "number", span=node.span)
        try:
            res = c.rules.result(c, ("@", a[0], b[0], a[0].why, b[0].why),
                                 lambda: _matmul(c, a[0], b[0], _texts(c, node), node.span))
        except ShapeError as err:
            raise c.suggest.matmul(causes.operands(c, err, node, a, b), node) from None
        ref = c._tensor_refs
        ref[id(node.left)], ref[id(node.right)] = a[1], b[1]
        return c.emit("matmul", text, node.span, [a[1], b[1]], res)[0]
    name = OPERATORS[node.op]
    if ta and tb:
        try:
            res = c.rules.result(c, (name, a[0], b[0], a[0].why, b[0].why),
                                 lambda: _elementwise(c, name, a[0], b[0], _texts(c, node), node.span))
        except ShapeError as err:
            raise causes.operands(c, err, node, a, b) from None
        return c.emit(name, text, node.span, [a[1], b[1]], res)[0]
    t, s = (a, b) if ta else (b, a)
    dt = dtypes.with_scalar(name, t[0], s, not ta, node.span, _texts(c, node))
    res = ops.Result((replace(_dense(c, t[0]), dtype=dt),),
                     detail={"scalar": s, "scalar_left": not ta})
    return c.emit(name, text, node.span, [t[1]], res)[0]

