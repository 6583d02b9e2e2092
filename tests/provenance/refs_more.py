"""PyTorch references for the second round of the provenance corpus.

BUG_REFERENCES: for the bug pairs bugs/w30x_b_*.shape, what the correct twin
(NAME.fixed.shape) computes. LOOKALIKE_REFERENCES: for lookalike/*.shape,
correct specs that look like one of the W301-W313 mistakes, what they compute.

Each reference is `ref(inputs, weights, sizes, **options) -> Tensor`, written
from the PyTorch formula (F.scaled_dot_product_attention, F.layer_norm,
F.unfold, nn.MultiheadAttention's layout, ...), never by calling the
generated code. `weights` is the generated module's state dict: `linear`
steps are named after their binding (`q.weight`, `q.bias`), a block's
parameters after the binding that calls it (`h.gamma`), a layernorm in a
pipeline `<binding>_ln`. Tables the spec computes (ALiBi slopes, decay
tables) are float32 in the generated module, as torch makes them, so the
references build them in float32 too before mixing them with float64 values.
Compare with torch.allclose(rtol=1e-6, atol=1e-8).
"""
from __future__ import annotations

import math

from refs_common import _F, _heads, _lin, _ln, _merge, _sdpa, _torch


def _attend(scores, v, dim=-1):
    return scores.softmax(dim) @ v


def _alibi_slopes(h):
    """2 ** (-8 h / H) for h = 1..H, in float32 as the spec computes them."""
    torch = _torch()
    return 2.0 ** (-8.0 * torch.arange(1, h + 1) / h)


# ================================================================== bug pairs (the twins)

def ref_mha_linear(i, w, sz, causal=False, x="x", names=("q", "k", "v", "out")):
    """Multi-head self-attention with nn.Linear projections (biases if any)."""
    t, h = i[x], sz["H"]
    q, k, v = (_heads(_lin(t, w, n), h) for n in names[:3])
    return _lin(_merge(_sdpa(q, k, v, causal)), w, names[3])


def ref_mqa_folded(i, w, sz):
    x, h = i["x"], sz["H"]
    q = _heads(_lin(x, w, "q"), h)
    k, v = (_lin(x, w, n)[:, None].expand(-1, h, -1, -1) for n in ("k", "v"))
    return _lin(_merge(_sdpa(q, k, v)), w, "out")


def _patches(img, p):
    """[B, C, Hi, Wi] -> [B, Hp*Wp, P*P*C], each patch's pixels in (row, column, channel) order."""
    b, c = img.shape[:2]
    cols = _F().unfold(img, kernel_size=p, stride=p)          # [B, C*P*P, L], (c, p1, p2)
    n = cols.shape[-1]
    return cols.view(b, c, p, p, n).permute(0, 4, 2, 3, 1).reshape(b, n, p * p * c)


def ref_patch_embed(i, w, sz):
    h = _lin(_patches(i["img"], sz["P"]), w, "out_linear")
    return _ln(h, w, "out_ln")


def ref_encdec_cross_einsum(i, w, sz):
    tgt, mem, h, p = i["tgt"], i["mem"], sz["H"], "out."
    q = _heads(tgt @ w[p + "W_q"], h)
    k, v = (_heads(mem @ w[p + n], h) for n in ("W_k", "W_v"))
    return _ln(tgt + _merge(_sdpa(q, k, v)), w, "out_ln")


def ref_audio_frames_mha(i, w, sz):
    F = _F()
    frames = F.gelu(F.conv1d(i["mel"], w["frames.weight"], w["frames.bias"], padding=1)).transpose(1, 2)
    return frames + ref_mha_linear({"x": frames}, w, sz)


def ref_retrieval_reader(i, w, sz):
    qs, ps, h = i["question"], i["passages"], sz["H"]
    q = _heads(_lin(qs, w, "q"), h)
    k, v = (_heads(_lin(ps, w, n), h) for n in ("k", "v"))
    return qs + _lin(_merge(_sdpa(q, k, v)), w, "out")


def ref_router(i, w, sz):
    torch = _torch()
    probs = _lin(i["x"], w, "logits").softmax(-1)
    top, chosen = probs.topk(sz["K"], -1)
    return torch.zeros_like(probs).scatter(-1, chosen, top / top.sum(-1, keepdim=True))


def ref_attention_pooling(i, w, sz):
    frames = i["frames"]
    weights = _lin(frames, w, "w").softmax(1)                 # over the frames
    return _lin((weights * frames).sum(1), w, "out")


def ref_norm_block_ffn(i, w, sz):
    F = _F()
    x = i["x"]
    h = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True, correction=0) + 1e-5) * w["h.gamma"]
    return x + _lin(F.relu(_lin(h, w, "out_linear1")), w, "out_linear2")


def ref_revin_rlinear(i, w, sz):
    series = i["series"]                                      # [B, L, C]
    mu = series.mean(1, keepdim=True)
    sd = (series.var(1, keepdim=True, correction=0) + 1e-5).sqrt()
    pred = _lin(((series - mu) / sd).transpose(1, 2), w, "pred").transpose(1, 2)
    return pred * sd + mu


def ref_simple_rmsnorm(i, w, sz):
    x = i["x"]
    return _lin(_F().normalize(x, dim=-1) * math.sqrt(x.shape[-1]) * w["gamma"], w, "out")


def ref_speech_cross(i, w, sz):
    text, audio, h = i["text"], i["audio"], sz["H"]
    q = _heads(_lin(text, w, "q"), h)
    k, v = (_heads(_lin(audio, w, n), h) for n in ("k", "v"))
    return text + _lin(_merge(_sdpa(q, k, v)), w, "out")


def ref_perceiver_io_decoder(i, w, sz):
    lat, h = i["latents"], sz["H"]
    q = _heads(_lin(w["queries"], w, "q")[None], h).expand(lat.shape[0], -1, -1, -1)
    k, v = (_heads(_lin(lat, w, n), h) for n in ("k", "v"))
    return _merge(_sdpa(q, k, v))


def ref_retrieval_cross_head(i, w, sz):
    chunk, nb = i["chunk"], i["neighbour"]
    q, k, v = _lin(chunk, w, "q"), _lin(nb, w, "k"), _lin(nb, w, "v")
    return chunk + _lin(_sdpa(q, k, v), w, "out")


def ref_vit_layer_fused_qkv(i, w, sz):
    x, hh = i["patches"], sz["H"]
    b, n, d = x.shape
    qkv = _lin(_ln(x, w, "h"), w, "qkv").view(b, n, 3, hh, d // hh).permute(2, 0, 3, 1, 4)
    return x + _lin(_merge(_sdpa(qkv[0], qkv[1], qkv[2])), w, "out")


def ref_dk_dv(i, w, sz):
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    return _lin(_merge(_sdpa(q, k, v, True)), w, "out")      # scale 1/sqrt(Dk), the default


def ref_mla_like(i, w, sz):
    x, h = i["x"], sz["H"]
    q = _heads(_lin(x, w, "q"), h)
    k_c = _heads(_lin(x, w, "k_c"), h)
    k_r = _lin(x, w, "k_r")[:, None].expand(-1, h, -1, -1)
    v = _heads(_lin(x, w, "v"), h)
    k = _torch().cat([k_c, k_r], -1)
    return _lin(_merge(_sdpa(q, k, v, True)), w, "out")      # scale 1/sqrt(Dn + Dr), the default


def ref_vision_global_attention(i, w, sz):
    fmap, h = i["fmap"], sz["H"]
    b, c, g, _ = fmap.shape
    tokens = fmap.flatten(2).transpose(1, 2)
    q, k, v = (_heads(_lin(tokens, w, n), h) for n in ("q", "k", "v"))
    y = _lin(_merge(_sdpa(q, k, v)), w, "y")
    return fmap + y.transpose(1, 2).reshape(b, c, g, g)


def ref_gqa_linear(i, w, sz, causal=True):
    x = i["x"]
    q = _heads(_lin(x, w, "q"), sz["H"])
    k, v = (_heads(_lin(x, w, n), sz["G"]) for n in ("k", "v"))
    return _lin(_merge(_sdpa(q, k, v, causal, enable_gqa=True)), w, "out")


def ref_retention(i, w, sz):
    torch = _torch()
    x, h, s = i["x"], sz["H"], sz["S"]
    pos = torch.arange(s)
    gap = pos[:, None] - pos
    decay = torch.where(gap >= 0, 0.9 ** gap, 0.0).to(x.dtype)   # float32 table, as built
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    products = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return _lin(_merge((products * decay) @ v), w, "out")


def ref_alibi_linear(i, w, sz):
    torch = _torch()
    x, h, s = i["x"], sz["H"], sz["S"]
    bias = torch.outer(_alibi_slopes(h), torch.arange(s, dtype=torch.float32))
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    return _lin(_merge(_sdpa(q, k, v, attn_mask=bias[:, None, :].to(x.dtype))), w, "out")


def ref_key_bias_linear(i, w, sz):
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    return _lin(_merge(_sdpa(q, k, v, attn_mask=w["key_bias"][:, None, :])), w, "out")


def ref_salience(i, w, sz):
    x, h = i["x"], sz["H"]
    bias = _lin(x, w, "salience").transpose(1, 2)[:, None]     # [B, 1, 1, S]: one logit per key
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    return _lin(_merge(_sdpa(q, k, v, attn_mask=bias)), w, "out")


CAUSAL = {"causal": True}
BUG_REFERENCES = {
    "w301_b_mqa_folded_rows_rearrange": (ref_mqa_folded, {}),
    "w301_b_patchify_view": (ref_patch_embed, {}),
    "w301_b_encdec_einsum_then_view": (ref_encdec_cross_einsum, {}),
    "w302_b_rearrange_merge_order": (ref_mha_linear, CAUSAL),
    "w302_b_movedim_last_flatten": (ref_audio_frames_mha, {}),
    "w302_b_einsum_out_dh": (ref_retrieval_reader, {}),
    "w303_b_router_softmax_over_tokens": (ref_router, {}),
    "w303_b_keys_first_softmax_last": (ref_mha_linear, {}),
    "w303_b_attention_pooling_singleton": (ref_attention_pooling, {}),
    "w304_b_std_over_tokens_block": (ref_norm_block_ffn, {}),
    "w304_b_revin_std_over_channels": (ref_revin_rlinear, {}),
    "w304_b_normalize_default_axis": (ref_simple_rmsnorm, {}),
    "w305_b_cross_sdpa_is_causal": (ref_speech_cross, {}),
    "w305_b_perceiver_io_decoder_triu": (ref_perceiver_io_decoder, {}),
    "w305_b_retrieval_where_tril": (ref_retrieval_cross_head, {}),
    "w306_b_sdpa_scale_model_width": (ref_vit_layer_fused_qkv, {}),
    "w306_b_scale_by_value_width": (ref_dk_dv, {}),
    "w306_b_mla_scale_nope_only": (ref_mla_like, {}),
    "w307_b_vision_residual_transposed": (ref_vision_global_attention, {}),
    "w307_b_gqa_einops_repeat_orders": (ref_gqa_linear, {}),
    "w307_b_retention_decay_transposed": (ref_retention, {}),
    "w308_b_alibi_einsum_attn_mask": (ref_alibi_linear, {}),
    "w308_b_keys_first_bias_unsqueeze1": (ref_key_bias_linear, {}),
    "w308_b_key_salience_per_query": (ref_salience, {}),
}

# ================================================================== look-alikes

def ref_mha_params(i, w, sz, causal=False):
    """Multi-head self-attention with [D, D] parameters W_q, W_k, W_v, W_o (x @ W)."""
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(x @ w[n], h) for n in ("W_q", "W_k", "W_v"))
    return _merge(_sdpa(q, k, v, causal)) @ w["W_o"]


def _torch_mha(query, key, w, h):
    """F.multi_head_attention_forward on sequence-first tensors, with the
    separate q/k/v/out linears of the state dict."""
    torch, F = _torch(), _F()
    d = query.shape[-1]
    out, _ = F.multi_head_attention_forward(
        query, key, key, d, h, None, torch.cat([w["q.bias"], w["k.bias"], w["v.bias"]]),
        None, None, False, 0.0, w["out.weight"], w["out.bias"], training=False, need_weights=False,
        use_separate_proj_weight=True, q_proj_weight=w["q.weight"], k_proj_weight=w["k.weight"],
        v_proj_weight=w["v.weight"])
    return out


def ref_torch_mha_seq_first(i, w, sz, query="x", key="x"):
    return _torch_mha(i[query], i[key], w, sz["H"])


def ref_qkv_interleaved(i, w, sz):
    """Megatron/BLOOM fused rows (H, 3, Dh): reorder them into separate q, k, v
    projections, then plain causal multi-head attention."""
    x, h = i["x"], sz["H"]
    d = x.shape[-1]
    wt = w["qkv.weight"].view(h, 3, d // h, d).transpose(0, 1).reshape(3, d, d)
    bs = w["qkv.bias"].view(h, 3, d // h).transpose(0, 1).reshape(3, d)
    F = _F()
    q, k, v = (_heads(F.linear(x, wt[j], bs[j]), h) for j in range(3))
    return _lin(_merge(_sdpa(q, k, v, True)), w, "out")


def ref_block_local(i, w, sz):
    torch = _torch()
    x, width = i["x"], sz["W"]
    outs = []
    for start in range(0, x.shape[1], width):             # each block of W tokens on its own
        blk = x[:, start:start + width]
        q, k, v = (_lin(blk, w, n) for n in ("q", "k", "v"))
        outs.append(_sdpa(q, k, v))
    return _lin(torch.cat(outs, 1), w, "out")


def ref_per_head_loop(i, w, sz):
    x = i["x"]
    out = 0
    for j in range(sz["H"]):                                # one head at a time
        q, k, v = (x @ w[n][j] for n in ("W_q", "W_k", "W_v"))
        out = out + _sdpa(q, k, v) @ w["W_o"][j]
    return out


def ref_slot_attention(i, w, sz):
    F = _F()
    feats = F.layer_norm(i["inputs"], i["inputs"].shape[-1:], w["feats.weight"], w["feats.bias"])
    b = feats.shape[0]
    slots = w["slots_init"].expand(b, -1, -1)
    slots = F.layer_norm(slots, slots.shape[-1:], w["slots.weight"], w["slots.bias"])
    q, k, v = _lin(slots, w, "q"), _lin(feats, w, "k"), _lin(feats, w, "v")
    attn = (q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])).softmax(1)   # slots compete
    return (attn / attn.sum(-1, keepdim=True)) @ v                       # weighted mean over inputs


def ref_expert_choice(i, w, sz):
    torch = _torch()
    probs = _lin(i["x"], w, "probs").softmax(-1).t()       # [E, T]
    gates, picked = probs.topk(sz["C"], -1)
    return torch.zeros_like(probs).scatter(-1, picked, gates)


def ref_multihead_pooling(i, w, sz):
    frames = i["frames"]
    weights = _lin(frames, w, "w").softmax(1)                # [B, T, H] over the frames
    pooled = weights.transpose(1, 2) @ frames                # [B, H, D]
    return _lin(pooled.flatten(1), w, "out")


def ref_router_experts_first(i, w, sz):
    torch = _torch()
    probs = (i["x"] @ w["W_gate"].t()).softmax(-1)           # [T, E], over the experts
    top, chosen = probs.topk(sz["K"], -1)
    gates = torch.zeros_like(probs).scatter(-1, chosen, top / top.sum(-1, keepdim=True))
    return gates.t()                                         # laid out [E, T] as the spec


def ref_mean_context(i, w, sz):
    torch = _torch()
    local = _F().relu(_lin(i["pts"], w, "local"))
    context = local.mean(1, keepdim=True).expand_as(local)
    return _lin(torch.cat([local, context], -1), w, "out")


def ref_revin_affine(i, w, sz):
    series, a, c = i["series"], w["affine_weight"], w["affine_bias"]
    mu = series.mean(1, keepdim=True)
    sd = (series.var(1, keepdim=True, correction=0) + 1e-5).sqrt()
    normed = (series - mu) / sd * a + c
    pred = _lin(normed.transpose(1, 2), w, "pred").transpose(1, 2)
    return (pred - c) / (a + 1e-10) * sd + mu


def ref_batchnorm_training(i, w, sz):
    x = i["x"]
    return _F().batch_norm(x.transpose(1, 2), None, None, training=True, eps=1e-5).transpose(1, 2)


def ref_groupnorm(i, w, sz):
    return _F().group_norm(i["x"], sz["G"], eps=1e-5)


def ref_convnext_layernorm(i, w, sz):
    fmap = i["fmap"]
    t = fmap.permute(0, 2, 3, 1)
    return _F().layer_norm(t, t.shape[-1:], w["gamma"], w["beta"], eps=1e-6).permute(0, 3, 1, 2)


def ref_xvector(i, w, sz):
    torch = _torch()
    h = _F().relu(_lin(i["frames"], w, "h"))
    return _lin(torch.cat([h.mean(1), h.std(1)], -1), w, "out")


def ref_cross_linear(i, w, sz, queries="tgt", keys="src", causal=False, residual=False, bias=None):
    """Multi-head attention of `queries` over `keys` with linears q, k, v, out."""
    xq, xk, h = i[queries], i[keys], sz["H"]
    q = _heads(_lin(xq, w, "q"), h)
    k, v = (_heads(_lin(xk, w, n), h) for n in ("k", "v"))
    mask = None if bias is None else i[bias][:, None, None, :]
    out = _lin(_merge(_sdpa(q, k, v, causal, attn_mask=mask)), w, "out")
    return xq + out if residual else out


def ref_kv_cache_step(i, w, sz):
    torch = _torch()
    x, h, p = i["x"], sz["H"], sz["P"]
    s = x.shape[1]
    q = _heads(_lin(x, w, "q"), h)
    k = torch.cat([i["past_k"], _heads(_lin(x, w, "k"), h)], 2)
    v = torch.cat([i["past_v"], _heads(_lin(x, w, "v"), h)], 2)
    keep = torch.arange(p + s)[None, :] <= (p + torch.arange(s))[:, None]   # key j at or before P + i
    return _lin(_merge(_sdpa(q, k, v, attn_mask=keep)), w, "out")


def ref_perceiver_ar(i, w, sz):
    torch = _torch()
    x, h, lat_n = i["x"], sz["H"], sz["L"]
    s = x.shape[1]
    q = _heads(_lin(x[:, s - lat_n:], w, "q"), h)
    k, v = (_heads(_lin(x, w, n), h) for n in ("k", "v"))
    keep = torch.arange(s)[None, :] <= (s - lat_n + torch.arange(lat_n))[:, None]
    return _lin(_merge(_sdpa(q, k, v, attn_mask=keep)), w, "out")


def ref_two_streams(i, w, sz):
    text, side, h = i["text"], i["side"], sz["H"]
    q = _heads(_lin(text, w, "out.q"), h)
    k, v = (_heads(_lin(side, w, n), h) for n in ("out.k", "out.v"))
    return text + _lin(_merge(_sdpa(q, k, v, True)), w, "out.out_linear")


def ref_whisper_split_scale(i, w, sz):
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    dh = q.shape[-1]
    return _lin(_merge(_sdpa(q, k, v, True, scale=dh ** -0.5)), w, "out")


def ref_two_products(i, w, sz):
    torch = _torch()
    x, h = i["x"], sz["H"]
    q = torch.cat([_heads(_lin(x, w, "q_c"), h), _heads(_lin(x, w, "q_r"), h)], -1)
    k = torch.cat([_heads(_lin(x, w, "k_c"), h), _heads(_lin(x, w, "k_r"), h)], -1)
    v = _heads(_lin(x, w, "v"), h)
    return _lin(_merge(_sdpa(q, k, v)), w, "out")           # one product over Dn + Dr


def ref_convnext_block(i, w, sz):
    F = _F()
    fmap = i["fmap"]
    c = fmap.shape[1]
    h = F.conv2d(fmap, w["h_conv.weight"], w["h_conv.bias"], padding=1, groups=c).permute(0, 2, 3, 1)
    h = F.layer_norm(h, (c,), w["h_ln.weight"], w["h_ln.bias"], eps=1e-6)
    h = _lin(F.gelu(_lin(h, w, "h_linear1")), w, "h_linear2")
    return fmap + h.permute(0, 3, 1, 2)


def ref_swin_windows(i, w, sz):
    x, ws = i["x"], sz["W"]
    b, g, _, c = x.shape
    m = g // ws

    def partition(t):                                       # Swin's window_partition
        t = t.view(b, m, ws, m, ws, c).permute(0, 1, 3, 2, 4, 5).contiguous()
        return t.view(-1, ws * ws, c)

    def reverse(t):                                         # Swin's window_reverse
        t = t.view(b, m, m, ws, ws, c).permute(0, 1, 3, 2, 4, 5).contiguous()
        return t.view(b, g, g, c)

    win = partition(x)
    q, k, v = (_lin(win, w, n) for n in ("q", "k", "v"))
    return x + reverse(_sdpa(q, k, v))


def ref_esim(i, w, sz):
    torch = _torch()
    a, b = i["a"], i["b"]
    e = a @ b.transpose(1, 2)
    a_hat = e.softmax(-1) @ b                                # each token of a over b's tokens
    b_hat = e.transpose(1, 2).softmax(-1) @ a                # each token of b over a's tokens
    return _lin(torch.cat([a_hat, b_hat], 1), w, "out")


def ref_column_mixing(i, w, sz):
    x = i["x"]                                              # [B, P(h), P(w), C]
    t = x.permute(0, 3, 2, 1)                               # [B, C, W, H]: the height last
    mixed = _F().gelu(_lin(t, w, "mixed")).permute(0, 3, 2, 1)
    return x + mixed


def ref_key_bias_param(i, w, sz):
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    return _lin(_merge(_sdpa(q, k, v, attn_mask=w["key_bias"])), w, "out")


def ref_symmetric_alibi(i, w, sz):
    torch = _torch()
    x, h, s = i["x"], sz["H"], sz["S"]
    pos = torch.arange(s)
    dist = (pos[:, None] - pos).abs().float()
    bias = -(_alibi_slopes(h)[:, None, None] * dist)        # float32, as the spec builds it
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    return _lin(_merge(_sdpa(q, k, v, attn_mask=bias.to(x.dtype))), w, "out")


def ref_t5_relative(i, w, sz):
    torch = _torch()
    x, h, s, r = i["x"], sz["H"], sz["S"], sz["R"]
    pos = torch.arange(s)
    offset = (pos[None, :] - pos[:, None]).clamp(-r, r)     # key j minus query i
    bias = w["W_rel"][offset + r].permute(2, 0, 1)          # [H, S, S]
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    return _lin(_merge(_sdpa(q, k, v, attn_mask=bias, scale=1.0)), w, "out")   # T5: no 1/sqrt(Dh)


# ------------------------------------------------------------------ look-alikes of W309-W313

def _bn(t, w, name, eps=1e-5):
    """BatchNorm in eval mode, named `name` in the state dict (running statistics)."""
    return _F().batch_norm(t, w[f"{name}.running_mean"], w[f"{name}.running_var"], w[f"{name}.weight"],
                           w[f"{name}.bias"], training=False, eps=eps)


def _rope_tables(s, dh):
    """cos and sin [s, dh] of the usual rotary angles, in float32 as the spec computes them."""
    torch = _torch()
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, dh, 2, dtype=torch.float32) / dh)
    freqs = torch.outer(torch.arange(s).float(), inv_freq)
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos(), emb.sin()


def _rotate_half(t):
    """HF transformers' rotate_half on the last axis."""
    half = t.shape[-1] // 2
    return _torch().cat([-t[..., half:], t[..., :half]], -1)


def _causal_softmax(scores):
    torch = _torch()
    n, m = scores.shape[-2:]
    hide = torch.ones(n, m, dtype=torch.bool).triu(1)
    return scores.masked_fill(hide, float("-inf")).softmax(-1)


def ref_conformer_conv_module(i, w, sz):
    F = _F()
    x, p = i["x"], "out."
    u = F.layer_norm(x, x.shape[-1:], w[p + "u.weight"], w[p + "u.bias"]).transpose(1, 2)   # [B, D, S]
    g = F.glu(F.conv1d(u, w[p + "gated.weight"], w[p + "gated.bias"]), dim=1)
    dw = F.conv1d(g, w[p + "dw_conv.weight"], w[p + "dw_conv.bias"], padding=sz["Pk"], groups=x.shape[-1])
    dw = F.silu(_bn(dw, w, p + "dw_bn"))
    return x + F.conv1d(dw, w[p + "out_conv.weight"], w[p + "out_conv.bias"]).transpose(1, 2)


def ref_cpvt_peg(i, w, sz):
    F = _F()
    t = i["tokens"]
    b, _, c = t.shape
    fmap = t.transpose(1, 2).reshape(b, c, sz["Hp"], sz["Wp"])
    peg = F.conv2d(fmap, w["peg.weight"], w["peg.bias"], padding=1, groups=c).flatten(2).transpose(1, 2)
    h = F.layer_norm(t + peg, (c,), w["h.weight"], w["h.bias"])
    return _lin(F.gelu(_lin(h, w, "out_linear1")), w, "out_linear2")


def ref_unet1d_block(i, w, sz):
    F = _F()
    sig, g = i["sig"], sz["G"]
    h = F.conv1d(F.silu(F.group_norm(sig, g, w["h_gn.weight"], w["h_gn.bias"])), w["h_conv.weight"],
                 w["h_conv.bias"], padding=1)
    t = _lin(F.silu(i["temb"]), w, "t")[:, :, None]                 # one value per channel
    h2 = F.conv1d(F.silu(F.group_norm(h + t, g, w["h2_gn.weight"], w["h2_gn.bias"])), w["h2_conv.weight"],
                  w["h2_conv.bias"], padding=1)
    return sig + h2


def ref_mobilenet_inverted_residual(i, w, sz):
    F = _F()
    x = i["fmap"]
    e = w["expand_conv.weight"].shape[0]
    h = F.relu6(_bn(F.conv2d(x, w["expand_conv.weight"]), w, "expand_bn"))
    h = F.relu6(_bn(F.conv2d(h, w["depthwise_conv.weight"], padding=1, groups=e), w, "depthwise_bn"))
    return x + _bn(F.conv2d(h, w["project_conv.weight"]), w, "project_bn")


def ref_mel_conv_pos_table(i, w, sz):
    F = _F()
    feats = F.gelu(F.conv1d(i["mel"], w["feats.weight"], w["feats.bias"], padding=1))   # [B, D, T]
    h = (feats + w["pos"]).transpose(1, 2)                           # pos[d, t] on channel d, frame t
    return _lin(F.layer_norm(h, h.shape[-1:], w["h.weight"], w["h.bias"]), w, "out")


def ref_rope_linear_heads(i, w, sz):
    """Llama-style RoPE in HF's [B, H, S, Dh] layout with computed tables; causal sdpa."""
    x, h = i["x"], sz["H"]
    cos, sin = _rope_tables(x.shape[1], x.shape[-1] // h)
    q, k = (_heads(_lin(x, w, n), h) for n in ("q_linear", "k_linear"))
    q, k = (t * cos + _rotate_half(t) * sin for t in (q, k))
    return _lin(_merge(_sdpa(q, k, _heads(_lin(x, w, "v"), h), True)), w, "out")


def ref_partial_rotary(i, w, sz):
    torch = _torch()
    x, h, cos, sin = i["x"], sz["H"], w["cos_table"], w["sin_table"]
    rd = cos.shape[-1]

    def partial(t):                                                  # GPT-NeoX: rotate the first rd
        rot, rest = t[..., :rd], t[..., rd:]
        return torch.cat([rot * cos + _rotate_half(rot) * sin, rest], -1)

    q, k = (partial(_heads(_lin(x, w, n), h)) for n in ("q_linear", "k_linear"))
    return _lin(_merge(_sdpa(q, k, _heads(_lin(x, w, "v"), h), True)), w, "out")


def ref_rope_params_causal(i, w, sz):
    """RoPE on [B, H, S, Dh] heads with the [S, Dh] tables, [D, D] parameters, causal."""
    x, h, cos, sin = i["x"], sz["H"], w["cos_table"], w["sin_table"]
    q, k = (_heads(x @ w[n], h) for n in ("W_q", "W_k"))
    q, k = (t * cos + _rotate_half(t) * sin for t in (q, k))
    return _merge(_sdpa(q, k, _heads(x @ w["W_v"], h), True)) @ w["W_o"]


def ref_rope_complex(i, w, sz):
    """RoPE as the complex product (x1 + i x2) e^(i angle) on each head's halves."""
    torch = _torch()
    x, h = i["x"], sz["H"]
    dh = x.shape[-1] // h
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, dh, 2, dtype=torch.float32) / dh)
    angles = torch.outer(torch.arange(x.shape[1]).float(), inv_freq)
    turn = torch.complex(angles.cos().double(), angles.sin().double())

    def rope(t):
        z = torch.complex(t[..., :dh // 2], t[..., dh // 2:]) * turn
        return torch.cat([z.real, z.imag], -1)

    q, k = (rope(_heads(_lin(x, w, n), h)) for n in ("q_linear", "k_linear"))
    return _lin(_merge(_sdpa(q, k, _heads(_lin(x, w, "v"), h), True)), w, "out")


def ref_single_head_rope(i, w, sz):
    x = i["x"]
    q, k = x @ w["W_q"], x @ w["W_k"]
    cos, sin = _rope_tables(x.shape[1], q.shape[-1])
    q, k = (t * cos + _rotate_half(t) * sin for t in (q, k))
    return _sdpa(q, k, x @ w["W_v"], True)


def ref_differential_chunk(i, w, sz):
    x, h = i["x"], sz["H"]
    q, k = (_heads(_lin(x, w, n), 2 * h) for n in ("q", "k"))      # [B, 2H, S, Dh]
    v = _heads(_lin(x, w, "v"), h)                                  # [B, H, S, 2*Dh]
    maps = _causal_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
    diff = maps[:, :h] - w["lam"] * maps[:, h:]                     # map j minus lam * map j + H
    return _lin(_merge(diff @ v), w, "out")


def ref_bert_embeddings(i, w, sz):
    F = _F()
    h = F.embedding(i["ids"], w["W_tok"]) + F.embedding(i["segs"], w["W_seg"]) + w["W_pos"][None]
    return F.layer_norm(h, h.shape[-1:], w["out.weight"], w["out.bias"], eps=1e-12)


def ref_audio_learned_positions(i, w, sz):
    F = _F()
    h = F.gelu(F.conv1d(i["mel"], w["frames_conv1.weight"], w["frames_conv1.bias"], padding=1))
    h = F.gelu(F.conv1d(h, w["frames_conv2.weight"], w["frames_conv2.bias"], stride=2, padding=1))
    h = h.transpose(1, 2)
    h = h + w["W_pos"][:h.shape[1]]                                  # the first T/2 rows
    return F.layer_norm(h, h.shape[-1:], w["out.weight"], w["out.bias"])


def ref_detr_learned_positions(i, w, sz):
    torch = _torch()
    fmap = i["fmap"]
    hh, ww = fmap.shape[-2:]
    x_emb, y_emb = w["col_embed"][:ww], w["row_embed"][:hh]          # DETR's PositionEmbeddingLearned
    pos = torch.cat([x_emb.unsqueeze(0).repeat(hh, 1, 1), y_emb.unsqueeze(1).repeat(1, ww, 1)], -1)
    pos = pos.permute(2, 0, 1).unsqueeze(0)
    return _lin((fmap + pos).flatten(2).transpose(1, 2), w, "out")


def ref_two_length_embeddings(i, w, sz):
    F = _F()

    def embed(ids, p):
        return F.embedding(ids, w[p + "W_tok"]) + w[p + "W_pos"][:ids.shape[1]]

    src, tgt = embed(i["src_ids"], "src."), embed(i["tgt_ids"], "tgt.")
    return _lin(_sdpa(tgt, src, src), w, "out")


def ref_vit_cls_positions(i, w, sz):
    F, torch = _F(), _torch()
    emb = _lin(i["patches"], w, "emb")
    tokens = torch.cat([w["cls"].expand(emb.shape[0], -1, -1), emb], 1) + w["W_pos"]
    return F.layer_norm(tokens, tokens.shape[-1:], w["out.weight"], w["out.bias"], eps=1e-6)


def ref_fused_qkv_causal(i, w, sz):
    x, h = i["x"], sz["H"]
    b, s, d = x.shape
    q, k, v = (x @ w["W_qkv"]).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
    return _merge(_sdpa(q, k, v, True)) @ w["W_o"]


def ref_cross_key_padding(i, w, sz, queries="tgt", keys="memory", residual=True, zero_padded_queries=False):
    """Attention of `queries` over `keys` (linears q, k, v, out) with the padded keys hidden
    (bool `pad`, True at padding); optionally the padded queries' weights zeroed after it."""
    xq, xk, h, pad = i[queries], i[keys], sz["H"], i["pad"]
    q = _heads(_lin(xq, w, "q"), h)
    k, v = (_heads(_lin(xk, w, n), h) for n in ("k", "v"))
    heads = _sdpa(q, k, v, attn_mask=~pad[:, None, None, :])
    if zero_padded_queries:
        heads = heads * (~pad)[:, None, :, None]
    out = _lin(_merge(heads), w, "out")
    return xq + out if residual else out


def ref_linear_attention(i, w, sz):
    """lucidrains' LinearAttention (denoising-diffusion-pytorch), without its norms."""
    F, torch = _F(), _torch()
    fmap, h = i["fmap"], sz["H"]
    b, _, x, y = fmap.shape
    q, k, v = (t.reshape(b, h, -1, x * y) for t in F.conv2d(fmap, w["qkv.weight"]).chunk(3, 1))
    q = q.softmax(-2) * q.shape[-2] ** -0.5
    k = k.softmax(-1)
    context = torch.einsum("bhdn,bhen->bhde", k, v)
    out = torch.einsum("bhde,bhdn->bhen", context, q).reshape(b, -1, x, y)
    return F.conv2d(out, w["out.weight"], w["out.bias"])


def ref_masked_softmax_attention(i, w, sz):
    """Bilinear attention with the dropped keys hidden by -inf before the softmax (a row with
    no key kept gives zeros)."""
    dec, enc, keep = i["dec"], i["enc"], i["keep"]
    scores = dec @ w["W_att"] @ enc.transpose(1, 2)
    weights = scores.masked_fill(~keep[:, None, :], float("-inf")).softmax(-1).nan_to_num(0.0)
    return weights @ enc


def ref_fused_split_causal(i, w, sz):
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(t, h) for t in _lin(x, w, "qkv").split(x.shape[-1], -1))
    return _lin(_merge(_sdpa(q, k, v, True)), w, "out")


def ref_single_head_params_causal(i, w, sz):
    x = i["x"]
    return _sdpa(x @ w["W_q"], x @ w["W_k"], x @ w["W_v"], True)


def ref_backward_lm(i, w, sz):
    torch = _torch()
    x, h = i["x"], sz["H"]
    s = x.shape[1]
    keep = torch.ones(s, s, dtype=torch.bool).triu()                # itself and the later tokens
    q, k, v = (_heads(_lin(x, w, n), h) for n in ("q", "k", "v"))
    return _lin(_merge(_sdpa(q, k, v, attn_mask=keep)), w, "out")


SELF_PADDED = {"queries": "x", "keys": "x", "residual": False}   # self-attention, no residual
LOOKALIKE_REFERENCES = {
    "w301_mha_seq_first_batch_heads": (ref_torch_mha_seq_first, {}),
    "w301_transpose_then_reshape_features_first": (ref_mha_params, CAUSAL),
    "w301_qkv_interleaved_per_head": (ref_qkv_interleaved, {}),
    "w301_block_local_chunks_view": (ref_block_local, {}),
    "w301_per_head_einsum_fold_batch": (ref_per_head_loop, {}),
    "w302_permute_contiguous_view_minus1": (ref_mha_params, {}),
    "w302_einsum_out_bqhd_reshape": (ref_mha_params, CAUSAL),
    "w302_movedim_minus2_flatten": (ref_mha_linear, {}),
    "w302_mha_seq_first_cross_merge": (ref_torch_mha_seq_first, {"query": "tgt", "key": "src"}),
    "w302_values_transposed_permute_merge": (ref_mha_params, {}),
    "w303_keys_first_softmax_minus2": (ref_mha_params, {}),
    "w303_slot_attention_softmax_over_slots": (ref_slot_attention, {}),
    "w303_expert_choice_topk_over_tokens": (ref_expert_choice, {}),
    "w303_multihead_pooling_softmax_over_frames": (ref_multihead_pooling, {}),
    "w303_heads_last_scores_softmax2": (ref_mha_linear, {}),
    "w303_router_experts_first_softmax0": (ref_router_experts_first, {}),
    "w304_mean_pool_appended_to_tokens": (ref_mean_context, {}),
    "w304_revin_affine_over_time": (ref_revin_affine, {}),
    "w304_batchnorm_by_hand_batch_and_tokens": (ref_batchnorm_training, {}),
    "w304_groupnorm_by_hand_reshape": (ref_groupnorm, {}),
    "w304_convnext_layernorm_channels_first": (ref_convnext_layernorm, {}),
    "w304_xvector_statistics_pooling": (ref_xvector, {}),
    "w305_aligned_streams_equal_length": (ref_cross_linear, {"queries": "phones", "keys": "frames", "causal": True, "residual": True}),
    "w305_kv_cache_shifted_mask": (ref_kv_cache_step, {}),
    "w305_perceiver_ar_offset_causal": (ref_perceiver_ar, {}),
    "w305_cross_padding_bias": (ref_cross_linear, {"bias": "pad_bias"}),
    "w305_block_two_streams_same_length": (ref_two_streams, {}),
    "w306_sdpa_scale_d_over_h": (ref_mha_linear, CAUSAL),
    "w306_prescaled_queries": (ref_mha_params, {}),
    "w306_whisper_split_scale": (ref_whisper_split_scale, {}),
    "w306_per_head_free_width": (ref_per_head_loop, {}),
    "w306_two_products_summed_scale": (ref_two_products, {}),
    "w307_convnext_block_permute_roundtrip": (ref_convnext_block, {}),
    "w307_swin_window_roundtrip": (ref_swin_windows, {}),
    "w307_gqa_grouped_queries_broadcast": (ref_gqa_linear, {}),
    "w307_esim_transposed_affinity": (ref_esim, {}),
    "w307_rearrange_column_mixing_square": (ref_column_mixing, {}),
    "w308_key_bias_h1s_param": (ref_key_bias_param, {}),
    "w308_symmetric_alibi_einsum": (ref_symmetric_alibi, {}),
    "w308_stable_softmax_max_shift": (ref_mha_linear, {}),
    "w308_t5_relative_bias_embed": (ref_t5_relative, {}),
    "w308_padding_bias_unsqueeze_keys": (ref_cross_linear, {"queries": "x", "keys": "x", "bias": "pad_bias"}),
    "w309_conformer_pointwise_conv_batchnorm": (ref_conformer_conv_module, {}),
    "w309_cpvt_peg_tokens_to_map": (ref_cpvt_peg, {}),
    "w309_unet1d_groupnorm_time_embedding": (ref_unet1d_block, {}),
    "w309_mobilenet_inverted_residual_batchnorm": (ref_mobilenet_inverted_residual, {}),
    "w309_mel_conv_channels_first_pos_table": (ref_mel_conv_pos_table, {}),
    "w310_rope_bshd_heads_third_chunk": (ref_rope_linear_heads, {}),
    "w310_partial_rotary_slice_narrow": (ref_partial_rotary, {}),
    "w310_rope_full_width_per_head_einops": (ref_rope_params_causal, {}),
    "w310_rope_halves_without_concat_swap": (ref_rope_complex, {}),
    "w310_single_head_rope_full_width": (ref_single_head_rope, {}),
    "w310_differential_heads_chunk": (ref_differential_chunk, {}),
    "w311_bert_table_exactly_seq_len": (ref_bert_embeddings, {}),
    "w311_audio_positions_after_stride2": (ref_audio_learned_positions, {}),
    "w311_detr_learned_row_col_positions": (ref_detr_learned_positions, {}),
    "w311_block_positions_two_lengths": (ref_two_length_embeddings, {}),
    "w311_vit_cls_positions_n_plus_one": (ref_vit_cls_positions, {}),
    "w312_scale_as_division_then_fill": (ref_fused_qkv_causal, {}),
    "w312_cross_dropout_after_softmax": (ref_cross_key_padding, {}),
    "w312_deberta_xsoftmax_refill_zero": (ref_cross_key_padding, SELF_PADDED),
    "w312_longformer_zero_padded_query_rows": (ref_cross_key_padding, {**SELF_PADDED, "zero_padded_queries": True}),
    "w312_linear_attention_scale_after_feature_softmax": (ref_linear_attention, {}),
    "w312_allennlp_masked_softmax_renormalise": (ref_masked_softmax_attention, {}),
    "w313_triu1_ones_masked_fill": (ref_fused_split_causal, {}),
    "w313_tril_attn_mask_keep": (ref_gqa_linear, {}),
    "w313_where_tril_keep": (ref_single_head_params_causal, {}),
    "w313_arange_ge_keep_mask": (ref_mha_linear, CAUSAL),
    "w313_backward_lm_tril_minus1_fill": (ref_backward_lm, {}),
    "w313_tutorial_square_subsequent_mask": (ref_mha_linear, CAUSAL),
}
