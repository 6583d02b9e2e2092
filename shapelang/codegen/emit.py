"""Codegen, one unit: checked IR bindings -> the lines of one nn.Module.

Input: the checked IR of the spec or of one block instantiation. Output: a
`Unit` with its `__init__` lines and its `forward` lines, one operation per
line with its shape as a trailing comment, and the sizes each part uses (for
`Sizes.classify`). Child blocks become units of their own, built on first use.
The operations themselves are written by the emitters in `EMITTERS`
(shapelang.codegen.registry, derived from the table), keyed by IR operation name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy as sp

from ..checker import dtypes
from ..checker.ir import BlockIR, CheckedSpec, Step
from ..checker.ops.table import moving
from ..syntax import brackets
from . import attention as attention_pattern
from . import generic as generic_sizes
from . import hoist, precision, steps_layers, steps_more, steps_tables, tables  # noqa: F401  (they register their emitters in EMITTERS)
from .attrs import AttrTree
from .layout import WIDTH, comment_line, comments_above, trailing_comment
from .naming import CodegenError, Namer, _snake, comment_text, py_str
from .sizes import Sizes
from .steps import BINARY, CHAIN_SUFFIX, EMITTERS, FUNCTIONAL, STEPS, UNARY, Op, _module_name
from .units import Unit

# layout steps written as a method call on the line before: `y.transpose(1, 2).contiguous()`
FOLD = moving("regroup", "move", "copy", "broadcast", "repeat", "cut")


def _primary(rhs: str) -> bool:
    """A call on a name or a module (`self.c_attn(x)`, `q.view(B, S, H, Dh)`), which a method
    call can follow without brackets; not an operator expression or a free function's call."""
    if rhs.startswith((FUNCTIONAL, "torch.", "-")):
        return False
    return all(quoted or depth or c in "()[]{}" or c.isalnum() or c in "_."
               for _k, c, depth, quoted in brackets.scan(rhs, "\"'"))

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

    def __init__(self, spec: CheckedSpec, sizes: Sizes, *, instrument: bool, taken: set,
                 names: str = "dotted", attention: str = "sdpa"):
        self.spec, self.sizes, self.instrument = spec, sizes, instrument
        self.names = names
        # the written-out steps in the instrumented module (`run` records each of them)
        self.fuse_attention = attention == "sdpa" and not instrument
        self.uses: dict = {}
        self.producers: dict = {}
        self.attention: dict = {}
        self.relaid: set = set()           # refs laid out otherwise than proved (after a fused call)
        self.skipped: set = set()
        self.gqa: dict = {}           # attention step id -> (k, v before repeat_interleave, copies)
        self.taken = set(taken)            # names no local may take (dims, classes)
        self.units: dict = {}
        self.order: list = []              # block units, children before parents
        self.uses_causal = False
        self.scope: Scope | None = None
        self.follow: set = set()           # refs whose float values follow the module's dtype
        self.varying: dict | None = None   # block -> dims its calls bind otherwise (generic.py)
        self.table_sizes: dict = {}        # unit key -> {table ref: (sizes, inputs)} (tables.py)
        self.eligible: dict | None = None  # unit key -> the table refs built in __init__

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

    def unit_for(self, ir: BlockIR, stacked: bool = False) -> Unit:
        generic = self.spec.generic_blocks.get(ir.name)
        bound = []
        if generic is not None and not self.instrument:
            ir = generic      # one class for every call: `Mlp(cfg, F)`, `Attention(cfg, NH, C)`
            self.varying = self.varying or generic_sizes.varying(self.spec)
            bound = [s for s in self.varying.get(ir.name, ()) if s not in ir.size_args]
        key = id(ir)
        if key in self.units:
            return self.units[key]
        rename, size_rename = generic_sizes.renames(ir)
        unit = Unit(key, ir.name, ir, [(d.name, d.type, False) for d in ir.inputs], ir.params,
                    ir.buffers, ir.bindings, rename, size_rename,
                    {loc: sp.sympify(ir.size_args[loc]) for loc in size_rename.values()},
                    stacked=stacked)
        unit.size_args.update((s, s) for s in bound)
        unit.bound_args = set(bound)
        unit.generic = ir is generic
        self.units[key] = unit
        saved = (self.scope, self.uses, self.producers, self.attention, self.relaid, self.skipped, self.follow,
                 self.gqa)
        self._build(unit)
        if unit.block is not None:
            self.sizes.readable(unit)
            generic_sizes.settle(unit, unit.readable, self.sizes.bound_dims)
        (self.scope, self.uses, self.producers, self.attention, self.relaid, self.skipped, self.follow,
         self.gqa) = saved
        self.order.append(unit)
        return unit

    # -------------------------------------------------------------- pass 1: one unit
    def _build(self, unit: Unit) -> None:
        is_top = unit.block is None
        names = Namer(self.taken)
        attrs = unit.attrs = AttrTree(unit.init, dotted=self.names == "dotted")
        self.scope = scope = Scope(names, attrs)
        unit.locals = names.claimed
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
        seeds = {ref: t for ref, t, anon in unit.inputs if not anon}
        seeds.update((d.name, d.type) for d in unit.params + unit.buffers)
        self.follow = precision.following(seeds, unit.bindings)
        # which values are used later (the rest are returned, or dead in a block)
        self.uses = uses = {}
        self.producers = {s.ref: s for b in unit.bindings for s in b.steps}
        for b in unit.bindings:
            for s in b.steps:
                for r in s.inputs:
                    uses[r] = uses.get(r, 0) + 1
        result_ref = unit.block.result if unit.block is not None else None
        result_refs = (unit.block.results or (result_ref,)) if result_ref else ()
        for r in result_refs:
            uses[r] = uses.get(r, 0) + 1
        self.attention = {}
        if self.fuse_attention:
            self.attention = attention_pattern.find(unit.bindings, self.spec.prover, result_ref, dict(scope.types))
        self.relaid = attention_pattern.relaid(unit.bindings, self.attention)
        self.skipped = set()
        for a in self.attention.values():
            self.skipped |= a.skipped - {a.step.id}
        self.gqa = attention_pattern.fused_gqa(unit.bindings, self.spec.prover, result_ref) \
            if self.fuse_attention else {}
        for _k, _v, copies in self.gqa.values():
            self.skipped |= copies
        binding_names = {}
        for b in unit.bindings:
            if b.names == ("return",):
                if is_top:     # the spec's `return:` is an output like any other, named `out`
                    binding_names["return"] = names.claim("out")
                continue
            for n, r in zip(b.names, b.results):
                dead = r not in uses and not is_top
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
        if unit.stacked and not self.instrument:     # built once, not in every layer
            self._hoist(unit, binding_names, result_ref)
        fixed = [] if unit.stacked or self.instrument else tables.build_once(self, unit, binding_names)
        source = self.spec.source.split("\n")
        for d in unit.params:
            unit.init += [comment_line(comment_text(c)) for c in comments_above(source, d.span.line)]
            frozen = ", requires_grad=False" if d.frozen else ""   # in the state dict, not trained
            unit.init.append((f"{scope.refs[d.name]} = nn.Parameter({self._param_init(unit, d)}{frozen})",
                              self.sizes.shape_comment(unit, d.type.shape)))
        for d in unit.buffers:
            owner, _, attr = scope.refs[d.name].rpartition(".")
            unit.init += [comment_line(comment_text(c)) for c in comments_above(source, d.span.line)]
            unit.init.append((f"{owner}.register_buffer({py_str(attr)}, {self._buffer_init(unit, d)})",
                              f"{self.sizes.shape_comment(unit, d.type.shape)}, not learned: set its values"))
        for b in unit.bindings:
            self._binding(unit, b, binding_names)
        unit.init += fixed        # tables fixed when it is built: buffers (tables.py)
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
            unit.returns = [("return", scope.refs[r], r) for r in result_refs]

    def _hoist(self, unit: Unit, binding_names: dict, result_ref) -> None:
        hoist.plan(self, unit, binding_names, result_ref, CHAIN_SUFFIX)

    def causal(self, unit: Unit, rows, cols, device: str) -> str:
        return hoist.causal(self, unit, rows, cols, device)

    def hoisted_args(self, unit: Unit, child: Unit) -> tuple[list, list]:
        return hoist.caller_args(self, unit, child, self.spec.source.split("\n"))

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
        source = self.spec.source.split("\n")
        notes = comments_above(source, b.span.line)
        if 0 < b.span.line <= len(source):
            tail = trailing_comment(source[b.span.line - 1])
            if tail is not None and tail.strip():
                notes.append(tail)
        if not (steps and all(s.id in unit.hoisted_steps for s in steps)):   # else: the caller's
            unit.body += [comment_line(comment_text(c)) for c in notes]
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
            if s.id in var or s.id in self.skipped:
                continue
            head = s
            while pred(head) is not None:
                head = pred(head)
            base = head.inputs[0] if head.inputs else prefix
            base = scope.refs.get(base, base)
            if base.startswith(("self.", "%")) or "," in base:
                base = base.rpartition(".")[2] if base.startswith("self.") else prefix
            suffix = CHAIN_SUFFIX.get(s.op, _snake(s.detail.get("block", s.op)))
            assign_chain(s, names.claim(f"{base.lstrip('_')}_{suffix}"))
        # module attributes: the binding's name for its one module with weights (`c_attn`),
        # else <binding>_<kind>, numbered (`m_linear1`); see attrs.py
        weighted = [s for s in steps if _module_name(s) and s.op != "dropout" and s.id not in self.skipped]
        # ... or the one block call or stack among several (`block_sparse_moe: x -> rmsnorm ->
        # SparseMoe` is `self.block_sparse_moe` beside `self.block_sparse_moe_norm`)
        calls = [s for s in weighted if s.op in ("block", "stack")]
        main = weighted[0] if len(weighted) == 1 else calls[0] if len(calls) == 1 else None
        module_count: dict[str, int] = {}
        for s in steps:
            short = _module_name(s)
            if short:
                module_count[short] = module_count.get(short, 0) + 1
        seen: dict[str, int] = {}
        early: dict = {}                # step id -> its attribute, claimed before it is written
        # a block or stack giving several tensors is named by the first name (`h, k, v:
        # n -> Attention(..)` is `self.h`); a scan's layers are `self.h`, as in `h: x ->
        # stack L Layer -> ...`, so that a step spec's weights are its full spec's
        scan = len(b.names) > 1 and final.op in ("stack", "block")
        out_lines: list = []            # [code, comment, step] per emitted statement
        for s in steps:
            if s.op == "input":
                scope.types[s.ref] = s.out
                if self.instrument:
                    out_lines.append([f"_record({s.id}, {var[s.id]})", None, None])
                continue
            if s.id in self.skipped:
                continue
            out = var[s.id]

            def claim(s):
                short = _module_name(s)
                seen[short] = seen.get(short, 0) + 1
                if s is main and b.names != ("return",):
                    want = b.names[0] if scan else prefix
                else:
                    want = f"{b.names[0] if scan else prefix}_{short}" \
                        + (str(seen[short]) if module_count[short] > 1 else "")
                return scope.attrs.claim(want.lstrip("_"))
            attr = early.pop(s.id, None)
            if attr is None and _module_name(s):
                attr = claim(s)
            if s.detail.get("stack_first"):    # the stack after it owns the list it indexes
                stack = next(t for t in steps if t.detail.get("first") == s.ref)
                attr = early[stack.id] = claim(stack)
            if s.id in self.attention:
                lines = self._attention(unit, self.attention[s.id], out, prefix)
            else:
                lines = self._step(unit, s, out, attr)
            # a scan's lines end with its last collected tensor (the others say theirs)
            comment = self.sizes.types_comment(unit, s.outputs[-1:] if s.detail.get("collected") else s.outputs)
            if not (len(lines) == 1 and self._fold(out_lines, s, lines[0], out, comment)):
                out_lines += [[line, None, s] for line in lines[:-1]] + [[lines[-1], comment, s]]
            if self.instrument:
                rec = out if len(s.outputs) == 1 else f"({out})"
                out_lines.append([f"_record({s.id}, {rec})", None, None])
            if len(s.outputs) == 1:
                scope.refs[s.ref] = out
            for k, t in enumerate(s.outputs):
                scope.types[f"{s.ref}.{k}"] = t
            scope.types[s.ref] = s.out
        for code, comment, _s in out_lines:
            unit.body.append((code, comment) if comment else code)
        for n, r in zip(b.names, b.results):
            if n != "return":
                scope.refs.setdefault(n, binding_names[n])

    def _fold(self, out_lines: list, s: Step, line: str, out: str, comment: str) -> bool:
        """Write a layout step as a method call on the line before (`q.view(...).transpose(1, 2)`)
        when that line computed its only input, the way a person chains them."""
        if not out_lines or s.op not in FOLD or self.instrument:
            return False
        prev = out_lines[-1]
        code, prev_step = prev[0], prev[2]
        if prev_step is None or not s.inputs or s.inputs[0] != prev_step.ref or self.uses.get(prev_step.ref) != 1:
            return False
        lhs, _, rhs = code.partition(" = ")
        x = self.scope.refs.get(s.inputs[0], "")
        head = f"{out} = {x}."
        if lhs != x or not line.startswith(head) or not _primary(rhs):
            return False
        joined = f"{out} = {rhs}.{line[len(head):]}"
        if 8 + len(joined) + 4 + len(comment) > WIDTH:
            return False
        prev[0], prev[1], prev[2] = joined, comment, s
        return True

    def _attention(self, unit: Unit, a, out: str, prefix: str) -> list[str]:
        """`F.scaled_dot_product_attention(q, k, v, ...)` for a recognised attention."""
        refs = self.scope.refs
        k = refs.get(a.k, a.k) + (".transpose(-2, -1)" if a.k_transposed else "")
        args = [refs.get(a.q, a.q), k, refs.get(a.v, a.v)]
        lines = []
        if a.masks or a.biases:
            keep = self._attn_mask(unit, a, prefix, lines, args[0])
            args.append(f"attn_mask={keep}")
        if a.dropout:
            field = self.sizes.hparam("dropout", a.dropout)
            attr = self.scope.attrs.claim("attn_dropout")
            unit.init.append(f"self.{attr} = cfg.{field}")
            args.append(f"dropout_p=self.{attr} if self.training else 0.0")
        if a.causal and not (a.masks or a.biases):
            args.append("is_causal=True")
        if a.scale is not None:
            scale = self.sizes.local(unit, a.scale, real=True)
            if re.fullmatch(r"\d+", scale):
                scale += ".0"
            elif "/" not in scale and "math." not in scale and "." not in scale:
                scale = f"float({scale})"      # a size: sdpa (and TorchScript) want a float
            args.append(f"scale={scale}")
        if a.gqa:
            args.append("enable_gqa=True")
        return lines + [f"{out} = {FUNCTIONAL}.scaled_dot_product_attention({', '.join(args)})"]

    def _attn_mask(self, unit: Unit, a, prefix: str, lines: list, q: str) -> str:
        """The one `attn_mask` for sdpa from a recognised attention's masks and biases: a bool
        mask (True takes part) when there are only masks, else a float mask (the biases, summed,
        with -inf where a mask hides)."""
        refs, types = self.scope.refs, self.scope.types
        hides = []
        for m in a.masks:
            mt = types.get(m)
            hides.append(refs.get(m, m) if mt is None or mt.dtype == "bool" else f"({refs.get(m, m)} != 0)")
        if a.causal:
            hides.append(self.causal(unit, *a.causal_size, q))
        if not a.biases and len(hides) == 1:
            return f"~{hides[0]}"
        name = self.scope.names.claim("attn_mask")
        if not a.biases:
            lines.append(f"{name} = ~({' | '.join(hides)})")
            return name
        if not hides and len(a.biases) == 1 and not a.biases[0][1]:
            return self._as_activation(a.biases[0][0], q)
        terms = []
        for ref, scaled in a.biases:
            b = self._as_activation(ref, q)
            if scaled:
                b = f"{b} * {self.sizes.local(unit, a.factor, real=True, operand=True)}"
            terms.append(b)
        lines.append(f"{name} = {' + '.join(terms)}")
        if hides:
            lines.append(f'{name} = {name}.masked_fill({" | ".join(hides)}, float("-inf"))')
        return name

    def _as_activation(self, ref: str, like: str) -> str:
        """`ref` as an expression, cast to the dtype of `like` when it is a float32 table."""
        expr = self.scope.refs.get(ref, ref)
        t = self.scope.types.get(ref)
        if t is not None and t.dtype == dtypes.DEFAULT and ref not in self.follow:
            return f"{expr}.to({like}.dtype)"
        return expr

    def _step(self, unit: Unit, s: Step, out: str, attr: str | None) -> list[str]:
        emitter = EMITTERS.get(s.op)
        if emitter is None:
            raise CodegenError(f"codegen does not know the operation `{s.op}`")
        args = [self.scope.refs.get(r, r) for r in s.inputs]
        for k, lead in precision.meeting_casts(s, self.follow, self.scope.types).items():
            args[k] = f"{args[k]}.to({args[lead]}.dtype)"     # a float32 table meets activations
        if attr and precision.fixed_input_of_layer(s, self.follow, self.scope.types):
            args[0] = f"{args[0]}.to(self.{attr}.weight.dtype)"
        xt = self.scope.types.get(s.inputs[0]) if s.inputs else None
        try:
            return emitter(Op(self, unit, s, s.detail, out, attr, args, args[0] if args else "", xt,
                              xt.rank if xt is not None else 0))
        except CodegenError as err:
            if str(err).startswith("line "):
                raise
            raise CodegenError(f"line {s.span.line}: `{s.text}`: {err}") from None

