"""Codegen, one step: checked IR steps -> lines of PyTorch source.

Input: one binding of a checked unit (spec or block), its steps with their
resolved arguments and output shapes. Output: the lines of `forward` (one
operation per line, the shape as a trailing comment) and, for steps that own
weights, the `__init__` lines creating the modules (`nn.Linear`, `nn.LayerNorm`,
child blocks). `EmitMixin` is mixed into `codegen.Generator`; `STEPS`, at the
end, is the table from IR operation to its emitter.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy as sp

from ..checker.ir import Step
from .naming import CodegenError, _snake

if TYPE_CHECKING:
    from .generator import Unit

FUNCTIONAL = "\x00F\x00"   # placeholder for the torch.nn.functional alias (F unless a spec name is F)
UNARY = {"relu": "F.relu({})", "gelu": "F.gelu({})", "silu": "F.silu({})", "softplus": "F.softplus({})",
         "tanh": "torch.tanh({})", "sigmoid": "torch.sigmoid({})", "exp": "torch.exp({})",
         "sqrt": "torch.sqrt({})", "rsqrt": "torch.rsqrt({})", "log": "torch.log({})",
         "abs": "torch.abs({})", "square": "torch.square({})", "neg": "-{}"}
BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "floordiv": "//", "mod": "%",
          "matmul": "@"}
MODULE_OPS = {"linear": "linear", "layernorm": "ln", "rmsnorm": "norm", "dropout": "drop"}
CHAIN_SUFFIX = {"transpose": "t", "permute": "p", "linear": "proj", "layernorm": "ln", "rmsnorm": "norm",
                "embed": "emb", "matmul": "mm", "contiguous": "c"}



class EmitMixin:
    """The per-step half of `codegen.Generator`: bindings and operations -> source lines."""

    def _param_init(self, unit: Unit, d) -> str:
        shape = ", ".join(self.cfg(unit, x) for x in d.type.shape)
        if len(d.type.shape) == 0:
            return "torch.zeros(())"
        if len(d.type.shape) == 1:
            ones = re.search(r"gamma|scale|weight|norm|^g$|^ln", d.name.lower())
            return f"torch.{'ones' if ones else 'zeros'}({shape})"
        return f"torch.randn({shape}) * 0.02"

    def _buffer_init(self, unit: Unit, d) -> str:
        shape = ", ".join(self.cfg(unit, x) for x in d.type.shape)
        if d.type.dtype == "int":
            if not d.type.shape:
                return "torch.zeros((), dtype=torch.long)"
            last = self.cfg(unit, d.type.shape[-1])
            if len(d.type.shape) == 1:
                return f"torch.arange({last})"
            return f"torch.arange({last}).expand({shape}).clone()"
        if d.type.dtype == "bool":
            return f"torch.zeros({shape or '()'}, dtype=torch.bool)"
        return f"torch.zeros({shape or '()'})"

    def _binding(self, unit: Unit, b, binding_names) -> None:
        names, steps = self._names, b.steps
        prefix = "out" if b.names == ("return",) else \
            ("".join(b.names) if all(len(n) == 1 for n in b.names) else "_".join(b.names))
        source = self._source_lines(b.span)
        if source:
            unit.body.append(f"# {source}")
        if not steps:
            for n, r in zip(b.names, b.results):
                if n != "return":
                    unit.body.append(f"{binding_names[n]} = {self.refs[r]}")
                    self.refs.setdefault(n, binding_names[n])
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
                if s.ref not in self.refs:
                    raise CodegenError(f"line {s.span.line}: the shape literal {s.text} inside block "
                                       f"`{unit.label}` is an anonymous input, which a block cannot "
                                       "have; declare it as an input of the block")
                var[s.id] = self.refs[s.ref]
        if len(final.outputs) > 1:
            if len(b.names) == len(final.outputs):
                pieces = [binding_names[n] for n in b.names]
            else:
                pieces = [names.claim(f"{prefix}_{k}") for k in range(len(final.outputs))]
            var[final.id] = ", ".join(pieces)
            for k, piece in enumerate(pieces):
                self.refs[f"{final.ref}.{k}"] = piece
            p = pred(final)
            if p is not None:
                assign_chain(p, names.claim(prefix))
        else:
            main = binding_names.get(b.names[0]) if b.names != ("return",) else names.claim("out")
            assign_chain(final, main)
        for s in reversed(steps):
            if s.id in var:
                continue
            head = s
            while pred(head) is not None:
                head = pred(head)
            base = head.inputs[0] if head.inputs else prefix
            base = self.refs.get(base, base)
            if base.startswith(("self.", "%")) or "," in base:
                base = base[5:] if base.startswith("self.") else prefix
            suffix = CHAIN_SUFFIX.get(s.op, _snake(s.detail.get("block", s.op)))
            assign_chain(s, names.claim(f"{base.lstrip('_')}_{suffix}", escape=False))
        module_count: dict[str, int] = {}
        for s in steps:
            short = _module_name(s)
            if short:
                module_count[short] = module_count.get(short, 0) + 1
        seen: dict[str, int] = {}
        for s in steps:
            if s.op == "input":
                self.types[s.ref] = s.out
                if self.instrument:
                    unit.body.append(f"_record({s.id}, {var[s.id]})")
                continue
            out = var[s.id]
            attr = None
            short = _module_name(s)
            if short:
                seen[short] = seen.get(short, 0) + 1
                want = f"{prefix}_{short}" + (str(seen[short]) if module_count[short] > 1 else "")
                attr = self._attrs.claim(want.lstrip("_"))
            lines = self._step(unit, s, out, attr)
            comment = self.types_comment(unit, s.outputs)
            lines[-1] += f"  # {comment}"
            unit.body.extend(lines)
            if self.instrument:
                rec = out if len(s.outputs) == 1 else f"({out})"
                unit.body.append(f"_record({s.id}, {rec})")
            if len(s.outputs) == 1:
                self.refs[s.ref] = out
            for k, t in enumerate(s.outputs):
                self.types[f"{s.ref}.{k}"] = t
            self.types[s.ref] = s.out
        for n, r in zip(b.names, b.results):
            if n != "return":
                self.refs.setdefault(n, binding_names[n])

    def _source_lines(self, span) -> str:
        lines = self.spec.source.split("\n")
        if not (0 < span.line <= span.end_line <= len(lines)):
            return ""
        text = " ".join(line.strip() for line in lines[span.line - 1:span.end_line])
        return text.replace("\r", "").strip()

    # -------------------------------------------------------------- one step
    def _axis(self, d: int, rank: int) -> str:
        return "-1" if rank >= 2 and d == rank - 1 else str(d)

    def _sizes(self, unit: Unit, sizes, infer=None) -> str:
        return ", ".join("-1" if (k == infer or (sp.sympify(x) == -1)) else self.local(unit, x)
                         for k, x in enumerate(sizes))

    def _step(self, unit: Unit, s: Step, out: str, attr: str | None) -> list[str]:
        emitter = STEPS.get(s.op) or (_unary if s.op in UNARY else _binary if s.op in BINARY else None)
        if emitter is None:
            raise CodegenError(f"codegen does not know the operation `{s.op}`")
        args = [self.refs.get(r, r) for r in s.inputs]
        xt = self.types.get(s.inputs[0]) if s.inputs else None
        return emitter(Op(self, unit, s, s.detail, out, attr, args, args[0] if args else "", xt,
                          xt.rank if xt is not None else 0))

    def _rearrange(self, unit: Unit, s: Step, out: str, x: str) -> list[str]:
        d = s.detail
        if "flat" not in d:
            raise CodegenError("this checker gives no stages for `rearrange`")
        lines = []
        src = x
        xt = self.types.get(s.inputs[0])
        copies = d["copies"]
        if copies[0] is not None:
            how = "reshape" if copies[0] else "view"
            lines.append(f"{out} = {src}.{how}({self._sizes(unit, d['flat'])})"
                         f"  # {self.shape_comment(unit, d['flat'])}")
            src = out
        perm = list(d["perm"])
        if perm != sorted(perm):
            flat = d["flat"] if copies[0] is not None else xt.shape
            lines.append(f"{out} = {src}.permute({', '.join(map(str, perm))})"
                         f"  # {self.shape_comment(unit, [flat[p] for p in perm])}")
            src = out
        if copies[1] is not None:
            how = "contiguous().view" if copies[1] else "view"
            lines.append(f"{out} = {src}.{how}({self._sizes(unit, d['final'])})")
            src = out
        if src != out:
            lines.append(f"{out} = {src}")
        last = lines.pop()
        lines.append(last.split("  # ")[0])
        return lines

# ------------------------------------------------------------------ one emitter per operation

@dataclass(frozen=True)
class Op:
    """One step being written: `out = <x>.op(...)`, in the unit's local names."""
    g: EmitMixin          # the Generator
    unit: Unit
    s: Step
    d: dict               # the step's resolved arguments
    out: str              # the variable(s) it assigns
    attr: str | None      # the module attribute it owns (`linear`, `layernorm`, blocks)
    args: list            # its inputs, as Python expressions
    x: str                # the first input
    xt: object            # the type of the first input
    rank: int

    def local(self, e, **kw) -> str:
        return self.g.local(self.unit, e, **kw)

    def cfg(self, e) -> str:
        return self.g.cfg(self.unit, e)

    def axis(self, dim: int, rank: int | None = None) -> str:
        return self.g._axis(dim, self.rank if rank is None else rank)


def _view(o: Op) -> list[str]:
    shape = o.g._sizes(o.unit, o.d["shape"], o.d.get("infer"))
    if o.s.op == "reshape" and o.d.get("copies"):
        return [f"{o.out} = {o.x}.contiguous().view({shape})"]
    return [f"{o.out} = {o.x}.view({shape})"]


def _transpose(o: Op) -> list[str]:
    i, j = o.d["dims"]
    if o.rank >= 3 and {i, j} == {o.rank - 2, o.rank - 1}:
        return [f"{o.out} = {o.x}.transpose(-2, -1)"]
    return [f"{o.out} = {o.x}.transpose({i}, {j})"]


def _squeeze(o: Op) -> list[str]:
    dims = [o.d["dim"]] if o.d["dim"] is not None else \
        [k for k, size in enumerate(o.xt.shape) if sp.sympify(size) == 1]
    if len(dims) == 1:
        return [f"{o.out} = {o.x}.squeeze({dims[0]})"]
    return [f"{o.out} = {o.x}.squeeze(({', '.join(map(str, dims))}{',' if len(dims) == 1 else ''}))"]


def _repeat_interleave(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.repeat_interleave({o.local(o.d['repeats'])}, dim={o.axis(o.d['dim'])})"]


def _scale(o: Op) -> list[str]:
    return [f"{o.out} = {o.x} * {o.local(o.d['factor'], real=True, operand=True)}"]


def _mask(o: Op) -> list[str]:
    if o.d["kind"] == "causal":
        o.g.uses_causal = True
        rows, cols = o.local(o.d["rows"]), o.local(o.d["cols"])
        return [f'{o.out} = {o.x}.masked_fill(causal_mask({rows}, {cols}, {o.x}.device), float("-inf"))']
    m = o.args[1]
    mt = o.g.types.get(o.s.inputs[1])
    if mt is not None and mt.dtype != "bool":
        m = f"{m} != 0"
    return [f'{o.out} = {o.x}.masked_fill({m}, float("-inf"))']


def _unary(o: Op) -> list[str]:
    return [f"{o.out} = " + UNARY[o.s.op].replace("F.", FUNCTIONAL + ".").format(o.x)]


def _module(o: Op, init: str) -> list[str]:
    """A step that owns a module: `self.attr = init` in __init__, `out = self.attr(x)` in forward."""
    o.unit.init.append(f"self.{o.attr} = {init}")
    return [f"{o.out} = self.{o.attr}({o.x})"]


def _layernorm(o: Op) -> list[str]:
    bias = "" if o.d.get("bias", True) else ", bias=False"
    return _module(o, f"nn.LayerNorm({o.cfg(o.d['features'])}{bias})")


def _linear(o: Op) -> list[str]:
    bias = "" if o.d["bias"] else ", bias=False"
    return _module(o, f"nn.Linear({o.cfg(o.d['in'])}, {o.cfg(o.d['out'])}{bias})")


def _embed(o: Op) -> list[str]:
    if o.d.get("table") is None:
        return _module(o, f"nn.Embedding({o.cfg(o.d['vocab'])}, {o.cfg(o.d['dim'])})")
    return [f"{o.out} = {FUNCTIONAL}.embedding({o.x}, {o.args[1]})"]


def _split(o: Op) -> list[str]:
    sizes = o.d["sizes"]
    if len(set(sizes)) == 1:
        what = o.local(sizes[0])
    else:
        what = "[" + ", ".join(o.local(z) for z in sizes) + "]"
    return [f"{o.out} = {o.x}.split({what}, dim={o.axis(o.d['dim'])})"]


def _reduce(o: Op) -> list[str]:
    keep = ", keepdim=True" if o.d.get("keepdim") else ""
    return [f"{o.out} = {o.x}.{o.s.op}(dim={o.axis(o.d['dim'])}{keep})"]


def _select(o: Op) -> list[str]:
    index = [":"] * o.d["dim"] + [o.local(o.d["index"])]
    return [f"{o.out} = {o.x}[{', '.join(index)}]"]


def _slice(o: Op) -> list[str]:
    start = o.local(o.d["start"]) if o.d["start"] != 0 else ""
    index = [":"] * o.d["dim"] + [f"{start}:{o.local(o.d['end'])}"]
    return [f"{o.out} = {o.x}[{', '.join(index)}]"]


def _binary(o: Op) -> list[str]:
    sign = BINARY[o.s.op]
    if len(o.args) == 2:
        return [f"{o.out} = {o.args[0]} {sign} {o.args[1]}"]
    scalar = o.local(o.d["scalar"], real=True, operand=True)
    if o.d.get("scalar_left"):
        return [f"{o.out} = {scalar} {sign} {o.x}"]
    return [f"{o.out} = {o.x} {sign} {scalar}"]


def _block(o: Op) -> list[str]:
    child = o.g._unit_for(o.s.block)
    o.unit.children.append(child)
    o.unit.init.append(f"self.{o.attr} = \x00C{child.key}\x00(cfg)")
    return [f"{o.out} = self.{o.attr}({', '.join(o.args)})"]


def _stack(o: Op) -> list[str]:
    child = o.g._unit_for(o.s.block)
    o.unit.children.append(child)
    count = o.cfg(o.d["count"])
    o.unit.init.append(f"self.{o.attr} = nn.ModuleList([\x00C{child.key}\x00(cfg) for _ in range({count})])")
    layer = o.g._names.claim("layer", escape=False)
    lines = [] if o.out == o.x else [f"{o.out} = {o.x}"]
    extra = "".join(f", {a}" for a in o.args[1:])
    return lines + [f"for {layer} in self.{o.attr}:", f"    {o.out} = {layer}({o.out}{extra})"]


# IR operation -> emitter; every name in UNARY and BINARY goes to _unary and _binary
STEPS = {
    "view": _view,
    "reshape": _view,
    "transpose": _transpose,
    "permute": lambda o: [f"{o.out} = {o.x}.permute({', '.join(map(str, o.d['dims']))})"],
    "movedim": lambda o: [f"{o.out} = {o.x}.movedim({o.d['source']}, {o.d['destination']})"],
    "unsqueeze": lambda o: [f"{o.out} = {o.x}.unsqueeze({o.d['dim']})"],
    "squeeze": _squeeze,
    "flatten": lambda o: [f"{o.out} = {o.x}.flatten({o.d['start']}, {o.d['end']})"],
    "expand": lambda o: [f"{o.out} = {o.x}.expand({o.g._sizes(o.unit, o.d['shape'])})"],
    "repeat_interleave": _repeat_interleave,
    "softmax": lambda o: [f"{o.out} = {FUNCTIONAL}.softmax({o.x}, dim={o.axis(o.d['dim'])})"],
    "log_softmax": lambda o: [f"{o.out} = {FUNCTIONAL}.log_softmax({o.x}, dim={o.axis(o.d['dim'])})"],
    "scale": _scale,
    "mask": _mask,
    "contiguous": lambda o: [f"{o.out} = {o.x}.contiguous()"],
    "layernorm": _layernorm,
    "rmsnorm": lambda o: _module(o, f"nn.RMSNorm({o.cfg(o.d['features'])})"),
    "linear": _linear,
    "dropout": lambda o: _module(o, f"nn.Dropout({o.d['p']!r})"),
    "embed": _embed,
    "concat": lambda o: [f"{o.out} = torch.cat([{', '.join(o.args)}], dim={o.axis(o.d['dim'], o.s.out.rank)})"],
    "split": _split,
    "chunk": lambda o: [f"{o.out} = {o.x}.chunk({o.d['chunks']}, dim={o.axis(o.d['dim'])})"],
    "sum": _reduce,
    "mean": _reduce,
    "var": _reduce,
    "amax": _reduce,
    "select": _select,
    "slice": _slice,
    "einsum": lambda o: [f"{o.out} = torch.einsum({json.dumps(o.d['equation'])}, {', '.join(o.args)})"],
    "rearrange": lambda o: o.g._rearrange(o.unit, o.s, o.out, o.x),
    "block": _block,
    "stack": _stack,
}


def _module_name(s) -> str | None:
    """The attribute name of the submodule a step owns (linear, embed, a block), or None."""
    if s.op in ("block", "stack"):
        return _snake(s.block.name) + ("s" if s.op == "stack" else "")
    if s.op == "embed" and s.detail.get("table") is None:
        return "embed"
    return MODULE_OPS.get(s.op)
