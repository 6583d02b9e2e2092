"""Codegen, sizes and names: checked dims -> Python expressions and identifiers.

Input: the sympy sizes and scalars of a `CheckedSpec` and the spec's names.
Output: Python text for them (`Printer`: `D // H`, `1 / math.sqrt(Dk)`),
collision-free identifiers (`Namer`), and the split of sizes into
hyper-parameters of the config and sizes read from the inputs in `forward`
(`SizesMixin`, mixed into `codegen.Generator`), with the `forward` preamble that
binds them (`B, S, D = x.shape`).
"""
from __future__ import annotations

import json
import keyword
import re
from typing import TYPE_CHECKING

import sympy as sp

if TYPE_CHECKING:
    from .generator import Unit

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

class SizesMixin:
    """The sizes half of `codegen.Generator`: printing sizes, and which are hyper-parameters."""

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
