"""What the renderers share: example values and shapes of the checked IR."""
from __future__ import annotations

from ..checker import arith
from ..checker import dims as dimlib
from ..checker.ir import CheckedSpec
from ..checker.lazysympy import sympy as sp


def fixed_sizes(spec: CheckedSpec) -> dict:
    """The sizes a spec fixes without an example line (`dim D = 64`, `dim Dh = D / H`), as the
    example would give them: symbol -> value. Empty when nothing is fixed or the example says."""
    cached = spec.__dict__.get("_fixed_sizes")
    if cached is not None:
        return cached
    env: dict = {}
    prover = spec.prover
    if prover is not None and not spec.example:
        todo = dict(getattr(prover, "definition", {}) or {})
        while todo:
            done = {}
            for sym, e in todo.items():
                v = prover.value(e, env)
                if v is not None and dimlib.as_int(v) is not None and dimlib.as_int(v) > 0:
                    done[sym] = dimlib.as_int(v)
            if not done:
                break
            env.update(done)
            for sym in done:
                del todo[sym]
    spec.__dict__["_fixed_sizes"] = env
    return env


def size_value(spec: CheckedSpec, e):
    """The value of a size at the example sizes, or from the dims the spec fixes; None where
    neither decides it."""
    if spec.example:
        return spec.example_value(e)
    env = fixed_sizes(spec)
    if not env:
        return None
    return spec.prover.value(sp.Integer(e) if isinstance(e, int) else e, env)


def example_shape(spec: CheckedSpec, shape):
    vals = [size_value(spec, d) for d in shape]
    if any(v is None or dimlib.as_int(v) is None for v in vals):
        return None
    return [dimlib.as_int(v) for v in vals]


def notation(spec):
    """How the spec's author writes sizes (checker/notation.py); None for the default."""
    prover = getattr(spec, "prover", None)
    return getattr(prover, "notation", None)


def shape_text(shape, spec=None) -> str:
    n = notation(spec)
    return "[" + ", ".join(dimlib.show(d, n) for d in shape) + "]"


OPERATORS = arith.SYMBOLS


def shapes_in(op: str, shapes: list[str]) -> str:
    """A step's input shapes as the step reads them: `[B, S, D] + [B, S, D]` for a binary
    operator, else separated by `;`."""
    sep = f" {OPERATORS[op]} " if op in OPERATORS and len(shapes) == 2 else "; "
    return sep.join(shapes)


def example_number(spec, e) -> int | None:
    v = size_value(spec, e)
    return dimlib.as_int(v) if v is not None else None


def types_of(spec: CheckedSpec, decls, bindings) -> dict:
    types = {d.name: d.type for d in decls}
    for b in bindings:
        for s in b.steps:
            types[s.ref] = s.out
            for k, t in enumerate(s.outputs):
                types[f"{s.ref}.{k}"] = t
    return types


def _axes(step) -> list | None:
    """Where each axis of a step's (first) output comes from: atom labels, `·` for a merge,
    `keys` on the key axis of attention scores; None where the analysis does not know."""
    tps = getattr(step, "provenance", None)
    if not tps:
        return None
    tp = tps[0]
    out = []
    for ax in tp.axes:
        text = "·".join(a.label for a in ax) if ax else "1"
        if tp.keys is not None and ax == tp.keys:
            text += " (keys)"
        out.append(text)
    return out

