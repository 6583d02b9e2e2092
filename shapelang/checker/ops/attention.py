"""Shape rule of `attention`: scaled dot-product attention as one operation, with the
semantics of torch.nn.functional.scaled_dot_product_attention.

`Q -> attention K V` takes queries [.., L, E], keys [.., S, E] and values [.., S, Ev]
and gives [.., L, Ev]; the batch axes broadcast. Keywords as in PyTorch: `attn_mask=M`
(or a third tensor argument; bool: True takes part, float: added to the scores),
`is_causal=true`, `scale=1/sqrt(E)`, `enable_gqa=true` (K and V may have fewer heads,
axis -3, that divide the heads of Q) and `dropout_p=0.1` (while training only).
"""
from __future__ import annotations

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import Num
from ..layout import TensorType, contiguous, fresh
from .args import Result, prod
from .combine import broadcast

KEYWORDS = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
USAGE = "attention K V"


def known_keywords(a, names) -> None:
    """Refuse a keyword the operation does not take (never drop one silently)."""
    for k in a.op.kwargs:
        if k.name not in names:
            raise a.fail(f"`{a.op.name}` takes no keyword `{k.name}=`",
                         f"its keywords are {', '.join(f'`{n}=`' for n in names)}", span=k.span)


def attention(c, x, a):
    known_keywords(a, KEYWORDS)
    a.count(2, 3, usage=USAGE)
    q, k, v = x, a.tensor_at(0), a.tensor_at(1)
    mask_node = a.pos[2] if len(a.pos) == 3 else None
    if "attn_mask" in a.kw:
        if mask_node is not None:
            raise a.fail("the mask is given twice: as the third argument and as `attn_mask=`",
                         span=a.kw["attn_mask"].span)
        mask_node = a.kw["attn_mask"].value
    for t, what in ((q, "queries"), (k, "keys"), (v, "values")):
        if t.rank < 2:
            raise a.fail(f"`attention` needs the {what} with at least 2 dims (positions and "
                         f"features), got {c.show(t)}")
    span = a.op.span
    L, E, S, Ev = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
    c.need_equal(E, k.shape[-1], code="E101", span=span,
                 message=lambda: f"the queries {c.show(q)} and the keys {c.show(k)} must have the same "
                         f"width (last dim): {E} and {k.shape[-1]}",
                 help="each query is compared with each key by a dot product over the last dim")
    c.need_equal(S, v.shape[-2], code="E101", span=span,
                 message=lambda: f"the keys {c.show(k)} and the values {c.show(v)} must count the same "
                         f"positions (dim -2): {S} and {v.shape[-2]}")
    gqa = a.kw_bool("enable_gqa", False)
    kb, vb = list(k.shape[:-2]), list(v.shape[:-2])
    if gqa:
        if min(q.rank, k.rank, v.rank) < 3:
            raise a.fail("`enable_gqa=true` needs a head axis (dim -3) in the queries, keys and values")
        heads = q.shape[-3]
        for t, what, batch in ((k, "key", kb), (v, "value", vb)):
            c.need_whole(heads / t.shape[-3], span=span,
                         what=lambda t=t, what=what: f"with `enable_gqa`, each {what} head serves "
                                                     f"{heads / t.shape[-3]} query heads")
            batch[-1] = heads
    batch = broadcast(c, [list(q.shape[:-2]), kb, vb], ["the queries", "the keys", "the values"], span)
    scores = list(batch) + [L, S]
    causal = a.kw_bool("is_causal", False)
    detail = {"rows": L, "cols": S, "width": E, "causal": causal, "gqa": gqa, "mask": False,
              "scale": None, "dropout": 0.0}
    if mask_node is not None:
        if causal:
            raise a.fail("give either a mask or `is_causal=true`, not both (PyTorch documents an "
                         "error for both); put the causal part into the mask", span=mask_node.span)
        m = c.tensor(mask_node)
        a.tensors.append(m)      # its dtype is checked with the others' (dtypes.attention)
        a.mask_span = mask_node.span
        if m.rank > len(scores):
            raise ShapeError("E102", f"the mask {c.show(m)} has more dims than the scores "
                             f"{c.show_shape(scores)}", span=mask_node.span)
        grown = broadcast(c, [scores, list(m.shape)], ["the scores", "the mask"], mask_node.span)
        c.need_shape_equal(grown, scores, span=mask_node.span, code="E102",
                           message=lambda: f"the mask {c.show(m)} would grow the scores "
                                   f"{c.show_shape(scores)}; a mask must broadcast to their shape")
        detail["mask"] = True
    if "scale" in a.kw:
        detail["scale"] = c.scalar(a.kw["scale"].value)
    if "dropout_p" in a.kw:
        node = a.kw["dropout_p"].value
        p = node.value if isinstance(node, Num) else None
        if p is None or not 0 <= p < 1:
            raise a.fail("`dropout_p=` takes a probability from 0 up to (not including) 1",
                         span=node.span)
        detail["dropout"] = p
    shape = tuple(batch) + (L, Ev)
    out = fresh(shape, q.dtype)
    if len(shape) == 4:
        # PyTorch's CPU kernel may lay the result out as [B, L, H, Ev] seen through a transpose;
        # a later `view` must suit both layouts (so merging heads needs `reshape`)
        b, h = shape[0], shape[1]
        inner = contiguous((b, L, h, Ev))
        out = TensorType(shape, out.strides, out.dtype,
                         (((inner[0], inner[2], inner[1], inner[3]), ()),),
                         "`attention` may return its result laid out as [B, L, H, Ev]")
    flops = prod(batch) * L * S * (E + Ev)
    return Result((out,), flops=flops, detail=detail)
