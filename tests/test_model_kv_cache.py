"""Incremental decoding: specs/kv_cache_decoder.shape is one attention layer with a
key/value cache (past length P, keys and values of [B, H, P + S, Dh], a causal mask
shifted by P, RoPE positions offset by P). Checked for all sizes, and its generated
module, run in PyTorch, gives the same outputs whether the sequence comes in at once
(prefill, P = 0) or in pieces with the cache carried between calls; both equal a
hand-written PyTorch reference of causal RoPE attention over the whole sequence."""
from __future__ import annotations

from pathlib import Path

import pytest

from shapelang import api
from shapelang.codegen import runner

torch = pytest.importorskip("torch")

SPEC = Path(__file__).resolve().parent.parent / "specs" / "kv_cache_decoder.shape"
D, H = 32, 4
Dh = D // H


def build():
    spec = api.check_file(str(SPEC))
    assert spec.ok and not spec.diagnostics, api.render_check(spec)
    gen = api.codegen(spec)
    mod = runner.load_module(gen.source, "kv_cache_decoder_test")
    model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)(D=D))   # H comes from the cache.eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model


def reference(model, x):
    """Causal attention with RoPE over the whole sequence, written as the textbooks do."""
    B, N, _ = x.shape
    w = {name: p for name, p in model.named_parameters()}
    linears = sorted(n for n in w if n.endswith(".weight"))
    assert len(linears) == 4, linears
    q_w, k_w, v_w, o_w = (w[f"{n}.weight"] for n in ("q", "k_new", "v_new", "out"))

    def heads(t):
        return t.view(B, N, H, Dh).transpose(1, 2)

    q, k, v = heads(x @ q_w.T), heads(x @ k_w.T), heads(x @ v_w.T)
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, Dh, 2).float() / Dh)
    angles = torch.outer(torch.arange(N).float(), inv_freq)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()

    def rope(t):
        t1, t2 = t.chunk(2, -1)
        return t * cos + torch.cat([-t2, t1], -1) * sin

    q, k = rope(q), rope(k)
    scores = q @ k.transpose(-2, -1) / Dh ** 0.5
    scores = scores.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, N, D)
    return out @ o_w.T


def test_the_spec_checks_for_all_sizes_and_names_the_grown_cache():
    spec = api.check_file(str(SPEC))
    assert spec.ok and not spec.diagnostics
    text = api.trace(spec)
    assert "[B, H, P + S, Dh]" in text and "[B, H, S, P + S]" in text


@pytest.mark.parametrize("pieces", [(7,), (4, 1, 1, 1), (1, 1, 1, 1, 1, 1, 1), (3, 4)])
def test_incremental_decoding_equals_the_whole_sequence_and_the_reference(pieces):
    model = build()
    B, N = 2, sum(pieces)
    x = torch.randn(B, N, D, generator=torch.Generator().manual_seed(1))
    k = torch.zeros(B, H, 0, Dh)
    v = torch.zeros(B, H, 0, Dh)
    outs, at = [], 0
    with torch.no_grad():
        for n in pieces:
            res = model(x[:, at:at + n], k, v)
            outs.append(res["out"])
            k, v = res["present_k"], res["present_v"]
            at += n
        got = torch.cat(outs, dim=1)
        want = reference(model, x)
    assert k.shape == (B, H, N, Dh)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_a_mask_that_is_not_shifted_by_the_past_is_wrong():
    # the same layer with the unshifted mask (diagonal 1): a one-token step then hides
    # every cached key but the first, and the outputs differ from the reference
    text = SPEC.read_text().replace("triu (P + 1)", "triu 1")
    spec = api.check(text)
    assert spec.ok
    gen = api.codegen(spec)
    mod = runner.load_module(gen.source, "kv_cache_decoder_unshifted")
    model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)(D=D))   # H comes from the cache.eval()
    good = build()
    model.load_state_dict(good.state_dict())
    x = torch.randn(1, 5, D, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        first = model(x[:, :4], torch.zeros(1, H, 0, Dh), torch.zeros(1, H, 0, Dh))
        step = model(x[:, 4:], first["present_k"], first["present_v"])
        want = reference(good, x)[:, 4:]
    assert not torch.allclose(step["out"], want, atol=1e-3)
