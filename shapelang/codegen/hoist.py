"""Codegen, values a block computes from sizes alone: built once by its caller.

A causal mask (`mask causal` outside a recognised attention, or combined with other
masks into one `attn_mask`) and a table computed from `arange`, `ones`, `full`, ...
(rotary cos/sin, a relative-position grid) do not depend on the values of the block's
inputs, only on sizes. Computed inside the block, a `stack L Block` would rebuild them
in every layer on every call. Instead the caller computes them once, before the layer
loop, and passes them as extra arguments of the stacked block's `forward`; all layers
share them. Nothing changes in the state dict: no buffer is added. A block called once
(not stacked) computes its own: in `__init__`, as buffers, when their sizes are fixed when
it is built (tables.py), else in `forward`.

The constant steps are those with no tensor inputs that create a tensor from sizes
(CREATORS: the table's entries whose provenance is "new"), and every step whose inputs are
all constant, except (NEVER) the inputs and the steps that own weights or call blocks
(`learned`) or are not pure (dropout draws random numbers).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..checker.ops.table import TABLE
from .layout import comment_line, comments_above
from .naming import comment_text

CREATORS = {d.ir_name for d in TABLE.values() if d.provenance == "new"}
NEVER = {"input"} | {d.ir_name for d in TABLE.values() if d.learned or not d.pure}


@dataclass
class Hoisted:
    """One extra argument of a block's forward, computed by its caller."""
    name: str                       # the argument's name in the block
    ref: str | None = None          # the constant value (a step ref) ...
    causal: tuple | None = None     # ... or a causal mask (rows, cols): True hides
    steps: list = field(default_factory=list)   # the constant steps computing `ref`, in order
    hints: dict = field(default_factory=dict)   # step ref -> the name the caller gives it


def constant_steps(bindings) -> dict:
    """{ref: Step} of the steps whose value depends on sizes only."""
    const: dict = {}
    for b in bindings:
        for s in b.steps:
            if s.op in NEVER or len(s.outputs) != 1:
                continue
            if not s.inputs:
                if s.op in CREATORS:
                    const[s.ref] = s
            elif all(r in const for r in s.inputs):
                const[s.ref] = s
    return const


def needed_by(ref: str, const: dict) -> list:
    """The constant steps `ref` is computed from (itself included), in program order."""
    out, todo = set(), [ref]
    while todo:
        r = todo.pop()
        if r in const and r not in out:
            out.add(r)
            todo += list(const[r].inputs)
    return sorted((const[r] for r in out), key=lambda s: s.id)


def frontier(bindings, const: dict, result_ref: str | None) -> list:
    """The constant refs a non-constant step (or the block's result) reads, in order."""
    out: list = []
    for b in bindings:
        for s in b.steps:
            if s.ref in const:
                continue
            for r in s.inputs:
                if r in const and r not in out:
                    out.append(r)
    if result_ref in const and result_ref not in out:
        out.append(result_ref)
    return out


def plan(em, unit, binding_names: dict, result_ref, suffix: dict) -> None:
    """The values of a block `unit` that depend on sizes only become arguments of its
    forward (unit.hoisted, unit.arg_names), computed by the caller (`caller_args`); the
    steps computing them are skipped in the block. `em`: the Emitter building it."""
    scope, hoisted = em.scope, []
    const = constant_steps(unit.bindings)
    named = {r: binding_names.get(n) for b in unit.bindings for n, r in zip(b.names, b.results)}
    hints = {s.ref: (n if s.ref == r else f"{n}_{suffix.get(s.op, s.op)}")
             for b in unit.bindings for n, r in zip(b.names, b.results) for s in b.steps}
    for ref in frontier(unit.bindings, const, result_ref):
        name = named.get(ref) or scope.names.claim("table")
        steps = needed_by(ref, const)
        hoisted.append(Hoisted(name, ref=ref, steps=steps,
                               hints={s.ref: hints.get(s.ref, name).lstrip("_") for s in steps}))
        scope.refs[ref], scope.types[ref] = name, const[ref].out
    unit.hoisted_steps = {s.id for s in const.values()}
    em.skipped |= unit.hoisted_steps
    fused_causal = [a for a in em.attention.values() if a.causal and (a.masks or a.biases)]
    sizes = [(s.detail["rows"], s.detail["cols"]) for b in unit.bindings for s in b.steps
             if s.op == "mask" and s.detail.get("kind") == "causal" and s.id not in em.skipped
             and s.ref not in const] + [a.causal_size for a in fused_causal]
    for rows, cols in sizes:
        if not any(h.causal is not None and em.spec.prover.same(h.causal[0], rows)
                   and em.spec.prover.same(h.causal[1], cols) for h in hoisted):
            hoisted.append(Hoisted(scope.names.claim("causal"), causal=(rows, cols)))
    unit.hoisted = hoisted
    unit.arg_names += [h.name for h in hoisted]


def causal(em, unit, rows, cols, device: str) -> str:
    """The causal mask (True hides) of these sizes: the one the caller passed, or built."""
    for h in unit.hoisted:
        if h.causal is not None and em.spec.prover.same(h.causal[0], rows) \
                and em.spec.prover.same(h.causal[1], cols):
            return h.name
    em.uses_causal = True
    return f"causal_mask({em.sizes.local(unit, rows)}, {em.sizes.local(unit, cols)}, {device}.device)"


def caller_args(em, unit, child, source: list) -> tuple[list, list]:
    """(lines, names): the caller computes what `child` takes from it (built once: a
    second call of the same block reuses them), with the comments of the block's bindings
    it computes whole (`source`: the spec's lines)."""
    scope, lines, names = em.scope, [], []
    first = {}
    for b in child.bindings:
        if b.steps and all(s.id in child.hoisted_steps for s in b.steps):
            first[b.steps[0].ref] = [comment_line(comment_text(c)) for c in comments_above(source, b.span.line)]
    device = unit.arg_names[0] if unit.arg_names else None
    for h in child.hoisted:
        if h.causal is not None:
            key = f"causal:{h.causal[0]}:{h.causal[1]}"
            if key not in scope.refs:
                scope.refs[key] = scope.names.claim("causal")
                rows, cols = (em.sizes.local(unit, x) for x in h.causal)
                em.uses_causal = True
                lines.append(f"{scope.refs[key]} = causal_mask({rows}, {cols}, {device}.device)")
            names.append(scope.refs[key])
            continue
        for s in h.steps:
            if s.ref in scope.refs:
                continue
            out = scope.names.claim(h.hints.get(s.ref, h.name))
            lines += first.pop(s.ref, [])
            lines += em._step(unit, s, out, None)
            scope.refs[s.ref], scope.types[s.ref] = out, s.out
        names.append(scope.refs[h.ref])
    return lines, names
