"""Mistral-7B written whole as a spec (specs/mistral_7b.shape): the checker's parameter
total is Hugging Face's, and the generated module at reduced sizes computes what a
hand-written reference of HF's MistralForCausalLM forward (eval) computes with the same
weights, with a window shorter than the text, so that the band of the sliding-window mask
is exercised, and with a window longer than the text, where it is Llama's causal mask."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_model_llama2 import _pairs as llama_pairs
from test_model_llama2 import _reference as llama_reference
from torch_shapes import checked, module, outputs_match, same_random_weights, shape_at

SPEC = Path(__file__).resolve().parent.parent / "specs" / "mistral_7b.shape"
SIZES = [{"V": 97, "D": 32, "H": 4, "G": 2, "F": 40, "L": 2, "W": 3},    # GQA, a window of 3
         {"V": 61, "D": 48, "H": 6, "G": 3, "F": 56, "L": 1, "W": 5}]


def _spec():
    return checked(SPEC.read_text(), "mistral_7b.shape")


def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.example_value(spec.total_params) == 7_241_732_096


def test_the_mask_is_square_and_bool_at_every_size():
    torch = pytest.importorskip("torch")
    spec = _spec()
    keep = next(b for b in spec.bindings if "keep" in b.names).types[0]
    assert keep.dtype == "bool"
    assert shape_at(spec, "keep", {"B": 2, "S": 9}) == (9, 9)
    # the band the spec writes (`tril` then `triu (1 - W)`) keeps W keys per query
    band = torch.ones(9, 9).tril().triu(1 - 3).bool()
    assert band.sum(-1).tolist() == [1, 2, 3, 3, 3, 3, 3, 3, 3]


# ------------------------------------------------------------------ a hand-written reference

def _reference(torch, V, D, H, G, F, L, W, eps=1e-5, theta=10000.0):
    """HF's MistralForCausalLM forward in eval mode (modeling_mistral.py): Llama's layout,
    and config.sliding_window on the causal mask."""
    return llama_reference(torch, V, D, H, G, F, L, eps=eps, theta=theta, window=W)


def _pairs(ref):
    """The reference's parameters in the generated module's order, by role."""
    return llama_pairs(ref, len(ref.layers))


def _built(torch, sizes):
    model, gen = module(_spec(), f"mistral_{sizes['G']}_{sizes['W']}", **sizes)
    ref = _reference(torch, **sizes)
    got, want = list(model.parameters()), _pairs(ref)
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    assert len(got) == len(list(ref.parameters()))
    same_random_weights(zip(got, want))
    return model, gen, ref


@pytest.mark.parametrize("sizes", SIZES, ids=["window3", "window5"])
def test_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    model, gen, ref = _built(torch, sizes)
    assert "W: int = " in gen.source and "triu(diagonal=1 - W)" in gen.source
    ids = torch.randint(0, sizes["V"], (2, 11), generator=torch.Generator().manual_seed(3))
    outputs_match(model, ref, ids, (2, 11, sizes["V"]))


def test_the_window_is_honoured():
    """Past the window the logits are not the causal model's; within it they are."""
    torch = pytest.importorskip("torch")
    sizes = SIZES[0]
    model, _, ref = _built(torch, sizes)
    wide = _reference(torch, **{**sizes, "W": 64})
    wide.load_state_dict(ref.state_dict())
    ids = torch.randint(0, sizes["V"], (1, 8), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        got, causal = model(ids), wide(ids)
    w = sizes["W"]
    torch.testing.assert_close(got[:, :w], causal[:, :w], atol=1e-5, rtol=1e-5)   # all keys inside
    assert (got[:, w:] - causal[:, w:]).abs().max().item() > 1e-3
