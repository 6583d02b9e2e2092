"""Codegen, one unit: checked IR bindings -> the lines of one nn.Module.

Input: the checked IR of the spec or of one block instantiation. Output: a
`Unit` with its `__init__` lines and its `forward` lines, one operation per
line with its shape as a trailing comment, and the sizes each part uses (for
`Sizes.classify`). Child blocks become units of their own, built on first use.
The operations themselves are written by the emitters in `EMITTERS`
(shapelang.codegen.steps), keyed by IR operation name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy as sp

from ..checker import dtypes
from ..checker.ir import BlockIR, CheckedSpec, Step
from . import steps_layers, steps_tables  # noqa: F401  (they register their emitters in EMITTERS)
from .naming import MODULE_ATTRS, RESERVED, CodegenError, Namer, _snake, _symbols_in, comment_text, py_str
from .sizes import Sizes
from .steps import BINARY, CHAIN_SUFFIX, EMITTERS, FUNCTIONAL, STEPS, UNARY, Op, _module_name
from .units import Unit

__all__ = ["BINARY", "EMITTERS", "FUNCTIONAL", "STEPS", "UNARY", "Emitter", "Scope"]


@dataclass
class Scope:
    """The names inside the unit being written: spec ref -> Python expression, its type,
    the local names and the attribute names taken so far."""
    names: Namer
    attrs: Namer
    refs: dict = field(default_factory=dict)
    types: dict = field(default_factory=dict)


class Emitter:
    """Writes the units of a spec: the top unit, then each block instantiation it uses."""

    def __init__(self, spec: CheckedSpec, sizes: Sizes, *, instrument: bool, taken: set):
        self.spec, self.sizes, self.instrument = spec, sizes, instrument
        self.taken = set(taken)            # names no local may take (dims, classes)
        self.units: dict = {}
        self.order: list = []              # block units, children before parents
        self.uses_causal = False
        self.scope: Scope | None = None

    def top(self, label: str) -> Unit:
        """The unit of the whole spec, named `label`, and every block unit it uses."""
        spec = self.spec
        inputs = [(d.name, d.type, False) for d in spec.decls if d.kind == "input"]
        for b in spec.bindings:
            for s in b.steps:
                if s.op == "input":
                    inputs.append((s.ref, s.out, True))
        top = Unit("top", label, None, inputs,
                   [d for d in spec.decls if d.kind == "param"],
                   [d for d in spec.decls if d.kind == "buffer"], spec.bindings)
        self.units["top"] = top
        self._build(top)
        return top

    def unit_for(self, ir: BlockIR) -> Unit:
        key = id(ir)
        if key in self.units:
            return self.units[key]
        # forward uses the block's own dims: `x: [B, S, D]` called with [B, T, D] reads S
        rename, taken = {}, set()
        for local_sym, outer in ir.binding_of_dims.items():
            if outer not in rename and local_sym not in taken:
                rename[outer] = local_sym
                taken.add(local_sym)
        # ... unless the block also uses the outer size of that name
        present = set()
        for d in ir.inputs + ir.params + ir.buffers:
            for x in d.type.shape:
                present |= sp.sympify(x).free_symbols
        for b in ir.bindings:
            for s in b.steps:
                for t in s.outputs:
                    for x in t.shape:
                        present |= sp.sympify(x).free_symbols
                present |= _symbols_in(s.detail)
        rename = {o: loc for o, loc in rename.items() if loc not in present}
        unit = Unit(key, ir.name, ir, [(d.name, d.type, False) for d in ir.inputs], ir.params,
                    ir.buffers, ir.bindings, rename)
        self.units[key] = unit
        saved = self.scope
        self._build(unit)
        self.scope = saved
        self.order.append(unit)
        return unit

    # -------------------------------------------------------------- pass 1: one unit
    def _build(self, unit: Unit) -> None:
        is_top = unit.block is None
        names = Namer(self.taken)
        attrs = Namer(reserved=RESERVED | MODULE_ATTRS)
        self.scope = scope = Scope(names, attrs)
        unit.arg_names = []
        for ref, t, anon in unit.inputs:
            if not anon:
                py = names.claim(ref)
                scope.refs[ref] = py
                scope.types[ref] = t
                unit.arg_names.append(py)
        for d in unit.params + unit.buffers:
            scope.refs[d.name] = "self." + attrs.claim(d.name)
            scope.types[d.name] = d.type
        # which binding results are used later (the rest are returned, or dead in a block)
        used = set()
        for b in unit.bindings:
            for s in b.steps:
                used |= set(s.inputs)
        result_ref = unit.block.result if unit.block is not None else None
        if result_ref:
            used.add(result_ref)
        binding_names = {}
        for b in unit.bindings:
            if b.names == ("return",):
                if is_top:     # the spec's `return:` is an output like any other, named `out`
                    binding_names["return"] = names.claim("out")
                continue
            for n, r in zip(b.names, b.results):
                dead = r not in used and not is_top
                binding_names[n] = names.claim(("_" if dead else "") + n)
                if dead:
                    unit.dead.add(n)
        for ref, t, anon in unit.inputs:   # anonymous inputs: named after their binding
            if anon:
                owner = next(b for b in unit.bindings if any(s.ref == ref for s in b.steps))
                py = names.claim(f"{owner.names[0]}_input")
                scope.refs[ref] = py
                scope.types[ref] = t
                unit.arg_names.append(py)
        for d in unit.params:
            unit.init.append(f"{scope.refs[d.name]} = nn.Parameter({self._param_init(unit, d)})"
                             f"  # {self.sizes.shape_comment(unit, d.type.shape)}")
        for d in unit.buffers:
            attr = scope.refs[d.name][5:]
            unit.init.append(f"self.register_buffer({py_str(attr)}, {self._buffer_init(unit, d)})"
                             f"  # {self.sizes.shape_comment(unit, d.type.shape)}, not learned: set its values")
        for b in unit.bindings:
            self._binding(unit, b, binding_names)
        if is_top:
            sinks = []
            for k, b in enumerate(unit.bindings):
                later = set()
                for b2 in unit.bindings[k + 1:]:
                    for s in b2.steps:
                        later |= set(s.inputs)
                for n, r in zip(b.names, b.results):
                    if r not in later:
                        sinks.append((n, binding_names[n], r))
            unit.returns = sinks
        else:
            if result_ref is None:
                raise CodegenError(f"block `{unit.label}` has no result")
            unit.returns = [("return", scope.refs[result_ref], result_ref)]

    def _param_init(self, unit: Unit, d) -> str:
        shape = ", ".join(self.sizes.cfg(unit, x) for x in d.type.shape)
        dt = "" if d.type.dtype == dtypes.DEFAULT else f", dtype=torch.{dtypes.torch_name(d.type.dtype)}"
        if len(d.type.shape) == 0:
            return f"torch.zeros((){dt})"
        if len(d.type.shape) == 1:
            ones = re.search(r"gamma|scale|weight|norm|^g$|^ln", d.name.lower())
            return f"torch.{'ones' if ones else 'zeros'}({shape}{dt})"
        return f"torch.randn({shape}{dt}) * 0.02"

    def _buffer_init(self, unit: Unit, d) -> str:
        shape = ", ".join(self.sizes.cfg(unit, x) for x in d.type.shape)
        if d.type.dtype not in ("int", "bool", dtypes.DEFAULT):
            return f"torch.zeros({shape or '()'}, dtype=torch.{dtypes.torch_name(d.type.dtype)})"
        if d.type.dtype == "int":
            if not d.type.shape:
                return "torch.zeros((), dtype=torch.long)"
            last = self.sizes.cfg(unit, d.type.shape[-1])
            if len(d.type.shape) == 1:
                return f"torch.arange({last})"
            return f"torch.arange({last}).expand({shape}).clone()"
        if d.type.dtype == "bool":
            return f"torch.zeros({shape or '()'}, dtype=torch.bool)"
        return f"torch.zeros({shape or '()'})"

    def _binding(self, unit: Unit, b, binding_names) -> None:
        scope = self.scope
        names, steps = scope.names, b.steps
        prefix = "out" if b.names == ("return",) else \
            ("".join(b.names) if all(len(n) == 1 for n in b.names) else "_".join(b.names))
        source = self._source_lines(b.span)
        if source:
            unit.body.append(f"# {comment_text(source)}")
        if not steps:
            for n, r in zip(b.names, b.results):
                if n in binding_names:
                    unit.body.append(f"{binding_names[n]} = {scope.refs[r]}")
                    scope.refs.setdefault(n, binding_names[n])
            return
        by_ref = {s.ref: s for s in steps}
        var: dict[int, str] = {}

        def pred(s: Step):
            if s.op == "input" or not s.inputs:
                return None
            p = by_ref.get(s.inputs[0])
            return p if p is not None and p.id not in var and p.op != "input" else None

        def assign_chain(s: Step, name: str):
            while s is not None:
                var[s.id] = name
                s = pred(s)

        final = steps[-1]
        for s in steps:
            if s.op == "input":
                if s.ref not in scope.refs:
                    raise CodegenError(f"line {s.span.line}: the shape literal {s.text} inside block "
                                       f"`{unit.label}` is an anonymous input, which a block cannot "
                                       "have; declare it as an input of the block")
                var[s.id] = scope.refs[s.ref]
        if len(final.outputs) > 1:
            if len(b.names) == len(final.outputs):
                pieces = [binding_names[n] for n in b.names]
            else:
                pieces = [names.claim(f"{prefix}_{k}") for k in range(len(final.outputs))]
            var[final.id] = ", ".join(pieces)
            for k, piece in enumerate(pieces):
                scope.refs[f"{final.ref}.{k}"] = piece
            p = pred(final)
            if p is not None:
                assign_chain(p, names.claim(prefix))
        else:
            main = binding_names.get(b.names[0]) or names.claim("out")
            assign_chain(final, main)
        for s in reversed(steps):
            if s.id in var:
                continue
            head = s
            while pred(head) is not None:
                head = pred(head)
            base = head.inputs[0] if head.inputs else prefix
            base = scope.refs.get(base, base)
            if base.startswith(("self.", "%")) or "," in base:
                base = base[5:] if base.startswith("self.") else prefix
            suffix = CHAIN_SUFFIX.get(s.op, _snake(s.detail.get("block", s.op)))
            assign_chain(s, names.claim(f"{base.lstrip('_')}_{suffix}"))
        module_count: dict[str, int] = {}
        for s in steps:
            short = _module_name(s)
            if short:
                module_count[short] = module_count.get(short, 0) + 1
        seen: dict[str, int] = {}
        for s in steps:
            if s.op == "input":
                scope.types[s.ref] = s.out
                if self.instrument:
                    unit.body.append(f"_record({s.id}, {var[s.id]})")
                continue
            out = var[s.id]
            attr = None
            short = _module_name(s)
            if short:
                seen[short] = seen.get(short, 0) + 1
                want = f"{prefix}_{short}" + (str(seen[short]) if module_count[short] > 1 else "")
                attr = scope.attrs.claim(want.lstrip("_"))
            lines = self._step(unit, s, out, attr)
            comment = self.sizes.types_comment(unit, s.outputs)
            lines[-1] += f"  # {comment}"
            unit.body.extend(lines)
            if self.instrument:
                rec = out if len(s.outputs) == 1 else f"({out})"
                unit.body.append(f"_record({s.id}, {rec})")
            if len(s.outputs) == 1:
                scope.refs[s.ref] = out
            for k, t in enumerate(s.outputs):
                scope.types[f"{s.ref}.{k}"] = t
            scope.types[s.ref] = s.out
        for n, r in zip(b.names, b.results):
            if n != "return":
                scope.refs.setdefault(n, binding_names[n])

    def _source_lines(self, span) -> str:
        lines = self.spec.source.split("\n")
        if not (0 < span.line <= span.end_line <= len(lines)):
            return ""
        text = " ".join(line.strip() for line in lines[span.line - 1:span.end_line])
        return text.replace("\r", "").strip()

    def _step(self, unit: Unit, s: Step, out: str, attr: str | None) -> list[str]:
        emitter = EMITTERS.get(s.op)
        if emitter is None:
            raise CodegenError(f"codegen does not know the operation `{s.op}`")
        args = [self.scope.refs.get(r, r) for r in s.inputs]
        xt = self.scope.types.get(s.inputs[0]) if s.inputs else None
        try:
            return emitter(Op(self, unit, s, s.detail, out, attr, args, args[0] if args else "", xt,
                              xt.rank if xt is not None else 0))
        except CodegenError as err:
            if str(err).startswith("line "):
                raise
            raise CodegenError(f"line {s.span.line}: `{s.text}`: {err}") from None

