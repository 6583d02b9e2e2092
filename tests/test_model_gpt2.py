"""specs/gpt2_small.shape is GPT-2 small whole, as nanoGPT's GPT writes it: its parameter
total is the published 124,439,808 (the LM head is tied to the token table), and the
module generated from it at reduced sizes gives the logits of a hand-written nanoGPT GPT
(eval mode) with the same weights: LayerNorm eps 1e-5, nn.GELU() (exact), causal
attention, positions from arange.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from shapelang.checker.checker import check_file
from shapelang.codegen import runner
from shapelang.codegen.generator import generate
from shapelang.render import check_text

SPEC = Path(__file__).resolve().parent.parent / "specs" / "gpt2_small.shape"
SMALL = {"V": 60, "Ctx": 16, "D": 32, "H": 4, "L": 2}


def test_the_parameter_total_is_the_published_one():
    spec = check_file(str(SPEC))
    assert spec.ok, check_text(spec)
    assert spec.example_value(spec.total_params) == 124_439_808


def _nanogpt(torch, V, Ctx, D, H, L):
    nn, F = torch.nn, torch.nn.functional

    class LayerNorm(nn.Module):         # nanoGPT's LayerNorm with an optional bias
        def __init__(self, ndim):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim))

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):   # the slow path, with nanoGPT's tril buffer
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(D, 3 * D)
            self.c_proj = nn.Linear(D, D)
            self.register_buffer("bias", torch.tril(torch.ones(Ctx, Ctx)).view(1, 1, Ctx, Ctx))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(D, dim=2)
            k = k.view(B, T, H, C // H).transpose(1, 2)
            q = q.view(B, T, H, C // H).transpose(1, 2)
            v = v.view(B, T, H, C // H).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(D, 4 * D)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * D, D)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn, self.ln_2, self.mlp = LayerNorm(D), CausalSelfAttention(), LayerNorm(D), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict({
                "wte": nn.Embedding(V, D), "wpe": nn.Embedding(Ctx, D),
                "h": nn.ModuleList([Block() for _ in range(L)]), "ln_f": LayerNorm(D)})
            self.lm_head = nn.Linear(D, V, bias=False)
            self.transformer.wte.weight = self.lm_head.weight     # weight tying

        def forward(self, idx):
            pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            return self.lm_head(self.transformer.ln_f(x))

    return GPT().eval()


def test_the_generated_module_matches_a_hand_written_nanogpt():
    torch = pytest.importorskip("torch")
    spec = check_file(str(SPEC))
    gen = generate(spec)
    assert "eps: float = 1e-05" in gen.source and "approximate" not in gen.source
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, SMALL))
    ref = _nanogpt(torch, **SMALL)
    got, want = list(model.parameters()), list(ref.parameters())     # the tied table once
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p, q in zip(got, want):
            q.copy_(torch.randn(q.shape, generator=g) * (0.3 if q.dim() > 1 else 1.0))
            p.copy_(q)
    idx = torch.randint(0, SMALL["V"], (3, 11), generator=g)
    with torch.no_grad():
        logits, want_logits = model(idx), ref(idx)
        assert logits.shape == (3, 11, SMALL["V"])
        assert (logits - want_logits).abs().max() <= 1e-5
        # causal: changing the last token leaves the earlier positions' logits alone
        idx2 = idx.clone()
        idx2[:, -1] = (idx2[:, -1] + 1) % SMALL["V"]
        assert (model(idx2)[:, :-1] - logits[:, :-1]).abs().max() <= 1e-5
        # the activation matters: HF's tanh GELU would give other logits
        for block in ref.transformer.h:
            block.mlp.gelu.approximate = "tanh"
        assert (ref(idx) - logits).abs().max() > 1e-5
