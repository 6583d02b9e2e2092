"""Helpers the PyTorch references of the provenance corpus share (refs_*.py beside this
file and tests/test_provenance_corpus.py): the functional forms of a linear layer, a layer
norm, heads split and merged, scaled dot-product attention and rotary embeddings."""
from __future__ import annotations


def _torch():
    import torch

    return torch


def _F():
    import torch.nn.functional as F

    return F


def _lin(t, w, name):
    """nn.Linear named `name` in the state dict (bias if it has one)."""
    return _F().linear(t, w[f"{name}.weight"], w.get(f"{name}.bias"))


def _ln(t, w, name, eps=1e-5):
    return _F().layer_norm(t, t.shape[-1:], w[f"{name}.weight"], w[f"{name}.bias"], eps=eps)


def _proj(x, w, name):
    """x through a weight of the state dict: a `param W: [IN, OUT]` used as
    `x @ W`, or an nn.Linear `name.weight` (and `name.bias` if it has one)."""
    if name in w:
        return x @ w[name]
    return _F().linear(x, w[f"{name}.weight"], w.get(f"{name}.bias"))


def _heads(t, h):
    """[B, S, h*Dh] -> [B, h, S, Dh]"""
    b, s, width = t.shape
    return t.reshape(b, s, h, width // h).transpose(1, 2)


def _merge(t):
    """[B, h, S, Dh] -> [B, S, h*Dh]"""
    b, h, s, d = t.shape
    return t.transpose(1, 2).reshape(b, s, h * d)


def _sdpa(q, k, v, causal=False, **kw):
    return _F().scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)


def _rotate_half(t):
    """RoPE's rotate_half on the last axis: (-second half, first half)."""
    half = t.shape[-1] // 2
    return _torch().cat([-t[..., half:], t[..., :half]], -1)


def _rope(t, cos, sin):
    return t * cos + _rotate_half(t) * sin


def _rope_tables(s, dh, base=10000.0):
    """Hugging Face's rotary tables: inv_freq in float32, angles for positions
    0..s-1, cos and sin of [s, dh] (each frequency twice)."""
    torch = _torch()
    inv_freq = 1.0 / base ** (torch.arange(0.0, dh, 2) / dh)
    freqs = torch.outer(torch.arange(s), inv_freq)
    angles = torch.cat([freqs, freqs], -1)
    return angles.cos(), angles.sin()
