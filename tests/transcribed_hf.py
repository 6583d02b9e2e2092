"""Hugging Face decoder layers transcribed from the public transformers code for the import
tests (transformers is not a dependency): OPT's (eager attention, `softmax(dtype=float32)`
and its cast back, the causal mask made in forward from `torch.full(.., finfo.min)`),
GPT-NeoX's (one packed query_key_value cut per head, partial rotary, parallel residual) and
Phi's (separate q/k/v, partial rotary, one layernorm feeding attention and MLP in parallel).
Each model is a stack of its layers behind an embedding-free input, `hidden_states: [B, S, D]`,
with the mask and the rotary tables made in `forward` as the HF models make them."""
from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from torch import nn


def causal_mask(hidden_states: torch.Tensor) -> torch.Tensor:
    """transformers' `_make_causal_mask`: finfo.min above the diagonal, 0 elsewhere, [B, 1, T, T]."""
    bsz, tgt_len = hidden_states.shape[:2]
    mask = torch.full((tgt_len, tgt_len), torch.finfo(hidden_states.dtype).min)
    mask_cond = torch.arange(mask.size(-1))
    mask = mask.masked_fill(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0):
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        causal = attention_mask[:, :, :, : key.shape[-2]]
        attn_weights = attn_weights + causal
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


# ------------------------------------------------------------------ OPT

class OPTAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_dim = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.embed_dim // self.num_heads
        self.scaling = self.head_dim**-0.5
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=config.enable_bias)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=config.enable_bias)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=config.enable_bias)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=config.enable_bias)

    def forward(self, hidden_states, attention_mask=None):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        query_states = query_states.view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        key_states = key_states.view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)
        attn_output, attn_weights = eager_attention_forward(self, query_states, key_states, value_states,
                                                            attention_mask, scaling=1.0)
        attn_output = attn_output.reshape(bsz, tgt_len, -1).contiguous()
        attn_output = self.out_proj(attn_output)
        return attn_output, attn_weights


class OPTDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_dim = config.hidden_size
        self.self_attn = OPTAttention(config)
        self.do_layer_norm_before = config.do_layer_norm_before
        self.activation_fn = nn.ReLU()
        self.self_attn_layer_norm = nn.LayerNorm(self.embed_dim, elementwise_affine=True)
        self.fc1 = nn.Linear(self.embed_dim, config.ffn_dim, bias=config.enable_bias)
        self.fc2 = nn.Linear(config.ffn_dim, self.embed_dim, bias=config.enable_bias)
        self.final_layer_norm = nn.LayerNorm(self.embed_dim, elementwise_affine=True)

    def forward(self, hidden_states, attention_mask=None):
        residual = hidden_states
        if self.do_layer_norm_before:
            hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states, attention_mask)
        hidden_states = residual + hidden_states
        if not self.do_layer_norm_before:
            hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states_shape = hidden_states.shape
        hidden_states = hidden_states.reshape(-1, hidden_states.size(-1))
        residual = hidden_states
        if self.do_layer_norm_before:
            hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.activation_fn(hidden_states)
        hidden_states = self.fc2(hidden_states)
        hidden_states = (residual + hidden_states).view(hidden_states_shape)
        if not self.do_layer_norm_before:
            hidden_states = self.final_layer_norm(hidden_states)
        return (hidden_states,)


def opt_config(hidden_size=32, num_attention_heads=4, ffn_dim=48, num_hidden_layers=2):
    return SimpleNamespace(hidden_size=hidden_size, num_attention_heads=num_attention_heads, ffn_dim=ffn_dim,
                           num_hidden_layers=num_hidden_layers, enable_bias=True, do_layer_norm_before=True)


class OPTLayers(nn.Module):
    """OPTDecoder's loop over its layers, with the causal mask it prepares."""

    def __init__(self, config=None):
        super().__init__()
        self.config = config or opt_config()
        self.layers = nn.ModuleList([OPTDecoderLayer(self.config) for _ in range(self.config.num_hidden_layers)])

    def forward(self, hidden_states):
        mask = causal_mask(hidden_states)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask)[0]
        return hidden_states


# ------------------------------------------------------------------ rotary (GPT-NeoX, Phi)

def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """The partial-rotary version GPT-NeoX and Phi share: the first rotary_dim features turn."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = (q_rot * cos) + (rotate_half(q_rot) * sin)
    k_embed = (k_rot * cos) + (rotate_half(k_rot) * sin)
    q_embed = torch.cat([q_embed, q_pass], dim=-1)
    k_embed = torch.cat([k_embed, k_pass], dim=-1)
    return q_embed, k_embed


class RotaryEmbedding(nn.Module):
    """The default rope: inv_freq a non-persistent buffer, cos and sin made in forward from the
    positions (`inv_freq[None, :, None] @ position_ids[:, None, :]`)."""

    def __init__(self, config):
        super().__init__()
        head_dim = config.hidden_size // config.num_attention_heads
        dim = int(head_dim * config.partial_rotary_factor)
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = 1.0

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


# ------------------------------------------------------------------ GPT-NeoX

class GPTNeoXAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.head_size = config.hidden_size // config.num_attention_heads
        self.attention_dropout = 0.0
        self.rotary_ndims = int(self.head_size * config.partial_rotary_factor)
        self.scaling = self.head_size**-0.5
        self.query_key_value = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, 3 * self.head_size)
        qkv = self.query_key_value(hidden_states).view(hidden_shape).transpose(1, 2)
        query_states, key_states, value_states = qkv.chunk(3, dim=-1)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        attn_output, attn_weights = eager_attention_forward(self, query_states, key_states, value_states,
                                                            attention_mask, scaling=self.scaling)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.dense(attn_output)
        return attn_output, attn_weights


class GPTNeoXMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(config.hidden_size, config.intermediate_size)
        self.dense_4h_to_h = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = nn.GELU()

    def forward(self, hidden_states):
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(hidden_states)))


class GPTNeoXLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.use_parallel_residual = config.use_parallel_residual
        self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = GPTNeoXAttention(config)
        self.mlp = GPTNeoXMLP(config)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        attn_output, _ = self.attention(self.input_layernorm(hidden_states), attention_mask, position_embeddings)
        if self.use_parallel_residual:
            mlp_output = self.mlp(self.post_attention_layernorm(hidden_states))
            hidden_states = mlp_output + attn_output + hidden_states
        else:
            attn_output = attn_output + hidden_states
            mlp_output = self.mlp(self.post_attention_layernorm(attn_output))
            hidden_states = mlp_output + attn_output
        return hidden_states


def neox_config(hidden_size=48, num_attention_heads=4, intermediate_size=80, num_hidden_layers=2):
    return SimpleNamespace(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                           intermediate_size=intermediate_size, num_hidden_layers=num_hidden_layers,
                           partial_rotary_factor=0.25, rope_theta=10000.0, attention_bias=True,
                           use_parallel_residual=True, layer_norm_eps=1e-5)


class GPTNeoXLayers(nn.Module):
    """GPTNeoXModel's loop (no embedding): positions, the rotary tables, the causal mask, the layers."""

    def __init__(self, config=None):
        super().__init__()
        self.config = config or neox_config()
        self.rotary_emb = RotaryEmbedding(self.config)
        self.layers = nn.ModuleList([GPTNeoXLayer(self.config) for _ in range(self.config.num_hidden_layers)])
        self.final_layer_norm = nn.LayerNorm(self.config.hidden_size, eps=self.config.layer_norm_eps)

    def forward(self, hidden_states):
        position_ids = torch.arange(hidden_states.shape[1]).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        mask = causal_mask(hidden_states)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask, position_embeddings)
        return self.final_layer_norm(hidden_states)


# ------------------------------------------------------------------ Phi

def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def phi_rotary(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class NewGELUActivation(nn.Module):
    """transformers' gelu_new, written out."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class PhiAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.q_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=True)
        self.dense = nn.Linear(config.num_attention_heads * self.head_dim, config.hidden_size, bias=True)
        self.rotary_ndims = int(self.head_dim * config.partial_rotary_factor)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_rot, query_pass = query_states[..., : self.rotary_ndims], query_states[..., self.rotary_ndims :]
        key_rot, key_pass = key_states[..., : self.rotary_ndims], key_states[..., self.rotary_ndims :]
        query_rot, key_rot = phi_rotary(query_rot, key_rot, cos, sin)
        query_states = torch.cat((query_rot, query_pass), dim=-1)
        key_states = torch.cat((key_rot, key_pass), dim=-1)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_output, attn_weights = eager_attention_forward(self, query_states, key_states, value_states,
                                                            attention_mask, scaling=self.scaling)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.dense(attn_output)
        return attn_output, attn_weights


class PhiMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.activation_fn = NewGELUActivation()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states):
        return self.fc2(self.activation_fn(self.fc1(hidden_states)))


class PhiDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = PhiAttention(config)
        self.mlp = PhiMLP(config)
        self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.resid_dropout = nn.Dropout(0.0)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        attn_outputs, _ = self.self_attn(hidden_states, position_embeddings, attention_mask)
        attn_outputs = self.resid_dropout(attn_outputs)
        feed_forward_hidden_states = self.resid_dropout(self.mlp(hidden_states))
        return attn_outputs + feed_forward_hidden_states + residual


def phi_config(hidden_size=64, num_attention_heads=2, num_key_value_heads=None, intermediate_size=80,
               num_hidden_layers=2):
    return SimpleNamespace(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                           num_key_value_heads=num_key_value_heads or num_attention_heads,
                           intermediate_size=intermediate_size, num_hidden_layers=num_hidden_layers,
                           partial_rotary_factor=0.4, rope_theta=10000.0, layer_norm_eps=1e-5)


class PhiLayers(nn.Module):
    """PhiModel's loop (no embedding): positions, rotary tables, the causal mask, layers, final norm."""

    def __init__(self, config=None):
        super().__init__()
        self.config = config or phi_config()
        self.rotary_emb = RotaryEmbedding(self.config)
        self.layers = nn.ModuleList([PhiDecoderLayer(self.config) for _ in range(self.config.num_hidden_layers)])
        self.final_layernorm = nn.LayerNorm(self.config.hidden_size, eps=self.config.layer_norm_eps)

    def forward(self, hidden_states):
        position_ids = torch.arange(hidden_states.shape[1]).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        mask = causal_mask(hidden_states)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask, position_embeddings)
        return self.final_layernorm(hidden_states)
