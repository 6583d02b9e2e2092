"""PyTorch references for tests/provenance/public/: each spec there transcribes one module or
function of well-known public model code, and the function here computes the same thing from
the public formula in plain torch / torch.nn.functional (torch's own module where the public
code is one: nn.MultiheadAttention, F.group_norm, F.layer_norm, F.scaled_dot_product_attention,
...), never by calling the generated code.

Each reference is `ref(inputs, weights, sizes, **options) -> Tensor`: `inputs` maps the spec's
input names to tensors, `weights` is the generated module's state dict (a `linear` step's
weights are named after its binding, e.g. `query_layer.weight`; a `param` by its name),
`sizes` the sizes the spec was run at. Values are float64.

PUBLIC_REFERENCES maps a spec's stem to (reference, options).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from test_model_bloom import build_alibi_tensor  # HF's ALiBi, as the BLOOM model test has it
from test_model_t5 import relative_position_bucket  # HF's T5 buckets, as the T5 model test has them

FMIN = torch.finfo(torch.float32).min   # what Hugging Face adds for a hidden position


def _lin(x, w, name, bias=True):
    return F.linear(x, w[f"{name}.weight"], w[f"{name}.bias"] if bias else None)


def _split(t, h):
    """[B, S, h*Dh] -> [B, h, S, Dh] (view + permute(0, 2, 1, 3))"""
    b, s, _ = t.shape
    return t.view(b, s, h, -1).permute(0, 2, 1, 3)


def _merge(t):
    """[B, h, S, Dh] -> [B, S, h*Dh]"""
    b, h, s, d = t.shape
    return t.permute(0, 2, 1, 3).reshape(b, s, h * d)


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _rope_tables(s, dim, base=10000.0, dtype=torch.float64):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype) / dim))
    freqs = torch.outer(torch.arange(s, dtype=dtype), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


# ------------------------------------------------------------------ encoders

def ref_bert_self_attention(i, w, sz):
    """BertSelfAttention (eager): scores / sqrt(Dh) + extended mask, softmax, @ value."""
    x, h = i["hidden_states"], sz["H"]
    q, k, v = (_split(_lin(x, w, n), h) for n in ("query_layer", "key_layer", "value_layer"))
    ext = (1.0 - i["attention_mask"][:, None, None, :].to(x.dtype)) * FMIN
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + ext
    return _merge(scores.softmax(-1) @ v)




def ref_t5_relative_bias_attention(i, w, sz):
    """T5Attention (encoder): q @ k^T + compute_bias(S, S), no scaling, softmax, o."""
    x, h, s = i["hidden_states"], sz["H"], sz["S"]
    ctx = torch.arange(s)[:, None]
    mem = torch.arange(s)[None, :]
    buckets = relative_position_bucket(mem - ctx, True, num_buckets=8, max_distance=16)
    bias = F.embedding(buckets, w["position_bias.weight"]).permute(2, 0, 1).unsqueeze(0)
    q, k, v = (_split(_lin(x, w, n, bias=False), h) for n in ("q", "k", "v"))
    scores = q @ k.transpose(3, 2) + bias
    return _lin(_merge(scores.softmax(-1) @ v), w, "attn_output", bias=False)


# ------------------------------------------------------------------ decoders

def ref_gpt2_attention(i, w, sz):
    """GPT2Attention: Conv1D c_attn, split, causal where(..., finfo.min), softmax, c_proj."""
    x, h = i["hidden_states"], sz["H"]
    d = x.shape[-1]
    q, k, v = (x @ w["c_attn_weight"] + w["c_attn_bias"]).split(d, dim=2)
    q, k, v = _split(q, h), _split(k, h), _split(v, h)
    s = x.shape[1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(v.size(-1))
    causal = torch.tril(torch.ones(s, s, dtype=torch.bool))
    scores = torch.where(causal, scores, torch.tensor(FMIN, dtype=scores.dtype))
    a = _merge(scores.softmax(-1) @ v)
    return a @ w["c_proj_weight"] + w["c_proj_bias"]


def _repeat_kv(x, n_rep):
    b, g, s, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, s, d).reshape(b, g * n_rep, s, d)


def _causal_fill(scores, value=float("-inf")):
    sq, sk = scores.shape[-2:]
    return scores.masked_fill(torch.ones(sq, sk, dtype=torch.bool).triu(1), value)


def ref_llama_attention(i, w, sz):
    """LlamaAttention (eager): RoPE on q and k, repeat_kv, scaled causal softmax, o_proj."""
    x, h, g = i["hidden_states"], sz["H"], sz["G"]
    _, s, d = x.shape
    hd = d // h
    cos, sin = _rope_tables(s, hd, dtype=torch.float32)
    cos, sin = cos.to(x.dtype)[None, None], sin.to(x.dtype)[None, None]
    q = _split(_lin(x, w, "query_states_linear", bias=False), h)
    k = _split(_lin(x, w, "key_states_linear", bias=False), g)
    v = _split(_lin(x, w, "value_states", bias=False), g)
    q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    k, v = _repeat_kv(k, h // g), _repeat_kv(v, h // g)
    attn = _causal_fill(q @ k.transpose(2, 3) * hd ** -0.5).softmax(-1)
    return _lin(_merge(attn @ v), w, "attn_output", bias=False)


def ref_mistral_sliding_window(i, w, sz):
    """MistralAttention (sdpa) with sliding_window_causal_mask_function as a bool keep-mask."""
    x, h, g, win = i["hidden_states"], sz["H"], sz["G"], sz["W"]
    t = x.shape[1]
    q_idx, kv_idx = torch.arange(t)[:, None], torch.arange(t)[None, :]
    keep = (kv_idx <= q_idx) & (kv_idx > q_idx - win)
    q = _split(_lin(x, w, "q", bias=False), h)
    k, v = _split(_lin(x, w, "k", bias=False), g), _split(_lin(x, w, "v", bias=False), g)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
    return _lin(_merge(o), w, "out", bias=False)


def ref_gpt_neox_partial_rotary(i, w, sz):
    """GPTNeoXAttention: qkv viewed [B, S, H, 3*Dh], RoPE on the first rotary_ndims of each head."""
    x, h = i["hidden_states"], sz["H"]
    b, s, d = x.shape
    hd = d // h
    rd = hd // 4
    qkv = _lin(x, w, "qkv").view(b, s, h, 3 * hd)
    q = qkv[..., :hd].permute(0, 2, 1, 3)
    k = qkv[..., hd: 2 * hd].permute(0, 2, 1, 3)
    v = qkv[..., 2 * hd:].permute(0, 2, 1, 3)
    cos, sin = _rope_tables(s, rd, dtype=torch.float32)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)

    def rot(t):
        t_rot, t_pass = t[..., :rd], t[..., rd:]
        return torch.cat((t_rot * cos + _rotate_half(t_rot) * sin, t_pass), dim=-1)

    q, k = rot(q), rot(k)
    scores = _causal_fill(q @ k.transpose(-1, -2) / math.sqrt(hd))
    return _lin(_merge(scores.softmax(-1) @ v), w, "attn_output")


def ref_falcon_multi_query(i, w, sz):
    """FalconAttention (multi_query): fused [..., :-2, :], [..., [-2], :], [..., [-1], :]."""
    x, h = i["hidden_states"], sz["H"]
    b, s, d = x.shape
    hd = d // h
    fused = _lin(x, w, "fused_qkv", bias=False).view(b, s, h + 2, hd)
    q, k, v = fused[..., :-2, :], fused[..., [-2], :], fused[..., [-1], :]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    scores = _causal_fill(q @ k.transpose(-1, -2) / math.sqrt(hd))
    out = (scores.softmax(-1) @ v).view(b, h, s, hd).permute(0, 2, 1, 3).reshape(b, s, h * hd)
    return _lin(out, w, "attn_output", bias=False)


def ref_bloom_attention(i, w, sz):
    """BloomAttention (eager): heads in the batch, alibi.baddbmm(q, k, beta=1, alpha=1/sqrt(Dh))."""
    x, m, h = i["hidden_states"], i["attention_mask"], sz["H"]
    b, s, d = x.shape
    hd = d // h
    fused = _lin(x, w, "fused_qkv").view(b, s, h, 3, hd)
    q = fused[..., 0, :].transpose(1, 2).reshape(b * h, s, hd)
    k = fused[..., 1, :].permute(0, 2, 3, 1).reshape(b * h, hd, s)
    v = fused[..., 2, :].transpose(1, 2).reshape(b * h, s, hd)
    alibi = build_alibi_tensor(torch, m, h).to(x.dtype)
    scores = alibi.baddbmm(batch1=q, batch2=k, beta=1.0, alpha=1.0 / math.sqrt(hd)).view(b, h, s, s)
    hide = torch.ones(s, s, dtype=torch.bool).triu(1) | (m == 0)[:, None, None, :]
    probs = scores.masked_fill(hide, FMIN).softmax(-1).view(b * h, s, s)
    ctx = torch.bmm(probs, v).view(b, h, s, hd).permute(0, 2, 1, 3).reshape(b, s, d)
    return _lin(ctx, w, "output")


def ref_whisper_cross_attention(i, w, sz):
    """WhisperAttention as cross-attention: q_proj(x) * Dh**-0.5, k_proj without bias."""
    x, kv, h = i["hidden_states"], i["key_value_states"], sz["H"]
    hd = x.shape[-1] // h
    q = _split(_lin(x, w, "query_states") * hd ** -0.5, h)
    k = _split(_lin(kv, w, "key_states", bias=False), h)
    v = _split(_lin(kv, w, "value_states"), h)
    return _lin(_merge((q @ k.transpose(2, 3)).softmax(-1) @ v), w, "attn_output")


# ------------------------------------------------------------------ vision

def _timm_attention(x, w, qkv, proj, h, bias=None):
    """timm Attention / WindowAttention: qkv reshape (B, N, 3, H, Dh).permute(2, 0, 3, 1, 4)."""
    b, n, c = x.shape
    q, k, v = _lin(x, w, qkv).reshape(b, n, 3, h, c // h).permute(2, 0, 3, 1, 4).unbind(0)
    attn = (q * (c // h) ** -0.5) @ k.transpose(-2, -1)
    if bias is not None:
        attn = attn + bias
    return _lin((attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c), w, proj)


def ref_vit(i, w, sz):
    """timm PatchEmbed (conv, flatten(2).transpose(1, 2)), cls token, pos_embed, pre-norm attention."""
    x, h, p = i["x"], sz["H"], sz["P"]
    patches = F.conv2d(x, w["patches.weight"], w["patches.bias"], stride=p).flatten(2).transpose(1, 2)
    tokens = torch.cat((w["cls_token"].expand(x.shape[0], -1, -1), patches), dim=1) + w["pos_embed"]
    normed = F.layer_norm(tokens, tokens.shape[-1:], w["qkv_ln.weight"], w["qkv_ln.bias"], eps=1e-6)
    return tokens + _timm_attention(normed, w, "qkv_linear", "out", h)


def ref_vit_pytorch(i, w, sz):
    """lucidrains ViT: einops patch Rearrange (written with view/permute), LN, Linear, LN, cls
    token, pos_embedding, then x + Attention(x) with to_qkv chunks and 'b n (h d)' heads."""
    img, p, h = i["img"], sz["P"], sz["H"]
    b, c, hi, wi = img.shape
    # 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'
    patches = img.reshape(b, c, hi // p, p, wi // p, p).permute(0, 2, 4, 3, 5, 1)
    patches = patches.reshape(b, (hi // p) * (wi // p), p * p * c)

    def ln(t, name):
        return F.layer_norm(t, t.shape[-1:], w[f"{name}.weight"], w[f"{name}.bias"])

    emb = ln(_lin(ln(patches, "emb_ln1"), w, "emb_linear"), "emb_ln2")
    x = torch.cat((w["cls_token"].expand(b, 1, -1), emb), dim=1) + w["pos_embedding"]
    q, k, v = _lin(ln(x, "qkv_ln"), w, "qkv_linear", bias=False).chunk(3, dim=-1)
    q, k, v = _split(q, h), _split(k, h), _split(v, h)     # 'b n (h d) -> b h n d'
    dots = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    out = _merge(torch.matmul(dots.softmax(dim=-1), v))     # 'b h n d -> b n (h d)'
    return x + _lin(out, w, "out")


def _swin_relative_position_index(win):
    coords = torch.stack(torch.meshgrid(torch.arange(win), torch.arange(win), indexing="ij"))
    coords_flatten = torch.flatten(coords, 1)
    rel = (coords_flatten[:, :, None] - coords_flatten[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += win - 1
    rel[:, :, 1] += win - 1
    rel[:, :, 0] *= 2 * win - 1
    return rel.sum(-1)


def ref_swin_window_attention(i, w, sz):
    """timm window_partition, WindowAttention with its relative position bias, window_reverse."""
    x, h, m = i["x"], sz["H"], sz["M"]
    b, hg, wg, c = x.shape
    win = x.view(b, hg // m, m, wg // m, m, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, m * m, c)
    index = _swin_relative_position_index(m)
    bias = w["relative_position_bias_table"][index.view(-1)].view(m * m, m * m, -1)
    bias = bias.permute(2, 0, 1).contiguous().unsqueeze(0)
    out = _timm_attention(win, w, "qkv", "out", h, bias)
    return out.view(b, hg // m, wg // m, m, m, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hg, wg, c)


def ref_convnext_block(i, w, sz):
    """ConvNeXt Block: dwconv 7x7, permute, LayerNorm(eps=1e-6), pwconv1, GELU, pwconv2, gamma."""
    x = i["x"]
    c = x.shape[1]
    h = F.conv2d(x, w["h_conv.weight"], w["h_conv.bias"], padding=3, groups=c).permute(0, 2, 3, 1)
    h = F.layer_norm(h, (c,), w["h_ln.weight"], w["h_ln.bias"], eps=1e-6)
    h = _lin(F.gelu(_lin(h, w, "h2_linear1")), w, "h2_linear2")
    return x + (w["gamma"] * h).permute(0, 3, 1, 2)


def ref_convnext_layernorm_channels_first(i, w, sz):
    """ConvNeXt LayerNorm(channels_first) = F.layer_norm over C with channels moved last."""
    x = i["x"]
    y = F.layer_norm(x.permute(0, 2, 3, 1), x.shape[1:2], w["weight"], w["bias"], eps=1e-6)
    return F.conv2d(y.permute(0, 3, 1, 2), w["out.weight"], w["out.bias"], stride=2)


def _batch_norm(x, w, name, eps=1e-5):
    """nn.BatchNorm in eval mode: the running statistics."""
    return F.batch_norm(x, w[f"{name}.running_mean"], w[f"{name}.running_var"], w[f"{name}.weight"],
                        w[f"{name}.bias"], training=False, eps=eps)


def ref_resnet_stem(i, w, sz):
    """torchvision ResNet: relu(bn1(conv1(x))), conv1 7x7 stride 2 padding 3 without bias."""
    y = F.conv2d(i["x"], w["out_conv.weight"], stride=2, padding=3)
    return F.relu(_batch_norm(y, w, "out_bn"))


def _conv(x, w, name, bias=True, conv=F.conv2d, **kw):
    return conv(x, w[f"{name}.weight"], w[f"{name}.bias"] if bias else None, **kw)


def ref_squeeze_excitation(i, w, sz):
    """torchvision SqueezeExcitation: sigmoid(fc2(relu(fc1(avgpool(x))))) * x."""
    x = i["x"]
    scale = F.adaptive_avg_pool2d(x, 1)
    scale = torch.sigmoid(_conv(F.relu(_conv(scale, w, "scale_conv1")), w, "scale_conv2"))
    return scale * x


def ref_diffusers_resnet_block(i, w, sz):
    """diffusers ResnetBlock2D: norm1, silu, conv1, + temb_proj(silu(temb)), norm2, silu, conv2, residual."""
    x, temb, g = i["input_tensor"], i["temb"], sz["G"]

    def gn(t, name):
        return F.group_norm(t, g, w[f"{name}.weight"], w[f"{name}.bias"], eps=1e-6)

    h = _conv(F.silu(gn(x, "hidden_states_gn")), w, "hidden_states_conv", padding=1)
    h = h + _lin(F.silu(temb), w, "time_emb")[:, :, None, None]
    h = _conv(F.silu(gn(h, "hidden2_gn")), w, "hidden2_conv", padding=1)
    return (x + h) / 1.0


def ref_groupnorm_by_hand(i, w, sz):
    """nn.GroupNorm's formula (F.group_norm) with the paper's [1, C, 1, 1] gamma and beta."""
    x = i["x"]
    return F.group_norm(x, sz["G"], w["gamma"].reshape(-1), w["beta"].reshape(-1), eps=1e-5)


# ------------------------------------------------------------------ audio

def _whisper_sinusoids(length, channels, max_timescale=10000):
    """openai/whisper model.py sinusoids(), in float32 as the generated module computes it."""
    log_timescale_increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2))
    scaled_time = torch.arange(length)[:, None] * inv_timescales[None, :]
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)


def ref_whisper_audio_frontend(i, w, sz):
    """Whisper AudioEncoder: gelu(conv1(x)), gelu(conv2(x)) stride 2, permute, + positional_embedding."""
    x = F.gelu(_conv(i["mel"], w, "x_conv1", conv=F.conv1d, padding=1))
    x = F.gelu(_conv(x, w, "x_conv2", conv=F.conv1d, stride=2, padding=1)).permute(0, 2, 1)
    return x + _whisper_sinusoids(x.shape[1], x.shape[2]).to(x.dtype)


def ref_wav2vec2_feature_projection(i, w, sz):
    """Wav2Vec2GroupNormConvLayer (conv, GroupNorm(C, C), gelu) then Wav2Vec2FeatureProjection."""
    x = i["input_values"][:, None]
    c = w["extract_features_conv.weight"].shape[0]
    h = F.conv1d(x, w["extract_features_conv.weight"], stride=5)
    h = F.gelu(F.group_norm(h, c, w["extract_features_gn.weight"], w["extract_features_gn.bias"]))
    h = F.layer_norm(h.transpose(1, 2), (c,), w["norm_hidden_states.weight"], w["norm_hidden_states.bias"])
    return _lin(h, w, "hidden_states")


# ------------------------------------------------------------------ retrieval

def ref_clip_loss_paper(i, w, sz):
    """CLIP Figure 3: cross-entropy over axis 0 and over axis 1 of logits = I_e @ T_e.T * exp(t)."""
    i_e = F.normalize(i["I_f"] @ w["W_i"], dim=1)
    t_e = F.normalize(i["T_f"] @ w["W_t"], dim=1)
    logits = i_e @ t_e.T * w["t"].exp()
    labels = torch.arange(logits.shape[0])
    loss_i = F.cross_entropy(logits.T, labels)   # axis 0: each text's softmax over the images
    loss_t = F.cross_entropy(logits, labels)     # axis 1
    return ((loss_i + loss_t) / 2).reshape(1)


def ref_clip_loss_hf(i, w, sz):
    """Hugging Face clip_loss(logits_per_text)."""
    img = i["image_embeds"] / i["image_embeds"].norm(p=2, dim=-1, keepdim=True)
    txt = i["text_embeds"] / i["text_embeds"].norm(p=2, dim=-1, keepdim=True)
    logits_per_text = txt @ img.t() * w["logit_scale"].exp()
    labels = torch.arange(len(logits_per_text))
    caption_loss = F.cross_entropy(logits_per_text, labels)
    image_loss = F.cross_entropy(logits_per_text.t(), labels)
    return (caption_loss + image_loss) / 2.0


def ref_colbert_maxsim(i, w, sz):
    """ColBERT: normalize(linear(.)) on both sides, colbert_score with padding at -9999."""
    q = F.normalize(F.linear(i["q_hidden"], w["linear_weight"]), p=2, dim=2)
    d = F.normalize(F.linear(i["d_hidden"], w["linear_weight"]), p=2, dim=2)
    scores = d @ q.permute(0, 2, 1)
    scores[~i["d_mask"].view(scores.size(0), scores.size(1)).bool()] = -9999
    return scores.max(1).values.sum(-1)


def _mean_pooling(token_embeddings, attention_mask):
    mask = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).to(token_embeddings.dtype)
    return torch.sum(token_embeddings * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)


def ref_sentence_transformers(i, w, sz):
    """sentence-transformers mean Pooling and util.cos_sim."""
    a = F.normalize(_mean_pooling(i["q_tokens"], i["q_mask"]), p=2, dim=1)
    b = F.normalize(_mean_pooling(i["d_tokens"], i["d_mask"]), p=2, dim=1)
    return torch.mm(a, b.transpose(0, 1))


# ------------------------------------------------------------------ mixture of experts

def ref_mixtral_router(i, w, sz):
    """MixtralSparseMoeBlock's router: softmax over experts, topk, renormalise; as a dense [T, E]."""
    x = i["hidden_states"]
    hidden = x.view(-1, x.shape[-1])
    router_logits = _lin(hidden, w, "router_logits", bias=False)
    routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float64)
    routing_weights, selected_experts = torch.topk(routing_weights, sz["K"], dim=-1)
    routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
    return torch.zeros_like(router_logits).scatter(1, selected_experts, routing_weights)


def ref_expert_choice(i, w, sz):
    """Expert choice routing, eq. (1)-(2): each expert's top-k tokens by S^T, gated FFN, summed back."""
    x = i["x"]
    t = x.shape[0]
    s = (x @ w["W_g"]).softmax(-1)                    # [n, e]
    g, idx = torch.topk(s.T, sz["Kc"], dim=-1)        # [e, k]
    p = F.one_hot(idx, t).to(x.dtype)                 # [e, k, n]
    x_in = torch.einsum("ekn,nd->ekd", p, x)
    x_e = torch.stack([F.gelu(x_in[e] @ w["W_1"][e]) @ w["W_2"][e] for e in range(x_in.shape[0])])
    return torch.einsum("ekn,ek,ekd->nd", p, g, x_e)


# ------------------------------------------------------------------ normalisation

def ref_llama_rmsnorm(i, w, sz):
    return F.rms_norm(i["hidden_states"], (sz["D"],), w["weight"], eps=1e-6)


def ref_gemma_rmsnorm(i, w, sz):
    x = i["x"]
    return F.rms_norm(x, x.shape[-1:], eps=1e-6) * (1.0 + w["weight"])


def ref_annotated_layernorm(i, w, sz):
    x = i["x"]
    mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
    return w["a_2"] * (x - mean) / (std + 1e-6) + w["b_2"]


def ref_revin(i, w, sz):
    """RevIN(affine=True): norm over time, a Linear T -> Tp on the time axis, denorm."""
    x, eps = i["x"], 1e-5
    mean = torch.mean(x, dim=1, keepdim=True)
    stdev = torch.sqrt(torch.var(x, dim=1, keepdim=True, unbiased=False) + eps)
    y = (x - mean) / stdev * w["affine_weight"] + w["affine_bias"]
    y = _lin(y.transpose(1, 2), w, "forecast").transpose(1, 2)
    y = (y - w["affine_bias"]) / (w["affine_weight"] + eps * eps)
    return y * stdev + mean


def ref_patchtst_patching(i, w, sz):
    """PatchTST: unfold(-1, patch_len, stride) patches, W_P, channel independence, + W_pos."""
    p = sz["P"]
    z = i["x"].permute(0, 2, 1).unfold(dimension=-1, size=p, step=p)   # [B, C, Np, P]
    z = z.permute(0, 1, 3, 2)                                            # backbone: [B, C, P, Np]
    x = _lin(z.permute(0, 1, 3, 2), w, "u")                              # encoder: W_P
    u = torch.reshape(x, (x.shape[0] * x.shape[1], x.shape[2], x.shape[3]))
    return u + w["W_pos"]


def ref_qwen3_qk_norm(i, w, sz):
    """Qwen3Attention: RMSNorm(head_dim) on [B, S, H, Dh] before transpose; sdpa causal with GQA."""
    x, hd = i["hidden_states"], sz["Dh"]
    b, s, _ = x.shape
    q = _lin(x, w, "query_states_linear", bias=False).view(b, s, -1, hd)
    k = _lin(x, w, "key_states_linear", bias=False).view(b, s, -1, hd)
    q = F.rms_norm(q, (hd,), w["query_states_norm.weight"], eps=1e-6).transpose(1, 2)
    k = F.rms_norm(k, (hd,), w["key_states_norm.weight"], eps=1e-6).transpose(1, 2)
    v = _lin(x, w, "value_states", bias=False).view(b, s, -1, hd).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=hd ** -0.5, enable_gqa=True)
    return _lin(_merge(o), w, "out", bias=False)


def ref_olmo2_qk_norm(i, w, sz):
    """Olmo2Attention: RMSNorm over the whole q_proj / k_proj output, then the heads."""
    x, h = i["hidden_states"], sz["H"]
    d = x.shape[-1]
    q = _lin(x, w, "query_states_linear", bias=False)
    k = _lin(x, w, "key_states_linear", bias=False)
    q = F.rms_norm(q, (d,), w["query_states_norm.weight"], eps=1e-6)
    k = F.rms_norm(k, (d,), w["key_states_norm.weight"], eps=1e-6)
    q, k, v = _split(q, h), _split(k, h), _split(_lin(x, w, "value_states", bias=False), h)
    attn = _causal_fill(q @ k.transpose(2, 3) * (d // h) ** -0.5).softmax(-1)
    return _lin(_merge(attn @ v), w, "attn_output", bias=False)


# ------------------------------------------------------------------ the seven the task names

def ref_sdpa_transposed_scores(i, w, sz):
    """F.scaled_dot_product_attention on the projected heads (cross-attention, no mask)."""
    h = sz["H"]
    q = _split(_lin(i["target"], w, "Q"), h)
    k, v = _split(_lin(i["memory"], w, "K"), h), _split(_lin(i["memory"], w, "V"), h)
    return _merge(F.scaled_dot_product_attention(q, k, v))


def ref_deepsets_perm_equi2_mean(i, w, sz):
    """PermEqui2_mean: Gamma(x) - Lambda(x.mean(1, keepdim=True)); the one linear's weight is
    [Gamma | -Lambda] along its in-features, its bias Gamma's."""
    x = i["x"]
    d = x.shape[-1]
    gamma_w, gamma_b = w["out.weight"][:, :d], w["out.bias"]
    lambda_w = -w["out.weight"][:, d:]
    xm = F.linear(x.mean(1, keepdim=True), lambda_w)
    return F.linear(x, gamma_w, gamma_b) - xm


def ref_slot_attention(i, w, sz):
    """lucidrains SlotAttention, one iteration, with torch's own GRUCell."""
    inputs, slots_prev = i["inputs"], i["slots"]
    b, _, d = inputs.shape
    x = F.layer_norm(inputs, (d,), w["x.weight"], w["x.bias"])
    k, v = _lin(x, w, "k"), _lin(x, w, "v")
    q = _lin(F.layer_norm(slots_prev, (d,), w["q_ln.weight"], w["q_ln.bias"]), w, "q_linear")
    dots = torch.einsum("bid,bjd->bij", q, k) * d ** -0.5
    attn = dots.softmax(dim=1) + 1e-8
    attn = attn / attn.sum(dim=-1, keepdim=True)
    updates = torch.einsum("bjd,bij->bid", v, attn)
    gru = torch.nn.GRUCell(d, d).to(inputs.dtype)
    gru.load_state_dict({"weight_ih": w["gi.weight"], "bias_ih": w["gi.bias"],
                         "weight_hh": w["gh.weight"], "bias_hh": w["gh.bias"]})
    with torch.no_grad():
        slots = gru(updates.reshape(-1, d), slots_prev.reshape(-1, d)).reshape(b, -1, d)
    mlp_in = F.layer_norm(slots, (d,), w["out_ln.weight"], w["out_ln.bias"])
    return slots + _lin(F.relu(_lin(mlp_in, w, "out_linear1")), w, "out_linear2")


def ref_torch_mha_forward(i, w, sz):
    """nn.MultiheadAttention itself (sequence-first), loaded with the spec's projections."""
    query, memory = i["query"], i["memory"]
    d = query.shape[-1]
    mha = torch.nn.MultiheadAttention(d, sz["H"], batch_first=False).to(query.dtype).eval()
    mha.load_state_dict({
        "in_proj_weight": torch.cat([w["q.weight"], w["k.weight"], w["v.weight"]]),
        "in_proj_bias": torch.cat([w["q.bias"], w["k.bias"], w["v.bias"]]),
        "out_proj.weight": w["attn_output.weight"], "out_proj.bias": w["attn_output.bias"],
    })
    with torch.no_grad():
        out, _ = mha(query, memory, memory, need_weights=False)
    return out


def ref_deepseek_mla(i, w, sz):
    """DeepSeek MLA with attn_impl="naive" (keys and values expanded per head by wkv_b, the
    queries and keys [nope | rope] concatenated): the same numbers as the absorbed form."""
    x = i["x"]
    b, s, _ = x.shape
    h, r, dn, dr, dv = sz["H"], sz["R"], sz["Dn"], sz["Dr"], sz["Dv"]
    q = F.linear(x, w["q_nope_q_pe.weight"]).view(b, s, h, dn + dr)
    q_nope, q_pe = torch.split(q, [dn, dr], dim=-1)
    kv = F.linear(x, w["kv_k_pe.weight"])
    kv, k_pe = torch.split(kv, [r, dr], dim=-1)
    k_pe = k_pe.unsqueeze(2)
    q = torch.cat([q_nope, q_pe], dim=-1)
    kv = F.linear(F.rms_norm(kv, (r,), w["kv_cache.weight"], eps=1e-6), w["wkv_b"])
    kv = kv.view(b, s, h, dn + dv)
    k_nope, v = torch.split(kv, [dn, dv], dim=-1)
    k = torch.cat([k_nope, k_pe.expand(-1, -1, h, -1)], dim=-1)
    scores = torch.einsum("bshd,bthd->bsht", q, k) * (dn + dr) ** -0.5
    mask = torch.full((s, s), float("-inf")).triu_(1)
    scores = (scores + mask.unsqueeze(1)).softmax(dim=-1)
    out = torch.einsum("bsht,bthd->bshd", scores, v)
    return F.linear(out.flatten(2), w["out.weight"])


PUBLIC_REFERENCES = {
    "bert_self_attention": (ref_bert_self_attention, {}),
    "gpt2_attention": (ref_gpt2_attention, {}),
    "t5_relative_bias_attention": (ref_t5_relative_bias_attention, {}),
    "llama_attention_rope_gqa": (ref_llama_attention, {}),
    "mistral_sliding_window_sdpa": (ref_mistral_sliding_window, {}),
    "gpt_neox_partial_rotary": (ref_gpt_neox_partial_rotary, {}),
    "falcon_multi_query_split": (ref_falcon_multi_query, {}),
    "bloom_alibi_baddbmm": (ref_bloom_attention, {}),
    "whisper_cross_attention": (ref_whisper_cross_attention, {}),
    "vit_patch_embed_attention": (ref_vit, {}),
    "swin_window_attention": (ref_swin_window_attention, {}),
    "vit_pytorch_rearrange": (ref_vit_pytorch, {}),
    "convnext_block": (ref_convnext_block, {}),
    "convnext_layernorm_channels_first": (ref_convnext_layernorm_channels_first, {}),
    "resnet_stem": (ref_resnet_stem, {}),
    "squeeze_excitation": (ref_squeeze_excitation, {}),
    "diffusers_resnet_block_groupnorm": (ref_diffusers_resnet_block, {}),
    "groupnorm_by_hand": (ref_groupnorm_by_hand, {}),
    "whisper_audio_encoder_frontend": (ref_whisper_audio_frontend, {}),
    "wav2vec2_feature_projection": (ref_wav2vec2_feature_projection, {}),
    "clip_loss_paper_axes": (ref_clip_loss_paper, {}),
    "clip_loss_hf": (ref_clip_loss_hf, {}),
    "colbert_maxsim": (ref_colbert_maxsim, {}),
    "sentence_transformers_mean_pooling": (ref_sentence_transformers, {}),
    "mixtral_router_topk": (ref_mixtral_router, {}),
    "expert_choice_routing": (ref_expert_choice, {}),
    "llama_rmsnorm": (ref_llama_rmsnorm, {}),
    "gemma_rmsnorm_plus_one": (ref_gemma_rmsnorm, {}),
    "annotated_transformer_layernorm": (ref_annotated_layernorm, {}),
    "revin_normalize_denormalize": (ref_revin, {}),
    "qwen3_qk_norm_per_head": (ref_qwen3_qk_norm, {}),
    "olmo2_qk_norm_full_width": (ref_olmo2_qk_norm, {}),
    "sdpa_transposed_scores": (ref_sdpa_transposed_scores, {}),
    "deepsets_mean_context_concat": (ref_deepsets_perm_equi2_mean, {}),
    "slot_attention_iteration": (ref_slot_attention, {}),
    "torch_mha_forward_layout": (ref_torch_mha_forward, {}),
    "deepseek_mla_absorbed_scores": (ref_deepseek_mla, {}),
    "patchtst_patching": (ref_patchtst_patching, {}),
}
