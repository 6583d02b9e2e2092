"""Run stage: generate, build at concrete sizes, run forward, compare every shape.

Input: a checked spec and sizes (the example, or --sizes merged over it).
Output: a report with one row per step: the shape the checker proved,
evaluated at the sizes, next to the shape the generated PyTorch code produced.
The instrumented variant of the generated module records each step; the clean
module (the one `codegen` writes) gets the same weights and must give the same
outputs. torch is imported here only, never at the package's import time.
"""
from __future__ import annotations

import random
import re
import sys
import types
from dataclasses import dataclass, field

import sympy as sp

from ..checker import dims as dimlib
from ..checker import dtypes
from ..checker.ir import CheckedSpec
from ..checker.ops.table import MOVES, moving
from .generator import Generated, generate
from .sizes import expected_size

# steps whose output holds its inputs' values (token ids keep their vocabulary through them)
PASS_THROUGH = moving(*MOVES)


class SizesError(Exception):
    """Sizes that are malformed or break the spec's assumptions."""


# ------------------------------------------------------------------ sizes

def parse_sizes(text: str | None) -> dict[str, int]:
    """`B=2,S=7` -> {"B": 2, "S": 7}."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*'?)\s*=\s*(-?[0-9]+)", item)
        if not m:
            raise SizesError(f"cannot read `{item}`: write sizes as NAME=NUMBER, e.g. --sizes B=2,S=7")
        if len(m.group(2).lstrip("-0")) > 18:
            raise SizesError(f"`{item}`: the size is too large to build")
        out[m.group(1)] = int(m.group(2))
    return out


def resolve_sizes(spec: CheckedSpec, overrides: dict[str, int] | None = None) -> dict[str, int]:
    """Every dim's value: the example, overridden; derived dims computed; assumptions checked."""
    p = spec.prover
    # a size the spec fixes (`dim L = 12`) is a config field with that default: it can be set
    fixed = {n for n, e in spec.definitions.items() if not e.free_symbols}
    base = [n for n in spec.dims if n not in spec.definitions or n in fixed]
    values = {n: int(spec.definitions[n]) for n in fixed}
    values.update({n: v for n, v in (spec.example or spec.example_given).items() if n in base and n not in fixed})
    given_derived = {}
    for name, v in (overrides or {}).items():
        if name not in p.user:
            raise SizesError(f"`{name}` is not a dim of {spec.path}; its dims are {', '.join(spec.dims)}")
        if v < (p.user[name] not in p.zero_ok):
            raise SizesError(f"{name}={v}: sizes are positive whole numbers"
                             + (" (0 only for a dim with `assume {name} >= 0`)" if v == 0 else ""))
        if name in spec.definitions and name not in fixed:
            given_derived[name] = v
        else:
            values[name] = v
    missing = [n for n in base if n not in values and n not in spec.call_bound]
    if missing:
        raise SizesError(f"no size for {', '.join(missing)}: the spec's example does not give "
                         f"{'it' if len(missing) == 1 else 'them'}; add --sizes "
                         + ",".join(f"{n}=..." for n in missing))
    env = {p.user[n]: v for n, v in values.items()}
    _check_assumptions(spec, env, only_known=True)   # name a broken `assume` before a derived dim
    open_ = {p.user[n] for n in spec.call_bound} - set(env)   # bound at block calls, not given
    pending = {n: e for n, e in spec.definitions.items() if n not in fixed and not e.free_symbols & open_}
    while pending:
        ready = [n for n, e in pending.items() if e.free_symbols <= set(env)]
        if not ready:
            raise SizesError(f"cannot work out {', '.join(pending)}")
        for name in ready:
            value = pending.pop(name)
            v = p.value(value, env)
            iv = dimlib.as_int(v) if v is not None else None
            if iv is None or iv < 1:
                shown = dimlib.fmt_value(v) if v is not None else "undefined"
                raise SizesError(f"at these sizes `{name} = {value}` is {shown}, not a whole positive "
                                 "number")
            env[p.user[name]] = iv
    for name, v in given_derived.items():
        if env[p.user[name]] != v:
            raise SizesError(f"`{name}` is derived: {name} = {spec.definitions[name]} = "
                             f"{env[p.user[name]]} at these sizes, not {v}; set the sizes it is made of")
    _check_assumptions(spec, env, only_known=False, open_=open_)
    return {n: env[p.user[n]] for n in spec.dims if p.user[n] in env}


def _check_assumptions(spec: CheckedSpec, env: dict, *, only_known: bool, open_=frozenset()) -> None:
    """Each assumption at the sizes of `env`; one about a size bound at block calls and not
    given (`assume F % 64 == 0` for a block's `dim F`) was proved at each call instead."""
    p = spec.prover
    for a, cmp, b, stmt in spec.assumptions:
        if only_known and not (a.free_symbols | b.free_symbols) <= set(env):
            continue
        if (a.free_symbols | b.free_symbols) & set(open_):
            continue
        va, vb = p.value(a, env), p.value(b, env)
        if va is None or vb is None or not dimlib._CMP[cmp](va, vb):
            shown = [dimlib.fmt_value(v) if v is not None else "?" for v in (va, vb)]
            if isinstance(a, sp.Mod) and shown[0] != "?":
                x, y = (dimlib.fmt_value(p.value(t, env)) for t in a.args)
                why = f"{x} % {y} is {shown[0]}"
            else:
                why = f"{a} {cmp} {b} is {shown[0]} {cmp} {shown[1]}"
            raise SizesError(f"the sizes break `{stmt.text}`: {why}")


def random_sizes(spec: CheckedSpec, seed: int, *, high: int = 6, tries: int = 500) -> dict[str, int] | None:
    """A valid size assignment drawn deterministically from `seed` (None if none is found).

    Draws the prover's free variables (`assume D % H == 0` makes D = H*k, so
    H and k are drawn), which satisfies the divisibility assumptions by
    construction; the rest are checked.
    """
    p = spec.prover
    rng = random.Random(seed)
    free = p.free_vars()
    base = [n for n in spec.dims if n not in spec.definitions]
    for _ in range(tries):
        canon = {v: rng.randint(1, high) for v in free}
        env = p._to_user(canon)
        if env is None:
            continue
        try:
            return resolve_sizes(spec, {n: env[p.user[n]] for n in base})
        except SizesError:
            continue
    return None


def value_at(e, spec: CheckedSpec, sizes: dict[str, int]) -> int:
    env = {spec.prover.user[n]: v for n, v in sizes.items()}
    v = dimlib.evaluate(sp.sympify(e), env)
    iv = dimlib.as_int(v)
    if iv is None:
        raise SizesError(f"{e} is {dimlib.fmt_value(v)} at these sizes")
    return iv


# ------------------------------------------------------------------ building

def load_module(source: str, name: str, extra: dict | None = None) -> types.ModuleType:
    """Import generated source as a fresh module (registered in sys.modules for dataclasses)."""
    mod = types.ModuleType(name)
    mod.__dict__.update(extra or {})
    sys.modules[name] = mod
    code = compile(source, f"<shapelang {name}>", "exec")
    exec(code, mod.__dict__)  # noqa: S102 - our own generated code
    return mod


_counter = [0]


def build(gen: Generated, sizes: dict[str, int], *, seed: int = 0, meta: bool = False, extra=None):
    """Instantiate the generated module at `sizes`: (module object, model in eval mode)."""
    torch = _import_torch()

    _counter[0] += 1
    mod = load_module(gen.source, f"shapelang_generated_{gen.module_name}_{_counter[0]}", extra)
    cfg = getattr(mod, gen.config_class)(**{py: sizes[n] for n, py in gen.fields})
    torch.manual_seed(seed)
    if meta:
        with torch.device("meta"):
            model = getattr(mod, gen.top_class)(cfg)
    else:
        model = getattr(mod, gen.top_class)(cfg)
    return mod, model.eval()


def _vocab_bounds(spec: CheckedSpec, sizes) -> dict[str, int]:
    """For each int input, the smallest vocabulary of an embedding it feeds."""
    scopes = []       # (scope key, steps by ref); the key is "top" or id(BlockIR)
    links: dict = {}  # (id(BlockIR), block input name) -> [(caller's scope key, argument ref)]
    seen = set()

    def visit(key, bindings):
        by_ref = {s.ref: s for b in bindings for s in b.steps}
        scopes.append((key, by_ref))
        for s in by_ref.values():
            if s.block is not None:
                for decl, arg in zip(s.block.inputs, s.inputs):
                    links.setdefault((id(s.block), decl.name), []).append((key, arg))
                if id(s.block) not in seen:
                    seen.add(id(s.block))
                    visit(id(s.block), s.block.bindings)

    visit("top", spec.bindings)
    by_key = dict(scopes)
    top_inputs = {d.name for d in spec.decls if d.kind == "input"}

    def origins(key, ref, depth=0) -> set:
        if depth > 200:
            return set()
        if key == "top" and ref in top_inputs:
            return {ref}
        if (key, ref) in links:
            out = set()
            for parent, arg in links[(key, ref)]:
                out |= origins(parent, arg, depth + 1)
            return out
        step = by_key[key].get(ref.split(".")[0])
        if step is None or step.op not in PASS_THROUGH:
            return set()
        refs = step.inputs if step.op == "concat" else step.inputs[:1]
        out = set()
        for r in refs:
            out |= origins(key, r, depth + 1)
        return out

    bounds: dict[str, int] = {}
    for key, by_ref in scopes:
        for s in by_ref.values():
            if s.op == "embed":
                vocab = value_at(s.detail["vocab"], spec, sizes)
                for name in origins(key, s.inputs[0]):
                    bounds[name] = min(bounds.get(name, vocab), vocab)
    return bounds


def make_inputs(spec: CheckedSpec, gen: Generated, sizes: dict[str, int], *, seed: int = 0) -> list:
    """Random inputs: floats ~ N(0, 1), ids below the vocabulary they index, sparse bool masks."""
    torch = _import_torch()

    g = torch.Generator().manual_seed(seed)
    bounds = _vocab_bounds(spec, sizes)
    out = []
    for _py, t, ref in gen.args:
        shape = [value_at(d, spec, sizes) for d in t.shape]
        kind = dtypes.kind(t.dtype)
        if kind == "int":
            high = min(bounds.get(ref, 2), 100 if t.dtype in ("int8", "uint8") else bounds.get(ref, 2))
            out.append(torch.randint(0, high, shape, generator=g, dtype=_torch_dtype(t.dtype)))
        elif kind == "bool":
            out.append(torch.rand(shape, generator=g) < 0.2)
        else:
            out.append(torch.randn(shape, generator=g).to(_torch_dtype(t.dtype)))
    return out


# ------------------------------------------------------------------ running

@dataclass
class Row:
    step: int
    line: int
    where: str
    op: str
    expected: list          # one shape per output
    dtype: str
    got: list = field(default_factory=list)   # per call: one shape per output
    dtype_ok: bool = True
    dtype_got: str = ""
    depth: int = 0
    dtypes: tuple = ()      # one dtype per output (topk gives float values and int indices)

    @property
    def ok(self) -> bool:
        return bool(self.got) and self.dtype_ok and all(g == self.expected for g in self.got)


@dataclass
class Report:
    path: str
    sizes: dict
    rows: list
    params_expected: int
    params_got: int | None = None
    clean_same: bool | None = None
    error: str | None = None
    built: bool = True     # False: the module was not built (its config refused the sizes), no step ran

    @property
    def ok(self) -> bool:
        return (self.error is None and all(r.ok for r in self.rows)
                and self.params_got == self.params_expected and self.clean_same is not False)


def _rows(spec: CheckedSpec, sizes) -> list[Row]:
    rows, seen = [], set()

    def walk(bindings, prefix, depth):
        for b in bindings:
            label = prefix + ("return" if b.names == ("return",) else ", ".join(b.names))
            for s in b.steps:
                rows.append(Row(s.id, s.span.line, label, s.text,
                                [[expected_size(d, spec, sizes, value_at) for d in t.shape] for t in s.outputs],
                                s.out.dtype, depth=depth, dtypes=tuple(t.dtype for t in s.outputs)))
                if s.block is not None and id(s.block) not in seen:
                    seen.add(id(s.block))
                    walk(s.block.bindings, s.block.name + ".", depth + 1)

    walk(spec.bindings, "", 0)
    return rows


def _dtype_name(t) -> str:
    """A torch tensor's dtype in the spec's names (torch.int64 -> int)."""
    name = str(t.dtype).removeprefix("torch.")
    return dtypes.canonical(name) or name


def _torch_dtype(name: str):
    return getattr(_import_torch(), dtypes.torch_name(name))


def _import_torch():
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch
    return torch


def run_spec(spec: CheckedSpec, sizes: dict[str, int], *, seed: int = 0, check_clean: bool = True,
             cache: dict | None = None) -> Report:
    """Build the instrumented module at `sizes`, run it, compare every step with the checker.

    `cache` (one dict per spec) keeps built modules by their config, so that
    several runs at sizes that differ only in runtime dims build once.
    """
    torch = _import_torch()

    rows = _rows(spec, sizes)
    report = Report(spec.path, dict(sizes), rows, value_at(spec.total_params, spec, sizes))
    by_step: dict[int, list] = {}
    for r in rows:
        by_step.setdefault(r.step, []).append(r)

    def record(step_id, value):
        tensors = value if isinstance(value, tuple) else (value,)
        for r in by_step.get(step_id, ()):
            r.got.append([list(t.shape) for t in tensors])
            got = [_dtype_name(t) for t in tensors]
            want = r.dtypes if len(r.dtypes) == len(tensors) else (r.dtype,) * len(tensors)
            r.dtype_ok = r.dtype_ok and all(g == w for g, w in zip(got, want))
            r.dtype_got = r.dtype_got or next((g for g, w in zip(got, want) if g != w), "")

    check_budget(spec, sizes, rows)
    cache = {} if cache is None else cache
    if "generated" not in cache:
        cache["generated"] = (generate(spec, instrument=True), generate(spec) if check_clean else None)
    gen_i, gen_c = cache["generated"]
    key = tuple(sizes[n] for n, _py in gen_i.fields)
    try:
        if key not in cache:
            mod, model = build(gen_i, sizes, seed=seed)
            clean = None
            if gen_c is not None:
                # built on the meta device and given the weights, unless it builds tables of
                # its own in __init__ (buffers no state dict holds): then built for real
                _mod, clean = build(gen_c, sizes, meta=not gen_c.built_tables)
                clean.load_state_dict(model.state_dict(), assign=True)
            cache[key] = (mod, model, clean)
        mod, model, clean = cache[key]
        mod._record = record
        report.params_got = sum(p.numel() for p in model.parameters())
        inputs = make_inputs(spec, gen_i, sizes, seed=seed)
    except Exception as err:  # noqa: BLE001 - reported to the user
        report.error = f"the module was not built: {_why(err)}"
        report.built = False
        return report
    try:
        with torch.no_grad():
            out_i = model(*inputs)
    except Exception as err:  # noqa: BLE001 - reported to the user
        report.error = f"forward failed{_at(rows)}: {_why(err)}"
        return report
    if check_clean and clean is not None:
        try:
            with torch.no_grad():
                out_c = clean(*inputs)
        except Exception as err:  # noqa: BLE001 - reported to the user
            report.error = f"the module without the shape records failed: {_why(err)}"
            return report
        a, b = _outputs(out_i), _outputs(out_c)
        if not all(isinstance(x, torch.Tensor) for x in a + b):
            report.error = "forward returned something other than tensors"
            return report
        # the clean module calls F.scaled_dot_product_attention where the instrumented one
        # writes every step out: the same function, rounded differently
        report.clean_same = len(a) == len(b) and all(
            x.shape == y.shape and torch.allclose(x, y, equal_nan=True, rtol=1e-4, atol=1e-5)
            if x.is_floating_point() else torch.equal(x, y) for x, y in zip(a, b))
    return report


def _why(err: BaseException) -> str:
    """One line for an exception raised by PyTorch or the generated code (no C++ frames)."""
    text = str(err).strip().split("\n")[0][:300]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _at(rows: list[Row]) -> str:
    """Where forward stopped: the first step that produced nothing."""
    for r in rows:
        if not r.got:
            return f" at step %{r.step} (line {r.line}: {r.where}: {r.op})"
    return ""


MAX_ELEMENTS = 1 << 28     # per tensor: 1 GB of float32
MAX_PARAMS = 1 << 29       # in all: 2 GB of float32


def check_budget(spec: CheckedSpec, sizes: dict[str, int], rows: list[Row] | None = None) -> None:
    """Refuse sizes that would make a tensor of more than MAX_ELEMENTS numbers (SizesError)."""
    shapes = [(f"step %{r.step} (line {r.line})", shape) for r in rows or _rows(spec, sizes)
              for shape in r.expected]
    decls = [d for d in spec.decls if d.kind in ("input", "param", "buffer")]
    shapes += [(f"{d.kind} {d.name}", [value_at(x, spec, sizes) for x in d.type.shape]) for d in decls]
    for what, shape in shapes:
        n = 1
        for x in shape:
            n *= max(int(x), 0)
        if n > MAX_ELEMENTS:
            raise SizesError(f"at these sizes {what} has {n:,} elements, more than `run` builds "
                             f"({MAX_ELEMENTS:,}); choose smaller sizes with --sizes")
    total = value_at(spec.total_params, spec, sizes)
    if total > MAX_PARAMS:
        raise SizesError(f"at these sizes the module has {total:,} parameters, more than `run` builds "
                         f"({MAX_PARAMS:,}); choose smaller sizes with --sizes")


def _outputs(out) -> list:
    if out is None:
        return []
    return list(out.values()) if isinstance(out, dict) else [out]


# ------------------------------------------------------------------ reports

def _shape(s) -> str:
    return "[" + ", ".join(map(str, s)) + "]"


def _shapes(shapes) -> str:
    return " | ".join(_shape(s) for s in shapes)


def report_text(rep: Report) -> str:
    head = [f"run of {rep.path} at " + ", ".join(f"{k}={v}" for k, v in rep.sizes.items()), ""]
    table = [["step", "line", "binding", "operation", "expected", "got", "ok"]]
    for r in rep.rows:
        if not r.got:
            got = "not run"
        else:
            distinct = []
            for g in r.got:
                if g not in distinct:
                    distinct.append(g)
            got = " / ".join(_shapes(g) for g in distinct) + (f" (x{len(r.got)})" if len(r.got) > 1 else "")
            if not r.dtype_ok:
                got += f" wrong dtype: {r.dtype_got}, not {r.dtype}"
        table.append([f"%{r.step}", str(r.line), "  " * r.depth + r.where, r.op, _shapes(r.expected), got,
                      "-" if not rep.built else "ok" if r.ok else "MISMATCH"])
    widths = [max(len(row[k]) for row in table) for k in range(len(table[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    out = head + lines + [""]
    if rep.error:
        out.append(rep.error)
    pg = f"{rep.params_got:,}" if rep.params_got is not None else "?"
    if rep.built:
        out.append(f"parameters: expected {rep.params_expected:,}, got {pg}: "
                   f"{'ok' if rep.params_got == rep.params_expected else 'MISMATCH'}")
    if rep.clean_same is not None:
        out.append("generated module (without the shape records) gives the same outputs: "
                   + ("ok" if rep.clean_same else "MISMATCH"))
    bad = sum(not r.ok for r in rep.rows)
    out.append(f"{rep.path}: " + ("ok, every step has the proved shape" if rep.ok else
                                  "the module was not built, no step ran" if not rep.built else
                                  f"{bad} of {len(rep.rows)} steps differ" if bad else "failed"))
    return "\n".join(out) + "\n"


def report_json(rep: Report) -> dict:
    return {"file": rep.path, "sizes": rep.sizes, "ok": rep.ok, "error": rep.error, "built": rep.built,
            "steps": [{"step": r.step, "line": r.line, "binding": r.where, "op": r.op,
                       "expected": r.expected, "got": r.got[0] if r.got else None, "calls": len(r.got),
                       "dtype": r.dtype, "ok": r.ok} for r in rep.rows],
            "params": {"expected": rep.params_expected, "got": rep.params_got},
            "clean_same": rep.clean_same}
