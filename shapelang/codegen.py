"""Codegen stage: checked IR -> one readable PyTorch module per spec.

Input: a `CheckedSpec` that checks. Output: Python source in the style of
nanoGPT's model.py: a config @dataclass for the hyper-parameter sizes, one
nn.Module per block and one for the whole spec, the spec's own names, one
operation per line with its shape as a trailing comment.

Which sizes are hyper-parameters: every size in the shape of a `param` or
`buffer`, in an argument that creates weights (linear widths, embedding tables,
norm widths, stack depths), and every size a module needs but cannot read from
the shapes of its inputs. They live in the config; every other size is read
from the inputs in `forward` (`B, S, D = x.shape`). Assumptions become
`assert`s: in `__init__` when they involve hyper-parameters only, else at the
top of `forward`.

Everything comes from the IR: shapes, strides, resolved arguments. Nothing is
parsed again and no shape is derived here; the source text is only quoted in
comments. `run` (shapelang.runner) uses the instrumented variant, which records
the shape of every step.
"""
from __future__ import annotations

import json
import keyword
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field

import sympy as sp

from .ir import BlockIR, CheckedSpec, Step

RESERVED = {"self", "cfg", "torch", "nn", "math", "dataclass", "causal_mask", "super", "float", "int",
            "range", "len", "min", "max", "property", "print", "dict", "tuple", "list", "_",
            "l", "O", "I", "_record", "True", "False", "None"}
# attributes of nn.Module that a parameter or submodule must not shadow
MODULE_ATTRS = {
    "T_destination", "add_module", "apply", "bfloat16", "buffers", "call_super_init", "children",
    "compile", "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr", "float", "forward",
    "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "ipu", "load_state_dict",
    "modules", "mtia", "named_buffers", "named_children", "named_modules", "named_parameters",
    "parameters", "register_backward_hook", "register_buffer", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_full_backward_pre_hook",
    "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook", "register_module",
    "register_parameter", "register_state_dict_post_hook", "register_state_dict_pre_hook",
    "requires_grad_", "set_extra_state", "set_submodule", "share_memory", "state_dict", "to",
    "to_empty", "train", "training", "type", "xpu", "zero_grad", "cfg"}
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


class CodegenError(Exception):
    """The spec checks but uses something codegen cannot express."""


# ------------------------------------------------------------------ printing sizes

ADD, MUL, UNARY_P, POW, ATOM = 1, 2, 3, 4, 5


class Printer:
    """sympy -> Python. Sizes are whole (`a // b`); scalars are real (`1 / math.sqrt(Dk)`).

    `compact` prints for comments, the way the spec writes sizes (`3*D`, `D/H`).
    Every symbol printed is added to `used`.
    """

    def __init__(self, name, *, real: bool = False, compact: bool = False):
        self.name, self.real, self.compact = name, real, compact
        self.used: set = set()
        self.prec = ATOM   # precedence of the last expression printed

    def __call__(self, e) -> str:
        e = sp.sympify(e)
        if not self.real and e.is_Add and any(sp.fraction(t)[1] != 1 for t in e.args):
            e = sp.together(e)
        text, self.prec = self._expr(e)
        return text

    def _p(self, e, prec: int) -> str:
        text, p = self._expr(e)
        return f"({text})" if p < prec else text

    def _div(self, num, den) -> tuple[str, int]:
        op = "/" if self.compact or self.real else "//"
        sep = op if self.compact else f" {op} "
        return self._p(num, MUL) + sep + self._p(den, UNARY_P), MUL

    def _expr(self, e) -> tuple[str, int]:
        if e.is_Integer:
            return str(int(e)), ATOM if e >= 0 else UNARY_P
        if e.is_Float:
            v = float(e)
            return repr(v), ATOM if v >= 0 else UNARY_P
        if e.is_Rational:
            return self._div(sp.Integer(e.p), sp.Integer(e.q))
        if e.is_Symbol:
            self.used.add(e)
            return self.name(e), ATOM
        if e.is_Add:
            terms = e.as_ordered_terms()
            out = self._p(terms[0], ADD)
            for t in terms[1:]:
                if t.could_extract_minus_sign():
                    out += " - " + self._p(-t, MUL)
                else:
                    out += " + " + self._p(t, ADD)
            return out, ADD
        if e.is_Mul or (e.is_Pow and e.exp.is_negative):
            num, den = sp.fraction(e)
            if den != 1:
                return self._div(num, den)
            coeff, rest = e.as_coeff_Mul()
            if coeff == -1:
                return "-" + self._p(rest, UNARY_P), UNARY_P
            factors = ([coeff] if coeff != 1 else []) + list(sp.Mul.make_args(rest))
            sep = "*" if self.compact else " * "
            return sep.join(self._p(f, MUL if k == 0 else UNARY_P) for k, f in enumerate(factors)), MUL
        if e.is_Pow:
            base, exp = e.args
            if exp == sp.Rational(1, 2):
                return ("sqrt(" if self.compact else "math.sqrt(") + self._p(base, 0) + ")", ATOM
            power = self._p(exp, ATOM) if exp.is_Integer else f"({self._p(exp, 0)})"
            return self._p(base, ATOM) + ("**" if self.compact else " ** ") + power, POW
        if isinstance(e, sp.Mod):
            a, b = e.args
            sep = "%" if self.compact else " % "
            return self._p(a, MUL) + sep + self._p(b, UNARY_P), MUL
        if isinstance(e, sp.floor):
            num, den = sp.fraction(sp.together(e.args[0]))
            if den != 1:
                sep = "//" if self.compact else " // "
                return self._p(num, MUL) + sep + self._p(den, UNARY_P), MUL
            return f"math.floor({self._p(e.args[0], 0)})", ATOM
        if isinstance(e, (sp.Min, sp.Max)):
            fn = "min" if isinstance(e, sp.Min) else "max"
            return f"{fn}({', '.join(self._p(a, 0) for a in e.args)})", ATOM
        raise CodegenError(f"cannot write the size `{e}` in Python")


def _symbols_in(value) -> set:
    """Every sympy symbol inside a step's detail (sizes, scalars, shapes)."""
    if isinstance(value, sp.Basic):
        return set(value.free_symbols)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        out = set()
        for v in value:
            out |= _symbols_in(v)
        return out
    return set()


def _identifier(name: str) -> str:
    name = name.replace("'", "_prime")
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in RESERVED:
        name += "_"
    return name


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


def _camel(stem: str) -> str:
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", stem) if p]
    name = "".join(p[:1].upper() + p[1:] for p in parts) or "Spec"
    return "Spec" + name if name[0].isdigit() else name


class Namer:
    def __init__(self, taken=()):
        self.taken = set(taken)

    def claim(self, want: str, *, escape: bool = True) -> str:
        base = _identifier(want) if escape else want
        name, n = base, 2
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name


# ------------------------------------------------------------------ units

@dataclass
class Unit:
    """One nn.Module class: the whole spec (`block` None) or one instantiation of a block."""
    key: object
    label: str
    block: BlockIR | None
    inputs: list                      # (ref, TensorType, is_anonymous)
    params: list
    buffers: list
    bindings: list
    rename: dict = field(default_factory=dict)   # outer size -> the block's own dim (forward only)
    # pass 1
    arg_names: list = field(default_factory=list)
    init: list = field(default_factory=list)      # __init__ lines after super().__init__()
    body: list = field(default_factory=list)      # forward lines
    needed: set = field(default_factory=set)      # sizes the forward body uses (local names)
    init_syms: set = field(default_factory=set)   # sizes __init__ uses (spec names)
    readable: dict = field(default_factory=dict)  # size -> (arg index, axis)
    returns: list = field(default_factory=list)   # (name, code) returned by forward
    children: list = field(default_factory=list)  # child units, in order
    dead: set = field(default_factory=set)
    # pass 2
    class_name: str = ""
    text: str = ""


@dataclass
class Generated:
    source: str
    module_name: str
    top_class: str
    config_class: str
    fields: list          # (dim name, python field name) of the config
    args: list            # (python name, TensorType, ref) of the top forward, in order
    outputs: list         # (name, ref) returned by the top forward
    returns_dict: bool


class Generator:
    def __init__(self, spec: CheckedSpec, *, instrument: bool = False, name: str | None = None):
        if not spec.ok:
            raise CodegenError("the spec does not check")
        self.spec, self.instrument = spec, instrument
        stem = os.path.splitext(os.path.basename(spec.path or "spec"))[0]
        self.file_name = os.path.basename(spec.path or "spec.shape")
        self.prover = spec.prover
        self.syms = dict(self.prover.user) if self.prover else {}
        self.definitions = {self.syms[k]: v for k, v in spec.definitions.items()}
        self.folds = [(v, self.syms[k]) for k, v in spec.definitions.items()
                      if v.free_symbols and not v.is_Symbol]
        global_names = Namer(RESERVED)
        self.dim_py = {self.syms[n]: global_names.claim(n) for n in spec.dims}
        self.block_names = {ir.name for insts in spec.blocks.values() for ir in insts}
        top = _camel(name or stem)
        if top in self.block_names or top in RESERVED:
            top += "Model"
        self.top_name = top
        self.config_name = top + "Config"
        self.units: dict = {}
        self.order: list = []
        self.uses_math = self.uses_causal = False
        self._by_text: dict[str, str] = {}
        self._class_names = Namer(RESERVED | {self.top_name, self.config_name})

    # -------------------------------------------------------------- helpers
    def fold(self, e):
        e = sp.sympify(e)
        for value, sym in self.folds:
            if value.free_symbols <= e.free_symbols:
                e = e.subs(value, sym)
        return e

    def base_syms(self, s, depth=0) -> set:
        if s not in self.definitions or depth > 50:
            return {s}
        out = set()
        for t in self.definitions[s].free_symbols:
            out |= self.base_syms(t, depth + 1)
        return out

    def local(self, unit: Unit, e, *, real=False, compact=False, record=True, operand=False):
        """Print a size (or scalar) of the forward pass in the unit's local names.

        `operand`: it is the right operand of `*` or another binary operator (parenthesised
        unless it is an atom or a power).
        """
        e = self.fold(sp.sympify(e).xreplace(unit.rename) if unit.rename else e)
        p = Printer(lambda s: self.dim_py[s] if not compact else str(s), real=real, compact=compact)
        text = p(e)
        if operand and p.prec <= MUL:
            text = f"({text})"
        if record and not compact:
            unit.needed |= p.used
        if "math." in text:
            self.uses_math = True
        return text

    def cfg(self, unit: Unit, e, prefix="cfg.") -> str:
        """Print a size of __init__ (a hyper-parameter) as `cfg.D`."""
        p = Printer(lambda s: prefix + self.dim_py[s])
        text = p(self.fold(e))
        unit.init_syms |= p.used
        return text

    def shape_comment(self, unit: Unit, shape) -> str:
        return "(" + ", ".join(self.local(unit, d, compact=True) for d in shape) + ")"

    def types_comment(self, unit: Unit, types) -> str:
        shown = [self.shape_comment(unit, t.shape) for t in types]
        if len(shown) > 1 and len(set(shown)) == 1:
            return f"{shown[0]} each"
        return ", ".join(shown)

    # -------------------------------------------------------------- driver
    def generate(self) -> Generated:
        spec = self.spec
        inputs = [(d.name, d.type, False) for d in spec.decls if d.kind == "input"]
        for b in spec.bindings:
            for s in b.steps:
                if s.op == "input":
                    inputs.append((s.ref, s.out, True))
        top = Unit("top", self.top_name, None, inputs,
                   [d for d in spec.decls if d.kind == "param"],
                   [d for d in spec.decls if d.kind == "buffer"], spec.bindings)
        self.units["top"] = top
        self._build(top)
        self._classify()
        for unit in self.order:          # children before parents
            self._finish(unit)
        self._finish(top)
        return self._assemble(top)

    def _unit_for(self, ir: BlockIR) -> Unit:
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
        saved = (self.refs, self.types, self._names, self._attrs)
        self._build(unit)
        self.refs, self.types, self._names, self._attrs = saved
        self.order.append(unit)
        return unit

    # -------------------------------------------------------------- pass 1: one unit
    def _build(self, unit: Unit) -> None:
        is_top = unit.block is None
        names = Namer(RESERVED | set(self.dim_py.values()) | {self.top_name, self.config_name}
                      | self.block_names)
        attrs = Namer(MODULE_ATTRS)
        self.refs: dict[str, str] = {}
        self.types: dict = {}
        unit.arg_names = []
        for ref, t, anon in unit.inputs:
            if not anon:
                py = names.claim(ref)
                self.refs[ref] = py
                self.types[ref] = t
                unit.arg_names.append(py)
        for d in unit.params + unit.buffers:
            self.refs[d.name] = "self." + attrs.claim(d.name)
            self.types[d.name] = d.type
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
                continue
            for n, r in zip(b.names, b.results):
                dead = r not in used and not is_top
                binding_names[n] = names.claim(("_" if dead else "") + n)
                if dead:
                    unit.dead.add(n)
        self._names, self._attrs = names, attrs
        for ref, t, anon in unit.inputs:   # anonymous inputs: named after their binding
            if anon:
                owner = next(b for b in unit.bindings if any(s.ref == ref for s in b.steps))
                py = names.claim(f"{owner.names[0]}_input")
                self.refs[ref] = py
                self.types[ref] = t
                unit.arg_names.append(py)
        for d in unit.params:
            unit.init.append(f"{self.refs[d.name]} = nn.Parameter({self._param_init(unit, d)})"
                             f"  # {self.shape_comment(unit, d.type.shape)}")
        for d in unit.buffers:
            attr = self.refs[d.name][5:]
            unit.init.append(f'self.register_buffer("{attr}", {self._buffer_init(unit, d)})'
                             f"  # {self.shape_comment(unit, d.type.shape)}, not learned: set its values")
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
            unit.returns = [("return", self.refs[result_ref], result_ref)]

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
            short = MODULE_OPS.get(s.op)
            if s.op == "embed" and s.detail.get("table") is None:
                short = "embed"
            if s.op in ("block", "stack"):
                short = _snake(s.block.name) + ("s" if s.op == "stack" else "")
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
            short = MODULE_OPS.get(s.op)
            if s.op == "embed" and s.detail.get("table") is None:
                short = "embed"
            if s.op in ("block", "stack"):
                short = _snake(s.block.name) + ("s" if s.op == "stack" else "")
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
        op, d = s.op, s.detail
        args = [self.refs.get(r, r) for r in s.inputs]
        x = args[0] if args else ""
        xt = self.types.get(s.inputs[0]) if s.inputs else None
        rank = xt.rank if xt is not None else 0
        f = FUNCTIONAL
        if op in ("view", "reshape"):
            shape = self._sizes(unit, d["shape"], d.get("infer"))
            if op == "reshape" and d.get("copies"):
                return [f"{out} = {x}.contiguous().view({shape})"]
            return [f"{out} = {x}.view({shape})"]
        if op == "transpose":
            i, j = d["dims"]
            if rank >= 3 and {i, j} == {rank - 2, rank - 1}:
                return [f"{out} = {x}.transpose(-2, -1)"]
            return [f"{out} = {x}.transpose({i}, {j})"]
        if op == "permute":
            return [f"{out} = {x}.permute({', '.join(map(str, d['dims']))})"]
        if op == "unsqueeze":
            return [f"{out} = {x}.unsqueeze({d['dim']})"]
        if op == "squeeze":
            dims = [d["dim"]] if d["dim"] is not None else \
                [k for k, size in enumerate(xt.shape) if sp.sympify(size) == 1]
            if len(dims) == 1:
                return [f"{out} = {x}.squeeze({dims[0]})"]
            return [f"{out} = {x}.squeeze(({', '.join(map(str, dims))}{',' if len(dims) == 1 else ''}))"]
        if op == "flatten":
            return [f"{out} = {x}.flatten({d['start']}, {d['end']})"]
        if op == "expand":
            return [f"{out} = {x}.expand({self._sizes(unit, d['shape'])})"]
        if op == "repeat_interleave":
            repeats = self.local(unit, d["repeats"])
            return [f"{out} = {x}.repeat_interleave({repeats}, dim={self._axis(d['dim'], rank)})"]
        if op in ("softmax", "log_softmax"):
            return [f"{out} = {f}.{op}({x}, dim={self._axis(d['dim'], rank)})"]
        if op == "scale":
            factor = self.local(unit, d["factor"], real=True, operand=True)
            return [f"{out} = {x} * {factor}"]
        if op == "mask":
            if d["kind"] == "causal":
                self.uses_causal = True
                rows, cols = self.local(unit, d["rows"]), self.local(unit, d["cols"])
                return [f'{out} = {x}.masked_fill(causal_mask({rows}, {cols}, {x}.device), float("-inf"))']
            m = args[1]
            mt = self.types.get(s.inputs[1])
            if mt is not None and mt.dtype != "bool":
                m = f"{m} != 0"
            return [f'{out} = {x}.masked_fill({m}, float("-inf"))']
        if op == "contiguous":
            return [f"{out} = {x}.contiguous()"]
        if op in UNARY:
            return [f"{out} = " + UNARY[op].replace("F.", f + ".").format(x)]
        if op == "layernorm":
            features = self.cfg(unit, d["features"])
            bias = "" if d.get("bias", True) else ", bias=False"
            unit.init.append(f"self.{attr} = nn.LayerNorm({features}{bias})")
            return [f"{out} = self.{attr}({x})"]
        if op == "rmsnorm":
            unit.init.append(f"self.{attr} = nn.RMSNorm({self.cfg(unit, d['features'])})")
            return [f"{out} = self.{attr}({x})"]
        if op == "linear":
            bias = "" if d["bias"] else ", bias=False"
            unit.init.append(f"self.{attr} = nn.Linear({self.cfg(unit, d['in'])}, "
                             f"{self.cfg(unit, d['out'])}{bias})")
            return [f"{out} = self.{attr}({x})"]
        if op == "dropout":
            unit.init.append(f"self.{attr} = nn.Dropout({d['p']!r})")
            return [f"{out} = self.{attr}({x})"]
        if op == "embed":
            if d.get("table") is None:
                unit.init.append(f"self.{attr} = nn.Embedding({self.cfg(unit, d['vocab'])}, "
                                 f"{self.cfg(unit, d['dim'])})")
                return [f"{out} = self.{attr}({x})"]
            return [f"{out} = {f}.embedding({x}, {args[1]})"]
        if op == "concat":
            return [f"{out} = torch.cat([{', '.join(args)}], dim={self._axis(d['dim'], s.out.rank)})"]
        if op == "split":
            sizes = d["sizes"]
            if len(set(sizes)) == 1:
                what = self.local(unit, sizes[0])
            else:
                what = "[" + ", ".join(self.local(unit, z) for z in sizes) + "]"
            return [f"{out} = {x}.split({what}, dim={self._axis(d['dim'], rank)})"]
        if op == "chunk":
            return [f"{out} = {x}.chunk({d['chunks']}, dim={self._axis(d['dim'], rank)})"]
        if op in ("sum", "mean", "var", "amax"):
            keep = ", keepdim=True" if d.get("keepdim") else ""
            return [f"{out} = {x}.{op}(dim={self._axis(d['dim'], rank)}{keep})"]
        if op == "select":
            index = [":"] * d["dim"] + [self.local(unit, d["index"])]
            return [f"{out} = {x}[{', '.join(index)}]"]
        if op == "slice":
            start = self.local(unit, d["start"]) if d["start"] != 0 else ""
            index = [":"] * d["dim"] + [f"{start}:{self.local(unit, d['end'])}"]
            return [f"{out} = {x}[{', '.join(index)}]"]
        if op == "einsum":
            return [f"{out} = torch.einsum({json.dumps(d['equation'])}, {', '.join(args)})"]
        if op == "rearrange":
            return self._rearrange(unit, s, out, x)
        if op in BINARY:
            if len(args) == 2:
                return [f"{out} = {args[0]} {BINARY[op]} {args[1]}"]
            scalar = self.local(unit, d["scalar"], real=True, operand=True)
            if d.get("scalar_left"):
                return [f"{out} = {scalar} {BINARY[op]} {x}"]
            return [f"{out} = {x} {BINARY[op]} {scalar}"]
        if op == "block":
            child = self._unit_for(s.block)
            unit.children.append(child)
            unit.init.append(f"self.{attr} = \x00C{child.key}\x00(cfg)")
            return [f"{out} = self.{attr}({', '.join(args)})"]
        if op == "stack":
            child = self._unit_for(s.block)
            unit.children.append(child)
            count = self.cfg(unit, d["count"])
            unit.init.append(f"self.{attr} = nn.ModuleList([\x00C{child.key}\x00(cfg) "
                             f"for _ in range({count})])")
            layer = self._names.claim("layer", escape=False)
            lines = [] if out == x else [f"{out} = {x}"]
            extra = "".join(f", {a}" for a in args[1:])
            lines += [f"for {layer} in self.{attr}:", f"    {out} = {layer}({out}{extra})"]
            return lines
        raise CodegenError(f"codegen does not know the operation `{op}`")

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

    # -------------------------------------------------------------- sizes: hyper-parameters
    def _readable(self, unit: Unit) -> None:
        unit.readable = {}
        for k, (ref, t, _anon) in enumerate(unit.inputs):
            for axis, size in enumerate(t.shape):
                size = sp.sympify(size).xreplace(unit.rename) if unit.rename else sp.sympify(size)
                if size.is_Symbol and size not in unit.readable:
                    unit.readable[size] = (k, axis)

    def _classify(self) -> None:
        units = [self.units["top"]] + self.order
        for u in units:
            self._readable(u)
        fields = set()
        for u in units:
            for s in u.init_syms:
                fields |= self.base_syms(s)
        top = self.units["top"]
        self.init_asserts, self.forward_asserts = [], []
        while True:
            changed = False
            for u in units:
                for s in sorted(u.needed, key=str):
                    if not self._available(u, s, fields):
                        fields |= {b for b in self.base_syms(s) if not self._available(u, b, fields)}
                        changed = True
            init_asserts, forward_asserts = [], []
            for a, cmp, b, stmt in self.spec.assumptions:
                syms = sp.sympify(a).free_symbols | sp.sympify(b).free_symbols
                if all(self._in_config(x, fields) for x in syms):
                    init_asserts.append((a, cmp, b, stmt))
                else:
                    forward_asserts.append((a, cmp, b, stmt))
                    if not syms <= top.needed:
                        top.needed |= syms
                        changed = True
            if not changed:
                break
        self.fields = fields
        self.init_asserts, self.forward_asserts = init_asserts, forward_asserts

    def _in_config(self, s, fields) -> bool:
        return s in fields or (s in self.definitions and self.base_syms(s) <= fields)

    def _available(self, u: Unit, s, fields, depth=0) -> bool:
        if s in u.readable or self._in_config(s, fields):
            return True
        if s in self.definitions and depth < 50:
            return all(self._available(u, t, fields, depth + 1) for t in self.definitions[s].free_symbols)
        return False

    def _preamble(self, unit: Unit) -> list[str]:
        fields = self.fields
        bound, plan = set(), {}

        def need(s, depth=0):
            if s in plan or depth > 50:
                return
            # a hyper-parameter is read from the first input (`B, S, D = x.shape`), else from the config
            in_config = self._in_config(s, fields)
            if s in unit.readable and (unit.readable[s][0] == 0 or not in_config):
                plan[s] = "input"
            elif in_config:
                plan[s] = "config"
            else:
                plan[s] = "derived"
                for t in sorted(self.definitions[s].free_symbols, key=str):
                    need(t, depth + 1)

        for s in sorted(unit.needed, key=str):
            need(s)
        lines = []
        for k, (ref, t, _anon) in enumerate(unit.inputs):
            names = []
            for axis, size in enumerate(t.shape):
                size = sp.sympify(size).xreplace(unit.rename) if unit.rename else sp.sympify(size)
                if size.is_Symbol and plan.get(size) == "input" and unit.readable[size] == (k, axis):
                    names.append(self.dim_py[size])
                    bound.add(size)
                else:
                    names.append("_")
            if any(n != "_" for n in names):
                arg = unit.arg_names[k]
                if len(names) == 1:
                    lines.append(f"{names[0]} = {arg}.shape[0]")
                elif sum(n != "_" for n in names) == 1 and len(names) > 3:
                    axis = next(a for a, n in enumerate(names) if n != "_")
                    lines.append(f"{names[axis]} = {arg}.shape[{axis}]")
                else:
                    lines.append(f"{', '.join(names)} = {arg}.shape")
        order = [self.syms[n] for n in self.spec.dims]
        config = [s for s in order if plan.get(s) == "config"]
        if config:
            lhs = ", ".join(self.dim_py[s] for s in config)
            rhs = ", ".join(f"self.cfg.{self.dim_py[s]}" for s in config)
            lines.append(f"{lhs} = {rhs}")
        done = bound | set(config)
        pending = [s for s in order if plan.get(s) == "derived"]
        while pending:
            for s in pending:
                if self.definitions[s].free_symbols <= done:
                    p = Printer(lambda x: self.dim_py[x])
                    lines.append(f"{self.dim_py[s]} = {p(self.definitions[s])}")
                    done.add(s)
                    pending.remove(s)
                    break
            else:
                raise CodegenError("cannot order the derived sizes")
        if unit.block is None:
            for a, cmp, b, stmt in self.forward_asserts:
                p = Printer(lambda x: self.dim_py[x])
                lines.append(f"assert {p(a)} {cmp} {p(b)}, {json.dumps(stmt.text)}")
        return lines

    # -------------------------------------------------------------- pass 2: text
    def _finish(self, unit: Unit) -> None:
        if unit.class_name:
            return
        init = list(unit.init)
        for child in unit.children:
            self._finish(child)
        init = [self._child_names(line) for line in init]
        preamble = self._preamble(unit)
        is_top = unit.block is None
        lines = []
        if is_top:
            lines.append(f'    """The whole of {self.file_name}."""')
        else:
            args = ", ".join(f"{n}: [{', '.join(self.local(unit, x, compact=True, record=False) for x in t.shape)}]"
                             for (n, t, _a) in unit.inputs)
            lines.append(f'    """block {unit.label}({args})."""')
        lines += ["", f"    def __init__(self, cfg: {self.config_name}):", "        super().__init__()"]
        if is_top:
            for a, cmp, b, stmt in self.init_asserts:
                p = Printer(lambda x: "cfg." + self.dim_py[x])
                lines.append(f"        assert {p(a)} {cmp} {p(b)}, {json.dumps(stmt.text)}")
        if any("self.cfg." in line for line in preamble):
            lines.append("        self.cfg = cfg")
        lines += ["        " + line for line in init]
        arg_list = "".join(f", {a}: torch.Tensor" for a in unit.arg_names)
        if is_top:
            if len(unit.returns) == 1:
                ret_t, ret = "torch.Tensor", unit.returns[0][1]
            elif unit.returns:
                ret_t = "dict[str, torch.Tensor]"
                ret = "{" + ", ".join(f'"{n}": {py}' for n, py, _r in unit.returns) + "}"
            else:
                ret_t, ret = "None", None
        else:
            ret_t, ret = "torch.Tensor", unit.returns[0][1]
        lines += ["", f"    def forward(self{arg_list}) -> {ret_t}:"]
        body = preamble + unit.body
        lines += ["        " + line for line in body]
        if ret is not None:
            lines.append(f"        return {ret}")
        elif not body:
            lines.append("        pass")
        unit.text = "\n".join(lines)
        if is_top:
            unit.class_name = self.top_name
            return
        if not self.instrument and unit.text in self._by_text:
            unit.class_name = self._by_text[unit.text]
            unit.text = ""
            return
        unit.class_name = self._class_names.claim(unit.label, escape=False) \
            if unit.label not in RESERVED else self._class_names.claim(unit.label + "Block", escape=False)
        self._by_text[unit.text] = unit.class_name

    def _child_names(self, line: str) -> str:
        def sub(m):
            key = m.group(1)
            unit = next(u for u in self.units.values() if str(u.key) == key)
            return unit.class_name
        return re.sub("\x00C([^\x00]*)\x00", sub, line)

    # -------------------------------------------------------------- the file
    def _assemble(self, top: Unit) -> Generated:
        spec = self.spec
        local_names = set()
        for u in [top] + self.order:
            for line in u.text.split("\n"):
                m = re.match(r"\s*([\w, ]+) = ", line)
                if m:
                    local_names |= {n.strip() for n in m.group(1).split(",")}
            local_names |= set(u.arg_names)
        alias = "F" if "F" not in local_names else "nnf"
        uses_functional = any(FUNCTIONAL in u.text for u in [top] + self.order)
        fields = [(n, self.dim_py[self.syms[n]]) for n in spec.dims
                  if n not in spec.definitions and self.syms[n] in self.fields]
        props = [n for n in spec.dims if n in spec.definitions and self.base_syms(self.syms[n]) <= self.fields]
        with_defaults = all(n in spec.example for n, _ in fields)
        args = [(unit_arg, t, ref) for unit_arg, (ref, t, _anon) in zip(top.arg_names, top.inputs)]
        out = ['"""' + self._docstring(top, args) + '"""']
        if self.uses_math:
            out.append("import math")
        out.append("from dataclasses import dataclass")
        out += ["", "import torch"]
        if uses_functional:
            out.append(f"import torch.nn.functional as {alias}")
        out += ["from torch import nn", "", ""]
        out += ["@dataclass", f"class {self.config_name}:",
                '    """Hyper-parameters: the sizes fixed when the module is built."""']
        if fields:
            out.append("")
        for n, py in fields:
            default = f" = {spec.example[n]}" if with_defaults else ""
            out.append(f"    {py}: int{default}")
        constants = [n for n in props if not self.definitions[self.syms[n]].free_symbols]
        if constants:
            out += ["", "    # fixed by the spec: class constants, not fields"]
        for n in constants:
            p = Printer(lambda x: "self." + self.dim_py[x])
            out.append(f"    {self.dim_py[self.syms[n]]} = {p(self.definitions[self.syms[n]])}")
        for n in props:
            if n in constants:
                continue
            p = Printer(lambda x: "self." + self.dim_py[x])
            out += ["", "    @property", f"    def {self.dim_py[self.syms[n]]}(self) -> int:",
                    f"        return {p(self.definitions[self.syms[n]])}"]
        if self.uses_causal:
            out += ["", "", "def causal_mask(rows: int, cols: int, device: torch.device) -> torch.Tensor:",
                    '    """True above the diagonal: the keys a query may not look at."""',
                    "    return torch.ones(rows, cols, dtype=torch.bool, device=device).triu(1)"]
        for u in self.order + [top]:
            if u.text:
                out += ["", "", f"class {u.class_name}(nn.Module):", u.text]
        source = "\n".join(out) + "\n"
        source = source.replace(FUNCTIONAL, alias)
        outputs = [(n, r) for n, _py, r in top.returns]
        return Generated(source, _identifier(os.path.splitext(self.file_name)[0]), self.top_name,
                         self.config_name, fields, args, outputs, len(top.returns) > 1)

    def _docstring(self, top: Unit, args) -> str:
        def shape(t):
            return self.shape_comment(top, t.shape)
        lines = [f"{self.top_name} in PyTorch, generated by shapelang from {self.file_name}.", "",
                 "One nn.Module per block and one for the whole spec, with the spec's names;",
                 "each line of forward is one operation, its shape in the comment.",
                 "",
                 f"Sizes: the hyper-parameters in `{self.config_name}` are the sizes that fix",
                 "a weight or buffer shape, a layer width, an embedding table or a stack depth,",
                 "plus any size that no input shows. Every other size is read from the inputs",
                 "in forward, e.g. `B, S, D = x.shape`. Each assumption is an `assert`.",
                 f"`shapelang run {self.file_name}` runs this code and compares every shape",
                 "with the one the checker proved.",
                 "", "Inputs:"]
        dtypes = {"float": "float32", "int": "int64 (torch.long)", "bool": "bool"}
        for py, t, _ref in args:
            lines.append(f"    {py}: {shape(t)} {dtypes.get(t.dtype, t.dtype)}")
        lines.append("Returns:")
        refs_types = {}
        for b in self.spec.bindings:
            for n, r, t in zip(b.names, b.results, b.types):
                refs_types[n] = t
        for n, _py, _r in top.returns:
            lines.append(f"    {n}: {shape(refs_types[n])}")
        if not top.returns:
            lines.append("    nothing")
        lines.append("")
        return "\n".join(lines)


def generate(spec: CheckedSpec, *, instrument: bool = False) -> Generated:
    """The PyTorch module for a checked spec (CodegenError if it cannot be written)."""
    return Generator(spec, instrument=instrument).generate()


# ------------------------------------------------------------------ writing files

def write_atomic(path: str, text: str, *, force: bool) -> None:
    """Write `text` to `path` through a temporary file; refuse to replace a file unless `force`."""
    if not force and os.path.lexists(path):
        raise FileExistsError(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".shapelang-", suffix=".py", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        if force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)      # fails if the file appeared meanwhile: never clobber
            except FileExistsError:
                raise
            except OSError:
                if os.path.lexists(path):
                    raise FileExistsError(path) from None
                os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def cli(args) -> int:
    """`shapelang codegen` and `shapelang run`: 0 ok, 1 findings, 2 usage or I/O."""
    if args.command == "run":
        from . import runner
        return runner.cli(args)
    from . import render
    from .checker import check_text
    try:
        with open(args.file, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as err:
        print(f"shapelang: cannot read {args.file}: {err.strerror}", file=sys.stderr)
        return 2
    spec = check_text(text, args.file)
    if not spec.ok:
        sys.stderr.write(render.check_text(spec))
        print(f"shapelang: no code for {args.file}: it does not check", file=sys.stderr)
        return 1
    if spec.diagnostics:   # warnings only
        sys.stderr.write(render.check_text(spec))
    try:
        source = generate(spec).source
    except CodegenError as err:
        print(f"shapelang: cannot generate code for {args.file}: {err}", file=sys.stderr)
        return 1
    if not args.output:
        sys.stdout.write(source)
        return 0
    try:
        write_atomic(args.output, source, force=args.force)
    except FileExistsError:
        print(f"shapelang: {args.output} exists; add --force to overwrite it", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"shapelang: cannot write {args.output}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
