"""conv1d / conv2d: output sizes floor((L + 2p - d(k-1) - 1)/s) + 1 proved symbolically and
equal to PyTorch's at several sizes (odd ones included), the assumption that makes a
strided size exact suggested (Whisper's stride-2 front end), parameters equal to
nn.Conv*'s numel, errors PyTorch raises too, and patch embedding as conv2d equal to
rearrange + linear."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from torch_shapes import checked, codes, module, shape_at

from shapelang import check

torch = pytest.importorskip("torch")
nn = torch.nn
ROOT = Path(__file__).resolve().parent.parent

# (operation, nn module given C and D)
CONV1D = [
    ("conv1d D 3", lambda C, D: nn.Conv1d(C, D, 3)),
    ("conv1d D 3 padding=1", lambda C, D: nn.Conv1d(C, D, 3, padding=1)),
    ("conv1d D 3 stride=2 padding=1", lambda C, D: nn.Conv1d(C, D, 3, stride=2, padding=1)),
    ("conv1d D 4 stride=3 dilation=2 bias=false", lambda C, D: nn.Conv1d(C, D, 4, stride=3, dilation=2, bias=False)),
    ('conv1d D 5 padding="same"', lambda C, D: nn.Conv1d(C, D, 5, padding="same")),
    ('conv1d D 2 padding="valid" groups=2', lambda C, D: nn.Conv1d(C, D, 2, padding="valid", groups=2)),
    ("conv1d D K stride=K", lambda C, D: nn.Conv1d(C, D, 2, stride=2)),
]
CONV2D = [
    ("conv2d D 3 padding=1", lambda C, D: nn.Conv2d(C, D, 3, padding=1)),
    ("conv2d D [3, 2] stride=[2, 1] padding=[1, 0]", lambda C, D: nn.Conv2d(C, D, (3, 2), stride=(2, 1), padding=(1, 0))),
    ("conv2d D 2 stride=2 dilation=[1, 2] groups=2", lambda C, D: nn.Conv2d(C, D, 2, stride=2, dilation=(1, 2), groups=2)),
]
SIZES = [(11, 13), (12, 12), (17, 9)]   # (L or H, W): odd and even


def _spec(op, rank, L, W, C=4, D=6):
    shape = "[B, C, L]" if rank == 1 else "[B, C, L, W]"
    return (f"dim B, C, L, W, D, K = 2\nassume C % 2 == 0\nassume D % 2 == 0\nassume L >= 9\nassume W >= 9\n"
            f"example B=2, C={C}, L={L}, W={W}, D={D}\ninput x: {shape}\ny: x -> {op}\n")


@pytest.mark.parametrize("op, make", CONV1D + CONV2D, ids=[c[0] for c in CONV1D + CONV2D])
@pytest.mark.parametrize("L, W", SIZES)
def test_output_size_and_parameters_are_pytorchs(op, make, L, W):
    rank = 1 if op.startswith("conv1d") else 2
    spec = check(_spec(op, rank, L, W))
    assert all(d.severity == "warning" and d.code == "W202" for d in spec.diagnostics), spec.diagnostics
    conv = make(4, 6)
    x = torch.randn(2, 4, L) if rank == 1 else torch.randn(2, 4, L, W)
    sizes = {"B": 2, "C": 4, "L": L, "W": W, "D": 6}
    assert shape_at(spec, "y", sizes) == tuple(conv(x).shape)
    env = spec.prover.user_env(sizes)
    assert int(spec.prover.value(spec.total_params, env)) == sum(p.numel() for p in conv.parameters())


def test_params_match_nn_conv2d_at_vit_sizes():
    spec = checked((ROOT / "specs" / "vit_patch_embedding.shape").read_text())
    conv = nn.Conv2d(3, 768, 16, stride=16)
    step = next(b for b in spec.bindings if b.names == ("grid",)).steps[0]
    assert step.op == "conv2d"
    assert int(spec.prover.value(step.params, spec.prover.user_env(spec.example))) == \
        sum(p.numel() for p in conv.parameters()) == 590_592


WHISPER = """\
dim B, S, D
dim M = 80
example B=1, S=3000, D=384
input mel: [B, M, S]
h: mel -> conv1d D 3 padding=1 -> gelu -> conv1d D 3 stride=2 padding=1 -> gelu -> transpose 1 2
expect h: [B, S/2, D]
"""


def test_whisper_front_end_needs_an_even_length_and_says_so():
    spec = check(WHISPER)
    found = {d.code: d for d in spec.diagnostics}
    assert set(found) == {"W202", "E107"}
    assert "assume S % 2 == 0" in found["W202"].help and "S/2" in found["W202"].help
    assert found["E107"].counterexample["S"] % 2 == 1
    # PyTorch agrees that the length is not S/2 for an odd S
    odd = found["E107"].counterexample["S"]
    conv = nn.Conv1d(4, 4, 3, stride=2, padding=1)
    assert conv(torch.randn(1, 4, odd)).shape[-1] != odd / 2
    fixed = checked(WHISPER.replace("example", "assume S % 2 == 0\nexample"))
    assert shape_at(fixed, "h", {"B": 1, "S": 3000, "D": 384}) == (1, 1500, 384)


ERRORS = [
    ("y: x -> conv1d D 5", "E105", lambda: nn.Conv1d(4, 6, 5)(torch.randn(1, 4, 3))),
    ('y: x -> conv1d D 3 stride=2 padding="same"', "E110",
     lambda: nn.Conv1d(4, 6, 3, stride=2, padding="same")),
    ("y: x -> conv1d D 3 groups=4", "E104", lambda: nn.Conv1d(4, 6, 3, groups=4)),
    ("y: v -> conv2d D 3", "E110", lambda: nn.Conv2d(4, 6, 3)(torch.randn(4, 3))),
    ("y: x -> conv1d D 3 kernel_size=3", "E110", None),
    ("y: x -> conv1d D [3, 3]", "E110", None),
    ("y: ids -> conv1d D 1", "E120", lambda: nn.Conv1d(4, 6, 1)(torch.ones(1, 4, 3, dtype=torch.long))),
]


@pytest.mark.parametrize("line, code, torch_call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(line, code, torch_call):
    text = (f"dim B, C, L, D\nassume L <= 4\nexample B=1, C=4, L=3, D=6\ninput x: [B, C, L]\n"
            f"input ids: [B, C, L] int\ninput v: [C, L]\n{line}\n")
    assert codes(text) == [code]
    if torch_call is not None:
        with pytest.raises((RuntimeError, ValueError)):
            torch_call()


# ------------------------------------------------------------------ generated code

def test_generated_conv_matches_functional_conv():
    text = _spec("conv2d D [3, 2] stride=[2, 1] padding=[1, 0] dilation=2 groups=2", 2, 12, 12)
    spec = check(text)
    model, gen = module(spec, "conv2d", C=4, D=6)
    flat = re.sub(r"\(\s+", "(", re.sub(r",?\s+\)", ")", " ".join(gen.source.split())))  # ruff may wrap it
    assert "nn.Conv2d(cfg.C, cfg.D, (3, 2), stride=(2, 1), padding=(1, 0), dilation=2, groups=2)" in flat
    x = torch.randn(2, 4, 12, 10)
    conv = model.y
    want = torch.nn.functional.conv2d(x, conv.weight, conv.bias, stride=(2, 1), padding=(1, 0), dilation=2,
                                      groups=2)
    torch.testing.assert_close(model(x), want)


PATCHES = """\
dim B, C, Himg, Wimg, P, D
dim Nh = Himg / P
dim Nw = Wimg / P
assume Himg % P == 0
assume Wimg % P == 0
example B=2, C=3, Himg=32, Wimg=48, P=8, D=20
input img: [B, C, Himg, Wimg]
patches: img -> rearrange "b c (h p1) (w p2) -> b (h w) (p1 p2 c)" p1=P, p2=P
tokens: patches -> linear D
"""


@pytest.mark.parametrize("sizes", [{"B": 2, "C": 3, "Himg": 32, "Wimg": 48, "P": 8, "D": 20},
                                   {"B": 1, "C": 1, "Himg": 12, "Wimg": 4, "P": 4, "D": 5}])
def test_patch_embedding_as_conv2d_equals_rearrange_and_linear(sizes):
    vit = checked((ROOT / "specs" / "vit_patch_embedding.shape").read_text(), "vit_patch_embedding.shape")
    by_conv, _ = module(vit, "vit_conv", **sizes)
    by_linear, _ = module(checked(PATCHES), "vit_linear", **sizes)
    with torch.no_grad():
        for p in by_conv.parameters():
            p.copy_(torch.randn(p.shape))
        conv = by_conv.grid
        D, P = sizes["D"], sizes["P"]
        # the same numbers in the order (p1 p2 c) that the rearrange reads a patch in
        by_linear.tokens.weight.copy_(conv.weight.permute(0, 2, 3, 1).reshape(D, -1))
        by_linear.tokens.bias.copy_(conv.bias)
    img = torch.randn(sizes["B"], sizes["C"], sizes["Himg"], sizes["Wimg"])
    tokens = by_linear(img)
    assert tokens.shape == (sizes["B"], sizes["Himg"] // P * (sizes["Wimg"] // P), D)
    x = by_conv(img)
    cls = by_conv.cls_token.expand(sizes["B"], 1, D)
    torch.testing.assert_close(x, torch.cat([cls, tokens], dim=1) + by_conv.pos_embed, atol=1e-5, rtol=1e-5)
