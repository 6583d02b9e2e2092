"""Codegen, tables built once: values computed from sizes fixed when the module is built
become buffers, made in `__init__` instead of on every forward.

A table is a value computed from sizes alone (`arange`, `ones`, `full`, ..., and every
step whose inputs are all tables, as hoist.constant_steps finds them, a `meshgrid` too). When every
size it needs is fixed when the module is built (a config field, a constructor argument:
Swin's window `W`, a rotary table's head width `Dh`), `__init__` computes it and keeps it
as a buffer, `persistent=False`: it follows the module to its device and dtype (as HF's
rotary `inv_freq` does) and stays out of the state dict, so checkpoints are unchanged.

A table that needs a size read from the inputs (the sequence length `S` of a rotary
cos/sin table, the batch) keeps being computed in `forward` from the buffers it builds on:
no maximum length is assumed and nothing is cached, so the module stays a plain function
of its inputs (and passes torch.jit.script). In a stacked block, hoist.py builds such
tables once per forward in the caller instead.

Which sizes are fixed at build is known only once the sizes are classified, so the
generator writes the module twice when it has tables: first to learn the config fields,
then with the tables (`eligible`) in `__init__`.
"""
from __future__ import annotations

import sympy as sp

from .hoist import CREATORS, NEVER
from .layout import comment_line, comments_above
from .naming import Namer, _symbols_in, comment_text, py_str
from .steps import CHAIN_SUFFIX


def tables(bindings) -> dict:
    """{ref: Step} of the values computed from sizes alone, with the pieces of a table step
    that gives several (`cy, cx: meshgrid(ax, ax)`) as `ref.k`."""
    const: dict = {}
    for b in bindings:
        for s in b.steps:
            if s.op in NEVER:
                continue
            if (not s.inputs and s.op in CREATORS) or (s.inputs and all(r in const for r in s.inputs)):
                const[s.ref] = s
                if len(s.outputs) > 1:
                    for k in range(len(s.outputs)):
                        const[f"{s.ref}.{k}"] = s
    return const


def sizes_of(steps: dict) -> dict:
    """{ref: the sizes its step uses} (its outputs' shapes, its arguments)."""
    out = {}
    for ref, s in steps.items():
        syms = set(_symbols_in(s.detail))
        for t in s.outputs:
            for x in t.shape:
                syms |= sp.sympify(x).free_symbols
        out[ref] = syms
    return out


def eligible(unit, candidates: dict, sizes) -> set:
    """The refs among a unit's tables whose sizes, and their inputs' sizes, are all fixed
    when it is built (after `sizes.classify`)."""
    def fixed(s):
        return s in unit.size_args or s in unit.size_rename or sizes._in_config(s, sizes.fields)
    ok = {ref for ref, (syms, _inputs) in candidates.items() if all(fixed(s) for s in syms)}
    changed = True
    while changed:      # a table is fixed only when what it is computed from is
        changed = False
        for ref in list(ok):
            if any(r not in ok for r in candidates[ref][1]):
                ok.discard(ref)
                changed = True
    return ok


def build_once(em, unit, binding_names: dict) -> list:
    """Pass 1: note the unit's tables and their sizes (em.table_sizes). Pass 2 (em.eligible
    set): the `__init__` lines that build the fixed ones as buffers (after the layers); their
    steps are skipped in `forward`, which reads the buffers."""
    const = tables(unit.bindings)
    if not const:
        return []
    syms = sizes_of(const)
    em.table_sizes[unit.key] = {ref: (syms[ref], tuple(const[ref].inputs)) for ref in const}
    chosen = (em.eligible or {}).get(unit.key)
    if not chosen:
        return []
    steps = {id(s): s for ref, s in const.items() if ref in chosen}
    # the tables `forward` reads: a chosen one read by a step that is no chosen table
    read = []
    for b in unit.bindings:
        for s in b.steps:
            if id(s) in steps:
                continue
            read += [r for r in s.inputs if r in chosen and r not in read]
    result = unit.block.results if unit.block is not None else ()
    read += [r for r in result if r in chosen and r not in read]
    if not read:
        return []
    needed, todo = set(), list(read)
    while todo:
        r = todo.pop()
        s = const[r]
        if id(s) not in needed:
            needed.add(id(s))
            todo += list(s.inputs)
    order = sorted((steps[i] for i in needed), key=lambda s: s.id)
    scope, sizes = em.scope, em.sizes
    source = em.spec.source.split("\n")
    hints = {r: n for b in unit.bindings for n, r in zip(b.names, b.results) if n != "return"}
    names = Namer(em.taken)
    init: list = []
    sizes.in_init = True
    try:
        for b in unit.bindings:
            if not any(id(s) in needed for s in b.steps):
                continue
            # the steps leading to the binding's value along their first inputs share its name
            # (`rel = ...; rel = rel - ...`), as in forward; the others get names of their own
            chain, by_ref = set(), {t.ref: t for t in b.steps}
            t = b.steps[-1]
            while t is not None and id(t) not in chain:
                chain.add(id(t))
                t = by_ref.get(t.inputs[0]) if t.inputs else None
            main = None
            init += [comment_line(comment_text(c)) for c in comments_above(source, b.span.line)]
            for s in b.steps:
                if id(s) not in needed:
                    continue
                if len(s.outputs) > 1:
                    base = hints.get(s.ref) or b.names[0]
                    pieces = [names.claim(n) for n in b.names] if len(b.names) == len(s.outputs) \
                        else [names.claim(f"{base}_{k}") for k in range(len(s.outputs))]
                    out = ", ".join(pieces)
                elif id(s) in chain and b.names != ("return",):
                    main = out = main or names.claim(b.names[0].lstrip("_"))
                else:
                    out = names.claim(f"{b.names[0]}_{CHAIN_SUFFIX.get(s.op, s.op)}".lstrip("_"))
                lines = em._step(unit, s, out, None)
                comment = sizes.types_comment(unit, s.outputs)
                init += lines[:-1] + [(lines[-1], comment)]
                if len(s.outputs) > 1:
                    for k, piece in enumerate(pieces):
                        scope.refs[f"{s.ref}.{k}"] = piece
                        scope.types[f"{s.ref}.{k}"] = s.outputs[k]
                else:
                    scope.refs[s.ref] = out
                scope.types[s.ref] = s.out
    finally:
        sizes.in_init = False
    for r in read:
        local = scope.refs[r]
        path = "self." + scope.attrs.claim(local)
        owner, _, attr = path.rpartition(".")
        init.append(f"{owner}.register_buffer({py_str(attr)}, {local}, persistent=False)")
        scope.refs[r] = path
    ids = {s.id for s in order}
    unit.hoisted_steps |= ids
    em.skipped |= ids
    return init
