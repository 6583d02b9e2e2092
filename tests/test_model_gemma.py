"""Gemma-2B written whole as a spec (specs/gemma_2b.shape): the checker's parameter total is
Hugging Face's (the tied head counted once), Gemma-7B is the same spec with other sizes, and
the generated module at reduced sizes computes what HF's GemmaForCausalLM forward (eval)
computes with the same weights: Llama's reference with the embeddings times sqrt(D),
GemmaRMSNorm's x * (1 + weight), the tanh GELU in the MLP, a head width of its own and a
tied LM head, with one key/value head (2B's multi-query) and with as many as query heads
(7B's)."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_model_llama2 import _pairs as llama_pairs
from test_model_llama2 import _reference as llama_reference
from torch_shapes import REDUCED, checked, module, outputs_match, same_random_weights, total_at

SPEC = Path(__file__).resolve().parent.parent / "specs" / "gemma_2b.shape"
SIZES = [{k: v for k, v in s.items() if k not in ("B", "S")} for s in REDUCED["gemma_2b"]]


def _spec():
    return checked(SPEC.read_text(), "gemma_2b.shape")



def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.example_value(spec.total_params) == 2_506_172_416
    V, D, H, G, Dh, F, L = 256000, 2048, 8, 1, 256, 16384, 18
    assert V * D + L * (2 * D * H * Dh + 2 * D * G * Dh + 3 * D * F + 2 * D) + D == 2_506_172_416


def test_gemma_7b_is_the_same_spec_with_other_sizes():
    # Gemma-7B: hidden 3072, 28 layers, 16 heads of 256 (16 * 256 = 4096, not 3072), 16
    # key/value heads, intermediate 24576; Hugging Face counts 8,537,680,896 parameters.
    assert total_at(_spec(), D=3072, L=28, H=16, G=16, F=24576) == 8_537_680_896


def _reference(torch, V, D, H, G, Dh, F, L):
    """HF's GemmaForCausalLM forward in eval mode (modeling_gemma.py)."""
    return llama_reference(torch, V, D, H, G, F, L, eps=1e-6, theta=10000.0, head_dim=Dh, tied=True,
                           gemma=True)


def _built(torch, sizes):
    model, gen = module(_spec(), f"gemma_{sizes['G']}", **sizes)
    ref = _reference(torch, **sizes)
    got, want = list(model.parameters()), llama_pairs(ref, sizes["L"])
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    assert len(got) == len(list(ref.parameters()))          # the tied head is one tensor in both
    return model, gen, ref, got, want


@pytest.mark.parametrize("sizes", SIZES, ids=["mqa", "mha"])
def test_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    model, gen, ref, got, want = _built(torch, sizes)
    assert "x * math.sqrt(D)" in gen.source and 'approximate="tanh"' in gen.source
    same_random_weights(zip(got, want))
    ids = torch.randint(0, sizes["V"], (2, 9), generator=torch.Generator().manual_seed(6))
    outputs_match(model, ref, ids, (2, 9, sizes["V"]))


def test_norm_weights_stored_as_offsets_from_one():
    """HF stores GemmaRMSNorm's weight as w in x * (1 + w), initialised to zeros: with those
    weights the generated module still computes the reference's logits (a norm written as
    Llama's, x * w, would give zeros)."""
    torch = pytest.importorskip("torch")
    sizes = SIZES[0]
    model, _, ref, got, want = _built(torch, sizes)
    same_random_weights(zip(got, want), seed=1)
    with torch.no_grad():
        for p, q in zip(got, want):
            if q.dim() == 1:
                p.zero_()
                q.zero_()
    ids = torch.randint(0, sizes["V"], (1, 7), generator=torch.Generator().manual_seed(7))
    out, _ = outputs_match(model, ref, ids, (1, 7, sizes["V"]))
    assert out.abs().max().item() > 1e-2
