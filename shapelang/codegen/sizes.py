"""Codegen, sizes: which sizes are hyper-parameters, and sizes as Python text.

Input: the sympy sizes and scalars of a `CheckedSpec` and the units being
written. Output: Python text for a size in a unit's local names (`local`) or in
the config (`cfg`), shape comments, the split of sizes into config fields and
sizes read from the inputs in `forward`, and the `forward` preamble that binds
them (`B, S, D = x.shape`).
"""
from __future__ import annotations

import sympy as sp

from ..checker.ir import CheckedSpec
from .naming import DATACLASS_NAMES, MUL, RESERVED, CodegenError, Namer, Printer, py_str
from .units import Unit


class Sizes:
    """The sizes of one spec: their Python names, how to print them, and which are
    hyper-parameters (config fields) and which `forward` reads from its inputs."""

    def __init__(self, spec: CheckedSpec):
        self.spec = spec
        self.prover = spec.prover
        self.syms = dict(self.prover.user) if self.prover else {}
        # a size the spec fixes (`dim V = 50257`) is a config field with that default, not a
        # constant: `Config(V=1000)` builds a smaller model (the proofs were made at the value)
        self.fixed = {self.syms[k]: int(v) for k, v in spec.definitions.items() if not v.free_symbols}
        self.definitions = {self.syms[k]: v for k, v in spec.definitions.items() if v.free_symbols}
        self.folds = [(v, self.syms[k]) for k, v in spec.definitions.items()
                      if v.free_symbols and not v.is_Symbol]
        # a dim is a config field and a local of forward: no `_x`, nothing a dataclass uses
        names = Namer(reserved=RESERVED | DATACLASS_NAMES, private=False)
        self.dim_py = {self.syms[n]: names.claim(n) for n in spec.dims}
        self.fields: set = set()
        self.extra: dict = {}         # config fields that are not sizes: name -> (type, default)
        self._extra_key: dict = {}
        self.init_asserts: list = []
        self.forward_asserts: list = []
        self.uses_math = False
        self.in_init = False          # writing __init__: every size is a hyper-parameter (tables.py)
        # the size parameters declared by blocks alone (not config fields)
        self.block_sizes = {self.syms[n] for n in getattr(spec, "size_params", {}) if n in self.syms}
        # and the dims bound only at block calls (`block Stage(x: [B, R, R, C])`): an assumption
        # about them is the blocks', proved at each call, not a check of the config
        self.block_sizes |= {self.syms[n] for n in getattr(spec, "call_bound", ()) if n in self.syms}
        # of which those a call binds (a derived size is computed, never bound): a class written
        # for every call takes the ones it needs as constructor arguments (generic.py)
        self.bound_dims = self.block_sizes - {self.syms[n] for n in spec.definitions if n in self.syms}

    # -------------------------------------------------------------- helpers
    def hparam(self, kind: str, value, typ: str = "float") -> str:
        """The config field holding a dropout probability or a norm's eps, by value:
        `dropout` for the first value, `dropout_2` for a second one, ...

        A float field holds a float even when the spec writes `dropout 0`: an int default
        would type the field int, which torch.jit.script then refuses in `nn.Dropout`."""
        if typ == "float":
            value = float(value)
        key = (kind, typ, value)
        if key not in self._extra_key:
            n = sum(1 for k in self._extra_key if k[0] == kind)
            name = kind if n == 0 else f"{kind}_{n + 1}"
            while name in self.dim_py.values() or name in self.extra:
                name += "_"
            self._extra_key[key] = name
            self.extra[name] = (typ, value)
        return self._extra_key[key]

    def fold(self, e):
        e = sp.sympify(e)
        for value, sym in self.folds:
            if value.free_symbols <= e.free_symbols:
                folded = e.subs(value, sym)
                # sympy folds `N = W*W` into a lone W as sqrt(N): a size is not a root
                if not any(not q.exp.is_Integer and q.base.has(sym) for q in folded.atoms(sp.Pow)):
                    e = folded
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
        if self.in_init and not compact:
            return self.cfg(unit, e, real=real, operand=operand)
        e = self.fold(renamed(sp.sympify(e), unit.rename) if unit.rename else e)
        p = Printer(lambda s: self._py(s) if not compact else str(s), real=real, compact=compact)
        text = p(e)
        if operand and p.prec <= MUL:
            text = f"({text})"
        if record and not compact:
            unit.needed |= p.used
        if "math." in text:
            self.uses_math = True
        return text

    def _py(self, s) -> str:
        if s not in self.dim_py and self.prover is not None and s in self.prover.unbacked:
            raise CodegenError(f"the size {s} depends on the values (it comes from `where`, `nonzero` or "
                               "`masked_select`); the generated code cannot name it here")
        return self.dim_py[s]

    def cfg(self, unit: Unit, e, prefix="cfg.", *, real=False, operand=False) -> str:
        """Print a size of __init__ (a hyper-parameter) as `cfg.D`; a size parameter of the
        block is its constructor argument (`F`). `real`, `operand`: as for `local`."""
        if unit.size_rename:
            e = renamed(sp.sympify(e), unit.size_rename)
        e = self.fold(e)
        if unit.block is not None:
            # a dim bound at the calls of an outer block (its constructor argument) is never a
            # config field: it is passed on (`WindowAttention(cfg, NH, C)` inside `SwinBlock`)
            for s in sorted(sp.sympify(e).free_symbols & self.bound_dims, key=str):
                if s not in unit.size_args:
                    unit.size_args[s] = s
                    unit.bound_args.add(s)
                    if not unit.generic:
                        unit.passed[s] = s
        own = set(unit.size_args)
        p = Printer(lambda s: self.dim_py[s] if s in own else prefix + self.dim_py[s], real=real)
        text = p(e)
        if operand and p.prec <= MUL:
            text = f"({text})"
        if "math." in text:
            self.uses_math = True
        unit.init_syms |= p.used - own
        unit.init_own |= p.used & own
        return text

    def shape_comment(self, unit: Unit, shape) -> str:
        return "(" + ", ".join(self.local(unit, d, compact=True) for d in shape) + ")"

    def types_comment(self, unit: Unit, types) -> str:
        shown = [self.shape_comment(unit, t.shape) for t in types]
        if len(shown) > 1 and len(set(shown)) == 1:
            return f"{shown[0]} each"
        return ", ".join(shown)

    # -------------------------------------------------------------- sizes: hyper-parameters
    def readable(self, unit: Unit) -> None:
        unit.readable = {}
        for k, (ref, t, _anon) in enumerate(unit.inputs):
            for axis, size in enumerate(t.shape):
                size = sp.sympify(size).xreplace(unit.rename) if unit.rename else sp.sympify(size)
                if size.is_Symbol and size not in unit.readable:
                    unit.readable[size] = (k, axis)

    def classify(self, units: list[Unit]) -> None:
        """Decide the config fields and where each assumption is asserted (units[0]: the top)."""
        for u in units:
            self.readable(u)
        fields = set()
        for u in units:
            for s in u.init_syms:
                fields |= self.base_syms(s)
        top = units[0]
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
                if syms & self.block_sizes:
                    continue      # about a block's size parameter: asserted in that block
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
        if s in u.readable or s in u.size_args or self._in_config(s, fields):
            return True
        if s in self.definitions and depth < 50:
            return all(self._available(u, t, fields, depth + 1) for t in self.definitions[s].free_symbols)
        return False

    def size_asserts(self, unit: Unit) -> list[tuple]:
        """The assumptions about a block's size parameters, for its __init__: `assert F % 2 == 0`."""
        own = set(unit.size_args)
        out = []
        for a, cmp, b, stmt in self.spec.assumptions:
            syms = sp.sympify(a).free_symbols | sp.sympify(b).free_symbols
            if own and syms & own and syms <= own | self.fields:
                out.append((a, cmp, b, stmt))
        return out

    def preamble(self, unit: Unit) -> list[str]:
        fields = self.fields
        bound, plan = set(), {}

        def need(s, depth=0):
            if s in plan or depth > 50:
                return
            # a hyper-parameter is read from the first input (`B, S, D = x.shape`), else from the config
            in_config = self._in_config(s, fields)
            if s in unit.size_args and not (s in unit.bound_args and s in unit.readable):
                plan[s] = "config"      # `F = self.F`, set from the constructor argument
            elif s in unit.readable and (unit.readable[s][0] == 0 or not in_config):
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
        unit.config_sizes = config
        if config and not unit.function:
            # sizes are plain ints on the module (`self.H = cfg.H`), so torch.jit.script works
            for s in config:
                if s not in unit.size_attrs:
                    unit.size_attrs[s] = unit.attrs.claim(self.dim_py[s])
            lhs = ", ".join(self.dim_py[s] for s in config)
            rhs = ", ".join(f"self.{unit.size_attrs[s]}" for s in config)
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
                lines.append(f"assert {p(a)} {cmp} {p(b)}, {py_str(stmt.text)}")
        return lines


def renamed(e, rename: dict):
    """`e` with outer sizes written as a block's own dims; a size given to a size parameter
    may be an expression (`4*D` -> F), found inside larger ones too (`8*D` -> 2*F)."""
    e = e.xreplace(rename)
    for outer, local in rename.items():
        if not outer.is_Symbol and not outer.is_Number and e.has(*outer.free_symbols):
            e = e.subs(outer, local)
    return e


class DataSize(int):
    """A data-dependent size (`where(M)`, `nonzero`) in `run`'s expected shapes: any whole
    number from 0 to its bound matches it; it prints as `N_tok<=12` (its value is the bound,
    which is what a JSON report gives)."""

    def __new__(cls, name: str, bound: int):
        out = super().__new__(cls, bound)
        out.name = name
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, int) and 0 <= other <= int(self)

    __hash__ = int.__hash__

    def __str__(self) -> str:
        return f"{self.name}<={int(self)}"

    __repr__ = __str__


def expected_size(e, spec: CheckedSpec, sizes: dict, value_at) -> int:
    """A size of a proved shape at `sizes`; a data-dependent one as a DataSize of its bound."""
    unbacked = spec.prover.unbacked if spec.prover is not None else {}
    e = sp.sympify(e)
    if e.is_Symbol and e in unbacked:
        return DataSize(str(e), value_at(unbacked[e], spec, sizes))
    if e.free_symbols & set(unbacked):
        bounds = {u: unbacked[u] for u in e.free_symbols & set(unbacked)}
        return DataSize(str(e), value_at(e.xreplace(bounds), spec, sizes))
    return value_at(e, spec, sizes)
