"""What every shape rule shares: typed access to arguments, and the rule's result."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import Name, Neg, Num, Op, ShapeLit, Str
from ..layout import TensorType

ZERO = sp.Integer(0)
ONE = sp.Integer(1)


@dataclass
class Result:
    outputs: tuple
    params: sp.Expr = ZERO
    flops: sp.Expr = ZERO
    detail: dict = field(default_factory=dict)


def prod(xs) -> sp.Expr:
    out = ONE
    for x in xs:
        out = out * x
    return out


def _ax(n: int) -> str:
    return f"{n}-d tensor"


class Args:
    """Typed access to an operation's arguments, with learner-facing errors."""

    def __init__(self, c, op: Op, x: TensorType | None = None):
        self.c, self.op, self.pos, self.x = c, op, op.args, x
        self.kw = {k.name: k for k in op.kwargs}

    def fail(self, message: str, help: str | None = None, span=None) -> ShapeError:
        return ShapeError("E110", message, help=help, span=span or self.op.span)

    def count(self, lo: int, hi: int | None = None, usage: str = "") -> None:
        hi = lo if hi is None else hi
        n = len(self.pos)
        if not lo <= n <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.fail(f"`{self.op.name}` takes {want} argument{'s' if hi != 1 else ''}, got {n}",
                            f"write it as `{usage}`" if usage else None)

    def int_at(self, i: int) -> int:
        node = self.pos[i]
        if isinstance(node, Neg) and isinstance(node.operand, Num):
            node = Num(node.span, -node.operand.value, "-" + node.operand.text)
        if not (isinstance(node, Num) and isinstance(node.value, int)):
            raise self.fail(f"`{self.op.name}` needs a whole number here", span=node.span)
        return node.value

    def axis_at(self, i: int, rank: int, *, extra: int = 0) -> int:
        """A dim index normalised to 0..rank-1 (rank+extra for unsqueeze)."""
        a = self.int_at(i)
        n = rank + extra
        if not -n <= a < n:
            what = f"`{self.op.name}` on {self.c.show(self.x)}, a {_ax(rank)}" \
                if self.x is not None and self.x.rank == rank else f"a {_ax(rank)}"
            raise ShapeError("E105", f"axis {a} is out of range for {what}",
                             help=f"the axes of a {_ax(rank)} run from {-n} to {n - 1}"
                             if n else "a 0-d tensor has no axes", span=self.pos[i].span)
        return a + n if a < 0 else a

    def dim_at(self, i: int) -> sp.Expr:
        return self.c.dim(self.pos[i])

    def scalar_at(self, i: int) -> sp.Expr:
        return self.c.scalar(self.pos[i])

    def shape_at(self, i: int, *, allow_infer: bool = True) -> tuple[list, int | None]:
        node = self.pos[i]
        if not isinstance(node, ShapeLit):
            raise self.fail(f"`{self.op.name}` needs a shape in brackets, e.g. [B, S, D]",
                            span=node.span)
        dims, infer = [], None
        for j, d in enumerate(node.dims):
            if allow_infer and _is_minus_one(d):
                if infer is not None:
                    raise ShapeError("E110", "only one size may be -1", span=d.span,
                                     help="-1 asks PyTorch to work out one size; give the others")
                infer = j
                dims.append(sp.Integer(-1))
            else:
                e = self.c.dim(d)
                self.c.need_whole(e, span=d.span, what=lambda e=e: f"this size is {self.c.sz(e)}")
                self.c.need_positive(e, d.span)
                dims.append(e)
        return dims, infer

    def tensor_at(self, i: int) -> TensorType:
        return self.c.tensor(self.pos[i])

    def str_at(self, i: int) -> str:
        node = self.pos[i]
        if not isinstance(node, Str):
            raise self.fail(f"`{self.op.name}` needs a quoted pattern here", span=node.span)
        return node.value

    def flag(self, name: str) -> bool:
        return any(isinstance(p, Name) and p.name == name for p in self.pos)

    def without_flags(self, *names) -> Args:
        self.pos = tuple(p for p in self.pos if not (isinstance(p, Name) and p.name in names))
        return self

    def kw_bool(self, name: str, default: bool) -> bool:
        k = self.kw.get(name)
        if k is None:
            return default
        if isinstance(k.value, Name) and k.value.name in ("true", "false", "True", "False"):
            return k.value.name.lower() == "true"
        raise self.fail(f"`{name}=` takes true or false", span=k.span)


def _is_minus_one(node) -> bool:
    return (isinstance(node, Num) and node.value == -1) or \
        (isinstance(node, Neg) and isinstance(node.operand, Num) and node.operand.value == 1)
