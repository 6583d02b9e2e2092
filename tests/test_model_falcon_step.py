"""specs/falcon_7b_step.shape: Falcon with a key/value cache per layer (its one key/value
head, after RoPE). Checked for all P >= 0 and S; its generated module, with the weights of
specs/falcon_7b.shape under the same names, gives the logits of the full forward and of
the hand-written HF reference, whether the prompt comes at once (prefill, P = 0) or in
pieces with the caches carried."""
from __future__ import annotations

from pathlib import Path

import pytest
from decoding import PIECES, assert_step_is_the_full_forward
from test_model_falcon import _pairs, _reference
from torch_shapes import checked, module, same_random_weights

from shapelang import api

SPECS = Path(__file__).resolve().parent.parent / "specs"
LAYOUTS = [{"V": 53, "D": 32, "H": 4, "L": 2}, {"V": 40, "D": 48, "H": 3, "L": 3}]


def _spec(name):
    return checked((SPECS / name).read_text(), name)


def test_the_step_has_the_full_models_parameters_and_a_one_head_cache():
    step, full = _spec("falcon_7b_step.shape"), _spec("falcon_7b.shape")
    assert step.example_value(step.total_params) == full.example_value(full.total_params) == 6_921_720_704
    assert "[L, B, 1, P + S, Dh]" in api.trace(step, width=0)


@pytest.mark.parametrize("sizes", LAYOUTS, ids=["4heads", "3heads"])
@pytest.mark.parametrize("pieces", PIECES)
def test_prefill_and_steps_give_the_full_forwards_logits(sizes, pieces):
    torch = pytest.importorskip("torch")
    full, _ = module(_spec("falcon_7b.shape"), "falcon_full", **sizes)
    step, _ = module(_spec("falcon_7b_step.shape"), "falcon_step", **sizes)
    ref = _reference(torch, **sizes)
    same_random_weights(zip(full.parameters(), _pairs(ref)))
    ids = torch.randint(0, sizes["V"], (2, sum(pieces)), generator=torch.Generator().manual_seed(7))
    assert_step_is_the_full_forward(full, step, ref, ids, pieces, 1, sizes["D"] // sizes["H"],
                                    sizes["L"])
