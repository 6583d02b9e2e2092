"""Import, the steps with weights and attention: linear, layer, RMS, group and batch norms
(with their eps), embedding, and scaled_dot_product_attention written out as shapelang
operations.

A step owns its weights (`linear 3*D`, `layernorm`, `embed V D`) when no other step reads
them; its weights go into the mapping in the order the steps run. A weight read elsewhere
too (GPT-2's tied token table) becomes a `param` the steps name (`embed wte`,
`x @ (wte -> transpose 0 1)`). Position embeddings, `embedding(W, arange(S))`, are the first
S rows of the table: `wpe -> slice 0 0 S`.
"""
from __future__ import annotations

import math

from .elementwise import _scale_text
from .graph import arg, num_text, target_name, tok, val
from .patterns import product_width
from .translate import LN_EPS, TABLE, Piece, Translator


def _weights(t: Translator, **named) -> dict:
    return {k: t.source(v) for k, v in named.items() if v is not None}


def _linear(t: Translator, node, leaf):
    x, w, b = node.args[0], node.args[1], arg(node, 2, "bias", None)
    if t.owned(w) and t.owned(b) and t.source(w) and (b is None or t.source(b)):
        product_width(t, node)
        text = f"linear {t.size(val(node).shape[-1], 'ffn')}" + (" bias=false" if b is None else "")
        return Piece(node.name, text, x.name, weight=("linear", _weights(t, weight=w, bias=b)),
                     hint=leaf or "proj", strong=True)
    # a weight read elsewhere too (tied): the spec names it as a param
    text = f"{tok(x.name)} @ ({tok(w.name)} -> transpose 0 1)"
    refs = [x.name, w.name]
    if b is not None:
        text += f" + {tok(b.name)}"
        refs.append(b.name)
    return Piece(node.name, text, refs=refs, hint=leaf or "proj")


def _eps(eps, default) -> str:
    """` eps=1e-06` when it is not the operation's default."""
    return "" if eps is None or math.isclose(eps, default, rel_tol=1e-9) else f" eps={num_text(float(eps))}"


def _layer_norm(t: Translator, node, leaf):
    x, shape, w, b = node.args[0], node.args[1], arg(node, 2, "weight"), arg(node, 3, "bias")
    eps = arg(node, 4, "eps", LN_EPS)
    if len(shape) != 1:
        return t.opaque(node, "a layer norm over several axes")
    if w is None and b is not None:
        return t.opaque(node, "a layer norm with a bias and no weight")
    if w is None:
        return Piece(node.name, "layernorm elementwise_affine=false" + _eps(eps, LN_EPS), x.name,
                     hint=leaf or "ln")
    if not (t.owned(w) and t.owned(b)):
        return t.opaque(node, "a layer norm whose weights other steps read too")
    return Piece(node.name, "layernorm" + _eps(eps, LN_EPS) + (" bias=false" if b is None else ""), x.name,
                 weight=("layernorm", _weights(t, weight=w, bias=b)), hint=leaf or "ln", strong=True)


def _rms_norm(t: Translator, node, leaf):
    x, shape, w, eps = node.args[0], node.args[1], arg(node, 2, "weight"), arg(node, 3, "eps")
    if len(shape) != 1:
        return t.opaque(node, "an RMS norm over several axes")
    text = "rmsnorm" + ("" if eps is None else f" eps={num_text(float(eps))}")
    if w is None:
        return Piece(node.name, text + " elementwise_affine=false", x.name, hint=leaf or "norm")
    if not t.owned(w):
        return t.opaque(node, "an RMS norm whose weight other steps read too")
    return Piece(node.name, text, x.name, weight=("rmsnorm", _weights(t, weight=w)),
                 hint=leaf or "norm", strong=True)


def _group_norm(t: Translator, node, leaf):
    """nn.GroupNorm: `groupnorm G [eps=..] [affine=false]`, with `assume C % G == 0`."""
    x, groups, w, b = node.args[0], node.args[1], arg(node, 2, "weight"), arg(node, 3, "bias")
    eps = arg(node, 4, "eps", LN_EPS)
    if (w is None) != (b is None):
        return t.opaque(node, "a group norm with only one of weight and bias")
    if w is not None and not (t.owned(w) and t.owned(b)):
        return t.opaque(node, "a group norm whose weights other steps read too")
    channels = t.size(val(x).shape[1])
    if not channels.isdigit() and int(groups) > 1:
        whole = channels if channels.isidentifier() else f"({channels})"
        t.sizes.assumes.append(f"{whole} % {int(groups)} == 0")
    text = f"groupnorm {int(groups)}" + _eps(eps, LN_EPS) + (" affine=false" if w is None else "")
    weight = None if w is None else ("groupnorm", _weights(t, weight=w, bias=b))
    return Piece(node.name, text, x.name, weight=weight, hint=leaf or "gn", strong=w is not None)


def _batch_norm(t: Translator, node, leaf):
    """nn.BatchNorm1d/2d in eval mode: `batchnorm [eps=..] [momentum=..]`, its running mean
    and variance (and count) copied by name with its weights."""
    x, w, b, mean, var = (node.args[0], *(arg(node, i, n) for i, n in
                                          enumerate(("weight", "bias", "running_mean", "running_var"), 1)))
    training, momentum, eps = arg(node, 5, "training", False), arg(node, 6, "momentum", 0.1), \
        arg(node, 7, "eps", LN_EPS)
    if training or mean is None or var is None:
        return t.opaque(node, "a batch norm from the batch's own statistics (training, or no running stats)")
    if (w is None) != (b is None):
        return t.opaque(node, "a batch norm with only one of weight and bias")
    tensors = {"weight": w, "bias": b, "running_mean": mean, "running_var": var}
    tensors = {k: v for k, v in tensors.items() if v is not None}
    if not all(t.owned(v) and t.source(v) for v in tensors.values()):
        return t.opaque(node, "a batch norm whose weights other steps read too")
    weights = _weights(t, **tensors)
    count = weights["running_mean"].rpartition(".")[0]
    count = (count + "." if count else "") + "num_batches_tracked"
    if t.buffers is not None and count in t.buffers:
        weights["num_batches_tracked"] = count
    text = "batchnorm" + _eps(eps, LN_EPS)
    if momentum is None:
        return t.opaque(node, "a batch norm with a cumulative average (momentum=None)")
    if not math.isclose(momentum, 0.1, rel_tol=1e-9):
        text += f" momentum={num_text(float(momentum))}"
    text += " affine=false" if w is None else ""
    return Piece(node.name, text, x.name, weight=("batchnorm", weights), hint=leaf or "bn", strong=True)


def _embedding(t: Translator, node, leaf):
    w, ids = node.args[0], node.args[1]
    if ids.op == "call_function" and target_name(ids) in ("aten.arange.start", "aten.arange.default") \
            and len(ids.users) == 1:
        start, end = (0, ids.args[0]) if target_name(ids) == "aten.arange.default" else ids.args[:2]
        if start == 0 and not ids.kwargs.get("step"):
            end_v = val(end) if hasattr(end, "meta") else end
            return Piece(node.name, f"slice 0 0 {t.size(end_v)}", w.name, hint="pos_emb")
    if t.owned(w) and t.source(w):
        v, d = val(w).shape
        return Piece(node.name, f"embed {t.size(v, 'vocab')} {t.size(d, 'model')}", ids.name,
                     weight=("embed", _weights(t, weight=w)), hint=leaf or "emb", strong=True)
    return Piece(node.name, f"embed {tok(w.name)}", ids.name, refs=[w.name], hint="tok_emb")


SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")


def _sdpa(t: Translator, node, leaf):
    """scaled_dot_product_attention as two bindings: the weights `att`, then `att @ v`."""
    a = {n: arg(node, i, n, None) for i, n in enumerate(SDPA_ARGS)}
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    p, causal = a["dropout_p"] or 0.0, bool(a["is_causal"])
    scale, gqa = node.kwargs.get("scale"), node.kwargs.get("enable_gqa", False)
    qv, kv = val(q), val(k)
    if mask is not None and val(mask).dtype.is_floating_point is False:
        return [t.opaque(node, "a boolean attn_mask (True keeps a position: shapelang masks the other way)")]
    if causal and mask is not None:
        return [t.opaque(node, "both attn_mask and is_causal")]
    keys, values = tok(k.name), tok(v.name)
    if gqa and qv.shape[-3] != kv.shape[-3]:
        group = t.sizes.ratio(qv.shape[-3], kv.shape[-3]) or t.size(qv.shape[-3] // kv.shape[-3]) \
            if isinstance(qv.shape[-3], int) else None
        if group is None:
            return [t.opaque(node, "grouped-query attention with a dynamic head count")]
        keys = f"{keys} -> repeat_interleave {group} -3"
        values = f"({values} -> repeat_interleave {group} -3)"
    width = qv.shape[-1]
    if scale is None:
        factor = f"1/sqrt({t.size(width)})"
    else:
        factor = _scale_text(t, qv, float(scale)) or num_text(float(scale))
    scores = f"{tok(q.name)} @ ({keys} -> transpose -2 -1) -> scale {factor}"
    refs = [q.name, k.name]
    if mask is not None:
        scores = f"({scores}) + {tok(mask.name)}"
        refs.append(mask.name)
    if causal:
        scores += " -> mask causal"
    scores += " -> softmax -1"
    if p:
        scores += f" -> dropout {num_text(float(p))}"
    att = f"{node.name}\x02att"
    first = Piece(att, scores, refs=refs, hint="att", comment=None)
    second = Piece(node.name, f"{tok(att)} @ {values}", refs=[att, v.name], hint="y")
    return [first, second]


TABLE.update({
    "aten.linear.default": _linear,
    "aten.layer_norm.default": _layer_norm,
    "aten.rms_norm.default": _rms_norm,
    "aten.group_norm.default": _group_norm, "aten.batch_norm.default": _batch_norm,
    "aten.embedding.default": _embedding,
    "aten.scaled_dot_product_attention.default": _sdpa,
})
