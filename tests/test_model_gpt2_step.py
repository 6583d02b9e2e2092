"""specs/gpt2_small_step.shape: GPT-2 small with one key/value cache per layer (prefill at
P = 0, then one token at a time). Checked for all P and S; its generated module, with the
weights of specs/gpt2_small.shape loaded under the same names, gives the logits of the
whole-sequence forward and of the hand-written nanoGPT reference, whether the prompt comes
at once or token by token with the caches carried."""
from __future__ import annotations

from pathlib import Path

import pytest
from decoding import PIECES, in_pieces, load_full_weights
from test_model_gpt2 import SMALL, _nanogpt

from shapelang import api
from shapelang.codegen import runner

torch = pytest.importorskip("torch")
SPECS = Path(__file__).resolve().parent.parent / "specs"


def _built(name):
    spec = api.check_file(str(SPECS / name))
    assert spec.ok and not spec.diagnostics, api.render_check(spec)
    return spec, runner.build(api.codegen(spec), runner.resolve_sizes(spec, SMALL))[1]


def test_the_step_checks_for_all_sizes_and_has_the_full_models_parameters():
    step, _ = _built("gpt2_small_step.shape")
    full = api.check_file(str(SPECS / "gpt2_small.shape"))
    assert step.example_value(step.total_params) == full.example_value(full.total_params) == 124_439_808
    text = api.trace(step, width=0)
    assert "[L, B, H, P + S, Dh]" in text and "[B, H, S, P + S]" in text


def test_the_step_with_a_cache_is_a_loop_over_the_layers():
    source = api.codegen(api.check_file(str(SPECS / "gpt2_small_step.shape"))).source
    assert "for i, layer in enumerate(self.hidden):" in source
    assert "layer(hidden, past_k[i], past_v[i], hide)" in source
    assert "present_k = torch.stack(present_k_list)" in source


@pytest.mark.parametrize("pieces", PIECES)
def test_prefill_and_steps_give_the_full_forwards_logits(pieces):
    _, full = _built("gpt2_small.shape")
    _, step = _built("gpt2_small_step.shape")
    ref = _nanogpt(**SMALL)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p, q in zip(full.parameters(), ref.parameters()):
            q.copy_(torch.randn(q.shape, generator=g) * (0.3 if q.dim() > 1 else 1.0))
            p.copy_(q)
    load_full_weights(step, full)
    B, N, H, L, Dh = 2, sum(pieces), SMALL["H"], SMALL["L"], SMALL["D"] // SMALL["H"]
    ids = torch.randint(0, SMALL["V"], (B, N), generator=g)
    empty = [torch.zeros(L, B, H, 0, Dh)] * 2
    with torch.no_grad():
        got, (k, v) = in_pieces(step, ids, pieces, empty)
        whole, want = full(ids), ref(ids)
    assert k.shape == (L, B, H, N, Dh) == v.shape
    torch.testing.assert_close(got, whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_a_cache_of_another_layer_count_is_refused():
    text = (SPECS / "gpt2_small_step.shape").read_text()
    bad = text.replace("input past_k: [L, B, H, P, Dh]", "input past_k: [L + 1, B, H, P, Dh]")
    spec = api.check(bad)
    assert [d.code for d in spec.errors()] == ["E113"]
    assert "layer count" in spec.errors()[0].message
