"""`shapelang import` writes one block per module class (issue 27's third failure).

A module class is one `block` whatever its calls differ in that the language binds at each
call: the sequence lengths of its inputs (an encoder's S, a decoder's T), and, for
nn.MultiheadAttention, whether it attends over its query (self-attention) or over a memory
(cross-attention): one block takes a query and a memory, and self-attention passes its query
as the memory. Each case is a sample of that rule; each round-trips against PyTorch (the
original's weights copied by the mapping, outputs compared at sizes the import did not use)."""
from __future__ import annotations

import itertools
import re

import pytest

torch = pytest.importorskip("torch")
import tiers
import torch.nn.functional as F
from import_kit import round_trip
from torch import nn


def _blocks(text: str) -> list[str]:
    return re.findall(r"^block (\w+)\(", text, re.MULTILINE)


class TwoAttentions(nn.Module):
    """Self-attention over x and cross-attention from x to a memory m, with one MultiheadAttention
    class, in either order (a decoder layer's, or a Perceiver-like cross-attention first)."""

    def __init__(self, batch_first: bool, bias: bool, cross_first: bool, pad: bool):
        super().__init__()
        torch.manual_seed(7)
        self.self_attn = nn.MultiheadAttention(24, 3, bias=bias, batch_first=batch_first)
        self.cross_attn = nn.MultiheadAttention(24, 3, bias=bias, batch_first=batch_first)
        self.norm = nn.LayerNorm(24)
        self.cross_first, self.pad = cross_first, pad
        for p in self.parameters():            # no zero bias or unit norm hides a wrong row
            nn.init.normal_(p, 0.0, 0.3)

    def _self(self, x):
        return x + self.self_attn(x, x, x, need_weights=False)[0]

    def _cross(self, x, m, pad):
        return x + self.cross_attn(x, m, m, key_padding_mask=pad, need_weights=False)[0]

    def forward(self, x, m, pad=None):
        x = self.norm(x)
        if self.cross_first:
            return self._self(self._cross(x, m, pad))
        return self._cross(self._self(x), m, pad)


CASES = [dict(zip(("batch_first", "bias", "cross_first", "pad"), c))
         for c in itertools.product((False, True), (True, False), (False, True), (False,))]


def _id(case):
    return "-".join(k if v else f"no_{k}" for k, v in case.items())


@pytest.mark.parametrize("case", tiers.sample(CASES, every=len(CASES), ids=_id))
def test_self_and_cross_attention_of_one_class_are_one_block(tmp_path, case):
    module = TwoAttentions(**case)
    first = case["batch_first"]

    def make(b, s, seed=0):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn((b, s, 24) if first else (s, b, 24), generator=g)
        m = torch.randn((b, s + 3, 24) if first else (s + 3, b, 24), generator=g)
        if not case["pad"]:
            return [x, m]
        pad = torch.rand(b, s + 3, generator=g) < 0.3
        pad[:, 0] = False
        return [x, m, pad]

    inputs = ["x=2x7x24", "m=2x10x24"] if first else ["x=7x2x24", "m=10x2x24"]
    dims = None if first else {"x": ["S", "B", None], "m": ["T", "B", None]}
    if case["pad"]:
        inputs.append("pad=2x10:bool")
    text = round_trip(tmp_path, module, inputs, make, dims=dims)
    assert "opaque" not in text
    assert [b for b in _blocks(text) if b.startswith("MultiheadAttention")] == ["MultiheadAttention"], text
    # both calls name the one block; self-attention's memory is its own query
    calls = re.findall(r"^(\w+): (\w+) -> MultiheadAttention\((\w+)\)", text, re.MULTILINE)
    assert sorted((n, q == m) for n, q, m in calls) == [("cross_attn", False), ("self_attn", True)], text
    assert "linear 3*D" not in text and text.count("-> linear D") >= 4


class Attention(nn.Module):
    """A hand-written attention (nanoGPT's, without the mask)."""

    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class TwoStreams(nn.Module):
    """One class applied to two inputs of different lengths (a source and a target), each
    instance with its own weights, their results joined at the end."""

    def __init__(self, d=32, h=4):
        super().__init__()
        torch.manual_seed(8)
        self.source = Attention(d, h)
        self.target = Attention(d, h)

    def forward(self, src, tgt):
        a = self.source(src).mean(1)
        b = self.target(tgt).mean(1)
        return a * b


def test_one_class_over_two_lengths_is_one_block(tmp_path):
    """The source is [B, S, D] and the target [B, T, D]: the block reads its first call's
    names, which each call binds (before: `Attention` over S and `Attention_2` over T)."""
    make = lambda b, s, seed=0: [torch.randn(b, s, 32, generator=torch.Generator().manual_seed(seed)),
                                 torch.randn(b, s + 2, 32, generator=torch.Generator().manual_seed(seed + 9))]
    text = round_trip(tmp_path, TwoStreams(), ["src=2x7x32", "tgt=2x9x32"], make)
    assert _blocks(text) == ["Attention"], text
    assert "block Attention(x: [B, S, D])" in text
    assert re.search(r"^source: src -> Attention", text, re.MULTILINE) and \
        re.search(r"^target: tgt -> Attention", text, re.MULTILINE), text


@pytest.mark.exhaustive
def test_a_padding_mask_is_the_last_input_of_its_block(tmp_path):
    """A call that passes key_padding_mask takes one input more than a call without: the
    language has no optional inputs, so it is a block of its own (`MultiheadAttention_2`),
    which takes the query, the memory, then the mask."""
    module = TwoAttentions(batch_first=True, bias=True, cross_first=False, pad=True)

    def make(b, s, seed=0):
        g = torch.Generator().manual_seed(seed)
        pad = torch.rand(b, s + 3, generator=g) < 0.3
        pad[:, 0] = False
        return [torch.randn(b, s, 24, generator=g), torch.randn(b, s + 3, 24, generator=g), pad]

    text = round_trip(tmp_path, module, ["x=2x7x24", "m=2x10x24", "pad=2x10:bool"], make)
    assert "block MultiheadAttention_2(x: [B, S, D], y: [B, T, D], z: [B, T] bool)" in text or \
        "block MultiheadAttention_2(x: [B, S, D], y: [B, T, D], z: [B, T])" in text, text
    assert re.search(r"^cross_attn: res -> MultiheadAttention_2\(m, pad\)$", text, re.MULTILINE), text


class Mlp(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Layer(nn.Module):
    def __init__(self, d, ratio):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = Mlp(d, ratio * d)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Stage(nn.Module):
    def __init__(self, d, ratio, depth):
        super().__init__()
        self.blocks = nn.ModuleList([Layer(d, ratio) for _ in range(depth)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class Pyramid(nn.Module):
    """Swin's shape of widths: stages of one class at widths D, 2D, 4D, .. with a projection
    between them (patch merging's linear), each stage a list of one layer class."""

    def __init__(self, widths, ratios, depth=2):
        super().__init__()
        torch.manual_seed(9)
        self.embed_dim = widths[0]
        self.stages = nn.ModuleList([Stage(w, r, depth) for w, r in zip(widths, ratios)])
        self.downs = nn.ModuleList([nn.Linear(a, b) for a, b in itertools.pairwise(widths)])

    def forward(self, x):
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i < len(self.downs):
                x = self.downs[i](x)
        return x


PYRAMIDS = [((16, 32, 64), (4, 4, 4)),       # Swin: the widths double, the ratio stays
            ((16, 32), (2, 3)),              # another ratio per stage too
            ((16, 16), (4, 2)),              # one width, two ratios
            ((24, 48, 96, 96), (4, 4, 4, 2))]


@pytest.mark.parametrize("pyramid", tiers.sample(PYRAMIDS, every=4, ids=lambda p: "-".join(map(str, p[0] + p[1]))))
def test_one_class_at_other_widths_is_one_block_with_its_sizes_as_parameters(tmp_path, pyramid):
    """Issue 27: "one block per module class, with its sizes as parameters". The sizes an
    input binds become the block's names for them (`x: [B, S, W]`), the others size
    parameters each call gives (`Stage(W2=8*D)`); the spec round-trips against PyTorch."""
    widths, ratios = pyramid
    module = Pyramid(widths, ratios)
    make = lambda b, s, seed=0: [torch.randn(b, s, widths[0], generator=torch.Generator().manual_seed(seed))]
    text = round_trip(tmp_path, module, [f"x=2x7x{widths[0]}"], make)
    assert _blocks(text) == ["Mlp", "Layer", "Stage"], text
    calls = re.findall(r"^\w+: \w+ -> Stage(.*)$", text, re.MULTILINE)
    assert len(calls) == len(widths), text
    if len({r * w for r, w in zip(ratios, widths)}) > 1:       # the hidden widths differ: a size parameter
        assert all(c.startswith("(W") for c in calls) and "dim W" in text, text
    assert "-> stack 2 Layer" in text
