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
    assert "torch.stack([gy, gx], dim=-1)" in gen.source and "register_buffer" not in gen.source
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
# shapelang has no shared-weights construct (every block call and every copy in `stack`
# owns its weights), so the shared layer is a block whose weights are its inputs:
# layernorm without affine times g plus b, `@` with weights stored [in, out]. Written for
# self_per_cross_attn = 2 (two self-attention blocks spelled out).

CROSS = [("g", "[D]"), ("b", "[D]"), ("gc", "[Ci]"), ("bc", "[Ci]"), ("wq", "[D, Hc*Dh]"),
         ("wkv", "[Ci, 2*Hc*Dh]"), ("wo", "[Hc*Dh, D]"), ("bo", "[D]")]
SELF = [("g", "[D]"), ("b", "[D]"), ("wq", "[D, Hl*Dh]"), ("wkv", "[D, 2*Hl*Dh]"), ("wo", "[Hl*Dh, D]"),
        ("bo", "[D]")]
FF = [("g", "[D]"), ("b", "[D]"), ("w1", "[D, 8*D]"), ("b1", "[8*D]"), ("w2", "[4*D, D]"), ("b2", "[D]")]
# the shared layer's weights: (prefix, list) in the order TiedLayer takes them
GROUPS = [("ca", CROSS), ("cf", FF), ("sa0", SELF), ("sf0", FF), ("sa1", SELF), ("sf1", FF)]


def _sig(ws, prefix=""):
    return ", ".join(f"{prefix}{n}: {s}" for n, s in ws)


def _names(ws, prefix):
    return ", ".join(f"{prefix}{n}" for n, _ in ws)


def _heads(t, h):
    return f'{t} -> rearrange "b n (h d) -> (b h) n d" h={h}'


BLOCKS = f"""
block TiedCrossAttention(x: [B, Nl, D], ctx: [B, M, Ci], {_sig(CROSS)}):
  h: (x -> layernorm elementwise_affine=false) * g + b
  c: (ctx -> layernorm elementwise_affine=false) * gc + bc
  q: {_heads("h @ wq", "Hc")}
  k, v: c @ wkv -> chunk 2 -1
  attn: q -> einsum "b i d, b j d -> b i j" ({_heads("k", "Hc")}) -> scale 1/sqrt(Dh) -> softmax -1
  out: attn -> einsum "b i j, b j d -> b i d" ({_heads("v", "Hc")}) -> rearrange "(b h) n d -> b n (h d)" h=Hc
  return out @ wo + bo
end

block TiedSelfAttention(x: [B, Nl, D], {_sig(SELF)}):
  h: (x -> layernorm elementwise_affine=false) * g + b
  q: {_heads("h @ wq", "Hl")}
  k, v: h @ wkv -> chunk 2 -1
  attn: q -> einsum "b i d, b j d -> b i j" ({_heads("k", "Hl")}) -> scale 1/sqrt(Dh) -> softmax -1
  out: attn -> einsum "b i j, b j d -> b i d" ({_heads("v", "Hl")}) -> rearrange "(b h) n d -> b n (h d)" h=Hl
  return out @ wo + bo
end

block TiedFeedForward(x: [B, Nl, D], {_sig(FF)}):
  a, gates: ((x -> layernorm elementwise_affine=false) * g + b) @ w1 + b1 -> chunk 2 -1
  return (a * (gates -> gelu)) @ w2 + b2
end

block TiedLayer(x: [B, Nl, D], ctx: [B, M, Ci], {", ".join(_sig(ws, p + "_") for p, ws in GROUPS)}):
  h: TiedCrossAttention(x, ctx, {_names(CROSS, "ca_")}) + x
  h1: TiedFeedForward(h, {_names(FF, "cf_")}) + h
  h2: TiedSelfAttention(h1, {_names(SELF, "sa0_")}) + h1
  h3: TiedFeedForward(h2, {_names(FF, "sf0_")}) + h2
  h4: TiedSelfAttention(h3, {_names(SELF, "sa1_")}) + h3
  return TiedFeedForward(h4, {_names(FF, "sf1_")}) + h4
end

"""


def _tied_text() -> str:
    """The spec with weight_tie_layers=True: the first layer written out, the other L - 1
    calls of one weightless layer given the same weights (declared once) as inputs."""
    text = SPEC.read_text()
    params = "\n".join(f"param t_{p}_{n}: {s}" for p, ws in GROUPS for n, s in ws)
    args = ", ".join(f"t_{p}_{n}" for p, ws in GROUPS for n, _ in ws)
    forward = (f"assume L >= 2\n{params}\nx1: x -> Layer(tokens)\n"
               f"hidden: x1 -> stack (L - 1) TiedLayer(tokens, {args})\n")
    text = text.replace("# --- The forward ---", BLOCKS + "# --- The forward ---", 1)
    return text.replace("hidden: x -> stack L Layer(tokens)\n", forward, 1)


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


ATT = {"norm.weight": ("g", False), "norm.bias": ("b", False), "norm_context.weight": ("gc", False),
       "norm_context.bias": ("bc", False), "fn.to_q.weight": ("wq", True), "fn.to_kv.weight": ("wkv", True),
       "fn.to_out.weight": ("wo", True), "fn.to_out.bias": ("bo", False)}
FFW = {"norm.weight": ("g", False), "norm.bias": ("b", False), "fn.w1.weight": ("w1", True),
       "fn.w1.bias": ("b1", False), "fn.w2.weight": ("w2", True), "fn.w2.bias": ("b2", False)}


def _tied_name(name: str) -> tuple[str, bool]:
    """The generated parameter of a reference parameter, and whether it is stored transposed."""
    if name.startswith("layers.0."):
        return renamed(name, RULES).replace("hidden.0.", "x1.", 1), False
    if not name.startswith("layers.1."):
        return renamed(name, RULES), False
    rest = name[len("layers.1."):]
    for prefix, (group, table) in {"0.": ("ca", ATT), "1.": ("cf", FFW), "2.0.0.": ("sa0", ATT),
                                   "2.0.1.": ("sf0", FFW), "2.1.0.": ("sa1", ATT),
                                   "2.1.1.": ("sf1", FFW)}.items():
        if rest.startswith(prefix) and rest[len(prefix):] in table:
            key, transposed = table[rest[len(prefix):]]
            return f"t_{group}_{key}", transposed
    raise KeyError(name)


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
    pairs = {_tied_name(n): q for n, q in ref.named_parameters()}     # shared ones listed once
    assert sorted(n for n, _ in pairs) == sorted(got)
    same_random_weights([(got[n], q.T if t else q) for (n, t), q in pairs.items()], seed=5)
    data = torch.randn(sizes["B"], sizes["Hi"], sizes["Wi"], sizes["C"], generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert (model(data) - ref(data)).abs().max() <= 1e-5
