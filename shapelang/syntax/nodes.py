"""Syntax nodes: the parser's output and the checker's input.

Frozen dataclasses, each with the source span it came from, so that every
diagnostic can point at the text the learner wrote.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """Where a node's text is: 1-based lines and columns, the end column one past its last character."""
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
    """An expression: a size (`D // H`), a tensor (`x`), an argument, or a pipeline."""
    span: Span


@dataclass(frozen=True)
class Num(Expr):
    """A number as written: `64`, `-1`, `0.5`, `1e4`."""
    value: int | float
    text: str


@dataclass(frozen=True)
class Name(Expr):
    """A name: a dim, a tensor, a block, or an operation's word (`-inf`, `causal`)."""
    name: str


@dataclass(frozen=True)
class Str(Expr):
    """A quoted pattern: `"b s d -> b d s"`."""
    value: str


@dataclass(frozen=True)
class Hole(Expr):
    """A blank in an exercise (`?` or `?name`), filled in by the learner."""
    name: str


@dataclass(frozen=True)
class ShapeLit(Expr):
    """A shape: `[B, S, D]`."""
    dims: tuple[Expr, ...]


@dataclass(frozen=True)
class BinOp(Expr):
    """`left op right`, for sizes and tensors alike."""
    op: str  # one of + - * / // % @ **
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Neg(Expr):
    """`-operand`."""
    operand: Expr


@dataclass(frozen=True)
class KwArg:
    """`name=value` in an operation, a call or a block call."""
    span: Span
    name: str
    value: Expr
    eq_span: Span | None = None   # its `=` in a call or an argument tuple: `Mlp(x, F=4*D)`


@dataclass(frozen=True)
class Call(Expr):
    """`func(args)`: a function of sizes (`sqrt(Dh)`) or of tensors (`arange(S)`)."""
    func: str
    func_span: Span
    args: tuple[Expr, ...]
    kwargs: tuple[KwArg, ...] = ()   # `arange(S, dtype=float)`, `Mlp(x, F=4*D)`


@dataclass(frozen=True)
class Op:
    """One operation of a pipeline: `linear 3*D`, `view [B, S, H, Dh]`, `Mlp(F=4*D)`."""
    span: Span
    name: str
    name_span: Span
    args: tuple[Expr, ...]
    kwargs: tuple[KwArg, ...]
    text: str  # the operation as written, for tables and messages
    tuple_kwargs: bool = False  # keywords inside `-> Block(a, F=4*D)`: for blocks only


@dataclass(frozen=True)
class Pipeline(Expr):
    """`head -> op -> op`: a value and the operations applied to it in turn."""
    head: Expr
    ops: tuple[Op, ...]


# ---- statements ----

@dataclass(frozen=True)
class Stmt:
    """A statement: one line of a spec, or a block with its body."""
    span: Span


@dataclass(frozen=True)
class DimDecl(Stmt):
    """`dim B` or `dim Dh = D / H`: a size, free or defined."""
    name: str
    value: Expr | None


@dataclass(frozen=True)
class Assume(Stmt):
    """`assume D % H == 0`: a chain of comparisons the checker may rely on."""
    terms: tuple[Expr, ...]
    cmps: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class ExampleItem:
    """`B=2` in an `example` line."""
    span: Span
    name: str
    value: int


@dataclass(frozen=True)
class Example(Stmt):
    """`example B=2, S=8`: sizes to show shapes with and to test assumptions on."""
    items: tuple[ExampleItem, ...]


@dataclass(frozen=True)
class TensorDecl(Stmt):
    """`input x: [B, S, D]`, `param W: [D, D]`, `buffer mask: [S, S] bool`."""
    kind: str  # input | param | buffer
    name: str
    shape: ShapeLit
    dtype: str | None
    dtype_span: Span | None = None
    frozen: bool = False     # a param kept in the state dict but not trained


@dataclass(frozen=True)
class Binding(Stmt):
    """`q, k, v: pipeline`: names for a pipeline's results."""
    names: tuple[str, ...]
    value: Pipeline


@dataclass(frozen=True)
class Expect(Stmt):
    """`expect q: [B, H, S, Dh]`: a shape the checker must prove."""
    name: str
    name_span: Span
    shape: ShapeLit | Hole
    dtype: str | None = None          # `expect keep: [S, S] bool`
    dtype_span: Span | None = None


@dataclass(frozen=True)
class Return(Stmt):
    """`return h` or `return h, k, v`: what a block gives back."""
    value: Pipeline          # the first (often the only) tensor returned
    values: tuple = ()       # every tensor returned: `return h, k, v`


@dataclass(frozen=True)
class SizeParam:
    """`dim F` in a block's signature: a size each call gives (`Mlp(x, F=4*D)`)."""
    span: Span
    name: str


@dataclass(frozen=True)
class Block(Stmt):
    """`block Name(x: [B, S, D], dim F):` ... `end`: a reusable piece of a model."""
    name: str
    inputs: tuple[TensorDecl, ...]
    body: tuple[Stmt, ...]
    end_span: Span
    sizes: tuple[SizeParam, ...] = ()


@dataclass(frozen=True)
class Spec:
    """A parsed `.shape` file: its path, its text and its statements."""
    path: str
    source: str
    statements: tuple[Stmt, ...] = field(default_factory=tuple)
