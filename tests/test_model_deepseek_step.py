"""specs/deepseek_v2_lite_step.shape: DeepSeek-V2-Lite whole, decoding with a LATENT cache
per layer (the latent compressed_kv [B, P, C] and the rotated shared key [B, 1, P, Dr]:
C + Dr = 576 numbers a token and layer, whatever the number of heads). Checked for all
P >= 0 and S; the dense first layer's cache is its own pair of inputs and outputs, the
MoE layers' caches have a leading axis of L - 1 handed out by the stack. Its generated
module, with the weights of specs/deepseek_v2_lite.shape under the same names, gives the
logits of the full forward and of the hand-written reference of modeling_deepseek.py,
whether the prompt comes at once (prefill, P = 0) or in pieces with the caches carried."""
from __future__ import annotations

from pathlib import Path

import pytest
from decoding import PIECES, in_pieces, load_full_weights
from test_model_deepseek import _config, _reference, _weights
from torch_shapes import REDUCED, checked, module, shape_at

from shapelang import api, check

SPECS = Path(__file__).resolve().parent.parent / "specs"
STEP = SPECS / "deepseek_v2_lite_step.shape"
CACHES = ("present_kv0", "present_pe0", "present_kv", "present_pe")
MODEL_SIZES = [{k: v for k, v in sizes.items() if k not in ("B", "P", "S")}
               for sizes in REDUCED["deepseek_v2_lite_step"]]


def _spec(path=STEP, text=None):
    return checked(text if text is not None else path.read_text(), path.name)


def test_the_step_has_the_full_models_parameters_and_checks_without_a_finding():
    step, full = _spec(), _spec(SPECS / "deepseek_v2_lite.shape")
    assert step.example_value(step.total_params) == full.example_value(full.total_params) == 15_706_484_224
    assert [d.code for d in step.diagnostics] == []
    text = api.trace(step, width=0)
    for row in ("[L - 1, B, P + S, C]", "[L - 1, B, 1, P + S, Dr]", "[B, P + S, C]", "[B, 1, P + S, Dr]",
                "[B, H, P + S, Dq]", "[B, H, P + S, Dv]", "[B, H, S, P + S]", "[B, 1, S, P + S]",
                "[26, 1, 9, 512]", "[26, 1, 1, 9, 64]", "[1, 16, 9, 192]"):
        assert row in text, row


def test_the_cache_is_576_numbers_a_token_and_layer_whatever_the_heads():
    spec = _spec()
    for heads in (16, 32):
        at = {"B": 2, "P": 5, "S": 3, "H": heads}
        layers = [shape_at(spec, name, at) for name in CACHES]
        assert layers == [(2, 8, 512), (2, 1, 8, 64), (26, 2, 8, 512), (26, 2, 1, 8, 64)], heads
        # 1 + 26 layers, 2 * 8 positions: C + Dr numbers each
        numbers = sum(_numel(s) for s in layers)
        assert numbers == 27 * 2 * 8 * (512 + 64)
    # the keys and values the heads use, recomputed from the latents: H*(Dn + Dv) a token
    mla = spec.blocks["MLA"][0]
    shapes = {n: t.shape for b in mla.bindings for n, t in zip(b.names, b.types)}
    assert tuple(map(str, shapes["kv"])) == ("B", "H", "P + S", "Dn + Dv")
    # at the example sizes: 16 heads * 256 = 4096 numbers a position, 7 times the 576 cached
    assert "[1, 16, 9, 256]" in api.trace(spec, width=0)


def _numel(shape):
    out = 1
    for n in shape:
        out *= n
    return out


def _models(torch, sizes, step_spec=None):
    """The full module, the step module (of `step_spec`, the shipped one by default) and
    the reference, all with the same random weights."""
    full, _ = module(_spec(SPECS / "deepseek_v2_lite.shape"), f"deepseek_full_{sizes['L']}", **sizes)
    step, _ = module(step_spec or _spec(), f"deepseek_step_{sizes['L']}_{id(step_spec)}", **sizes)
    ref = _reference(torch, _config(**sizes))
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for q in ref.parameters():
            q.copy_(torch.randn(q.shape, generator=g) * 0.2 + (1.0 if q.dim() == 1 else 0.0))
        want, got = _weights(ref), dict(full.named_parameters())
        assert sorted(got) == sorted(want)
        for name, p in got.items():
            p.copy_(want[name])
    load_full_weights(step, full)
    return full, step, ref


def _empty(torch, sizes, B):
    L, C, Dr = sizes["L"], sizes["C"], sizes["Dr"]
    return [torch.zeros(B, 0, C), torch.zeros(B, 1, 0, Dr),
            torch.zeros(L - 1, B, 0, C), torch.zeros(L - 1, B, 1, 0, Dr)]


@pytest.mark.parametrize("sizes", MODEL_SIZES, ids=["two-moe-layers", "one-moe-layer"])
@pytest.mark.parametrize("pieces", PIECES)
def test_prefill_and_steps_give_the_full_forwards_logits(sizes, pieces):
    torch = pytest.importorskip("torch")
    full, step, ref = _models(torch, sizes)
    B, N, L = 2, sum(pieces), sizes["L"]
    ids = torch.randint(0, sizes["V"], (B, N), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        got, (kv0, pe0, kv, pe) = in_pieces(step, ids, pieces, _empty(torch, sizes, B), names=CACHES)
        whole, want = full(ids), ref(ids)
    # every layer keeps C + Dr numbers a position, however many heads
    assert kv0.shape == (B, N, sizes["C"]) and pe0.shape == (B, 1, N, sizes["Dr"])
    assert kv.shape == (L - 1, B, N, sizes["C"]) and pe.shape == (L - 1, B, 1, N, sizes["Dr"])
    torch.testing.assert_close(got, whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("old, new", [
    # rotary positions restarting at 0 for the new tokens (not P .. P + S - 1)
    ("position_ids: arange(P, P + S)", "position_ids: arange(S)"),
    # a causal mask not shifted by the cache: query i sees keys 0 .. i only
    ("triu (P + 1)", "triu 1"),
], ids=["positions-from-0", "mask-not-shifted"])
def test_a_step_that_forgets_the_offset_P_checks_but_is_wrong_after_the_prompt(old, new):
    torch = pytest.importorskip("torch")
    text = STEP.read_text()
    assert text.count(old) == 1
    sizes = MODEL_SIZES[0]
    _full, _good, ref = _models(torch, sizes)
    _full, bad, _ref = _models(torch, sizes, _spec(text=text.replace(old, new)))
    ids = torch.randint(0, sizes["V"], (1, 5), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        got, _caches = in_pieces(bad, ids, (4, 1), _empty(torch, sizes, 1), names=CACHES)
        want = ref(ids)
    torch.testing.assert_close(got[:, :4], want[:, :4], atol=1e-5, rtol=1e-5)   # the prompt: P = 0
    assert not torch.allclose(got[:, 4:], want[:, 4:], atol=1e-3)              # the next token


def test_a_cache_of_another_layer_count_is_refused():
    text = STEP.read_text()
    old = "input past_kv: [L - 1, B, P, C]"
    assert text.count(old) == 1
    spec = check(text.replace(old, "input past_kv: [L, B, P, C]"))
    assert [d.code for d in spec.errors()] == ["E113"]
    assert "layer count" in spec.errors()[0].message


@pytest.mark.parametrize("sizes", MODEL_SIZES, ids=["two-moe-layers", "one-moe-layer"])
def test_hugging_faces_cache_of_expanded_keys_gives_the_same_logits_and_is_bigger(sizes):
    # modeling_deepseek.py caches the key_states [B, H, P, Dq] and value_states [B, H, P, Dv]
    # each layer's attention builds; the spec caches the latent and the shared rotary key
    torch = pytest.importorskip("torch")
    _full, step, ref = _models(torch, sizes)
    B, pieces = 2, (3, 1, 2, 1)
    ids = torch.randint(0, sizes["V"], (B, sum(pieces)), generator=torch.Generator().manual_seed(7))
    hf_caches, hf_logits, at = [[] for _ in range(sizes["L"])], [], 0
    with torch.no_grad():
        got, caches = in_pieces(step, ids, pieces, _empty(torch, sizes, B), names=CACHES)
        for n in pieces:
            hf_logits.append(ref(ids[:, at:at + n], hf_caches))
            at += n
    torch.testing.assert_close(got, torch.cat(hf_logits, dim=1), atol=1e-5, rtol=1e-5)
    H, C, Dr, Dn, Dv = (sizes[k] for k in ("H", "C", "Dr", "Dn", "Dv"))
    per_token = sum(c.numel() for c in caches) // (B * sum(pieces) * sizes["L"])
    hf_per_token = sum(t.numel() for kv in hf_caches for t in kv) // (B * sum(pieces) * sizes["L"])
    assert per_token == C + Dr
    assert hf_per_token == H * (Dn + Dr + Dv) > per_token
