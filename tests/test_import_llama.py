"""`shapelang import` of a Llama-style model: RMSNorm written by hand (x * rsqrt(mean(x^2) + eps)
* w), rotary embedding with cos/sin buffers and rotate_half, grouped-query attention (by
repeat_interleave, and by expand + reshape), a SiLU-gated MLP. Each RMSNorm's weight and each
attention's tables are its block's own `param` and `buffer`s, so the layers stack."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F
from import_kit import floats, ids, round_trip
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, max_seq_len, expand, theta=10000.0):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.expand = expand
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        inv = 1.0 / theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim)
        freqs = torch.outer(torch.arange(max_seq_len).float(), inv)
        emb = torch.cat((freqs, freqs), -1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def repeat_kv(self, x):
        n_rep = self.n_heads // self.n_kv_heads
        if self.expand:
            b, h, s, d = x.shape
            return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)
        return x.repeat_interleave(n_rep, dim=1)

    def forward(self, x):
        B, S, _ = x.shape
        q = self.wq(x).view(B, S, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, S, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, S, self.n_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.cos[:S], self.sin[:S]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, S, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim=48, n_heads=6, n_kv_heads=2, max_seq_len=32, hidden_dim=80, expand=False):
        super().__init__()
        self.attention = Attention(dim, n_heads, n_kv_heads, max_seq_len, expand)
        self.feed_forward = FeedForward(dim, hidden_dim)
        self.attention_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, vocab_size=101, dim=48, n_layers=2, n_heads=6, n_kv_heads=2, max_seq_len=32):
        super().__init__()
        torch.manual_seed(0)
        self.tok_embeddings = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList([TransformerBlock(dim, n_heads, n_kv_heads, max_seq_len)
                                     for _ in range(n_layers)])
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab_size, bias=False)
        for p in self.parameters():       # the norms' weights must matter
            nn.init.normal_(p, 0.0, 0.3)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


@pytest.fixture(scope="module")
def llama_text(tmp_path_factory):
    return round_trip(tmp_path_factory.mktemp("llama"), Llama(), ["tokens=2x8:int"], ids(101),
                      sizes_list=((2, 8), (3, 5), (1, 32)))


def test_the_llama_round_trips_with_its_layers_stacked(llama_text):
    assert "opaque" not in llama_text
    assert "layers: tok_embeddings -> stack 2 TransformerBlock" in llama_text


def test_the_hand_written_rmsnorm_is_its_operations_with_its_own_weight(llama_text):
    block = llama_text[llama_text.index("block RMSNorm"):]
    for line in ("  param weight: [D]", "square -> mean -1 keepdim", "+ 1e-06 -> rsqrt", "* weight"):
        assert line in block, line


def test_rotary_tables_are_the_attentions_buffers_and_rotate_half_its_steps(llama_text):
    for line in ("  buffer cos: [N, Dh]", "  buffer sin: [N, Dh]", "cos -> slice 0 0 S",
                 "slice 3 0 Dh/2", "slice 3 Dh/2 Dh -> neg", "assume Dh % 2 == 0", "assume S <= N"):
        assert line in llama_text, line


def test_sizes_come_from_the_attributes_and_the_roles(llama_text):
    # n_heads, n_kv_heads, head_dim are attributes; the width is their product; the group
    # count is H / Hkv because the keys are repeated from Hkv heads up to H
    for line in ("dim H  # n_heads", "dim Hkv  # n_kv_heads", "dim Dh  # head_dim", "dim D = H * Dh",
                 "dim G = H / Hkv", "linear Hkv*Dh bias=false", "repeat_interleave G 1",
                 "w1: x -> linear F bias=false -> silu"):
        assert line in llama_text, line


def test_grouped_query_attention_by_expand_and_reshape(tmp_path):
    torch.manual_seed(3)
    block = TransformerBlock(expand=True)
    for p in block.parameters():
        nn.init.normal_(p, 0.0, 0.3)
    text = round_trip(tmp_path, block, ["x=2x8x48"], floats(lambda b, s: [(b, s, 48)]))
    assert "unsqueeze 2 -> expand [B, Hkv, G, S, Dh] -> reshape [B, H, S, Dh]" in text
