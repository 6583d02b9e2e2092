"""Whisper's incremental decoding: specs/whisper_tiny_prefill.shape runs the whole model on
the audio and the prompt and returns, with the logits, each decoder layer's self-attention
cache and the cross-attention keys and values of the audio; specs/whisper_tiny_step.shape
takes those caches and S more tokens (no encoder, no cross-attention key/value weights).
Both are checked; with the weights of specs/whisper_tiny.shape under the same names, the
prefill followed by token-by-token steps gives the logits of the whole-sequence forward and
of the hand-written openai whisper reference."""
from __future__ import annotations

from pathlib import Path

import pytest
from decoding import PIECES, in_pieces, load_full_weights
from test_model_whisper import SIZES, Whisper, spec_name
from torch_shapes import checked, module

from shapelang import api

torch = pytest.importorskip("torch")
SPECS = Path(__file__).resolve().parent.parent / "specs"


def _spec(name):
    return checked((SPECS / name).read_text(), name)


def test_the_prefill_has_the_whole_models_parameters_and_the_step_the_decoders():
    full, pre, step = _spec("whisper_tiny.shape"), _spec("whisper_tiny_prefill.shape"), _spec("whisper_tiny_step.shape")
    assert pre.example_value(pre.total_params) == full.example_value(full.total_params) == 37_184_640
    # the decoder: 29,552,256 less the cross-attention key and value maps (4 layers x (2*384^2 + 384))
    assert step.example_value(step.total_params) == 29_552_256 - 4 * (2 * 384 * 384 + 384)
    assert "[Ld, B, H, A, Dh]" in api.trace(pre, width=0)
    assert "[Ld, B, H, P + S, Dh]" in api.trace(step, width=0)


def _models(s):
    full, _ = module(_spec("whisper_tiny.shape"), "whisper_full", **s)
    pre, _ = module(_spec("whisper_tiny_prefill.shape"), "whisper_prefill", **s)
    step, _ = module(_spec("whisper_tiny_step.shape"), "whisper_step", **s)
    ref = Whisper(s["M"], s["A"], s["D"], s["H"], s["Le"], s["V"], s["Ctx"], s["Ld"]).eval()
    ours = dict(full.named_parameters())
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.copy_(torch.randn_like(p) * 0.3)
            ours[spec_name(name)].copy_(p)
    load_full_weights(pre, full)
    weights = full.state_dict()
    left = set(weights) - set(step.state_dict())
    # the encoder's (its stack `xa`, its norm `xa_ln`) and each layer's cross-attention keys and
    # values (the binding `c`), which the prefill computes once
    assert left and all(k.startswith(("f1.", "f2.", "xa.", "xa_")) or ".c.k." in k
                        or ".c.v." in k for k in left), sorted(left)
    step.load_state_dict({k: weights[k] for k in step.state_dict()})
    return full, pre, step, ref


@pytest.mark.parametrize("s", SIZES, ids=["1-layer", "2-layers"])
@pytest.mark.parametrize("pieces", PIECES)
def test_prefill_then_steps_give_the_whole_forwards_logits(s, pieces):
    full, pre, step, ref = _models(s)
    B, N = s["B"], sum(pieces)
    assert N <= s["Ctx"]
    g = torch.Generator().manual_seed(2)
    mel = torch.randn(B, s["M"], 2 * s["A"], generator=g)
    tokens = torch.randint(0, s["V"], (B, N), generator=g)
    first = pieces[0]
    with torch.no_grad():
        out = pre(mel, tokens[:, :first])
        cross = (out["cross_k"], out["cross_v"])
        assert cross[0].shape == (s["Ld"], B, s["H"], s["A"], s["D"] // s["H"])
        got, k = out["logits"], out["present_k"]
        if pieces[1:]:
            rest, (k, _v) = in_pieces(step, tokens[:, first:], pieces[1:],
                                      (out["present_k"], out["present_v"]), *cross)
            got = torch.cat([got, rest], dim=1)
        whole, want = full(mel, tokens), ref(mel, tokens)
        # the step alone from an empty cache (P = 0), with the audio's keys and values
        empty = [torch.zeros(s["Ld"], B, s["H"], 0, s["D"] // s["H"])] * 2
        alone, _ = in_pieces(step, tokens, pieces, empty, *cross)
    assert k.shape[-2] == N
    torch.testing.assert_close(got, whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone, whole, atol=1e-5, rtol=1e-5)
