"""specs/perceiver.shape is lucidrains' perceiver-pytorch `Perceiver` whole (eval mode,
the README's configuration, an image channels last): its parameter total is the one of
a hand-written reference of that architecture, and the module generated from it at
reduced sizes gives the class scores of that reference with the same weights: Fourier
position features (linspace per axis, meshgrid, frequencies from linspace(1, max_freq/2),
sin and cos of position * frequency * pi, the position), tokens flattened from the pixels,
latents repeated over the batch, pre-norm cross-attention whose query width (the latents')
and context width (the tokens') differ, GEGLU feed-forwards, latent self-attention and
a mean over the latents before the classifier head.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import REDUCED, checked, module, renamed, same_random_weights, shape_at

SPEC = Path(__file__).resolve().parent.parent / "specs" / "perceiver.shape"

# the README's example: Perceiver(input_channels=3, input_axis=2, num_freq_bands=6,
# max_freq=10., depth=6, num_latents=256, latent_dim=512, cross_heads=1, latent_heads=8,
# cross_dim_head=64, latent_dim_head=64, num_classes=1000, self_per_cross_attn=2, ...)
README = {"C": 3, "Nb": 6, "Fmax": 10, "L": 6, "Nl": 256, "D": 512, "Hc": 1, "Hl": 8,
          "Dh": 64, "K": 1000, "Sp": 2}


def _spec():
    return checked(SPEC.read_text(), "perceiver.shape")


# ------------------------------------------------------------------ a hand-written reference

def _reference(torch, C, Nb, Fmax, L, Nl, D, Hc, Hl, Dh, K, Sp, tie=False):
    """perceiver-pytorch's Perceiver, written from perceiver_pytorch.py (eval mode, no mask,
    input_axis=2, fourier_encode_data=True, final_classifier_head=True). With `tie`
    (weight_tie_layers=True) the layers after the first share one set of weights."""
    nn = torch.nn
    Ci = 2 * (2 * Nb + 1) + C

    def fourier_encode(x):                    # x: [..., 2] positions in [-1, 1]
        x = x.unsqueeze(-1)
        scales = torch.linspace(1.0, Fmax / 2, Nb)
        xs = x * scales * math.pi
        return torch.cat([xs.sin(), xs.cos(), x], dim=-1)

    class PreNorm(nn.Module):
        def __init__(self, fn, context_dim=None):
            super().__init__()
            self.fn, self.norm = fn, nn.LayerNorm(D)
            self.norm_context = nn.LayerNorm(context_dim) if context_dim else None

        def forward(self, x, context=None):
            x = self.norm(x)
            if self.norm_context is None:
                return self.fn(x)
            return self.fn(x, self.norm_context(context))

    class FeedForward(nn.Module):             # Linear -> GEGLU -> Linear, mult 4
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = nn.Linear(D, D * 4 * 2), nn.Linear(D * 4, D)

        def forward(self, x):
            a, gates = self.w1(x).chunk(2, dim=-1)
            return self.w2(a * torch.nn.functional.gelu(gates))

    class Attention(nn.Module):
        def __init__(self, context_dim, heads):
            super().__init__()
            self.heads, self.scale = heads, Dh ** -0.5
            self.to_q = nn.Linear(D, heads * Dh, bias=False)
            self.to_kv = nn.Linear(context_dim, 2 * heads * Dh, bias=False)
            self.to_out = nn.Linear(heads * Dh, D)

        def forward(self, x, context=None):
            context = x if context is None else context
            q = self.to_q(x)
            k, v = self.to_kv(context).chunk(2, dim=-1)
            b, h = x.shape[0], self.heads

            def fold(t):                      # 'b n (h d) -> (b h) n d'
                return t.reshape(b, t.shape[1], h, Dh).permute(0, 2, 1, 3).reshape(b * h, t.shape[1], Dh)

            q, k, v = fold(q), fold(k), fold(v)
            sim = torch.einsum("bid,bjd->bij", q, k) * self.scale
            out = torch.einsum("bij,bjd->bid", sim.softmax(dim=-1), v)
            out = out.reshape(b, h, -1, Dh).permute(0, 2, 1, 3).reshape(b, -1, h * Dh)
            return self.to_out(out)

    def layer():
        return nn.ModuleList([PreNorm(Attention(Ci, Hc), context_dim=Ci), PreNorm(FeedForward()),
                              nn.ModuleList([nn.ModuleList([PreNorm(Attention(D, Hl)), PreNorm(FeedForward())])
                                             for _ in range(Sp)])])

    class Perceiver(nn.Module):
        def __init__(self):
            super().__init__()
            self.latents = nn.Parameter(torch.randn(Nl, D))
            if tie:                           # the first layer, then one shared by the rest
                shared = layer()
                self.layers = nn.ModuleList([layer()] + [shared] * (L - 1))
            else:
                self.layers = nn.ModuleList([layer() for _ in range(L)])
            self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, K)

        def forward(self, data):              # data: [b, Hi, Wi, C]
            b, hi, wi, _ = data.shape
            axis_pos = [torch.linspace(-1.0, 1.0, n) for n in (hi, wi)]
            pos = torch.stack(torch.meshgrid(*axis_pos, indexing="ij"), dim=-1)
            enc = fourier_encode(pos).reshape(hi, wi, -1)
            enc = enc.unsqueeze(0).repeat(b, 1, 1, 1)
            data = torch.cat((data, enc), dim=-1).reshape(b, hi * wi, -1)
            x = self.latents.unsqueeze(0).repeat(b, 1, 1)
            for cross_attn, cross_ff, self_attns in self.layers:
                x = cross_attn(x, context=data) + x
                x = cross_ff(x) + x
                for self_attn, self_ff in self_attns:
                    x = self_attn(x) + x
                    x = self_ff(x) + x
            return self.head(self.norm(x.mean(dim=-2)))

    return Perceiver().eval()


def _param_count(torch, **sizes) -> int:
    torch.manual_seed(0)
    return sum(p.numel() for p in _reference(torch, **sizes).parameters())


def test_the_parameter_total_is_the_reference_architectures():
    torch = pytest.importorskip("torch")
    spec = _spec()
    assert not spec.diagnostics
    total = spec.example_value(spec.total_params)
    assert total == _param_count(torch, **README) == 70_395_972


def test_the_tokens_are_the_pixels_with_their_fourier_features():
    spec = _spec()
    sizes = {"B": 1, "Hi": 224, "Wi": 224}
    assert shape_at(spec, "pos", sizes) == (224, 224, 2)
    assert shape_at(spec, "enc", sizes) == (224, 224, 2, 13)
    assert shape_at(spec, "tokens", sizes) == (1, 224 * 224, 29)
    assert shape_at(spec, "logits", sizes) == (1, 1000)


# generated names, from the reference's (rules applied in order)
RULES = [
    (r"^layers\.(\d+)\.0\.fn\.to_q", r"hidden.\1.h.q"),
    (r"^layers\.(\d+)\.0\.fn\.to_kv", r"hidden.\1.h.kv"),
    (r"^layers\.(\d+)\.0\.fn\.to_out", r"hidden.\1.h.out_linear"),
    (r"^layers\.(\d+)\.0\.norm_context", r"hidden.\1.h.c"),
    (r"^layers\.(\d+)\.0\.norm", r"hidden.\1.h.h"),
    (r"^layers\.(\d+)\.1\.", r"hidden.\1.h2."),
    (r"^layers\.(\d+)\.2\.(\d+)\.0\.", r"hidden.\1.out_self_blocks.\2.h."),
    (r"^layers\.(\d+)\.2\.(\d+)\.1\.", r"hidden.\1.out_self_blocks.\2.out_feed_forward."),
    (r"\.fn\.to_q", ".q"), (r"\.fn\.to_kv", ".kv"), (r"\.fn\.to_out", ".out_linear"),
    (r"\.norm\.", ".h."),                       # a self-attention's PreNorm
    (r"(h2|out_feed_forward)\.h\.", r"\1.a_gates_ln."),
    (r"\.fn\.w1\.", ".a_gates_linear."), (r"\.fn\.w2\.", ".out_linear."),
    (r"^norm\.", "logits_ln."), (r"^head\.", "logits_linear."),
]


@pytest.mark.parametrize("sizes", REDUCED["perceiver"], ids=lambda s: f"Hc{s['Hc']}-L{s['L']}")
def test_the_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    spec = _spec()
    model, gen = module(spec, "perceiver", **sizes)
    assert 'torch.meshgrid(ys, xs, indexing="ij")' in gen.source and "math.pi" in gen.source
    assert "torch.stack([gy, gx], dim=-1)" in gen.source and all("persistent=False" in ln for ln in gen.source.splitlines() if "register_buffer(" in ln)
    arch = {k: v for k, v in sizes.items() if k in README}
    torch.manual_seed(0)
    ref = _reference(torch, **arch)
    got = dict(model.named_parameters())
    want = {renamed(n, RULES): q for n, q in ref.named_parameters()}
    assert sorted(got) == sorted(want)
    assert all(got[n].shape == want[n].shape for n in got)
    same_random_weights([(got[n], want[n]) for n in sorted(got)], seed=3)
    g = torch.Generator().manual_seed(4)
    data = torch.randn(sizes["B"], sizes["Hi"], sizes["Wi"], sizes["C"], generator=g)
    with torch.no_grad():
        logits, want_logits = model(data), ref(data)
    assert logits.shape == (sizes["B"], sizes["K"])
    assert (logits - want_logits).abs().max() <= 1e-5
    # a different image size is read from the input: the same module, more tokens
    data = torch.randn(sizes["B"], sizes["Hi"] + 2, sizes["Wi"] + 1, sizes["C"], generator=g)
    with torch.no_grad():
        assert (model(data) - ref(data)).abs().max() <= 1e-5


# ------------------------------------------------------------------ weight_tie_layers=True
# the layers after the first share one set of weights: `first=` gives layer 0 its own,
# `shared=true` one set for the others; the generated list holds two layers, as the
# reference's named_parameters lists layers.0 and layers.1 (the shared one) once each

def _tied_text() -> str:
    tied = "hidden: x -> stack L Layer(tokens) first=Layer(tokens) shared=true\n"
    return SPEC.read_text().replace("hidden: x -> stack L Layer(tokens)\n", tied, 1)


def _tied_spec():
    return checked(_tied_text(), "perceiver_tied.shape")


def test_tied_layers_count_the_shared_weights_once():
    torch = pytest.importorskip("torch")
    spec = _tied_spec()
    assert not spec.diagnostics
    total = spec.example_value(spec.total_params)
    torch.manual_seed(0)
    assert total == sum(p.numel() for p in _reference(torch, **README, tie=True).parameters())
    assert total == 131_072 + 2 * 11_625_146 + 514_024        # latents, two layers' weights, head


TIED_SIZES = [REDUCED["perceiver"][0], {**REDUCED["perceiver"][1], "Sp": 2, "L": 3}]


@pytest.mark.parametrize("sizes", TIED_SIZES, ids=lambda s: f"Hc{s['Hc']}-L{s['L']}")
def test_tied_layers_match_the_reference_with_weight_tie_layers(sizes):
    torch = pytest.importorskip("torch")
    model, _gen = module(_tied_spec(), "perceiver_tied", **sizes)
    arch = {k: v for k, v in sizes.items() if k in README}
    torch.manual_seed(0)
    ref = _reference(torch, **arch, tie=True)
    assert ref.layers[1] is ref.layers[-1] and ref.layers[0] is not ref.layers[1]
    got = dict(model.named_parameters())
    want = {renamed(n, RULES): q for n, q in ref.named_parameters()}     # shared ones listed once
    assert sorted(got) == sorted(want) and len(model.hidden) == 2
    same_random_weights([(got[n], want[n]) for n in sorted(got)], seed=5)
    data = torch.randn(sizes["B"], sizes["Hi"], sizes["Wi"], sizes["C"], generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert (model(data) - ref(data)).abs().max() <= 1e-5
        # the shared layer really runs L - 1 times: the untied forward with copies of it agrees
        untied, _ = module(_spec(), "perceiver_untied", **sizes)
        for k, layer in enumerate(untied.hidden):
            layer.load_state_dict(model.hidden[min(k, 1)].state_dict())
        untied.load_state_dict({**untied.state_dict(), **{n: q for n, q in model.state_dict().items()
                                                          if not n.startswith("hidden.")}})
        assert (untied(data) - model(data)).abs().max() <= 1e-5
