"""Re-checking an exercise with some blanks filled: the incremental engines.

Input: the exercise template (shapelang.teaching.template.Template), the reference
solution's text, and `fills` (statement index -> code with the answers put in;
None: do not run it). Output: a `Run`, per unit (a statement, or a whole block)
its error diagnostics, the types of the tensors it defines, their value
signatures and their values at probe sizes (shapelang.teaching.probe).

`FastEngine` checks one statement at a time against the reference's sizes,
assumptions and prover (built once per exercise), memoised on (statement, text,
types of the tensors it reads). `FullEngine` checks whole files, memoised on
the filled text: it works for any exercise, including blanks in `dim`/`assume`
lines or inside blocks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..checker.ops import TABLE
from ..syntax.diagnostics import Diagnostic
from ..syntax.nodes import Expect, Name, Span, Spec
from ..syntax.parser import ParseFailure, parse
from .probe import COMMUTATIVE, LAYOUT, PROBE_ERRORS, Probe, TooBig, Val
from .template import Template

__all__ = ["CACHE_LIMIT", "FastEngine", "FullEngine", "Reference", "Run", "Unit", "UnitResult"]

CACHE_LIMIT = 200_000
_MISSING = object()
# the arguments of an operation that change values (not only shapes): the table's `values`
_SIG_DETAILS = {name: d.values for name, d in TABLE.items() if d.values}


@dataclass
class UnitResult:
    errors: tuple          # error Diagnostics (lines in the exercise's numbering)
    defs: dict             # name -> TensorType | None (None: failed)
    sigs: dict             # name -> value signature (tuple)
    steps: tuple           # the binding's steps
    deps: tuple            # tensor names it reads
    results: dict = field(default_factory=dict)   # name -> ref of the step that made it
    partial: tuple = ()    # a binding that failed: the steps done before the failure


_SKIPPED = UnitResult((), {}, {}, (), ())


@dataclass
class Run:
    units: list            # UnitResult per unit
    vals: list             # per unit: name -> Val (None where values are not tracked)


@dataclass
class Unit:
    index: int
    stmt: int              # first template statement
    line: int
    end_line: int
    kind: str
    names: tuple           # names it defines
    holes: bool


@dataclass
class Reference:
    """The exercise with the solution's answers, run: what a learner's answers are judged by."""
    tmpl: Template
    path: str              # the exercise's path
    answers: dict          # blank name -> the solution's answer (None: an `expect X: ?` blank)
    fills: dict            # statement index -> its code with the solution's answers
    engine: _Engine
    run: Run               # the engine's run of `fills`
    env: dict              # tensor name -> its type in that run (None: not computed)

    @property
    def units(self) -> list:
        return self.run.units

    @property
    def prover(self):
        return self.engine.prover

    @property
    def example_env(self) -> dict | None:
        return self.engine.example_env

    @property
    def facts(self):
        """The reference's checker: its shape text and suggestions are what `check` says."""
        return self.engine.facts


def _walk_names(node, out: set) -> None:
    """Add every name that `node` mentions to `out`."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Name):
            out.add(n.name)
        elif isinstance(n, (list, tuple)):
            stack.extend(n)
        elif hasattr(n, "__dataclass_fields__") and not isinstance(n, Span):
            for f in n.__dataclass_fields__:
                v = getattr(n, f)
                if not isinstance(v, (str, int, float, type(None), Span)):
                    stack.append(v)


def _sig(binding, ref_names) -> tuple:
    """What a binding computes apart from moving data: per step the operation, its
    value-changing arguments and the names of the tensors it reads."""
    out = []
    for s in binding.steps:
        if s.op in LAYOUT:
            continue
        keys = _SIG_DETAILS.get(s.op, ())
        detail = tuple(s.detail.get(k) for k in keys)
        names = tuple(ref_names.get(r, "%") for r in s.inputs if r != "?")
        if s.op in COMMUTATIVE:
            names = tuple(sorted(names))
        out.append((s.op, detail, names))
    return tuple(out)


class _Engine:
    """Runs the exercise's statements with some holes filled; returns per-unit results."""

    def __init__(self, tmpl: Template, ref_text: str, path: str):
        self.tmpl = tmpl
        self.path = path
        self.units = _units(tmpl)
        self.unit_of_stmt = {}
        for u in self.units:
            for k in range(u.stmt, len(tmpl.stmts)):
                if tmpl.stmts[k].line > u.end_line:
                    break
                self.unit_of_stmt[k] = u.index
        self.tensor_names = {n for u in self.units for n in u.names}
        self.probe = None
        self.vmemo: dict = {}

    def run(self, fills: dict) -> Run:
        raise NotImplementedError

    def reset(self) -> None:
        pass

    def _unit_values(self, u: Unit, code: str, res: UnitResult, vals: dict) -> dict:
        """name -> Val for the tensors a unit defines (None when not tracked)."""
        if not u.names or self.probe is None or self.probe.env is None:
            return {n: None for n in u.names}
        if u.kind in ("input", "param", "buffer"):
            t = res.defs.get(u.names[0])
            try:
                return {u.names[0]: Val.base(("tensor", u.names[0]), self.probe.shape(t.shape))
                        if t is not None else None}
            except TooBig:
                return {u.names[0]: None}
        inputs = {n: vals.get(n) for n in res.deps}
        key = (u.index, code, tuple(v.key if v is not None else None for v in inputs.values()))
        hit = self.vmemo.get(key)
        if hit is not None:
            return hit
        out = {n: None for n in u.names}
        if res.steps and not any(v is None for v in inputs.values()):
            try:
                got = self.probe.binding(res.steps, inputs, u.index)
                out = {n: got.get(res.results.get(n)) for n in u.names}
            except PROBE_ERRORS:
                pass
        if len(self.vmemo) > CACHE_LIMIT:
            self.vmemo.clear()
        self.vmemo[key] = out
        return out


def filled_text(tmpl: Template, fills: dict) -> str:
    """The exercise's text with each statement in `fills` replaced by its code (None:
    left out); line numbers stay those of the exercise."""
    lines = [ln.text for ln in tmpl.lines]
    for k, code in fills.items():
        st = tmpl.stmts[k]
        for no in range(st.line, st.end_line + 1):
            lines[no - 1] = ""
        lines[st.line - 1] = code or ""
    return "\n".join(lines)


def _units(tmpl: Template) -> list[Unit]:
    """The exercise's statements as units of re-checking: a block with its body is one."""
    units, k = [], 0
    stmts = tmpl.stmts
    while k < len(stmts):
        st = stmts[k]
        if st.kind == "block":
            e = k
            while e + 1 < len(stmts) and stmts[e + 1].block == st.index:
                e += 1
            holes = any(stmts[j].holes for j in range(k, e + 1))
            units.append(Unit(len(units), k, st.line, stmts[e].end_line, "block", st.names, holes))
            k = e + 1
            continue
        names = st.names if st.kind in ("binding", "input", "param", "buffer") else ()
        units.append(Unit(len(units), k, st.line, st.end_line, st.kind, names, bool(st.holes)))
        k += 1
    return units


class FastEngine(_Engine):
    """Statement-at-a-time checking against the reference's sizes and prover."""

    def __init__(self, tmpl: Template, ref_text: str, path: str):
        super().__init__(tmpl, ref_text, path)
        from ..checker.checker import Checker

        base = Checker(parse(ref_text, path))
        base.run()
        self.ref_spec = base.out
        self.base = self.facts = base
        self.prover = base.prover
        self.example_env = base.example_env
        self.lines = ref_text.split("\n")
        self.memo: dict = {}
        self.parsed: dict = {}
        self.block_cache: dict = {}
        self.probe = Probe(self.prover)

    def reset(self) -> None:
        self.block_cache = {}

    def _parse(self, unit: Unit, code: str):
        key = (unit.index, code)
        hit = self.parsed.get(key)
        if hit is not None:
            return hit
        try:
            spec = parse("\n" * (unit.line - 1) + code, self.path)
            names: set = set()
            for s in spec.statements:
                _walk_names(s, names)
                if isinstance(s, Expect):
                    names.add(s.name)
            deps = tuple(sorted(n for n in names if n in self.tensor_names))
            hit = (spec.statements, deps)
        except ParseFailure as failure:
            hit = failure.diagnostic
        if len(self.parsed) > CACHE_LIMIT:
            self.parsed.clear()
        self.parsed[key] = hit
        return hit

    def run(self, fills: dict) -> Run:
        env: dict = {}
        vals: dict = {}
        out, out_vals = [], []
        for u in self.units:
            if u.kind in ("dim", "assume", "example", "block", "end", "other", "return"):
                out.append(_SKIPPED)
                out_vals.append({})
                continue
            code = fills.get(u.stmt, _MISSING)
            if code is None:
                out.append(_SKIPPED)
                out_vals.append({})
                continue
            if code is _MISSING:
                code = self.tmpl.stmts[u.stmt].code
            parsed = self._parse(u, code)
            if isinstance(parsed, Diagnostic):
                res = UnitResult((parsed,), {n: None for n in u.names}, {}, (), ())
            else:
                stmts, deps = parsed
                key = (u.index, code, tuple(env.get(n, _MISSING) for n in deps))
                res = self.memo.get(key)
                if res is None:
                    res = self._check_unit(u, code, stmts, deps, env)
                    if len(self.memo) > CACHE_LIMIT:
                        self.memo.clear()
                    self.memo[key] = res
            for n in u.names:
                env[n] = res.defs.get(n)
            uv = self._unit_values(u, code, res, vals)
            vals.update(uv)
            out.append(res)
            out_vals.append(uv)
        return Run(out, out_vals)

    def _check_unit(self, u: Unit, code: str, stmts, deps, env) -> UnitResult:
        from ..checker.checker import Checker

        lines = list(self.lines)
        if u.line - 1 < len(lines):
            lines[u.line - 1] = code
            for k in range(u.line, min(u.end_line, len(lines))):
                lines[k] = ""
        chk = Checker(Spec(self.path, "\n".join(lines), tuple(stmts)),
                      block_cache=self.block_cache)
        chk.use_facts(self.base)
        for n in deps:
            t = env.get(n, _MISSING)
            if t is not _MISSING:
                chk.preset(n, t)
        for s in stmts:
            chk.statement(s)
        errors = tuple(d for d in chk.out.diagnostics if d.severity == "error")
        defs = {}
        for n in u.names:
            defs[n] = chk.lookup(n)
        sigs, steps, results = {}, (), {}
        ref_names = {n: n for n in deps}
        for b in chk.out.bindings:
            steps = tuple(b.steps)
            for n, r in zip(b.names, b.results):
                sigs[n] = _sig(b, ref_names)
                results[n] = r
        partial = tuple(chk.scope.steps or ()) if errors and not steps else ()
        return UnitResult(errors, defs, sigs, steps, deps, results, partial)


class FullEngine(_Engine):
    """Whole-file checking, memoised by the filled text: works for any exercise."""

    def __init__(self, tmpl: Template, ref_text: str, path: str):
        super().__init__(tmpl, ref_text, path)
        from ..checker.checker import Checker

        self.facts = Checker(parse(ref_text, path))
        self.ref_spec = self.facts.run()
        self.prover = self.ref_spec.prover
        example = self.ref_spec.example
        self.example_env = self.prover.user_env(example) if example else None
        self.memo: dict = {}
        self.probe = Probe(self.prover)

    def run(self, fills: dict) -> Run:
        from ..checker.checker import check_text

        text = filled_text(self.tmpl, fills)
        hit = self.memo.get(text)
        if hit is not None:
            return hit
        spec = check_text(text, self.path)
        out = self._split(spec)
        if len(self.memo) > CACHE_LIMIT // 100:
            self.memo.clear()
        self.memo[text] = out
        return out

    def _split(self, spec) -> list:
        ref_names = {d.name: d.name for d in spec.decls}
        by_name = {}
        for b in spec.bindings:
            for n, r, t in zip(b.names, b.results, b.types):
                ref_names[r] = n
                by_name[n] = (t, b)
        decls = {d.name: d.type for d in spec.decls}
        out, out_vals = [], []
        vals: dict = {}
        probe = self.probe
        for u in self.units:
            errors = tuple(d for d in spec.diagnostics if d.severity == "error"
                           and u.line <= d.span.line <= u.end_line)
            defs, sigs, steps = {}, {}, ()
            if u.kind == "block":
                for k, inst in enumerate(spec.blocks.get(u.names[0] if u.names else "", [])):
                    defs[f"{u.names[0]}#{k}"] = inst.output
                    for b in inst.bindings:
                        for n, t in zip(b.names, b.types):
                            defs[f"{u.names[0]}#{k}.{n}"] = t
                        sigs[f"{u.names[0]}#{k}.{b.names[0]}"] = _sig(b, {})
            elif u.kind in ("dim",):
                for name in self.tmpl.stmts[u.stmt].mentioned():
                    if name in spec.definitions:
                        defs["dim " + name] = spec.definitions[name]
            uv = {n: None for n in u.names}
            for n in u.names:
                if u.kind == "binding":
                    hit = by_name.get(n)
                    defs[n] = hit[0] if hit else None
                    if hit:
                        sigs[n] = _sig(hit[1], ref_names)
                        steps = tuple(hit[1].steps)
                elif u.kind in ("input", "param", "buffer"):
                    defs[n] = decls.get(n)
            if probe is not None and probe.env is not None and u.names:
                try:
                    if u.kind == "binding" and steps:
                        b = by_name[u.names[0]][1]
                        got = probe.binding(b.steps, vals, u.index)
                        vals.update(got)
                        for n, r in zip(b.names, b.results):
                            uv[n] = got.get(r)
                            vals[n] = uv[n]
                    elif u.kind in ("input", "param", "buffer") and defs.get(u.names[0]):
                        n = u.names[0]
                        uv[n] = Val.base(("tensor", n), probe.shape(defs[n].shape))
                        vals[n] = uv[n]
                    elif u.kind == "block" and u.names:
                        for k, inst in enumerate(spec.blocks.get(u.names[0], [])):
                            key = probe.block_value(inst)
                            uv[f"{u.names[0]}#{k}"] = Val.base(("block", key), (1,)) \
                                if key is not None else None
                except PROBE_ERRORS:
                    pass
            out.append(UnitResult(errors, defs, sigs, steps, ()))
            out_vals.append(uv)
        return Run(out, out_vals)

