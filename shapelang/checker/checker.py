"""Check stage: nodes -> checked IR (shapelang.checker.ir) plus every diagnostic.

Walks the spec in order, threads the bindings, applies one shape rule per
operation (shapelang.checker.ops), and asks the prover (shapelang.checker.dims) to decide each
side condition for all sizes that satisfy the assumptions. An error poisons
only the binding it is in, so that every independent error is reported.
"""
from __future__ import annotations

import functools
from dataclasses import replace

from ..syntax import collector
from ..syntax.diagnostics import Diagnostic, ShapeError
from ..syntax.nodes import (
    Binding,
    BinOp,
    Block,
    Call,
    Expect,
    Hole,
    Name,
    Neg,
    Num,
    Pipeline,
    ShapeLit,
    Spec,
    Str,
    TensorDecl,
)
from ..syntax.parser import parse_recovering
from . import advice, arith, calls, dtypes, expects, ops
from . import dims as dimlib
from .advice import causes
from .advice.suggest import Suggestions
from .blocks import BlockCalls
from .facts import Facts
from .ir import BindingIR, CheckedSpec, Decl, Step, Unfinished
from .layout import TensorType, fresh
from .lazysympy import sympy as sp
from .provenance import Provenance
from .prover import Prover
from .rulememo import RuleMemo, facts_key
from .scope import Poisoned, Scope

# the steps whose result keeps the sizes the spec writes in it (inputs, `view [B, S, H, Dh]`)
_AS_WRITTEN = {"input"} | {d.ir_name for d in ops.TABLE.values() if d.as_written}
_IR_NAMES = {name: d.ir_name for name, d in ops.TABLE.items()}

class Stale(Exception):
    """A newer text has replaced the one being checked (`check_text(..., stale=...)`)."""


def check_text(text: str, path: str = "<input>", *, prove_fixes: bool = True, memo=None,
               stale=None, rules: RuleMemo | None = None) -> CheckedSpec:
    """Check spec text. Fixes that diagnostics propose are re-checked and shown only when
    proved (`prove_fixes`; off for the re-checks themselves). `memo`: a `syntax.reuse.ParseMemo` that keeps the statements of the last text, so that
    an edited text parses only what changed (checker/session.py). `stale`: a function
    asked between statements; when it answers true the check stops with `Stale`. `rules`: the
    shape rules' results of an earlier check (checker/rulememo.py), kept while its sizes'
    statements are unchanged. The garbage collector is paused meanwhile (syntax/collector.py)."""
    with collector.paused():
        parsed = parse_recovering(text, path) if memo is None else memo.parse(text, path, remember=prove_fixes)
        return check_parsed(text, path, parsed, prove_fixes=prove_fixes, memo=memo, stale=stale, rules=rules)


def check_parsed(text: str, path: str, parsed, *, prove_fixes: bool = True, memo=None, stale=None,
                 rules: RuleMemo | None = None) -> CheckedSpec:
    """`check_text` after the parse: `parsed` is what `parse_recovering(text, path)` gives."""
    spec, syntax_errors, skipped = parsed
    if spec is None:   # over the limits of untrusted text (E004): not read, so no advice
        out = CheckedSpec(path, text, [], {}, [], {})
        out.diagnostics.extend(syntax_errors)
        return out
    checker = Checker(spec, skipped)
    checker.stale = stale
    checker.rules = rules or checker.rules
    checker.out.diagnostics.extend(syntax_errors)
    out = checker.run()

    def recheck(source: str) -> CheckedSpec:
        return check_text(source, path, prove_fixes=False, memo=memo, stale=stale)

    # the passes after the walk, in order (checker/advice): acknowledged, habits, fixes proved
    return advice.run(advice.PASSES, advice.Findings(text, out, recheck if prove_fixes else None))


def check_file(path: str) -> CheckedSpec:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return check_text(fh.read(), path)


class Checker(Facts):
    def __init__(self, spec: Spec, skipped: set[str] = frozenset(), block_cache: dict | None = None):
        """`block_cache`: block instantiations, (block name, argument types) -> BlockIR,
        to share between checkers of the same spec (a new one by default)."""
        self.spec = spec
        self.skipped = set(skipped)  # names defined by statements with syntax errors
        self.prover = Prover()
        self.out = CheckedSpec(spec.path, spec.source, [], {}, [], {}, prover=self.prover)
        self.blocks: dict[str, Block] = {}
        self.block_cache: dict = {} if block_cache is None else block_cache
        self.next_id = 0
        self.scope = Scope()
        self.top_scope = self.scope
        self.seen: set = set()
        self.example_env: dict | None = None
        self._tensor_refs: dict[int, str] = {}
        self.top = self.scope
        self.block_calls = BlockCalls(self)
        self.suggest = Suggestions(spec.source)
        self.out.decls = self.top.decls
        self.step_of: dict = {}   # ref -> the step that made it (to point back at causes)
        self.calls: list = []     # the block calls being checked: labels for what they report
        self.dim_spans: dict = {}  # dim name -> its declaration
        self.local_sizes: dict = {}  # size parameter declared by a block alone -> that block
        self.binding_names: tuple = ()
        self.data_names: dict = {}   # data-dependent sizes by name, while an `expect` is read
        self.fresh_blocks: dict = {}  # block keys that make data-dependent sizes -> called yet
        self.stale = None   # asked between statements: a newer text makes this check moot
        self.rules = RuleMemo()   # shape rules applied, kept for the same operation on the same type

    # ------------------------------------------------------------ reporting
    def report(self, diag: Diagnostic | None) -> None:
        if diag is None:
            return
        if self.calls:   # inside a block: show where it was called from, with what
            diag = replace(diag, labels=tuple(diag.labels) + tuple(
                c for c in reversed(self.calls) if c[0].line != diag.span.line))
        self.rules.reported += 1
        key = (diag.code, diag.span, diag.message)
        if key not in self.seen:
            self.seen.add(key)
            self.out.diagnostics.append(diag)

    def error(self, code, message, span, help=None, notes=(), cex=None, severity="error"):
        self.report(Diagnostic(code, message, span, help, tuple(notes), cex, severity))

    # ------------------------------------------------------------ driver
    def run(self) -> CheckedSpec:
        stmts = self.spec.statements
        self._sizes(stmts)
        self.rules.facts(facts_key(self.spec, self.skipped))
        self.local_sizes = {sz.name: s.name for s in stmts if isinstance(s, Block) for sz in s.sizes
                            if self.dim_spans.get(sz.name) == sz.span}
        self.out.size_params = dict(self.local_sizes)
        for s in stmts:
            if isinstance(s, Block):
                if s.name in self.blocks:
                    self.report(Diagnostic("E003", f"block `{s.name}` is defined twice", s.span,
                                           "give the second block another name",
                                           labels=causes.first_declared(self.blocks[s.name].span,
                                                                        "first defined here")))
                self.blocks[s.name] = s
        for s in stmts:
            if self.stale is not None and self.stale():
                raise Stale()
            self._statement(s)
        for name, block in self.blocks.items():
            if not any(k[0] == name for k in self.block_cache):   # never called: check it alone
                try:
                    args = self.block_calls.own_types(block)
                    self.block_calls.call_block(block, args, [d.name for d in block.inputs], block.span)
                except (ShapeError, Poisoned):
                    pass
        for block in self.blocks.values():
            self.block_calls.generic(block)
        self.provenance()
        self.out.diagnostics.sort(key=lambda d: (d.span.line, d.span.column))
        return self.out

    def provenance(self) -> None:
        """Where every axis's elements come from, and what shapes alone miss (W301-W313)."""
        analysis = Provenance(self)
        analysis.run(self.out)
        for d in analysis.findings.found:
            self.report(d)

    # ------------------------------------------------------------ one statement at a time
    # For re-checking single statements of a spec that has been checked already (the
    # grader): take that run's facts, preset the tensors the statement reads, check
    # the statement, look up what it defined.
    def use_facts(self, base: Checker) -> None:
        """Check against the dims, assumptions, example and blocks of `base`, which has run."""
        self.prover = self.out.prover = base.prover
        self.example_env = base.example_env
        self.blocks = base.blocks

    def preset(self, name: str, t: TensorType | None) -> None:
        """Make tensor `name` visible with type `t`; None: it failed, so uses stay silent."""
        self.scope.values[name] = None if t is None else (t, name)

    def statement(self, s) -> None:
        """Check one declaration, binding or expect in the current scope."""
        self._statement(s)

    def lookup(self, name: str) -> TensorType | None:
        """The type of tensor `name`; None if it is not defined or its statement failed."""
        v = self.scope.values.get(name)
        return v[0] if v else None

    # ------------------------------------------------------------ sizes
    def _dim_lookup(self, node: Name) -> sp.Expr:
        p = self.prover
        if node.name in p.user:
            owner = self.local_sizes.get(node.name)
            if owner is not None and node.name not in self.scope.sizes:
                raise ShapeError("E002", f"`{node.name}` is a size parameter of block `{owner}`, "
                                 "known only inside it", span=node.span,
                                 help=f"declare a size of your own with `dim {node.name}`, or give "
                                 f"`{owner}` a size here: `{owner}(..., {node.name}=...)`")
            sym = p.user[node.name]
            return self.scope.subst.get(sym, sym)
        if node.name in self.skipped:
            raise Poisoned()
        if node.name in self.data_names:   # a data-dependent size, in an `expect`
            return self.data_names[node.name]
        if self.scope.values.get(node.name) is not None or node.name in self.scope.values:
            raise ShapeError("E112", f"`{node.name}` is a tensor, but a size is expected here",
                             span=node.span)
        raise ShapeError("E002", f"unknown dim `{node.name}`", span=node.span,
                         help=self._did_you_mean(node.name, p.user) or
                         f"declare it with `dim {node.name}`",
                         fixes=self._close_fix(node.name, p.user, node.span))

    def _statement(self, s) -> None:
        if isinstance(s, TensorDecl):
            self._declare(s)
        elif isinstance(s, Binding):
            b = self._binding(s)
            if b is not None and self.scope is self.top:
                self.out.bindings.append(b)
        elif isinstance(s, Expect):
            expects.check(self, s)

    def _decl_type(self, s: TensorDecl, subst) -> TensorType:
        shape = []
        for d in s.shape.dims:
            e = self.build(d)
            self.need_whole_size(e, d.span, lambda e=e: f"the size `{self.sz(e)}` is not always a whole number")
            if e not in self.prover.zero_ok:   # an axis of a size that may be 0 (`assume P >= 0`)
                verdict = self.prover.positive(e)
                help, fixes = self._positive_fix(e, verdict) if not verdict.ok else (None, ())
                self.need(verdict, "E109", d.span, lambda e=e: f"the size `{self.sz(e)}` is not always positive",
                          expr=e, help=help, fixes=fixes)
            shape.append(e)
        return fresh(shape, dtypes.declared(s))

    def _declare(self, s: TensorDecl) -> None:
        if s.name in self.scope.values or s.name in self.prover.user:
            self._twice(s.name, s.span)
            return
        try:
            t = self._decl_type(s, self.scope.subst)
        except ShapeError as err:
            self.report(err.at(s.span))
            self.scope.values[s.name] = None
            return
        self.scope.values[s.name] = (t, s.name)
        self.scope.spans[s.name] = s.span
        self.scope.decls.append(Decl(s.kind, s.name, t, s.span, getattr(s, "frozen", False)))

    def _twice(self, name: str, span, help=None) -> None:
        """E003, with a label where the name was first defined."""
        first = self.scope.spans.get(name)
        declared = any(d.name == name for d in self.scope.decls)
        what = "first declared here" if declared else "first defined here"
        if first is None and name in self.dim_spans:
            first, what = self.dim_spans[name], "declared as a dim here"
        self.report(Diagnostic("E003", f"`{name}` is already defined", span, help,
                               labels=causes.first_declared(first, what) if first else ()))

    def _binding(self, s: Binding):
        for n in s.names:
            if n in self.scope.values or n in self.prover.user:
                self._twice(n, s.span, "give each step of the pipeline its own name")
                return None
        self.scope.steps = []
        self.binding_names = s.names   # data-dependent sizes are named after their binding
        try:
            outs = self.pipeline(s.value)
            if len(s.names) != len(outs):
                raise self.suggest.several(s, len(outs))
        except ShapeError as err:
            self.report(err.at(s.value.ops[-1].span if s.value.ops and err.span is None else s.span))
            self._unfinished(s, err.code)
            return None
        except Poisoned:
            self._unfinished(s, None)
            return None
        values, spans = self.scope.values, self.scope.spans
        for n, (t, ref) in zip(s.names, outs):
            values[n] = (t, ref)
            spans[n] = s.span
        types, refs = zip(*outs)
        return BindingIR(s.names, s.span, self.scope.steps, refs, types)

    def _unfinished(self, s: Binding, code: str | None) -> None:
        """A binding left without a type; at the top level, kept with the steps that checked."""
        for n in s.names:
            self.scope.values[n] = None
        if self.scope is self.top_scope:
            self.out.unfinished.append(Unfinished(s.names, s.span, list(self.scope.steps), code))

    # ------------------------------------------------------------ expressions
    def pipeline(self, node) -> list[tuple[TensorType, str]]:
        if not isinstance(node, Pipeline):
            return calls.head(self, node)   # several tensors from a call such as `where(M)`
        calls.tuple_keywords(self, node)
        try:
            vals = calls.head(self, node.head)
        except ShapeError as err:
            raise self.suggest.head(err, node) from None
        for k, op in enumerate(node.ops):
            if len(vals) != 1:
                raise self.suggest.several_into(node, k, len(vals))
            try:
                vals = self.apply(op, *vals[0])
            except ShapeError as err:
                raise self.suggest.op(err, node, k) from None
        return vals

    def emit(self, op, text, span, inputs, result: ops.Result, block=None) -> list:
        if op not in _AS_WRITTEN:
            named, prover = self.rules.named, self.prover
            result.outputs = tuple([named(prover, t) for t in result.outputs])
        outputs = tuple(result.outputs)
        step = Step(self.next_id, op, text, span, tuple(inputs), outputs,
                    sp.Integer(result.params) if isinstance(result.params, int) else result.params,
                    result.flops, result.detail, block)
        ref, self.next_id = step.ref, self.next_id + 1
        self.scope.steps.append(step)
        self.step_of[ref] = step
        if len(outputs) == 1:
            return [(outputs[0], ref)]
        self.step_of.update((f"{ref}.{k}", step) for k in range(len(outputs)))
        return [(t, f"{ref}.{k}") for k, t in enumerate(outputs)]

    def apply(self, op, x: TensorType, ref: str) -> list:
        if op.name.startswith("?"):
            raise ShapeError("E116", f"the blank `{op.name}` is not filled in", span=op.name_span,
                             help="replace it with the operation")
        args = list(op.args) + [k.value for k in op.kwargs] if op.args or op.kwargs else ()
        for arg in args:
            if isinstance(arg, Hole):
                raise dimlib.unfilled(arg)
        rule = ops.RULES.get(op.name)
        if rule is not None:
            try:
                result = self.rules.apply(self, op, x)   # the shape rule, keywords, dtypes
            except Poisoned:
                raise
            except ShapeError as err:
                raise err if err.span else replace(err, span=op.span) from None
            extra = [self._arg_ref(a) for a in args if self._is_tensor_arg(a)]
            return self.emit(_IR_NAMES[op.name], op.text, op.span, [ref] + extra, result)
        if op.name == "stack":
            return self.block_calls.stack(op, x, ref)
        if op.name in self.skipped:
            raise Poisoned()
        if op.name in self.blocks:
            args = [(x, ref)] + [self.tensor_value(a) for a in op.args]
            return self.block_calls.block_step(self.blocks[op.name], args, op.text, op.span, op.kwargs)
        known = list(ops.RULES) + list(self.blocks) + ["stack"]
        raise ShapeError("E111", f"unknown operation `{op.name}`", span=op.name_span,
                         help=self._did_you_mean(op.name, known) or
                         "see the list of operations in docs/language.md",
                         fixes=self._close_fix(op.name, known, op.name_span))

    def _is_tensor_arg(self, a) -> bool:
        if isinstance(a, (Num, ShapeLit)):   # `transpose 1 2`, `view [B, S, D]`: never a tensor
            return False
        self.rules.read += 1
        if isinstance(a, Name):
            return self.scope.values.get(a.name) is not None
        return isinstance(a, (Pipeline, BinOp, Call)) and self._mentions_tensor(a)

    def _mentions_tensor(self, a) -> bool:
        if isinstance(a, Name):
            return a.name in self.scope.values
        if isinstance(a, Pipeline):
            return self._mentions_tensor(a.head)
        if isinstance(a, BinOp):
            return self._mentions_tensor(a.left) or self._mentions_tensor(a.right)
        if isinstance(a, Call):
            return a.func not in dimlib.SCALAR_FUNCTIONS
        return isinstance(a, ShapeLit)

    def _arg_ref(self, a) -> str:
        return self._tensor_refs.get(id(a), a.name if isinstance(a, Name) else "?")

    def tensor_value(self, node) -> tuple[TensorType, str]:
        v = self.value(node)
        if isinstance(v, tuple):
            return v
        raise ShapeError("E112", f"`{_src(self.spec.source, node)}` is a size ({self.sz(v)}), but a tensor is "
                         "expected here", span=node.span)

    def value(self, node):
        """A tensor (TensorType, ref) or a size (sympy expression)."""
        self.rules.read += 1
        if isinstance(node, Name):
            if node.name in self.scope.values:
                v = self.scope.values[node.name]
                if v is None:
                    raise Poisoned()
                return v
            if node.name in self.prover.user:
                return self._dim_lookup(node)
            if node.name in self.skipped:
                raise Poisoned()
            if node.name in dimlib.CONSTANTS:        # `x * pi`
                return getattr(sp, node.name)
            known = list(self.scope.values) + list(self.prover.user)
            raise ShapeError("E002", f"unknown name `{node.name}`", span=node.span,
                             help=self._did_you_mean(node.name, known) or
                             f"define it first, e.g. `input {node.name}: [B, S, D]`",
                             fixes=self._close_fix(node.name, known, node.span))
        if isinstance(node, Num):
            return sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(node.value)
        if isinstance(node, Str):
            raise ShapeError("E112", "a quoted pattern is not a tensor", span=node.span)
        if isinstance(node, Hole):
            raise dimlib.unfilled(node)
        if isinstance(node, ShapeLit):
            t = self._decl_type(_anon_decl(node), self.scope.subst)
            return self.emit("input", f"[{', '.join(map(self.sz, t.shape))}]", node.span, [],
                             ops.Result((t,)))[0]
        if isinstance(node, Pipeline):
            vals = self.pipeline(node)
            if len(vals) != 1:
                raise ShapeError("E110", "split/chunk gives several tensors; name them first",
                                 span=node.span)
            self._tensor_refs[id(node)] = vals[0][1]
            return vals[0]
        if isinstance(node, (Neg, BinOp)):
            try:
                return self.binop(node) if isinstance(node, BinOp) else self.negate(node)
            except ShapeError as err:   # a dtype refused: the casts that make it valid, proved
                raise self.suggest.cast(err, node) from None
        if isinstance(node, Call):
            v = self.call(node)
            if isinstance(v, tuple):
                self._tensor_refs[id(node)] = v[1]
            return v
        raise ShapeError("E112", "unexpected expression", span=node.span)

    def negate(self, node: Neg):
        return arith.negate(self, node)

    def binop(self, node: BinOp):
        return arith.binop(self, node)

    def call(self, node: Call):
        return calls.call(self, node)

    def source_of(self, node) -> str:
        return _src(self.spec.source, node)

    # ------------------------------------------------------------ conditions
    @property
    def ctx(self) -> Checker:
        return self

    def dim(self, node) -> sp.Expr:
        return self.build(node)

    def scalar(self, node) -> sp.Expr:
        return self.build(node, allow_real=True)

    def tensor(self, node) -> TensorType:
        t, ref = self.tensor_value(node)
        self._tensor_refs[id(node)] = ref
        return t

    def takes_axis_away(self, op: str) -> bool:
        """A reduction (the table's `reduces`), which `keepdim` would keep as size 1."""
        d = ops.TABLE.get(op)
        return d is not None and d.reduces

    def is_tensor_name(self, name: str) -> bool:
        return self.rules.looked(name, self.scope.values.get(name) is not None)

def _anon_decl(node: ShapeLit) -> TensorDecl:
    return TensorDecl(node.span, "input", "", node, None)


@functools.lru_cache(maxsize=8)
def _lines(source: str) -> list[str]:
    return source.split("\n")


def _src(source: str, node) -> str:
    """The source text of a node (one line), for messages."""
    span = node.span
    lines = _lines(source)
    if span.line == span.end_line and 0 < span.line <= len(lines):
        return lines[span.line - 1][span.column - 1:span.end_column - 1]
    return "..."
