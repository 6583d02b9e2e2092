"""CLIP ViT-B/32's image tower written whole as a spec (specs/clip_vit_b32.shape): the
checker's parameter total is Hugging Face's CLIPVisionModelWithProjection for
openai/clip-vit-base-patch32 (87,849,216), and the module generated from it at reduced sizes,
loaded with the state dict of a hand-written reference of HF's structure (modeling_clip.py,
eval mode, the eager attention path) under a table of renamed keys, gives that reference's
image embeddings: conv patches without bias, a class embedding [D], an nn.Embedding of
positions, pre_layrnorm, quick_gelu, post_layernorm on the class token, a projection without
bias."""
from __future__ import annotations

from pathlib import Path

import pytest
from torch_shapes import checked, module, renamed

SPEC = Path(__file__).resolve().parent.parent / "specs" / "clip_vit_b32.shape"
SIZES = [{"C": 3, "Img": 32, "P": 8, "D": 32, "H": 4, "F": 64, "L": 2, "E": 16},
         {"C": 3, "Img": 24, "P": 12, "D": 24, "H": 2, "F": 40, "L": 1, "E": 8}]
# the generated module's names -> HF's
NAMES = [(r"^class_embedding$", "vision_model.embeddings.class_embedding"),
         (r"^W_pos$", "vision_model.embeddings.position_embedding.weight"),
         (r"^patches\.", "vision_model.embeddings.patch_embedding."),
         (r"^pre_ln\.", "vision_model.pre_layrnorm."), (r"^layers\.", "vision_model.encoder.layers."),
         (r"\.h\.", ".layer_norm1."), (r"\.([qkv])\.", r".self_attn.\1_proj."), (r"\.o\.", ".self_attn.out_proj."),
         (r"\.m\.", ".layer_norm2."), (r"\.(fc[12])\.", r".mlp.\1."),
         (r"^pooled\.", "vision_model.post_layernorm."), (r"^image_embeds\.", "visual_projection.")]


def _spec():
    return checked(SPEC.read_text(), "clip_vit_b32.shape")


def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.diagnostics == []                         # no warning either
    assert spec.example_value(spec.total_params) == 87_849_216
    # by parts: patches (no bias), class and position embeddings, pre/post norms, 12 layers of
    # four biased D x D maps, two norms and the MLP, the projection without bias
    C, P, D, F, L, E, N = 3, 32, 768, 3072, 12, 512, 7 * 7 + 1
    layer = 4 * (D * D + D) + 2 * 2 * D + D * F + F + F * D + D
    assert C * P * P * D + D + N * D + 2 * D + L * layer + 2 * D + D * E == 87_849_216


def _hf_clip_vision(torch, C, Img, P, D, H, F, L, E, eps=1e-5):
    """HF's CLIPVisionModelWithProjection forward in eval mode, written from modeling_clip.py."""
    nn = torch.nn
    Dh, N = D // H, (Img // P) ** 2 + 1

    class CLIPVisionEmbeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.class_embedding = nn.Parameter(torch.randn(D))
            self.patch_embedding = nn.Conv2d(C, D, kernel_size=P, stride=P, bias=False)
            self.position_embedding = nn.Embedding(N, D)
            self.register_buffer("position_ids", torch.arange(N).expand((1, -1)), persistent=False)

        def forward(self, pixel_values):
            patch_embeds = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
            class_embeds = self.class_embedding.expand(pixel_values.shape[0], 1, -1)
            embeddings = torch.cat([class_embeds, patch_embeds], dim=1)
            return embeddings + self.position_embedding(self.position_ids)

    class CLIPAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = Dh ** -0.5
            self.k_proj, self.v_proj = nn.Linear(D, D), nn.Linear(D, D)
            self.q_proj, self.out_proj = nn.Linear(D, D), nn.Linear(D, D)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = (proj(x).view(b, s, -1, Dh).transpose(1, 2) for proj in (self.q_proj, self.k_proj, self.v_proj))
            weights = (torch.matmul(q, k.transpose(2, 3)) * self.scale).softmax(-1, dtype=torch.float32)
            out = torch.matmul(weights, v).transpose(1, 2).reshape(b, s, D)
            return self.out_proj(out)

    class CLIPMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(D, F), nn.Linear(F, D)

        def forward(self, x):
            x = self.fc1(x)
            return self.fc2(x * torch.sigmoid(1.702 * x))      # ACT2FN["quick_gelu"]

    class CLIPEncoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn, self.layer_norm1 = CLIPAttention(), nn.LayerNorm(D, eps=eps)
            self.mlp, self.layer_norm2 = CLIPMLP(), nn.LayerNorm(D, eps=eps)

        def forward(self, x):
            x = x + self.self_attn(self.layer_norm1(x))
            return x + self.mlp(self.layer_norm2(x))

    class CLIPEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(CLIPEncoderLayer() for _ in range(L))

    class CLIPVisionTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = CLIPVisionEmbeddings()
            self.pre_layrnorm = nn.LayerNorm(D, eps=eps)
            self.encoder = CLIPEncoder()
            self.post_layernorm = nn.LayerNorm(D, eps=eps)

        def forward(self, pixel_values):
            x = self.pre_layrnorm(self.embeddings(pixel_values))
            for layer in self.encoder.layers:
                x = layer(x)
            return self.post_layernorm(x[:, 0, :])              # pooled_output

    class CLIPVisionModelWithProjection(nn.Module):
        def __init__(self):
            super().__init__()
            self.vision_model = CLIPVisionTransformer()
            self.visual_projection = nn.Linear(D, E, bias=False)

        def forward(self, pixel_values):
            return self.visual_projection(self.vision_model(pixel_values))   # image_embeds

    return CLIPVisionModelWithProjection().eval()


@pytest.mark.parametrize("sizes", SIZES, ids=["four-heads", "two-heads"])
def test_generated_module_loads_hf_weights_and_matches(sizes):
    torch = pytest.importorskip("torch")
    model, gen = module(_spec(), f"clip_{sizes['D']}", **sizes)
    assert "bias=False)" in gen.source and "torch.sigmoid" in gen.source and "eps: float = 1e-05" in gen.source
    ref = _hf_clip_vision(torch, **sizes)
    g = torch.Generator().manual_seed(8)
    with torch.no_grad():
        for q in ref.parameters():
            q.copy_(torch.randn(q.shape, generator=g) * 0.2 + (1.0 if q.dim() == 1 else 0.0))
    hf = ref.state_dict()
    ours = {name: hf[renamed(name, NAMES)] for name in model.state_dict()}
    assert sorted(renamed(n, NAMES) for n in ours) == sorted(hf)     # every HF tensor, once
    model.load_state_dict(ours)
    pixels = torch.randn(2, sizes["C"], sizes["Img"], sizes["Img"], generator=g)
    with torch.no_grad():
        got, want = model(pixels), ref(pixels)
    assert got.shape == (2, sizes["E"])
    assert (got - want).abs().max().item() <= 1e-5
    for layer in ref.vision_model.encoder.layers:     # quick_gelu, not the exact GELU, is what matches
        layer.mlp.forward = lambda x, mlp=layer.mlp: mlp.fc2(torch.nn.functional.gelu(mlp.fc1(x)))
    with torch.no_grad():
        assert (got - ref(pixels)).abs().max().item() > 1e-3
