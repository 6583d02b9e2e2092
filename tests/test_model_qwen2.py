"""Qwen2-0.5B written whole as a spec (specs/qwen2_0_5b.shape): the checker's parameter
total is Hugging Face's (the tied head counted once), Qwen2-1.5B is the same spec with other
sizes, and the generated module at reduced sizes computes what HF's Qwen2ForCausalLM forward
(eval) computes with the same weights: Llama's reference with biases on q/k/v only, theta 1e6,
eps 1e-6 and the LM head tied to the token table."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_model_llama2 import _pairs as llama_pairs
from test_model_llama2 import _reference as llama_reference
from torch_shapes import REDUCED, checked, module, outputs_match, same_random_weights, total_at

SPEC = Path(__file__).resolve().parent.parent / "specs" / "qwen2_0_5b.shape"


def _spec():
    return checked(SPEC.read_text(), "qwen2_0_5b.shape")



def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.example_value(spec.total_params) == 494_032_768
    # by parts: the table once, q/k/v biases, the rest of Llama's layer
    V, D, H, G, Dh, F, L = 151936, 896, 14, 2, 64, 4864, 24
    layer = D * H * Dh + H * Dh + 2 * (D * G * Dh + G * Dh) + H * Dh * D + 3 * D * F + 2 * D
    assert V * D + L * layer + D == 494_032_768


def test_qwen2_1_5b_is_the_same_spec_with_other_sizes():
    # Qwen2-1.5B: hidden 1536, 28 layers, 12 heads, 2 key/value heads, intermediate 8960,
    # tied embeddings; Hugging Face counts 1,543,714,304 parameters.
    assert total_at(_spec(), D=1536, L=28, H=12, G=2, F=8960) == 1_543_714_304


def _reference(torch, V, D, H, G, F, L):
    """HF's Qwen2ForCausalLM forward in eval mode (modeling_qwen2.py): Llama's layout with
    biases on q_proj, k_proj and v_proj, theta 1e6, eps 1e-6, a tied LM head."""
    return llama_reference(torch, V, D, H, G, F, L, eps=1e-6, theta=1e6, qkv_bias=True, tied=True)


@pytest.mark.parametrize("sizes", [{k: v for k, v in s.items() if k not in ("B", "S")} for s in REDUCED["qwen2_0_5b"]],
                         ids=["gqa3", "gqa7"])
def test_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    model, gen = module(_spec(), f"qwen2_{sizes['H']}", **sizes)
    assert "eps: float = 1e-06" in gen.source and "1000000.0" in gen.source
    ref = _reference(torch, **sizes)
    got, want = list(model.parameters()), llama_pairs(ref, sizes["L"])
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    assert len(got) == len(list(ref.parameters()))          # the tied head is one tensor in both
    same_random_weights(zip(got, want))
    ids = torch.randint(0, sizes["V"], (2, 9), generator=torch.Generator().manual_seed(5))
    outputs_match(model, ref, ids, (2, 9, sizes["V"]))
    with torch.no_grad():                 # the q/k/v biases are used: without them the logits move
        for layer in model.hidden:
            layer.k.bias.zero_()
        assert (model(ids) - ref(ids)).abs().max().item() > 1e-3
