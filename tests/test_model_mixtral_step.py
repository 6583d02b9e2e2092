"""specs/mixtral_8x7b_step.shape: Mixtral with a key/value cache per layer (G heads, after
RoPE at positions P.., theta 1e6, before repeat_kv) and the sparse MoE block of
specs/mixtral_8x7b.shape. Checked for all P >= 0 and S; its generated module, with the
weights of specs/mixtral_8x7b.shape under the same names, gives the logits of the full
forward and of the hand-written HF reference, whether the prompt comes at once (prefill,
P = 0) or in pieces with the caches carried, with some experts idle and with every
expert routed."""
from __future__ import annotations

from pathlib import Path

import pytest
from decoding import PIECES, assert_step_is_the_full_forward
from test_model_mixtral import _pairs, _reference
from torch_shapes import REDUCED, checked, module, same_random_weights

from shapelang import api

SPECS = Path(__file__).resolve().parent.parent / "specs"
SIZES = [{"V": 53, "D": 32, "H": 4, "G": 2, "F": 24, "E": 8, "K": 2, "L": 2},   # 8 experts, top-2
         {"V": 61, "D": 48, "H": 6, "G": 3, "F": 40, "E": 4, "K": 2, "L": 1}]   # 4 experts, top-2


def _spec(name):
    return checked((SPECS / name).read_text(), name)


def test_the_step_has_the_full_models_parameters_and_a_grouped_cache():
    step, full = _spec("mixtral_8x7b_step.shape"), _spec("mixtral_8x7b.shape")
    assert step.example_value(step.total_params) == full.example_value(full.total_params) == 46_702_792_704
    text = api.trace(step, width=0)
    assert "[L, B, G, P + S, Dh]" in text and "[B, H, P + S, Dh]" in text
    assert "[S, P + S]" in text and "[N_top_x, D]" in text


def test_an_experts_tokens_are_bounded_by_the_new_tokens_not_the_cache():
    p = _spec("mixtral_8x7b_step.shape").prover
    sizes = [u for u in p.unbacked if str(u).startswith("N_top_x")]
    assert sizes
    for n in sizes:   # at most K*B*S: the router sees the S new tokens only, and may send none
        bound = p.unbacked[n]
        assert p.leq(n, bound).ok and p.positive(n).status == "refuted"
        assert p.user["P"] not in bound.free_symbols and p.user["K"] in bound.free_symbols


@pytest.mark.parametrize("sizes", SIZES, ids=["8-experts", "4-experts"])
@pytest.mark.parametrize("pieces", PIECES)
def test_prefill_and_steps_give_the_full_forwards_logits(sizes, pieces):
    torch = pytest.importorskip("torch")
    full, _ = module(_spec("mixtral_8x7b.shape"), "mixtral_full", **sizes)
    step, _ = module(_spec("mixtral_8x7b_step.shape"), "mixtral_step", **sizes)
    ref = _reference(torch, **sizes)
    same_random_weights(zip(full.parameters(), _pairs(ref)))
    ids = torch.randint(0, sizes["V"], (2, sum(pieces)), generator=torch.Generator().manual_seed(5))
    assert_step_is_the_full_forward(full, step, ref, ids, pieces, sizes["G"], sizes["D"] // sizes["H"],
                                    sizes["L"])


def test_a_one_token_step_routes_at_most_batch_tokens_to_an_expert():
    torch = pytest.importorskip("torch")
    sizes = SIZES[0]
    step, _ = module(_spec("mixtral_8x7b_step.shape"), "mixtral_step_one", **sizes)
    seen = []
    experts = [m for m in step.modules() if type(m).__name__ == "Expert"]
    assert len(experts) == sizes["L"] * sizes["E"]
    for m in experts:
        m.register_forward_hook(lambda _m, args, out: seen.append(int(args[2].sum())))
    B, P, Dh = 3, 5, sizes["D"] // sizes["H"]
    past = [torch.randn(sizes["L"], B, sizes["G"], P, Dh) for _ in range(2)]
    ids = torch.randint(0, sizes["V"], (B, 1), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        res = step(ids, *past)
    assert res["logits"].shape == (B, 1, sizes["V"])
    assert res["present_k"].shape == (sizes["L"], B, sizes["G"], P + 1, Dh)
    torch.testing.assert_close(res["present_k"][:, :, :, :P], past[0], rtol=0, atol=0)
    # every (token, slot) pair goes to exactly one expert: K*B per layer, <= B per expert
    assert len(seen) == sizes["L"] * sizes["E"] and max(seen) <= B
    assert sum(seen) == sizes["L"] * sizes["K"] * B


def test_reduced_sizes_for_whole_spec_tests_are_listed():
    assert "mixtral_8x7b_step" in REDUCED
