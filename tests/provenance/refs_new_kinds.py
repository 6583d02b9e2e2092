"""PyTorch references for the bug pairs of the provenance kinds W303 (outside
plain attention), W309, W310, W311, W312 and W313 in tests/provenance/bugs/.

Each reference computes, in plain torch / torch.nn.functional, what the
correct twin (NAME.fixed.shape) computes: `ref(inputs, weights, sizes, **options)`
with the inputs by name, the state dict of the generated module (the bug's:
both modules share every weight, except that a norm the bug applies along
another axis has a gain of another length, still at its identity start, so
the references use no norm gain) and the sizes. They are written from the
formulas (F.scaled_dot_product_attention, F.group_norm, F.conv1d, ...), not
from the generated code.

BUG_REFERENCES maps each bug's stem to (reference, options), as REFERENCES in
tests/test_provenance_corpus.py does. The module imports nothing from the
test module, so that module may import it.
"""
from __future__ import annotations

from refs_common import _F, _heads, _merge, _proj, _rope, _rope_tables, _rotate_half, _sdpa, _torch  # noqa: F401

# ------------------------------------------------------------------ helpers


# ------------------------------------------------------------------ W303: softmax axes outside plain attention

def ref_moe_dense(i, w, sz):
    """A dense mixture: every expert (GELU MLP) on every token, weighted by a
    softmax over the experts."""
    F = _F()
    h = i["h"]
    mix = (h @ w["W_gate"].T).softmax(-1)   # [B, T, E]
    out = 0
    for e in range(sz["E"]):
        expert = F.gelu(h @ w["W_in"][e]) @ w["W_out"][e]
        out = out + mix[..., e:e + 1] * expert
    return out


def ref_feature_pool(i, w, sz):
    """Multi-dimensional attention pooling: scores per token and feature from
    an ELU MLP, softmax over the tokens for each feature, weighted sum over the
    tokens, LayerNorm."""
    F = _F()
    x = i["x"]
    scores = _proj(F.elu(_proj(x, w, "scores_linear1")), w, "scores_linear2")   # [B, S, D]
    pooled = (scores.softmax(dim=1) * x).sum(1)
    return F.layer_norm(pooled, pooled.shape[-1:], w["out.weight"], w["out.bias"], eps=1e-5)


def ref_rag_mixture(i, w, sz):
    """RAG-Sequence: p(passage | query) by a softmax over the N passages of
    each query, times p(answer | query, passage), summed over the passages."""
    torch = _torch()
    q, docs = i["query"] @ w["W_q"], i["passages"]
    doc_prob = torch.softmax((docs * q[:, None, :]).sum(-1), dim=1)        # [B, N]
    answer = ((docs + i["query"][:, None, :]) @ w["W_gen"]).softmax(-1)   # [B, N, V]
    return (doc_prob[..., None] * answer).sum(1)


def ref_spatial_softargmax(i, w, sz):
    """A 1x1 conv, then per channel the expected (x, y) on a [-1, 1] grid
    under the softmax of its map over the positions."""
    torch, F = _torch(), _F()
    logits = F.conv2d(i["fmap"], w["logits.weight"], w["logits.bias"]).flatten(2)   # [B, C, Hh*Ww]
    gy, gx = torch.meshgrid(torch.linspace(-1, 1, sz["Hh"]), torch.linspace(-1, 1, sz["Ww"]), indexing="ij")
    p = logits.softmax(-1)
    x = (p * gx.reshape(-1)).sum(-1)
    y = (p * gy.reshape(-1)).sum(-1)
    return torch.stack([x, y], -1).flatten(1)


def ref_mha(i, w, sz, causal=False, names=("W_q", "W_k", "W_v", "W_o"), x="x"):
    x, h = i[x], sz["H"]
    q, k, v = (_heads(_proj(x, w, n), h) for n in names[:3])
    return _proj(_merge(_sdpa(q, k, v, causal)), w, names[3])


def ref_pool_query(i, w, sz):
    """Multi-head attention pooling with one learned query per head
    ([H, Dh], the same for every image), then a linear."""
    x, h = i["patches"], sz["H"]
    b = x.shape[0]
    k = _heads(_proj(x, w, "pooled.k"), h)
    v = _heads(_proj(x, w, "pooled.v"), h)
    q = w["pooled.query"][None, :, None, :].expand(b, -1, -1, -1)   # [B, H, 1, Dh]
    pooled = _sdpa(q, k, v).reshape(b, -1)                          # [B, D]
    return _proj(pooled, w, "out")


# ------------------------------------------------------------------ W309: channels at axis 1

def ref_groupnorm_tokens(i, w, sz):
    """Pre-norm MLP block with GroupNorm over the features of [B, S, D]."""
    F = _F()
    x = i["x"]
    h = F.group_norm(x.transpose(1, 2), sz["G"], eps=1e-5).transpose(1, 2)
    return x + _proj(F.gelu(_proj(h, w, "out_linear1")), w, "out_linear2")


def ref_conv_groupnorm_frontend(i, w, sz):
    """conv1d over [B, M, T], GroupNorm over the channels, GELU, to tokens."""
    F = _F()
    c = F.conv1d(i["mel"], w["tokens_conv.weight"], w["tokens_conv.bias"], padding=1)
    tokens = F.gelu(F.group_norm(c, sz["G"], eps=1e-5)).transpose(1, 2)
    return _proj(tokens, w, "out")


def ref_groupnorm_grid(i, w, sz):
    """Tokens [B, Hp*Wp, C] as a channels-last grid, GroupNorm over the
    channels, SiLU, a linear over the channels."""
    F = _F()
    t = i["tokens"]
    grid = t.reshape(t.shape[0], sz["Hp"], sz["Wp"], sz["C"])
    act = F.silu(F.group_norm(grid.permute(0, 3, 1, 2), sz["G"], eps=1e-5).permute(0, 2, 3, 1))
    return _proj(act, w, "out")


def ref_groupnorm_fmap(i, w, sz):
    """x + conv2d(SiLU(GroupNorm(x))) on a [B, C, H, W] feature map."""
    F = _F()
    x = i["fmap"]
    h = F.silu(F.group_norm(x, sz["G"], eps=1e-5))
    return x + F.conv2d(h, w["out.weight"], w["out.bias"], padding=1)


def ref_conformer_conv(i, w, sz):
    """Conformer's convolution module with GroupNorm: linear to 2D, GLU,
    depthwise conv over the frames, GroupNorm over the channels, SiLU, linear;
    a residual around it."""
    F = _F()
    x = i["x"]
    u = F.glu(_proj(x, w, "out.u"), -1).transpose(1, 2)             # [B, D, T]
    c = F.conv1d(u, w["out.c.weight"], w["out.c.bias"], padding=1, groups=sz["D"])
    n = F.silu(F.group_norm(c, sz["G"], eps=1e-5).transpose(1, 2))   # [B, T, D]
    return x + _proj(n, w, "out.out_linear")


# ------------------------------------------------------------------ W310: rotate_half along the head width

def ref_rope_mha(i, w, sz, names=("W_q", "W_k", "W_v", "W_o")):
    """Causal multi-head attention with RoPE on q and k (rotate_half on each
    head's halves), the cos and sin tables [S, Dh] from the buffers."""
    x, h, cos, sin = i["x"], sz["H"], w["cos_table"], w["sin_table"]
    q, k, v = (_heads(_proj(x, w, n), h) for n in names[:3])
    heads = _sdpa(_rope(q, cos, sin), _rope(k, cos, sin), v, True)
    return _proj(_merge(heads), w, names[3])


# ------------------------------------------------------------------ W311: positions counted along the tokens

def ref_learned_positions(i, w, sz):
    """Token embedding plus learned positions 0..S-1, LayerNorm, a linear."""
    F = _F()
    ids = i["ids"]
    s = ids.shape[1]
    h = w["W_tok"][ids] + w["W_pos"][:s]
    return _proj(F.layer_norm(h, h.shape[-1:], w["h.weight"], w["h.bias"], eps=1e-5), w, "out")


def ref_seq_first_positions(i, w, sz):
    """Sequence-first [S, B, D] plus learned positions along axis 0,
    LayerNorm, a ReLU MLP."""
    F = _F()
    src = i["src"]
    h = src + w["W_pos"][: src.shape[0], None, :]
    h = F.layer_norm(h, h.shape[-1:], w["h.weight"], w["h.bias"], eps=1e-5)
    return _proj(F.relu(_proj(h, w, "out_linear1")), w, "out_linear2")


def ref_tutorial_pe(i, w, sz):
    """The tutorial's table pe: [max_len, 1, D], its first S rows added along
    the tokens of a batch-first x, LayerNorm, a linear."""
    F = _F()
    x = i["x"]
    h = x + w["pe"][: x.shape[1]].transpose(0, 1)
    return _proj(F.layer_norm(h, h.shape[-1:], eps=1e-5), w, "out_linear")


def ref_rope_computed(i, w, sz):
    """Causal multi-head attention with RoPE whose tables are computed for
    the positions 0..S-1 (Hugging Face's rotary embedding, theta 10000)."""
    x, h = i["x"], sz["H"]
    cos, sin = _rope_tables(x.shape[1], sz["Dh"])
    q, k, v = (_heads(_proj(x, w, n), h) for n in ("q", "k", "v"))
    heads = _sdpa(_rope(q, cos, sin), _rope(k, cos, sin), v, True)
    return _proj(_merge(heads), w, "out")


# ------------------------------------------------------------------ W312: scale and mask before the softmax

def ref_mha_fused_qkv(i, w, sz, causal=False):
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(t, h) for t in (x @ w["W_qkv"]).chunk(3, -1))
    return _merge(_sdpa(q, k, v, causal)) @ w["W_o"]


def ref_single_head_cross(i, w, sz):
    """One head from the queries to the memory, scale 1/sqrt(Dk)."""
    q = i["query"] @ w["W_q"]
    return _sdpa(q, i["memory"] @ w["W_k"], i["memory"] @ w["W_v"])


def ref_prenorm_padded_attention(i, w, sz):
    """x + attention(LayerNorm(x)) with the padded keys hidden."""
    F = _F()
    x, h, pad = i["x"], sz["H"], i["pad"]
    n = F.layer_norm(x, x.shape[-1:], w["out_ln.weight"], w["out_ln.bias"], eps=1e-5)
    q, k, v = (_heads(_proj(n, w, f"out.{p}"), h) for p in "qkv")
    heads = _sdpa(q, k, v, attn_mask=~pad[:, None, None, :])
    return x + _proj(_merge(heads), w, "out.out_linear")


# ------------------------------------------------------------------ W313: mask polarity

def ref_nanogpt_attention(i, w, sz):
    """nanoGPT's CausalSelfAttention: one linear to 3C, split, causal SDPA,
    merge, a linear."""
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(t, h) for t in _proj(x, w, "qkv").split(x.shape[-1], -1))
    return _proj(_merge(_sdpa(q, k, v, True)), w, "out")


def ref_gqa_causal(i, w, sz):
    x = i["x"]
    q = _heads(_proj(x, w, "q"), sz["H"])
    k, v = (_heads(_proj(x, w, n), sz["G"]) for n in ("k", "v"))
    return _proj(_merge(_sdpa(q, k, v, True, enable_gqa=True)), w, "out")


def ref_single_head_causal(i, w, sz):
    x = i["x"]
    return _sdpa(x @ w["W_q"], x @ w["W_k"], x @ w["W_v"], True)


def ref_padded_attention(i, w, sz):
    """x + attention(x) with the padded keys hidden (attn_mask True where a
    key is a real token)."""
    x, h, pad = i["x"], sz["H"], i["pad"]
    q, k, v = (_heads(_proj(x, w, n), h) for n in ("q", "k", "v"))
    return x + _proj(_merge(_sdpa(q, k, v, attn_mask=~pad[:, None, None, :])), w, "out")


CAUSAL = {"causal": True}
LINEAR_QKVO = {"names": ("q", "k", "v", "out")}
ROPE_LINEARS = {"names": ("q_linear", "k_linear", "v", "out")}


def ref_vit_block_positions(i, w, sz):
    """Patches plus learned positions 0..N-1 (a block's table), LayerNorm, a linear."""
    F = _F()
    x = i["patches"]
    h = x + w["out.W_pos"][: x.shape[1]]
    h = F.layer_norm(h, h.shape[-1:], w["out.out_ln.weight"], w["out.out_ln.bias"], eps=1e-5)
    return _proj(h, w, "out_linear")


def ref_audio_positions(i, w, sz):
    """Conv1d front end over the mel bins, frames plus learned positions 0..T-1, LayerNorm, a linear."""
    F = _F()
    frames = F.gelu(F.conv1d(i["mel"], w["frames.weight"], w["frames.bias"], padding=1)).transpose(1, 2)
    h = frames + w["W_pos"][: frames.shape[1]]
    h = F.layer_norm(h, h.shape[-1:], w["out_ln.weight"], w["out_ln.bias"], eps=1e-5)
    return _proj(h, w, "out_linear")


BUG_REFERENCES = {
    # W303
    "w303_moe_gate_experts_first_softmax_last": (ref_moe_dense, {}),
    "w303_rag_doc_scores_softmax_over_batch": (ref_rag_mixture, {}),
    "w303_spatial_softargmax_over_channels": (ref_spatial_softargmax, {}),
    "w303_feature_pool_softmax_over_features": (ref_feature_pool, {}),
    "w303_einsum_heads_last_softmax_last": (ref_mha, {}),
    "w303_pool_block_softmax_over_heads": (ref_pool_query, {}),
    # W309
    "w309_groupnorm_on_tokens_last": (ref_groupnorm_tokens, {}),
    "w309_groupnorm_after_early_transpose": (ref_conv_groupnorm_frontend, {}),
    "w309_groupnorm_channels_last_grid": (ref_groupnorm_grid, {}),
    "w309_groupnorm_movedim_like_layernorm": (ref_groupnorm_fmap, {}),
    "w309_conformer_conv_block_groupnorm": (ref_conformer_conv, {}),
    # W310
    "w310_rotate_half_slices_across_heads": (ref_rope_mha, {}),
    "w310_rotate_full_width_chunk": (ref_rope_mha, ROPE_LINEARS),
    "w310_rotate_full_width_view_halves": (ref_rope_mha, {}),
    "w310_rotate_half_narrow_heads_bshd": (ref_rope_mha, ROPE_LINEARS),
    # W311
    "w311_positions_from_batch_size": (ref_learned_positions, {}),
    "w311_seq_first_positions_from_batch": (ref_seq_first_positions, {}),
    "w311_vit_positions_from_batch_block": (ref_vit_block_positions, {}),
    "w311_audio_frames_positions_from_batch": (ref_audio_positions, {}),
    # W312
    "w312_scale_after_softmax": (ref_mha, {}),
    "w312_causal_mask_after_softmax": (ref_mha, {**CAUSAL, **LINEAR_QKVO}),
    "w312_einsum_cross_scale_after_softmax": (ref_single_head_cross, {}),
    "w312_block_padding_mask_after_softmax": (ref_prenorm_padded_attention, {}),
    "w312_causal_zeroed_after_softmax": (ref_mha_fused_qkv, CAUSAL),
    # W313
    "w313_nanogpt_tril_as_fill_mask": (ref_nanogpt_attention, {}),
    "w313_triu_hides_diagonal": (ref_mha, CAUSAL),
    "w313_sdpa_keep_mask_given_future": (ref_gqa_causal, {}),
    "w313_where_keeps_future": (ref_single_head_causal, {}),
}
