"""specs/mistral_7b_step.shape: Mistral with a sliding-window key/value cache (G heads,
after RoPE, at most W - 1 positions kept). Checked for all P >= 0 and S; its generated
module, with the weights of specs/mistral_7b.shape under the same names, gives the logits
of the full forward and of the hand-written HF reference when the prompt comes at once or
in pieces, past the window, with a cache that stops growing at W - 1."""
from __future__ import annotations

from pathlib import Path

import pytest
from decoding import load_full_weights
from test_model_mistral import _pairs, _reference
from torch_shapes import checked, module, same_random_weights, shape_at

from shapelang import api

SPECS = Path(__file__).resolve().parent.parent / "specs"
SIZES = [{"V": 97, "D": 32, "H": 4, "G": 2, "F": 40, "L": 2, "W": 3},
         {"V": 61, "D": 48, "H": 6, "G": 3, "F": 56, "L": 1, "W": 5}]
PIECES = [(9,), (4, 1, 1, 1, 1, 1), (1,) * 9, (2, 5, 2)]


def _spec(name):
    return checked((SPECS / name).read_text(), name)


def test_the_step_has_the_full_models_parameters_and_a_bounded_cache():
    step, full = _spec("mistral_7b_step.shape"), _spec("mistral_7b.shape")
    assert step.example_value(step.total_params) == full.example_value(full.total_params) == 7_241_732_096
    text = api.trace(step, width=0)
    assert "[L, B, G, min(P + S, W - 1), Dh]" in text and "[B, H, P + S, Dh]" in text
    # the cache is full at the example (P = 4095): one more token keeps it at W - 1
    assert shape_at(step, "present_k", {"B": 1, "P": 4095, "S": 1}) == (32, 1, 8, 4095, 128)
    assert shape_at(step, "present_k", {"B": 1, "P": 0, "S": 7}) == (32, 1, 8, 7, 128)


def _in_pieces(step, ids, pieces, sizes):
    """Logits of the step module on consecutive pieces of `ids`, each call given its
    positions and the caches the previous call kept; also the caches' lengths."""
    import torch

    G, Dh, L, W = sizes["G"], sizes["D"] // sizes["H"], sizes["L"], sizes["W"]
    caches = [torch.zeros(L, ids.shape[0], G, 0, Dh)] * 2
    outs, lengths, at = [], [], 0
    for n in pieces:
        res = step(ids[:, at:at + n], torch.arange(at, at + n), *caches)
        caches, at = [res["present_k"], res["present_v"]], at + n
        assert caches[0].shape == caches[1].shape
        lengths.append(caches[0].shape[3])
        assert lengths[-1] == min(at, W - 1)
        outs.append(res["logits"])
    return torch.cat(outs, dim=1), lengths


@pytest.mark.parametrize("sizes", SIZES, ids=["window3", "window5"])
@pytest.mark.parametrize("pieces", PIECES)
def test_prefill_and_steps_give_the_full_forwards_logits(sizes, pieces):
    torch = pytest.importorskip("torch")
    full, _ = module(_spec("mistral_7b.shape"), "mistral_full", **sizes)
    step, _ = module(_spec("mistral_7b_step.shape"), "mistral_step", **sizes)
    ref = _reference(torch, **sizes)
    same_random_weights(zip(full.parameters(), _pairs(ref)))
    load_full_weights(step, full)
    ids = torch.randint(0, sizes["V"], (2, sum(pieces)), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        got, lengths = _in_pieces(step, ids, pieces, sizes)
        whole, want = full(ids), ref(ids)
    assert max(lengths) == sizes["W"] - 1               # the cache stopped growing
    torch.testing.assert_close(got, whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
