"""specs/vit_b16.shape is ViT-B/16 whole, as timm's VisionTransformer writes it: its
parameter total is timm's vit_base_patch16_224 (86,567,656), and the module generated
from it at reduced sizes gives the class scores of a hand-written VisionTransformer (timm's
structure, eval mode, the written-out attention of its non-fused path) with the same
weights: conv patch embedding, class token, learned positions, LayerNorm eps 1e-6, the
exact GELU and a head on the class token.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from shapelang.checker.checker import check_file
from shapelang.codegen import runner
from shapelang.codegen.generator import generate
from shapelang.render import check_text

SPEC = Path(__file__).resolve().parent.parent / "specs" / "vit_b16.shape"
SMALL = {"C": 3, "Img": 32, "P": 8, "D": 24, "H": 4, "F": 48, "L": 2, "K": 10}


def test_the_parameter_total_is_the_published_one():
    spec = check_file(str(SPEC))
    assert spec.ok, check_text(spec)
    assert not spec.diagnostics, check_text(spec)        # no warning either
    assert spec.example_value(spec.total_params) == 86_567_656


def _timm_vit(torch, C, Img, P, D, H, F, L, K):
    nn = torch.nn

    class PatchEmbed(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv2d(C, D, kernel_size=P, stride=P, bias=True)

        def forward(self, x):
            return self.proj(x).flatten(2).transpose(1, 2)    # NCHW -> NLC

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_heads, self.head_dim = H, D // H
            self.scale = self.head_dim ** -0.5
            self.qkv = nn.Linear(D, 3 * D, bias=True)
            self.proj = nn.Linear(D, D)

        def forward(self, x):
            B, N, _ = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            attn = (q * self.scale) @ k.transpose(-2, -1)      # timm's path without fused_attn
            x = attn.softmax(dim=-1) @ v
            return self.proj(x.transpose(1, 2).reshape(B, N, D))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.act, self.fc2 = nn.Linear(D, F), nn.GELU(), nn.Linear(F, D)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn = nn.LayerNorm(D, eps=1e-6), Attention()
            self.norm2, self.mlp = nn.LayerNorm(D, eps=1e-6), Mlp()

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class VisionTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = PatchEmbed()
            self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
            self.pos_embed = nn.Parameter(torch.zeros(1, (Img // P) ** 2 + 1, D))
            self.blocks = nn.Sequential(*[Block() for _ in range(L)])
            self.norm = nn.LayerNorm(D, eps=1e-6)
            self.head = nn.Linear(D, K)

        def forward(self, x):
            x = self.patch_embed(x)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)    # _pos_embed
            x = self.norm(self.blocks(x + self.pos_embed))
            return self.head(x[:, 0])                          # global_pool="token"

    return VisionTransformer().eval()


def test_the_generated_module_matches_a_hand_written_vit():
    torch = pytest.importorskip("torch")
    spec = check_file(str(SPEC))
    gen = generate(spec)
    assert "eps: float = 1e-06" in gen.source and "F.scaled_dot_product_attention(q, k, v)" in gen.source
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, SMALL))
    ref = _timm_vit(torch, **SMALL)
    # the same learned tensors, by role: timm registers cls_token and pos_embed on the model
    # itself, so they come before the patch projection's weight in both
    got, want = dict(model.named_parameters()), dict(ref.named_parameters())
    assert len(got) == len(want)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for (gname, p), (rname, q) in zip(got.items(), want.items()):
            assert p.shape == q.shape, (gname, rname)
            q.copy_(torch.randn(q.shape, generator=g) * (0.3 if q.dim() > 1 else 1.0))
            p.copy_(q)
    img = torch.randn(3, SMALL["C"], SMALL["Img"], SMALL["Img"], generator=g)
    with torch.no_grad():
        logits, want_logits = model(img), ref(img)
    assert logits.shape == (3, SMALL["K"])
    assert (logits - want_logits).abs().max() <= 1e-5
    assert [m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)] == [1e-6] * (2 * 2 + 1)
