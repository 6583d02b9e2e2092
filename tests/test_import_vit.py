"""`shapelang import` of a ViT: a patch embedding (conv2d with kernel = stride = P, then
flatten(2).transpose(1, 2)), a class token concatenated in front, learned positions, pre-norm
blocks and a head on the class token; and a patch embedding alone over images of any size
that its `torch._check` says are whole patches (a guard that becomes `assume`s)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F
from import_kit import floats, round_trip
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class Block(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class PatchEmbed(nn.Module):
    """timm's, with strict_img_size: the image is img_size square."""

    def __init__(self, img_size=24, patch_size=4, in_chans=3, embed_dim=48):
        super().__init__()
        self.img_size = img_size
        self.proj = nn.Conv2d(in_chans, embed_dim, patch_size, stride=patch_size)

    def forward(self, x):
        _, _, H, W = x.shape
        assert H == self.img_size and W == self.img_size
        return self.proj(x).flatten(2).transpose(1, 2)


class ViT(nn.Module):
    def __init__(self, img_size=24, patch_size=4, in_chans=3, embed_dim=48, depth=2, num_heads=6,
                 num_classes=10):
        super().__init__()
        torch.manual_seed(0)
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        n = (img_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, embed_dim))
        self.blocks = nn.ModuleList([Block(embed_dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)
        for p in self.parameters():
            nn.init.normal_(p, 0.0, 0.3)

    def forward(self, x):
        x = self.patch_embed(x)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


def test_vit_round_trip(tmp_path):
    text = round_trip(tmp_path, ViT(), ["x=2x3x24x24"], floats(lambda b, s: [(b, 3, 24, 24)]),
                      sizes_list=((2, 0), (5, 0)))
    assert "opaque" not in text
    # export fixed the image (the module asserts its size): the image side and the token
    # count are written with their values, every width keeps its name
    assert "input x: [B, C, Img, Img]" in text and "dim Img = 24" in text
    assert "conv2d D 4 stride=4 -> flatten 2 -> transpose -2 -1" in text
    assert "param cls_token: [1, 1, D]" in text and "expand [B, 1, D]" in text
    assert "concat(1, " in text and "param pos_embed: [1, N, D]" in text
    assert "reshape [B, T, 3, H, Dh]" in text or "reshape [B, N, 3, H, Dh]" in text, text
    assert "-> stack 2 Block" in text and "select 1 0" in text
    assert "dim D  #" not in text and "dim D\n" in text and "dim D = " not in text   # widths stay free


class DynamicPatchEmbed(nn.Module):
    """timm's dynamic_img_size: any image of whole patches."""

    def __init__(self, patch_size=4, in_chans=3, embed_dim=48):
        super().__init__()
        torch.manual_seed(1)
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_chans, embed_dim, patch_size, stride=patch_size)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        _, _, H, W = x.shape
        torch._check(H % self.patch_size == 0)
        torch._check(W % self.patch_size == 0)
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


def test_a_patch_embedding_over_any_image_of_whole_patches(tmp_path):
    make = floats(lambda b, s: [(b, 3, 4 * s, 4 * (s + 1))])
    text = round_trip(tmp_path, DynamicPatchEmbed(), ["x=2x3x16x20"], make, sizes_list=((2, 4), (3, 2)))
    # the guards of the module are the spec's assumptions; the patch side is named from patch_size
    assert "input x: [B, C, Himg, Wimg]" in text and "dim P  # patch_size" in text
    assert "assume Himg % P == 0" in text and "assume Wimg % P == 0" in text
    assert "conv2d D P stride=P -> flatten 2 -> transpose -2 -1" in text
