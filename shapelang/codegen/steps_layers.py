"""Codegen, the emitters of whole layers: attention (F.scaled_dot_product_attention),
convolutions (nn.Conv1d / nn.Conv2d) and indexing. Registered into
shapelang.codegen.steps.EMITTERS when this module is imported (shapelang.codegen.emit
imports it)."""
from __future__ import annotations

from .steps import CHAIN_SUFFIX, EMITTERS, FUNCTIONAL, MODULE_OPS, Op


def _attention(o: Op) -> list[str]:
    q, k, v = o.args[:3]
    args = [q, k, v]
    d = o.d
    if d.get("mask"):
        mask = o.args[3]
        mt = o.em.scope.types.get(o.s.inputs[3])
        if mt is not None and mt.dtype not in ("bool", "float"):
            mask = f"{mask} != 0"
        args.append(f"attn_mask={mask}")
    if d.get("dropout"):
        args.append(f"dropout_p={d['dropout']!r} if self.training else 0.0")
    if d.get("causal"):
        args.append("is_causal=True")
    if d.get("scale") is not None:
        args.append(f"scale={o.local(d['scale'], real=True)}")
    if d.get("gqa"):
        args.append("enable_gqa=True")
    return [f"{o.out} = {FUNCTIONAL}.scaled_dot_product_attention({', '.join(args)})"]


EMITTERS.update({
    "attention": _attention,
})
CHAIN_SUFFIX.update({"attention": "attn"})
MODULE_OPS.update({})
