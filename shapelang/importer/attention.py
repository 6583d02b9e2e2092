"""Import, nn.MultiheadAttention: its call written as attention reads, not as its kernel.

PyTorch's MultiheadAttention folds the heads into the batch axis (`[S, B*H, Dh]`) on its way
to scaled_dot_product_attention; step by step that is correct but unreadable, and the
checker warns that batch and heads share an axis. When a call's graph shows an
nn.MultiheadAttention with no masks, no bias_k/bias_v and no zero attention, its steps are
written the way specs/pytorch/multihead_attention.shape writes them: the in_proj as one
`linear 3*D` (self-attention) or three `linear D` (their rows of in_proj_weight), heads
split with `reshape [B, S, H, Dh] -> transpose 1 2`, the scores, softmax, `att @ vh`, the
heads merged, out_proj. The importer's verification compares the result with the module.

When a module calls its attentions both ways (nn.TransformerDecoderLayer: self-attention on
the target, cross-attention on the memory), every call is written the cross-attention way,
a query and a memory, so that the class is one block: self-attention is that block called
with the query as its memory (`self_attn: x -> MultiheadAttention(x)`), its in_proj's rows
three `linear D`.
"""
from __future__ import annotations

import torch
from torch import nn

from .graph import arg, target_name, tok, val
from .scope import call_stack, segment_io
from .translate import Piece


def reads_memory(ctx) -> bool:
    """Whether some nn.MultiheadAttention call of the module attends over another tensor than
    its query (cross-attention)."""
    if ctx.module is None or not any(isinstance(m, nn.MultiheadAttention) for m in ctx.module.modules()):
        return False
    calls: dict[str, list] = {}
    for n in ctx.nodes:
        if n.op == "call_function":
            for key, path, _cls in call_stack(n):
                if isinstance(ctx.submodule(path), nn.MultiheadAttention):
                    calls.setdefault(key, []).append(n)
                    break
    for raw in calls.values():
        inputs, _ = segment_io([n for n in raw if ctx.translatable(n)], raw, ctx)
        if sum(val(ctx.by_name[k]).dtype.is_floating_point for k in inputs) > 1:
            return True
    return False


def with_memory(ctx, mha: nn.MultiheadAttention, inputs: list) -> list:
    """A call's inputs as its block takes them: the query, the key and value, then a padding
    mask; a self-attention call's query read again as its memory (a key of its own,
    `ctx.memory`) where the module's attentions are written the cross-attention way."""
    floats = [k for k in inputs if ctx.value(k).dtype.is_floating_point]
    inputs = floats + [k for k in inputs if k not in floats]
    if len(floats) != 1 or ctx.value(floats[0]).dim() != 3 or not ctx.reads_memory():
        return inputs
    q = floats[0]
    axis = 1 if mha.batch_first else 0
    taken = {str(ctx.sizes.binds(s)) for s in ctx.value(q).shape}
    length = ctx.sizes.bound_name(taken, "the memory's length")
    key = f"{q}\x02memory"
    ctx.memory[key] = (q, axis, length)
    i = inputs.index(q) + 1
    return inputs[:i] + [key] + inputs[i:]


def recognise(ctx, scope, raw: list, mha: nn.MultiheadAttention, inputs: list, out: str) -> list | None:
    """The pieces of one MultiheadAttention call (`inputs`: query, key, value in first-use
    order; `out`: the call's result), or None when the call is not the plain case."""
    if mha.bias_k is not None or mha.add_zero_attn:
        return None
    # a key_padding_mask: a bool [B, T] input (True: the key is padding), at most one
    pads = [k for k in inputs if ctx.value(k).dim() == 2 and ctx.value(k).dtype == torch.bool]
    inputs = [k for k in inputs if k not in pads]
    if len(pads) > 1 or len(inputs) not in (1, 2, 3):
        return None
    shapes = [ctx.value(k) for k in inputs]
    if any(s.dim() != 3 or not s.dtype.is_floating_point for s in shapes):
        return None
    linears = [n for n in raw if target_name(n) == "aten.linear.default"]
    memory = any(k in ctx.memory for k in inputs)      # self-attention written with a memory
    packed = len(inputs) == 1 and mha._qkv_same_embed_dim
    # key is value (cross-attention on one memory): PyTorch projects k and v with one packed
    # linear (in_proj_weight's last two row blocks); the spec writes its two `linear D`
    packed_kv = len(inputs) == 2 and mha._qkv_same_embed_dim and not memory
    if len(linears) != (2 if packed or memory and mha._qkv_same_embed_dim else 3 if packed_kv else 4) \
            or any(target_name(n) == "aten.baddbmm.default" for n in raw):
        return None
    if not pads and any(target_name(n) == "aten.masked_fill.Scalar" for n in raw):
        return None
    sdpa = [n for n in raw if target_name(n) == "aten.scaled_dot_product_attention.default"]
    if len(sdpa) != 1 or arg(sdpa[0], 5, "is_causal") or (arg(sdpa[0], 3, "attn_mask") is not None) != bool(pads):
        return None
    t, first = ctx.tr, mha.batch_first
    q_in = inputs[0]
    k_in = inputs[1] if len(inputs) > 1 else q_in
    v_in = inputs[2] if len(inputs) > 2 else k_in
    fqn = ctx.module_path(mha)
    b_ax, s_ax = (0, 1) if first else (1, 0)

    def size(s, role=None):
        return t.sizes.text(s if not hasattr(s, "node") else s.node.expr, role)

    B, S = size(ctx.value(q_in).shape[b_ax]), size(ctx.value(q_in).shape[s_ax])
    T = size(ctx.memory[k_in][2] if k_in in ctx.memory else ctx.value(k_in).shape[s_ax])
    D, H = size(mha.embed_dim), size(mha.num_heads, "size")
    Dh = t.sizes.ratio(mha.embed_dim, mha.num_heads) or size(mha.embed_dim // mha.num_heads)
    pieces, keys = [], {}
    seq = {q_in: S, k_in: T, v_in: T}
    for k in dict.fromkeys([q_in, k_in, v_in]):
        keys[k] = k
        if not first:       # [S, B, D] -> [B, S, D]
            keys[k] = f"{k}\x02bf"
            pieces.append(Piece(keys[k], "transpose 0 1", k, hint="xb"))
    bias = mha.in_proj_bias is not None
    flag = "" if bias else " bias=false"
    names = [f"{fqn}in_proj_bias"] * 3 if bias else [None] * 3
    if packed:
        w = {"weight": f"{fqn}in_proj_weight"} | ({"bias": f"{fqn}in_proj_bias"} if bias else {})
        ctx.weights[linears[0].name] = ("linear", w)
        pieces.append(Piece(linears[0].name, f"linear 3*{D}{flag}", keys[q_in], weight=("linear", w),
                            hint="in_proj", strong=True))
        outs = [f"{out}\x02{r}" for r in "qkv"]
        pieces.append(Piece(f"{out}\x02chunk", "chunk 3 -1", linears[0].name, outs=outs, hint="qkv"))
        ctx.roles.update(zip(outs, "qkv"))
        sources = dict(zip("qkv", outs))
    else:
        sources = {}
        for j, (role, src) in enumerate(zip("qkv", (q_in, k_in, v_in))):
            if mha._qkv_same_embed_dim:
                w = {"weight": [f"{fqn}in_proj_weight", j, 3]}
            else:
                w = {"weight": f"{fqn}{role}_proj_weight"}
            if bias:
                w["bias"] = [names[j], j, 3]
            if memory and mha._qkv_same_embed_dim:    # the packed in_proj is one node: the rows by name
                key = f"{out}\x02{role}proj"
                ctx.order[key] = ctx.index[linears[0].name] + j / 4
            elif packed_kv and role == "v":     # the packed k/v linear is one node: v's rows by name
                key = f"{out}\x02vproj"
                ctx.order[key] = ctx.index[linears[1].name] + 0.5
            else:
                key = linears[j].name
            ctx.weights[key] = ("linear", w)
            pieces.append(Piece(key, f"linear {D}{flag}", keys[src], weight=("linear", w), hint=role,
                                strong=True))
            sources[role] = key
    heads = {}
    for role, src in zip("qkv", (q_in, k_in, v_in)):
        key = f"{out}\x02{role}h"
        pieces.append(Piece(f"{key}\x02r", f"reshape [{B}, {seq[src]}, {H}, {Dh}]", sources[role], hint=role + "h"))
        pieces.append(Piece(key, "transpose 1 2", f"{key}\x02r", hint=role + "h"))
        ctx.roles[key] = role + "h"
        heads[role] = key
    hide = ""
    if pads:       # [B, T] -> [B, 1, 1, T]: one row of hidden keys per sequence, for every head and query
        m = f"{out}\x02pad"
        pieces.append(Piece(m, f"reshape [{B}, 1, 1, {T}]", pads[0], hint="pad"))
        hide = f" -> mask {tok(m)}"
    att = f"{tok(heads['q'])} @ ({tok(heads['k'])} -> transpose -2 -1) -> scale 1/sqrt({Dh}){hide} -> softmax -1"
    if mha.dropout:
        att += f" -> dropout {mha.dropout!r}"
    pieces.append(Piece(f"{out}\x02att", att, refs=[heads["q"], heads["k"]] + ([f"{out}\x02pad"] if pads else []),
                        hint="att"))
    y = f"{out}\x02y"
    pieces.append(Piece(y, f"{tok(f'{out}{chr(2)}att')} @ {tok(heads['v'])}", refs=[f"{out}\x02att", heads["v"]],
                        hint="y"))
    pieces.append(Piece(f"{y}\x02t", "transpose 1 2", y, hint="y"))
    pieces.append(Piece(f"{y}\x02m", f"reshape [{B}, {S}, {D}]", f"{y}\x02t", hint="y"))
    w = {"weight": f"{fqn}out_proj.weight"} | ({"bias": f"{fqn}out_proj.bias"} if mha.out_proj.bias is not None
                                               else {})
    last = out if first else f"{out}\x02o"
    ctx.weights[linears[-1].name] = ("linear", w)
    pieces.append(Piece(last, f"linear {D}" + ("" if "bias" in w else " bias=false"), f"{y}\x02m",
                        weight=("linear", w), hint="out_proj", strong=True))
    if not first:
        pieces.append(Piece(out, "transpose 0 1", last, hint="out"))
    return pieces
