"""specs/swin_tiny.shape is Swin-T whole, as timm's SwinTransformer writes it: its parameter
total is timm's swin_tiny_patch4_window7_224 (28,288,354), and the module generated from it
at reduced sizes gives the class scores of a hand-written SwinTransformer (timm's structure and
parameter names, eval mode, the written-out attention of its non-fused path) with the same
weights: patch embedding with a norm, window partition and reverse, the relative position bias
read at its index, shifted windows with the attention mask of get_attn_mask, patch merging
(timm's reshape / permute form, which the spec writes as four strided slices), a final norm,
average pooling and the head.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from torch_shapes import REDUCED

from shapelang.checker.checker import check_file
from shapelang.codegen import runner
from shapelang.codegen.generator import generate
from shapelang.render import check_text

SPEC = Path(__file__).resolve().parent.parent / "specs" / "swin_tiny.shape"


def test_the_parameter_total_is_the_published_one():
    spec = check_file(str(SPEC))
    assert spec.ok, check_text(spec)
    assert not spec.diagnostics, check_text(spec)        # no warning either
    assert spec.example_value(spec.total_params) == 28_288_354


def _timm_swin(torch, Cin, Img, P, D, Nh, W, Sh, L1, L2, L3, L4, K, **_):
    nn = torch.nn

    def window_partition(x, ws):
        B, H, Wd, C = x.shape
        x = x.view(B, H // ws, ws, Wd // ws, ws, C)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, C)

    def window_reverse(windows, ws, H, Wd):
        C = windows.shape[-1]
        x = windows.view(-1, H // ws, Wd // ws, ws, ws, C)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, Wd, C)

    def relative_position_index(ws):
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij"))
        flat = torch.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += ws - 1
        rel[:, :, 1] += ws - 1
        rel[:, :, 0] *= 2 * ws - 1
        return rel.sum(-1)

    class PatchEmbed(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv2d(Cin, D, kernel_size=P, stride=P)
            self.norm = nn.LayerNorm(D)

        def forward(self, x):
            return self.norm(self.proj(x).permute(0, 2, 3, 1))     # output_fmt NHWC

    class WindowAttention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.num_heads, self.head_dim = heads, dim // heads
            self.scale = self.head_dim ** -0.5
            self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * W - 1) ** 2, heads))
            self.register_buffer("relative_position_index", relative_position_index(W), persistent=False)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x, mask=None):
            B_, N, _ = x.shape
            qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            attn = (q * self.scale) @ k.transpose(-2, -1)
            bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]
            attn = attn + bias.view(N, N, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
            if mask is not None:
                num_win = mask.shape[0]
                attn = attn.view(-1, num_win, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, self.num_heads, N, N)
            x = attn.softmax(-1) @ v
            return self.proj(x.transpose(1, 2).reshape(B_, N, -1))

    class Mlp(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc1, self.act, self.fc2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class SwinTransformerBlock(nn.Module):
        def __init__(self, dim, res, heads, shift):
            super().__init__()
            self.res = res
            self.window_size, self.shift_size = (res, 0) if res <= W else (W, shift)   # _calc_window_shift
            self.norm1, self.attn = nn.LayerNorm(dim), WindowAttention(dim, heads)
            self.norm2, self.mlp = nn.LayerNorm(dim), Mlp(dim)
            self.register_buffer("attn_mask", self.get_attn_mask(), persistent=False)

        def get_attn_mask(self):
            if not self.shift_size:
                return None
            ws, s = self.window_size, self.shift_size
            img_mask = torch.zeros((1, self.res, self.res, 1))
            cnt = 0
            for h in ((0, -ws), (-ws, -s), (-s, None)):
                for w in ((0, -ws), (-ws, -s), (-s, None)):
                    img_mask[:, h[0]:h[1], w[0]:w[1], :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, ws).view(-1, ws * ws)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
            return attn_mask.masked_fill(attn_mask != 0, -100.0).masked_fill(attn_mask == 0, 0.0)

        def _attn(self, x):
            _, H, Wd, C = x.shape
            s, ws = self.shift_size, self.window_size
            shifted = torch.roll(x, shifts=(-s, -s), dims=(1, 2)) if s else x
            windows = window_partition(shifted, ws).view(-1, ws * ws, C)
            att = self.attn(windows, mask=self.attn_mask).view(-1, ws, ws, C)
            shifted = window_reverse(att, ws, H, Wd)
            return torch.roll(shifted, shifts=(s, s), dims=(1, 2)) if s else shifted

        def forward(self, x):
            B, H, Wd, C = x.shape
            x = x + self._attn(self.norm1(x))
            x = x.reshape(B, -1, C)
            x = x + self.mlp(self.norm2(x))
            return x.reshape(B, H, Wd, C)

    class PatchMerging(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(4 * dim)
            self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

        def forward(self, x):
            B, H, Wd, C = x.shape
            x = x.reshape(B, H // 2, 2, Wd // 2, 2, C).permute(0, 1, 3, 4, 2, 5).flatten(3)
            return self.reduction(self.norm(x))

    class SwinTransformerStage(nn.Module):
        def __init__(self, dim, res, depth, heads, downsample):
            super().__init__()
            self.downsample = PatchMerging(dim // 2) if downsample else nn.Identity()
            self.blocks = nn.Sequential(*[SwinTransformerBlock(dim, res, heads, 0 if i % 2 == 0 else Sh)
                                          for i in range(depth)])

        def forward(self, x):
            return self.blocks(self.downsample(x))

    class ClassifierHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8 * D, K)

        def forward(self, x):
            return self.fc(x.mean((1, 2)))          # global_pool="avg", input_fmt NHWC

    class SwinTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = PatchEmbed()
            G = Img // P
            self.layers = nn.Sequential(*[
                SwinTransformerStage(D * 2 ** i, G // 2 ** i, depth, Nh * 2 ** i, i > 0)
                for i, depth in enumerate((L1, L2, L3, L4))])
            self.norm = nn.LayerNorm(8 * D)
            self.head = ClassifierHead()

        def forward(self, x):
            return self.head(self.norm(self.layers(self.patch_embed(x))))

    return SwinTransformer().eval()


@pytest.mark.parametrize("sizes", REDUCED["swin_tiny"], ids=["window-2", "window-3"])
def test_the_generated_module_matches_a_hand_written_swin(sizes):
    torch = pytest.importorskip("torch")
    spec = check_file(str(SPEC))
    gen = generate(spec)
    assert "torch.roll" in gen.source or ".roll(" in gen.source
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, sizes))
    ref = _timm_swin(torch, **sizes)
    got, want = dict(model.named_parameters()), dict(ref.named_parameters())
    assert len(got) == len(want)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for (gname, p), (rname, q) in zip(got.items(), want.items()):
            assert p.shape == q.shape, (gname, rname)
            q.copy_(torch.randn(q.shape, generator=g) * (0.3 if q.dim() > 1 else 1.0))
            p.copy_(q)
    img = torch.randn(sizes["B"], sizes["Cin"], sizes["Img"], sizes["Img"], generator=g)
    with torch.no_grad():
        logits, want_logits = model(img), ref(img)
    assert logits.shape == (sizes["B"], sizes["K"])
    assert (logits - want_logits).abs().max() <= 1e-5
    # the shifted blocks are masked: without the mask the reference gives other scores
    for m in ref.modules():
        if hasattr(m, "attn_mask") and m.attn_mask is not None:
            m.attn_mask = torch.zeros_like(m.attn_mask)
    with torch.no_grad():
        assert (ref(img) - want_logits).abs().max() > 1e-3
