"""Codegen, attention: the written-out pattern recognised in the checked IR, so that it can
be emitted as one `F.scaled_dot_product_attention` call.

The pattern, inside one module (a block or the spec), in any split into bindings:

    scores = Q @ K^T          (K^T a `transpose -2 -1` of K, or any tensor: then K = K^T^T)
    [scale s | * s | / s]     (s > 0; at most one, anywhere among the masks)
    [mask causal | mask M | + bias]...   (any number: one causal at most, padding masks,
                              additive biases; combined into one `attn_mask`)
    softmax over the last axis
    [dropout p]
    out = weights @ V

Shapes alone do not make it attention; the checker's axis provenance
(shapelang.checker.provenance) must agree: the product is marked as scores with a key
axis, the softmax runs along that key axis, and V's rows are the keys' positions (the
same atoms, or atoms of the same size and name when K and V arrive as separate inputs).
Every intermediate value (scores, weights) must be used by the next step only. When K
and V are `repeat_interleave G` of tensors with fewer heads (GQA), the call takes those
with `enable_gqa=True` and the copies are not made.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from ..checker.ir import Step
from ..checker.ops.table import TABLE


@dataclass
class Attention:
    """One recognised attention: the `@ V` step and what the call needs."""
    step: Step                     # weights @ V
    q: str                         # refs
    k: str
    v: str
    k_transposed: bool             # K is only known as K^T: pass `kt.transpose(-2, -1)`
    scale: object = None           # sympy factor; None: sdpa's default 1/sqrt(E)
    causal: bool = False
    masks: list = field(default_factory=list)     # refs of `mask M` tensors (True hides)
    biases: list = field(default_factory=list)    # (ref, scaled): `+ bias`, times the scale if
                                                  # the scale comes after it
    causal_size: tuple | None = None              # (rows, cols) of the causal mask
    factor: object = None                         # the written-out scale (for the biases)
    dropout: float | None = None
    gqa: bool = False
    skipped: set = field(default_factory=set)   # step ids the call replaces


# operations whose result is laid out afresh (contiguous), whatever their inputs' layout: the
# copies and the ones that sum products (`@` has no table entry)
_FRESH_LAYOUT = {"matmul"} | {d.ir_name for d in TABLE.values() if d.contracts or d.moves == "copy"}


def relaid(bindings, fused: dict) -> set:
    """The refs whose memory layout may differ from the one the checker proved on: the
    result of each fused call (F.scaled_dot_product_attention lays its result out as its
    kernel likes, e.g. [B, L, H, Ev] in memory on CPU) and what keeps that layout after it
    (elementwise ops, transposes, views). A `view` of one is written as `reshape`."""
    out: set = set()
    for b in bindings:
        for s in b.steps:
            if s.id in fused or (s.op not in _FRESH_LAYOUT and any(r in out for r in s.inputs)):
                out.add(s.ref)
                out.update(f"{s.ref}.{k}" for k in range(len(s.outputs)))
    return out


def steps_and_uses(bindings, result_ref: str | None) -> tuple[dict, dict]:
    """A module's steps by reference, and how many times each reference is read (the
    module's result counts as one read)."""
    steps: dict = {}
    uses: dict = {}
    for b in bindings:
        for s in b.steps:
            steps[s.ref] = s
            for r in s.inputs:
                uses[r] = uses.get(r, 0) + 1
    if result_ref:
        uses[result_ref] = uses.get(result_ref, 0) + 1
    return steps, uses


def find(bindings, prover, result_ref: str | None, types: dict) -> dict:
    """{id of the `@ V` step: Attention} for one module's bindings.

    `types`: ref -> TensorType for the module's inputs, params and buffers."""
    steps, uses = steps_and_uses(bindings, result_ref)
    found = {}
    for s in steps.values():
        if s.op == "matmul" and len(s.inputs) == 2:
            a = _match(s, steps, uses, prover, types)
            if a is not None:
                found[s.id] = a
    return found


def fused_gqa(bindings, prover, result_ref: str | None) -> dict:
    """{id of an `attention q k v` step: (k before, v before, ids of the copies)} where k and v
    are both `repeat_interleave G` along the heads axis and read nowhere else (Llama's
    `repeat_kv`): the call takes the tensors before the copy, with `enable_gqa=True`
    (F.scaled_dot_product_attention's own grouped-query path; no copy is made)."""
    steps, uses = steps_and_uses(bindings, result_ref)
    out = {}
    for s in steps.values():
        if s.op != "attention" or len(s.inputs) < 3 or s.out.rank < 3:
            continue
        ks, vs = steps.get(s.inputs[1]), steps.get(s.inputs[2])
        if ks is None or vs is None or ks is vs or ks.op != "repeat_interleave" or vs.op != "repeat_interleave":
            continue
        if not (_only_use(ks.ref, uses) and _only_use(vs.ref, uses)):
            continue
        heads = s.out.rank - 3
        if ks.detail["dim"] != heads or vs.detail["dim"] != heads:
            continue
        if prover.same(ks.detail["repeats"], vs.detail["repeats"]):
            out[s.id] = (ks.inputs[0], vs.inputs[0], {ks.id, vs.id})
    return out


def _only_use(ref, uses) -> bool:
    return uses.get(ref, 0) == 1


def _match(out: Step, steps: dict, uses: dict, prover, types: dict) -> Attention | None:
    weights, v = out.inputs
    s = steps.get(weights)
    chain = []
    dropout = None
    if s is not None and s.op == "dropout" and _only_use(s.ref, uses):
        dropout = s.detail["p"]
        chain.append(s)
        s = steps.get(s.inputs[0])
    if s is None or s.op != "softmax" or not _only_use(s.ref, uses):
        return None
    if s.detail.get("dim") != s.out.rank - 1 or s.out.rank < 2 or s.detail.get("dtype"):
        return None
    softmax = s
    chain.append(s)
    s = steps.get(s.inputs[0])
    scale, causal, causal_size, masks, biases = None, False, None, [], []
    while s is not None and _only_use(s.ref, uses) and s.op in ("scale", "mask", "mul", "div", "add"):
        if s.op == "mask":
            if s.detail.get("kind") == "causal":
                if causal:
                    return None
                causal, causal_size = True, (s.detail["rows"], s.detail["cols"])
            else:
                if len(s.inputs) != 2:
                    return None
                masks.append(s.inputs[1])
        elif s.op == "add":
            chained = _chained_input(s, steps, uses)
            if chained is None:
                return None
            biases.append((s.inputs[1 - chained], scale is not None))
            chain.append(s)
            s = steps.get(s.inputs[chained])
            continue
        else:
            factor = _factor(s)
            if factor is None or scale is not None or sp.sympify(factor).is_positive is not True:
                return None
            scale = factor
        chain.append(s)
        s = steps.get(s.inputs[0])
    if s is None or s.op != "matmul" or len(s.inputs) != 2 or not _only_use(s.ref, uses):
        return None
    scores = s
    chain.append(s)
    q, kt = scores.inputs
    k, k_transposed = kt, True
    kt_step = steps.get(kt)
    if kt_step is not None and kt_step.op == "transpose":
        r = kt_step.out.rank
        if set(kt_step.detail["dims"]) == {r - 2, r - 1}:
            k, k_transposed = kt_step.inputs[0], False
            if _only_use(kt, uses):
                chain.append(kt_step)
    if not _provenance_agrees(scores, softmax, v, steps):
        return None
    qt, kt_t, vt = _type(q, steps, types), _type(kt, steps, types), _type(v, steps, types)
    if qt is None or kt_t is None or vt is None:
        return None
    rank = qt.rank
    if rank < 2 or kt_t.rank != rank or vt.rank != rank or out.out.rank != rank:
        return None
    for k_ax, (a, kb, vb, o) in enumerate(zip(qt.shape[:-2], kt_t.shape[:-2], vt.shape[:-2], out.out.shape[:-2])):
        if not prover.same(a, o):
            return None
        for other in (kb, vb):
            if not (prover.same(other, a) or prover.is_one(other)):
                return None
    for c in chain:      # masks and biases broadcast to the scores, never widen them
        if c.op in ("mask", "add") and not _same_shape(c.out.shape, scores.out.shape, prover):
            return None
    att = Attention(out, q, k, v, k_transposed, causal=causal, masks=masks[::-1],
                    biases=biases[::-1], causal_size=causal_size, factor=scale, dropout=dropout)
    if scale is not None and not prover.same(scale, 1 / sp.sqrt(qt.shape[-1])):
        att.scale = scale
    elif scale is None:
        att.scale = sp.Integer(1)
    att.skipped = {c.id for c in chain}
    _gqa(att, steps, uses, prover, rank)
    return att


def _chained_input(s: Step, steps: dict, uses: dict) -> int | None:
    """Which input of `a + b` carries the scores (the other is an additive bias), or None."""
    if len(s.inputs) != 2 or "scalar" in s.detail:
        return None
    found = [k for k, r in enumerate(s.inputs) if r in steps and _only_use(r, uses)
             and steps[r].op in ("matmul", "scale", "mask", "mul", "div", "add")]
    if len(found) != 1:
        return None
    return found[0]


def _same_shape(a, b, prover) -> bool:
    return len(a) == len(b) and all(prover.same(x, y) for x, y in zip(a, b))


def _factor(s: Step):
    if s.op == "scale":
        return s.detail.get("factor")
    if len(s.inputs) != 1 or "scalar" not in s.detail or s.detail.get("scalar_left"):
        return None
    sc = sp.sympify(s.detail["scalar"])
    return sc if s.op == "mul" else 1 / sc


def _type(ref: str, steps: dict, types: dict):
    base, _, k = ref.partition(".")
    s = steps.get(base)
    if s is None:
        return types.get(ref)
    return s.outputs[int(k)] if k else s.out


def _provenance(ref: str, steps: dict):
    base, _, k = ref.partition(".")
    s = steps.get(base)
    if s is None or not s.provenance:
        return None
    return s.provenance[int(k) if k else 0]


def _key(atom) -> tuple:
    return (atom.size, atom.name, atom.parent, atom.index, atom.pieces)


def _provenance_agrees(scores: Step, softmax: Step, v: str, steps: dict) -> bool:
    """The checker's provenance marks the product as scores, the softmax runs along their
    key axis, and V's rows are the keys' positions."""
    if not scores.provenance or not softmax.provenance:
        return False
    tp, sm = scores.provenance[0], softmax.provenance[0]
    if tp is None or tp.keys is None or sm is None or sm.keys is None or sm.axes[-1] != sm.keys:
        return False
    vt = _provenance(v, steps)
    if vt is None:
        return True          # V arrives from outside the module: its shape was checked
    if len(vt.axes) < 2:
        return False
    return [_key(a) for a in vt.axes[-2]] == [_key(a) for a in tp.keys]


def _gqa(att: Attention, steps: dict, uses: dict, prover, rank: int) -> None:
    """K and V both `repeat_interleave G` along the heads axis: pass the tensors before."""
    if rank < 3 or att.k_transposed:
        return
    ks, vs = steps.get(att.k), steps.get(att.v)
    if ks is None or vs is None or ks.op != "repeat_interleave" or vs.op != "repeat_interleave":
        return
    if not (_only_use(att.k, uses) and _only_use(att.v, uses)):
        return
    if ks.detail["dim"] != rank - 3 or vs.detail["dim"] != rank - 3:
        return
    if not prover.same(ks.detail["repeats"], vs.detail["repeats"]):
        return
    att.k, att.v, att.gqa = ks.inputs[0], vs.inputs[0], True
    att.skipped |= {ks.id, vs.id}
