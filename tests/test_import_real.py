"""`shapelang import` of modules nobody on this project wrote (issue 27): torch.nn's Transformer,
TransformerDecoderLayer and TransformerEncoder(norm_first=True), torchvision's ViT
(transcribed: tests/transcribed_torchvision.py), and Hugging Face's OPT, GPT-NeoX and Phi
layers (transcribed: tests/transcribed_hf.py). For each: the spec checks with no warning, has
no opaque step, writes one block per module class, and the module generated from it at sizes
the import never saw computes what the original built at those sizes computes, with the
original's weights copied by the mapping."""
from __future__ import annotations

import functools
import re

import pytest

torch = pytest.importorskip("torch")
import transcribed_hf as hf
import transcribed_torchvision as tv
from torch import nn

from shapelang import api
from shapelang.codegen import runner
from shapelang.importer import copy_weights, import_module


def _encoder(d, h, f, layers=2):
    layer = nn.TransformerEncoderLayer(d, h, f, 0.0, batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


# name: (build(sizes), the import's sizes, other sizes (N: the rotary table's length there), inputs(sizes, b, s),
# --size names)
CASES = {
    "transformer": (lambda z: nn.Transformer(z["D"], z["H"], 2, 2, z["F"], 0.0, batch_first=True),
                    {"D": 32, "H": 4, "F": 48}, {"D": 36, "H": 3, "F": 20},
                    lambda z, b, s: [(b, s + 2, z["D"]), (b, s, z["D"])], {"F": 48}),
    "decoder_layer": (lambda z: nn.TransformerDecoderLayer(z["D"], z["H"], z["F"], 0.0, batch_first=True),
                      {"D": 32, "H": 4, "F": 48}, {"D": 24, "H": 2, "F": 40},
                      lambda z, b, s: [(b, s, z["D"]), (b, s + 3, z["D"])], {"F": 48}),
    "encoder_norm_first": (lambda z: _encoder(z["D"], z["H"], z["F"]), {"D": 32, "H": 4, "F": 48},
                           {"D": 40, "H": 5, "F": 24}, lambda z, b, s: [(b, s, z["D"])], {"F": 48}),
    "torchvision_vit": (lambda z: tv.VisionTransformer(32, 8, 2, z["H"], z["D"], z["F"], num_classes=10),
                        {"D": 64, "H": 4, "F": 96}, {"D": 48, "H": 3, "F": 40},
                        lambda z, b, s: [(b, 3, 32, 32)], {"F": 96}),
    "opt": (lambda z: hf.OPTLayers(hf.opt_config(z["D"], z["H"], z["F"])), {"D": 32, "H": 4, "F": 48},
            {"D": 48, "H": 6, "F": 20}, lambda z, b, s: [(b, s, z["D"])], {}),
    "gpt_neox": (lambda z: hf.GPTNeoXLayers(hf.neox_config(z["D"], z["H"], z["F"])), {"D": 48, "H": 2, "F": 80},
                 {"D": 64, "H": 4, "F": 24, "N": 2}, lambda z, b, s: [(b, s, z["D"])], {}),
    "phi": (lambda z: hf.PhiLayers(hf.phi_config(z["D"], z["H"], intermediate_size=z["F"])),
            {"D": 64, "H": 2, "F": 80}, {"D": 80, "H": 2, "F": 24, "N": 8}, lambda z, b, s: [(b, s, z["D"])], {}),
}


@functools.cache
def _imported(name):
    build, sizes, _other, shapes, named = CASES[name]
    torch.manual_seed(0)
    module = build(sizes).eval()
    names = ["src", "tgt"] if name == "transformer" else ["tgt", "memory"] if name == "decoder_layer" \
        else ["x"] if name == "torchvision_vit" else ["src"] if name.startswith("encoder") else ["hidden_states"]
    inputs = [f"{n}={'x'.join(map(str, shape))}" for n, shape in zip(names, shapes(sizes, 2, 7))]
    return module, import_module(module, inputs, sizes=named)


DEFAULT_TIER = {"decoder_layer", "opt", "torchvision_vit"}      # the others: the exhaustive tier


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT_TIER else (pytest.mark.exhaustive,))
                                  for n in CASES])
def test_a_real_module_imports_as_a_spec_an_engineer_would_keep(name):
    _build, _sizes, other, shapes, _named = CASES[name]
    module, imported = _imported(name)
    text = imported.text
    spec = api.check(text, f"{name}.shape")
    assert spec.ok and not spec.diagnostics, api.render_check(spec)
    assert imported.opaque == 0 and "opaque" not in text
    assert imported.verified is not None and not imported.verified.constant
    # one block per module class: a class never comes back as `Name_2`, and every block is
    # called (an unused copy would hide a second version of a class)
    blocks = re.findall(r"^block (\w+)\(", text, re.MULTILINE)
    classes = {type(m).__name__ for m in module.modules()}
    assert len(blocks) == len(set(blocks)) and set(blocks) <= classes, blocks
    assert all(re.search(rf"(->|stack \w+) {b}\b", text) for b in blocks), text
    # and instances that follow each other in a list are one stack (every case but the lone layer)
    assert name == "decoder_layer" or re.search(r"-> stack \w+ \w+", text), text
    # the fixed sizes are free: the spec holds at sizes the import never used
    assert not re.search(r"^dim (D|H|F) = ", text, re.MULTILINE), text
    torch.manual_seed(1)
    bigger = _build(other).eval()
    example = dict(spec.example) | other
    _mod, model = runner.build(api.codegen(spec), example)
    g = torch.Generator().manual_seed(2)
    args = [torch.randn(s, generator=g) for s in shapes(other, 3, 5)]
    mapping = imported.mapping | {"inputs": [{**i, "shape": list(a.shape)}
                                             for i, a in zip(imported.mapping["inputs"], args)]}
    for p in bigger.parameters():          # no zero head or unit norm hides a wrong step
        with torch.no_grad():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    copy_weights(model, bigger, mapping)
    with torch.no_grad():
        want, got = bigger(*args), model(*args)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.exhaustive
def test_gpt_neox_layers_are_one_block_and_a_stack():
    """Issue 27's third failure: layer 0 read `slice 3 6 24` and `1/sqrt(24)`, layer 1 `Dh`, so
    one class became GPTNeoXAttention and GPTNeoXAttention_2 with no stack."""
    _module, imported = _imported("gpt_neox")
    text = imported.text
    assert re.findall(r"^block (\w+)\(", text, re.MULTILINE) == ["GPTNeoXAttention", "GPTNeoXMLP", "GPTNeoXLayer"]
    assert "-> stack L GPTNeoXLayer(" in text
    assert "reshape [B, S, H, 3*Dh]" in text and "scale 1/sqrt(Dh)" in text
    assert "slice 3 0 2*N" in text and "slice 3 2*N Dh" in text     # the rotary part, by role


def test_opt_softmax_dtype_and_a_mask_made_in_forward():
    """Issue 27's fourth failure: OPT's softmax(dtype=float32) and `torch.full(.., finfo.min)`."""
    _module, imported = _imported("opt")
    text = imported.text
    assert "full([S, S], " in text and "masked_fill" in text and "arange(S)" in text
    assert "-> softmax -1" in text and "scale 1/sqrt(Dh)" in text
    assert "-> stack L OPTDecoderLayer(" in text


def test_torchvision_vit_names_sizes_by_role():
    """Issue 27's second failure: at hidden 64 with 4 heads the 16 patches read `4*H`."""
    _module, imported = _imported("torchvision_vit")
    text = imported.text
    assert "reshape [B, D, 16]" in text and "4*H" not in text
    # torchvision names its layers `encoder_layer_0`, `encoder_layer_1` in an nn.Sequential
    assert "-> stack 2 EncoderBlock" in text
    assert imported.verified.randomised >= 2        # the zero head and class token were randomised


@pytest.mark.parametrize("name", [pytest.param("decoder_layer"),
                                  pytest.param("transformer", marks=pytest.mark.exhaustive)])
def test_self_and_cross_attention_are_one_block(name):
    """Issue 27's third failure: nn.MultiheadAttention called for self-attention (the target)
    and cross-attention (the memory) was two blocks, `MultiheadAttention` (one packed
    `linear 3*D`) and `MultiheadAttention_2` (three `linear D`); and the decoder's self-attention
    over T was a third, the encoder's over S with T written for S. Now one block takes a query and
    a memory, and self-attention passes its query as the memory."""
    _module, imported = _imported(name)
    text = imported.text
    assert re.findall(r"^block MultiheadAttention\w*\((.*)\):", text, re.MULTILINE) == \
        ["x: [B, S, D], y: [B, T, D]"], text
    calls = re.findall(r"^\s*(\w+): (\w+) -> MultiheadAttention\((\w+)\)$", text, re.MULTILINE)
    assert {(n, q == m) for n, q, m in calls} == {("self_attn", True), ("multihead_attn", False)}, calls
    # the in_proj's rows, one `linear D` each: q's rows, then k's, then v's
    rows = [s["tensors"]["weight"] for s in imported.mapping["steps"] if "in_proj_weight" in str(s["tensors"])]
    assert rows[:3] == [[rows[0][0], j, 3] for j in range(3)], rows
