"""The symbol index of one document: where every dim, tensor, block and param is
defined and used.

Built from the parser's nodes (`parse_recovering`, so that a document with a
syntax error still has an index for the statements that parse). Declarations
keep the span of the whole statement; the name's own span is found in the
source line from there. Names inside a block live in the block's scope; a name
not defined there falls back to the top level (dims are global).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import api
from .positions import contains, size

n = api.nodes          # the syntax tree's node classes
Span = api.Span


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str            # dim | input | param | buffer | tensor | block
    span: Span           # the name where it is defined
    scope: str | None    # block name, None at the top level
    node: object         # the defining statement


@dataclass(frozen=True)
class Occurrence:
    name: str
    span: Span
    scope: str | None
    symbol: Symbol | None = None   # set for a definition


@dataclass
class SymbolIndex:
    symbols: dict = field(default_factory=dict)       # (scope, name) -> Symbol
    occurrences: list = field(default_factory=list)   # Occurrence
    blocks: dict = field(default_factory=dict)        # block name -> Block node
    spec: n.Spec | None = None

    def at(self, line: int, column: int) -> Occurrence | None:
        """The name under 1-based (line, column)."""
        hits = [o for o in self.occurrences if contains(o.span, line, column)]
        return min(hits, key=lambda o: size(o.span)) if hits else None

    def resolve(self, occ: Occurrence) -> Symbol | None:
        if occ.symbol is not None:
            return occ.symbol
        return self.lookup(occ.name, occ.scope)

    def lookup(self, name: str, scope: str | None) -> Symbol | None:
        return self.symbols.get((scope, name)) or self.symbols.get((None, name))

    def references(self, symbol: Symbol) -> list[Occurrence]:
        return [o for o in self.occurrences if self.resolve(o) == symbol]

    def scope_at(self, line: int) -> str | None:
        for name, block in self.blocks.items():
            if block.span.line <= line <= block.end_span.end_line:
                return name
        return None

    def visible(self, scope: str | None) -> list[Symbol]:
        """Symbols usable in `scope`: its own, then the top level's not shadowed."""
        own = {k[1]: s for k, s in self.symbols.items() if k[0] == scope}
        if scope is not None:
            for (sc, name), s in self.symbols.items():
                if sc is None and name not in own and s.kind in ("dim", "block"):
                    own[name] = s
        return list(own.values())


def build(text: str) -> SymbolIndex:
    spec, _diagnostics, _skipped = api.parse(text, "<lsp>")
    return _Builder(text).index(spec)


_WORD = r"(?<![A-Za-z0-9_]){}(?![A-Za-z0-9_'])"


class _Builder:
    def __init__(self, text: str):
        self.lines = text.split("\n")
        self.out = SymbolIndex()

    def index(self, spec: n.Spec | None) -> SymbolIndex:
        if spec is None:
            return self.out
        self.out.spec = spec
        for s in spec.statements:
            if isinstance(s, n.Block):
                self.out.blocks[s.name] = s
                self.define(s.name, "block", s.span, None, s)
        for s in spec.statements:
            self.statement(s, None)
        return self.out

    def name_span(self, name: str, start: Span, after: int = 0) -> Span:
        """The span of `name` on the line where `start` begins, at or after its column."""
        line = self.lines[start.line - 1] if 0 < start.line <= len(self.lines) else ""
        m = re.compile(_WORD.format(re.escape(name))).search(line, max(start.column - 1, after))
        col = m.start() + 1 if m else start.column
        return Span(start.line, col, start.line, col + len(name))

    def define(self, name: str, kind: str, where: Span, scope, node, find: bool = True) -> Span:
        span = self.name_span(name, where) if find else where
        sym = Symbol(name, kind, span, scope, node)
        self.out.symbols.setdefault((scope, name), sym)
        self.out.occurrences.append(Occurrence(name, span, scope, sym))
        return span

    def use(self, name: str, span: Span, scope) -> None:
        self.out.occurrences.append(Occurrence(name, span, scope))

    def statement(self, s, scope) -> None:
        if isinstance(s, n.DimDecl):
            self.define(s.name, "dim", s.span, None, s)
            self.expr(s.value, scope)
        elif isinstance(s, n.TensorDecl):
            self.define(s.name, s.kind, s.span, scope, s)
            self.expr(s.shape, scope)
        elif isinstance(s, n.Binding):
            after = 0
            for name in s.names:
                span = self.name_span(name, s.span, after)
                after = span.end_column - 1
                self.define(name, "tensor", span, scope, s, find=False)
            self.expr(s.value, scope)
        elif isinstance(s, n.Expect):
            self.use(s.name, s.name_span, scope)
            self.expr(s.shape, scope)
        elif isinstance(s, n.Example):
            for item in s.items:
                self.use(item.name, self.name_span(item.name, item.span), None)
        elif isinstance(s, n.Assume):
            for t in s.terms:
                self.expr(t, scope)
        elif isinstance(s, n.Return):
            for v in s.values or (s.value,):
                self.expr(v, scope)
        elif isinstance(s, n.Block):
            for sz in s.sizes:      # `dim F` in the signature: a dim of the block's own
                self.define(sz.name, "dim", Span(sz.span.line, sz.span.end_column - len(sz.name),
                                                 sz.span.line, sz.span.end_column), s.name, sz, find=False)
            for d in s.inputs:
                self.statement(d, s.name)
            for b in s.body:
                self.statement(b, s.name)

    def sizes_given(self, block: str, kwargs) -> None:
        """`Mlp(x, F=4*D)`: the `F` names the size parameter of `Mlp` (hover, go to definition)."""
        if block not in self.out.blocks:
            return
        for k in kwargs:
            self.use(k.name, Span(k.span.line, k.span.column, k.span.line, k.span.column + len(k.name)), block)

    def expr(self, e, scope) -> None:
        stack = [e]
        while stack:
            e = stack.pop()
            if e is None:
                continue
            if isinstance(e, n.Name):
                self.use(e.name, e.span, scope)
            elif isinstance(e, n.ShapeLit):
                stack.extend(e.dims)
            elif isinstance(e, n.BinOp):
                stack.extend((e.left, e.right))
            elif isinstance(e, n.Neg):
                stack.append(e.operand)
            elif isinstance(e, n.Call):
                if e.func in self.out.blocks:
                    self.use(e.func, e.func_span, scope)
                    self.sizes_given(e.func, e.kwargs)
                stack.extend(e.args)
                stack.extend(k.value for k in e.kwargs)
            elif isinstance(e, n.Pipeline):
                stack.append(e.head)
                for op in e.ops:
                    if op.name in self.out.blocks:
                        self.use(op.name, op.name_span, scope)
                        self.sizes_given(op.name, op.kwargs)
                    elif op.name == "stack" and op.args and isinstance(op.args[-1], (n.Name, n.Call)):
                        target = op.args[-1]
                        self.sizes_given(getattr(target, "func", None) or target.name, op.kwargs)
                    stack.extend(op.args)
                    stack.extend(k.value for k in op.kwargs)
