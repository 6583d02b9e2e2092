"""The checked IR: the checker's output, and the single source for trace,
codegen and grading.

Every value is referred to by a `ref`: a declared name (`X`, `W_q`) or a step
id (`%3`). Every step carries its input refs, output types, learned parameters
and multiply-add FLOPs as sympy expressions, and the resolved arguments.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..syntax.diagnostics import Diagnostic
from ..syntax.nodes import Span
from .layout import TensorType
from .lazysympy import sympy as sp
from .lazysympy import zero


@dataclass
class Decl:
    kind: str  # input | param | buffer
    name: str
    type: TensorType
    span: Span
    frozen: bool = False   # a param in the state dict that is not trained (`param P: [..] frozen`)


@dataclass(slots=True)   # one per operation of a spec: no per-step attribute dict
class Step:
    id: int
    op: str              # operation name: view, linear, matmul, add, block, stack, ...
    text: str            # as written
    span: Span
    inputs: tuple        # refs
    outputs: tuple       # TensorType per output
    params: sp.Expr = field(default_factory=zero)
    flops: sp.Expr = field(default_factory=zero)
    detail: dict = field(default_factory=dict)
    block: BlockIR | None = None
    provenance: tuple | None = None   # per output: where each axis's elements come from (provenance.TP)
    ref: str = field(init=False, repr=False, compare=False)   # `%id`, how other steps name it

    def __post_init__(self):
        self.ref = f"%{self.id}"

    @property
    def out(self) -> TensorType:
        return self.outputs[0]


@dataclass(slots=True)
class BindingIR:
    names: tuple
    span: Span
    steps: list
    results: tuple       # refs, one per name
    types: tuple         # TensorType per name


class Totals:
    """Learned parameters and forward multiply-adds of a spec or a block instance."""

    @property
    def total_params(self) -> sp.Expr:
        return total_params(self.params, self.bindings)

    @property
    def total_flops(self) -> sp.Expr:
        return total_flops(self.bindings)

    @property
    def frozen_params(self) -> sp.Expr:
        """The part of total_params that is frozen (counted, as model.parameters() counts it)."""
        return frozen_params(self.params, self.bindings)


@dataclass
class BlockIR(Totals):
    """One instantiation of a block at particular input shapes."""
    name: str
    span: Span
    inputs: list          # Decl (shapes as called)
    params: list          # Decl
    buffers: list         # Decl
    bindings: list        # BindingIR
    result: str | None    # ref
    output: TensorType | None
    binding_of_dims: dict  # declared dim symbol -> size at this call
    size_args: dict = field(default_factory=dict)  # size parameter symbol -> size given at this call
    results: tuple = ()   # refs of every returned tensor (`return h, k, v`); results[0] is result
    outputs: tuple = ()   # their types; outputs[0] is output



def total_params(params, bindings) -> sp.Expr:
    out = sp.Integer(0)
    for p in params:
        n = sp.Integer(1)
        for d in p.type.shape:
            n = n * d
        out += n
    for b in bindings:
        for s in b.steps:
            out += s.params
    return sp.expand(out)


def frozen_params(params, bindings) -> sp.Expr:
    out = sp.Integer(0)
    for p in params:
        if p.frozen:
            out += sp.Mul(*p.type.shape)
    for b in bindings:
        for s in b.steps:
            if s.block is not None:
                copies = s.detail.get("count", 1) if s.op == "stack" and not s.detail.get("shared") else 1
                out += copies * s.block.frozen_params
    return sp.expand(out)


def total_flops(bindings) -> sp.Expr:
    return sp.expand(sum((s.flops for b in bindings for s in b.steps), sp.Integer(0)))


@dataclass
class Unfinished:
    """A top-level binding with no type: `code` is the error that stopped it (the steps before
    it checked and are kept, for the pictures), None when it was not checked at all because
    it reads a name that has none."""
    names: tuple
    span: object
    steps: list
    code: str | None


@dataclass
class CheckedSpec(Totals):
    path: str
    source: str
    dims: list                 # user dim names, in declaration order
    definitions: dict          # derived dim name -> sympy expression
    assumptions: list          # assumption texts
    example: dict              # dim name -> int (base and derived), empty if none
    decls: list = field(default_factory=list)
    bindings: list = field(default_factory=list)
    blocks: dict = field(default_factory=dict)   # name -> [BlockIR instantiations]
    expects: list = field(default_factory=list)  # (name, shape, span)
    diagnostics: list = field(default_factory=list)
    prover: object = None
    example_given: dict = field(default_factory=dict)   # what the example line gives, complete or not
    call_bound: list = field(default_factory=list)      # dims bound at block calls, not in the example
    # a block with size parameters checked with its own dims and sizes free (None: it needs
    # more than its assumptions for that): codegen writes one class from it for every call
    generic_blocks: dict = field(default_factory=dict)
    size_params: dict = field(default_factory=dict)   # size parameter declared by a block alone -> the block
    acknowledged: list = field(default_factory=list)  # (warning, reason) the author's `# allow` keeps out
    unfinished: list = field(default_factory=list)    # [Unfinished]: top-level bindings that failed or were skipped

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)

    @property
    def params(self) -> list:
        return [d for d in self.decls if d.kind == "param"]


    def example_value(self, e):
        if not self.example or self.prover is None:
            return None
        return self.prover.value(sp.Integer(e) if isinstance(e, int) else e,
                                 {self.prover.user[k]: v for k, v in self.example.items()
                                  if k in self.prover.user})

    html_renderer = None   # set by shapelang.render.html: a renderer imports the checker, not back

    def _repr_html_(self) -> str | None:
        """Notebooks show a checked spec as its trace picture."""
        render = type(self).html_renderer
        return render(self) if render is not None else None

    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]
