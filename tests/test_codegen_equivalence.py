"""The modules generated from specs/pytorch/ compute what PyTorch's own modules
compute: the same weights (copied with shapelang.codegen.torch_compat) give the same
outputs to within 1e-5 in float32, in eval mode.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from shapelang import codegen
from shapelang.checker.checker import check_file
from shapelang.codegen import runner

torch = pytest.importorskip("torch")
nn = torch.nn
torch_compat = pytest.importorskip("shapelang.codegen.torch_compat")

PYTORCH_SPECS = Path(__file__).resolve().parent.parent / "specs" / "pytorch"
B, S, T, D, H, F = 3, 7, 5, 32, 4, 64
ATOL = 1e-5


@functools.cache
def generated(name: str):
    spec = check_file(str(PYTORCH_SPECS / name))
    assert spec.ok, name
    gen = codegen.generate(spec)
    return gen, runner.load_module(gen.source, f"equivalence_{gen.module_name}")


def build(name: str, **sizes) -> nn.Module:
    gen, mod = generated(name)
    cfg = getattr(mod, gen.config_class)(**sizes)
    return getattr(mod, gen.top_class)(cfg).eval()


def randomize(module: nn.Module) -> nn.Module:
    """PyTorch starts biases at 0 and norms at 1: randomise everything so each copy matters."""
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (0.3 if p.dim() > 1 else 0.5))
    return module.eval()


def inputs(*shape, seed: int = 0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def causal(n: int):
    return nn.Transformer.generate_square_subsequent_mask(n)


@pytest.mark.parametrize("masked", [False, True], ids=["no_mask", "causal"])
def test_multihead_attention(masked):
    name = "multihead_attention_causal.shape" if masked else "multihead_attention.shape"
    mha = randomize(nn.MultiheadAttention(D, H, dropout=0.1, batch_first=True))
    model = build(name, D=D, H=H)
    torch_compat.load_multihead_attention(model, mha)
    x = inputs(B, S, D)
    with torch.no_grad():
        want, _ = mha(x, x, x, attn_mask=causal(S) if masked else None, need_weights=False)
        got = model(x)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    if masked:   # the same mask as a bool matrix, and as is_causal
        with torch.no_grad():
            bool_mask = torch.ones(S, S, dtype=torch.bool).triu(1)
            want2, _ = mha(x, x, x, attn_mask=bool_mask, need_weights=False)
        torch.testing.assert_close(got, want2, atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True], ids=["postnorm", "prenorm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_layer(norm_first, activation):
    name = f"encoder_layer_{'prenorm' if norm_first else 'postnorm'}_{activation}.shape"
    layer = randomize(nn.TransformerEncoderLayer(D, H, F, dropout=0.1, activation=activation,
                                                 batch_first=True, norm_first=norm_first))
    model = build(name, D=D, H=H, F=F)
    torch_compat.load_transformer_encoder_layer(model, layer)
    x = inputs(B, S, D)
    with torch.no_grad():
        want = layer(x)
        got = model(x)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    with torch.enable_grad():     # and off PyTorch's inference fast path
        torch.testing.assert_close(model(x), layer(x), atol=ATOL, rtol=0)


def test_transformer_decoder_layer():
    layer = randomize(nn.TransformerDecoderLayer(D, H, F, dropout=0.1, batch_first=True))
    model = build("decoder_layer.shape", D=D, H=H, F=F)
    torch_compat.load_transformer_decoder_layer(model, layer)
    tgt, memory = inputs(B, T, D, seed=1), inputs(B, S, D, seed=2)
    with torch.no_grad():
        want = layer(tgt, memory, tgt_mask=causal(T), tgt_is_causal=True)
        got = model(tgt, memory)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def test_copy_parameters_checks_names_and_shapes():
    mha = nn.MultiheadAttention(D, H, batch_first=True)
    model = build("multihead_attention.shape", D=D, H=H)
    mapping = {"qkv.weight": "in_proj_weight", "qkv.bias": "in_proj_bias",
               "out.weight": "out_proj.weight", "out.bias": "out_proj.bias"}
    with pytest.raises(KeyError, match="no source for"):
        torch_compat.copy_parameters(model, mha, {k: v for k, v in mapping.items() if "out" not in k})
    with pytest.raises(KeyError, match="has no tensor"):
        torch_compat.copy_parameters(model, mha, {**mapping, "nope.weight": "in_proj_weight"})
    with pytest.raises(ValueError, match="qkv.weight"):
        torch_compat.copy_parameters(model, mha, {**mapping, "qkv.weight": "out_proj.weight"})
    small = build("multihead_attention.shape", D=8, H=2)
    with pytest.raises(ValueError, match="do not match"):
        torch_compat.load_multihead_attention(small, mha)


def test_kdim_vdim_and_a_fully_padded_key_row():
    """kdim/vdim load by shape and role; a query whose keys are all padding gets finite values,
    equal to PyTorch's with need_weights=False (its sdpa path), in both emissions."""
    Dk, Dv = 6, 10
    mha = randomize(nn.MultiheadAttention(D, H, dropout=0.1, batch_first=True, kdim=Dk, vdim=Dv))
    q, k, v = inputs(B, T, D, seed=1), inputs(B, S, Dk, seed=2), inputs(B, S, Dv, seed=3)
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[0, 4:] = True
    pad[1] = True                          # every key of this sequence is padding
    with torch.enable_grad():              # PyTorch's Python path (the fast path gives NaN here)
        want, _ = mha(q, k, v, key_padding_mask=pad, need_weights=False)
    assert torch.isfinite(want).all()
    spec = check_file(str(PYTORCH_SPECS / "multihead_attention_kdim_vdim.shape"))
    for attention in ("sdpa", "explicit"):
        gen = codegen.generate(spec, attention=attention)
        assert ("scaled_dot_product_attention" in gen.source) == (attention == "sdpa")
        mod = runner.load_module(gen.source, f"kdim_vdim_{attention}")
        model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)(D=D, H=H, Dk=Dk, Dv=Dv)).eval()
        report = torch_compat.load_multihead_attention(model, mha)
        assert "q.weight" in str(report) and "q_proj_weight" in str(report)
        assert "in_proj_bias[0:32]" in str(report) and report.ok
        with torch.no_grad():
            got = model(q, k, v, pad)
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want.detach(), atol=ATOL, rtol=0)


def test_any_binding_names_load_by_shape_and_role():
    """The loaders do not depend on the spec's names: rename every binding and load again."""
    text = (PYTORCH_SPECS / "encoder_layer_prenorm_gelu.shape").read_text()
    for old, new in (("sa:", "attn_out:"), ("sa\n", "attn_out\n"), ("+ sa", "+ attn_out"),
                     ("ff:", "mlp:"), ("+ ff", "+ mlp"), ("qkv", "c_attn")):
        text = text.replace(old, new)
    from shapelang.checker.checker import check_text
    spec = check_text(text, "renamed_encoder.shape")
    assert spec.ok
    gen = codegen.generate(spec)
    assert "self.c_attn = nn.Linear" in gen.source and "self.mlp_linear1" in gen.source
    mod = runner.load_module(gen.source, "renamed_encoder")
    model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)(D=D, H=H, F=F)).eval()
    layer = randomize(nn.TransformerEncoderLayer(D, H, F, activation="gelu", batch_first=True,
                                                 norm_first=True))
    report = torch_compat.load_transformer_encoder_layer(model, layer)
    text = str(report)
    assert "attn_out.c_attn.weight" in text and "self_attn.in_proj_weight" in text
    assert "attn_out_ln.weight" in text and "norm1.weight" in text
    x = inputs(B, S, D)
    with torch.no_grad():
        torch.testing.assert_close(model(x), layer(x), atol=ATOL, rtol=0)


def test_a_mismatch_is_reported_with_what_matched():
    model = build("multihead_attention.shape", D=D, H=H)
    layer = nn.TransformerEncoderLayer(D, H, F, batch_first=True)
    with pytest.raises(ValueError) as err:
        torch_compat.load_matching(model, layer)
    text = str(err.value)
    assert "qkv.weight" in text and "left over in the source" in text and "linear1.weight" in text
    report = torch_compat.match_parameters(model, layer)
    assert not report.ok and report.unused and not report.missing


def test_loading_changes_every_output():
    """Guard against a vacuous comparison: a fresh module disagrees before loading."""
    layer = randomize(nn.TransformerEncoderLayer(D, H, F, batch_first=True))
    model = build("encoder_layer_postnorm_relu.shape", D=D, H=H, F=F)
    x = inputs(B, S, D)
    with torch.no_grad():
        assert not torch.allclose(model(x), layer(x), atol=1e-2)
        torch_compat.load_transformer_encoder_layer(model, layer)
        torch.testing.assert_close(model(x), layer(x), atol=ATOL, rtol=0)
