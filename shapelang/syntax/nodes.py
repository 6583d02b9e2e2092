"""Syntax nodes: the parser's output and the checker's input.

Frozen dataclasses, each with the source span it came from, so that every
diagnostic can point at the text the learner wrote.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def of(meta) -> Span:
        return Span(meta.line, meta.column, meta.end_line, meta.end_column)


# ---- expressions (tensor or size: the checker decides from the names) ----

@dataclass(frozen=True)
class Expr:
    span: Span


@dataclass(frozen=True)
class Num(Expr):
    value: int | float
    text: str


@dataclass(frozen=True)
class Name(Expr):
    name: str


@dataclass(frozen=True)
class Str(Expr):
    value: str


@dataclass(frozen=True)
class Hole(Expr):
    """A blank in an exercise (`?` or `?name`), filled in by the learner."""
    name: str


@dataclass(frozen=True)
class ShapeLit(Expr):
    dims: tuple[Expr, ...]


@dataclass(frozen=True)
class BinOp(Expr):
    op: str  # one of + - * / // % @ **
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Neg(Expr):
    operand: Expr


@dataclass(frozen=True)
class KwArg:
    span: Span
    name: str
    value: Expr
    eq_span: Span | None = None   # its `=` in a call or an argument tuple: `Mlp(x, F=4*D)`


@dataclass(frozen=True)
class Call(Expr):
    func: str
    func_span: Span
    args: tuple[Expr, ...]
    kwargs: tuple[KwArg, ...] = ()   # `arange(S, dtype=float)`, `Mlp(x, F=4*D)`


@dataclass(frozen=True)
class Op:
    span: Span
    name: str
    name_span: Span
    args: tuple[Expr, ...]
    kwargs: tuple[KwArg, ...]
    text: str  # the operation as written, for tables and messages
    tuple_kwargs: bool = False  # keywords inside `-> Block(a, F=4*D)`: for blocks only


@dataclass(frozen=True)
class Pipeline(Expr):
    head: Expr
    ops: tuple[Op, ...]


# ---- statements ----

@dataclass(frozen=True)
class Stmt:
    span: Span


@dataclass(frozen=True)
class DimDecl(Stmt):
    name: str
    value: Expr | None


@dataclass(frozen=True)
class Assume(Stmt):
    terms: tuple[Expr, ...]
    cmps: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class ExampleItem:
    span: Span
    name: str
    value: int


@dataclass(frozen=True)
class Example(Stmt):
    items: tuple[ExampleItem, ...]


@dataclass(frozen=True)
class TensorDecl(Stmt):
    kind: str  # input | param | buffer
    name: str
    shape: ShapeLit
    dtype: str | None
    dtype_span: Span | None = None
    frozen: bool = False     # a param kept in the state dict but not trained


@dataclass(frozen=True)
class Binding(Stmt):
    names: tuple[str, ...]
    value: Pipeline


@dataclass(frozen=True)
class Expect(Stmt):
    name: str
    name_span: Span
    shape: ShapeLit | Hole
    dtype: str | None = None          # `expect keep: [S, S] bool`
    dtype_span: Span | None = None


@dataclass(frozen=True)
class Return(Stmt):
    value: Pipeline          # the first (often the only) tensor returned
    values: tuple = ()       # every tensor returned: `return h, k, v`


@dataclass(frozen=True)
class SizeParam:
    """`dim F` in a block's signature: a size each call gives (`Mlp(x, F=4*D)`)."""
    span: Span
    name: str


@dataclass(frozen=True)
class Block(Stmt):
    name: str
    inputs: tuple[TensorDecl, ...]
    body: tuple[Stmt, ...]
    end_span: Span
    sizes: tuple[SizeParam, ...] = ()


@dataclass(frozen=True)
class Spec:
    path: str
    source: str
    statements: tuple[Stmt, ...] = field(default_factory=tuple)
