"""specs/gpt2_small.shape is GPT-2 small whole, as nanoGPT's GPT writes it: its parameter
total is the published 124,439,808 (the LM head is tied to the token table), and the
module generated from it at reduced sizes gives the logits of nanoGPT's GPT (bench/nanogpt.py,
eval mode, its manual attention path) with the same weights: LayerNorm eps 1e-5, nn.GELU() (exact), causal
attention, positions from arange.
"""
from __future__ import annotations

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


def _nanogpt(V, Ctx, D, H, L):
    """nanoGPT's GPT on its manual attention path (the causal buffer and masked_fill)."""
    from bench.nanogpt import GPT, GPTConfig

    return GPT(GPTConfig(block_size=Ctx, vocab_size=V, n_layer=L, n_head=H, n_embd=D, flash=False)).eval()


def test_the_generated_module_matches_a_hand_written_nanogpt():
    torch = pytest.importorskip("torch")
    spec = check_file(str(SPEC))
    gen = generate(spec)
    assert "eps: float = 1e-05" in gen.source and "approximate" not in gen.source
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, SMALL))
    ref = _nanogpt(**SMALL)
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
