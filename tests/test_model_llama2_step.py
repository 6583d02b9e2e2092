"""specs/llama2_7b_step.shape: Llama-2 with a key/value cache per layer (G heads, after
RoPE, before repeat_kv). Checked for all P >= 0 and S; its generated module, with the
weights of specs/llama2_7b.shape under the same names, gives the logits of the full
forward and of the hand-written HF reference, whether the prompt comes at once (prefill,
P = 0) or in pieces with the caches carried, for Llama-2-7B's and Llama-2-70B's head
layouts."""
from __future__ import annotations

from pathlib import Path

import pytest
from decoding import PIECES, assert_step_is_the_full_forward
from test_model_llama2 import _pairs, _reference
from torch_shapes import checked, module, same_random_weights

from shapelang import api

SPECS = Path(__file__).resolve().parent.parent / "specs"
LAYOUTS = [{"V": 97, "D": 32, "H": 4, "G": 4, "F": 88, "L": 2},    # Llama-2-7B's: G = H
           {"V": 61, "D": 48, "H": 6, "G": 2, "F": 72, "L": 2}]    # Llama-2-70B's: G < H


def _spec(name):
    return checked((SPECS / name).read_text(), name)


def test_the_step_has_the_full_models_parameters_and_a_grouped_cache():
    step, full = _spec("llama2_7b_step.shape"), _spec("llama2_7b.shape")
    assert step.example_value(step.total_params) == full.example_value(full.total_params) == 6_738_415_616
    text = api.trace(step, width=0)
    assert "[L, B, G, P + S, Dh]" in text and "[B, H, P + S, Dh]" in text


@pytest.mark.parametrize("sizes", LAYOUTS, ids=["mha", "gqa"])
@pytest.mark.parametrize("pieces", PIECES)
def test_prefill_and_steps_give_the_full_forwards_logits(sizes, pieces):
    torch = pytest.importorskip("torch")
    full, _ = module(_spec("llama2_7b.shape"), "llama2_full", **sizes)
    step, _ = module(_spec("llama2_7b_step.shape"), "llama2_step", **sizes)
    ref = _reference(torch, **sizes)
    same_random_weights(zip(full.parameters(), _pairs(ref, sizes["L"])))
    ids = torch.randint(0, sizes["V"], (2, sum(pieces)), generator=torch.Generator().manual_seed(5))
    assert_step_is_the_full_forward(full, step, ref, ids, pieces, sizes["G"], sizes["D"] // sizes["H"],
                                    sizes["L"])
