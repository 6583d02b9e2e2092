"""specs/t5_small_step.shape: T5's decoder with a key/value cache per layer, the relative
position bias of queries at P .. P+S-1 over keys 0 .. P+S-1. Checked for all P >= 0 and S;
its generated module, with the decoder weights of specs/t5_small.shape under the same
names, gives the decoder output of the full forward and of the hand-written HF reference,
whether the target comes at once (P = 0) or in pieces with the caches carried, also at
offsets in the logarithmic and capped buckets (beyond 16 and 128 positions)."""
from __future__ import annotations

from pathlib import Path

import pytest
from decoding import PIECES, in_pieces
from test_model_t5 import T5Model, spec_name
from torch_shapes import checked, module

from shapelang import api

torch = pytest.importorskip("torch")
SPECS = Path(__file__).resolve().parent.parent / "specs"
SIZES = {"V": 50, "D": 16, "H": 2, "Dkv": 4, "F": 24, "L": 2}


def _spec(name):
    return checked((SPECS / name).read_text(), name)


def test_the_step_has_the_decoders_parameters_and_an_offset_bias():
    step, full = _spec("t5_small_step.shape"), _spec("t5_small.shape")
    # the decoder of t5-small: 6 layers of 4*512*512 (self) + 4*512*512 (cross) + 2*512*2048
    # + 3*512 (norms), its bias table 32*8, the final norm 512 and the shared table
    layer = 8 * 512 * 512 + 2 * 512 * 2048 + 3 * 512
    assert step.example_value(step.total_params) == 6 * layer + 32 * 8 + 512 + 32128 * 512
    assert step.example_value(full.total_params) == 60_506_624
    text = api.trace(step, width=0)
    assert "[1, H, S, P + S]" in text and "[L, B, H, P + S, Dkv]" in text


def _models():
    full, _ = module(_spec("t5_small.shape"), "t5_full", **SIZES)
    step, _ = module(_spec("t5_small_step.shape"), "t5_step", **SIZES)
    ref = T5Model(SIZES["V"], SIZES["D"], SIZES["Dkv"], SIZES["H"], SIZES["F"], SIZES["L"]).eval()
    ours = dict(full.named_parameters())
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.copy_(torch.randn_like(p) * 0.3)
            ours[spec_name(name)].copy_(p)
    weights = full.state_dict()
    left = set(weights) - set(step.state_dict())
    assert left and all(k.startswith(("enc.", "enc_")) for k in left), sorted(left)   # the encoder's
    step.load_state_dict({k: weights[k] for k in step.state_dict()})
    return full, step, ref


@pytest.mark.parametrize("pieces", PIECES + [(130,) + (1,) * 10, (20, 1, 1)])
def test_the_first_call_and_steps_give_the_full_decoders_output(pieces):
    full, step, ref = _models()
    B, Se, N = 2, 6, sum(pieces)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, SIZES["V"], (B, Se), generator=g)
    mask = torch.ones(B, Se, dtype=torch.long)
    mask[1, -2:] = 0                                     # the second input is padded
    dec = torch.randint(0, SIZES["V"], (B, N), generator=g)
    Dkv, H, L = SIZES["Dkv"], SIZES["H"], SIZES["L"]
    empty = [torch.zeros(L, B, H, 0, Dkv)] * 2
    with torch.no_grad():
        enc = ref.encoder(ids, mask)
        # the step module returns `hidden_norm`: pass it on as the logits of the helper
        wrapped = _Renamed(step)
        got, (k, _v) = in_pieces(wrapped, dec, pieces, empty, enc, mask)
        whole, want = full(ids, mask, dec), ref(ids, mask, dec)
    assert k.shape == (L, B, H, N, Dkv)
    torch.testing.assert_close(got, whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


class _Renamed:
    """The step module with its decoder output under the name the decoding helper reads."""

    def __init__(self, step):
        self.step = step

    def __call__(self, dec, past_k, past_v, enc, mask):
        out = self.step(dec, enc, mask, past_k, past_v)
        return {**out, "logits": out["hidden_norm"]}
