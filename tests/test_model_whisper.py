"""Whisper-tiny written whole as a spec (specs/whisper_tiny.shape): the checker's parameter
total at the real sizes is the public model's, counted on a full-size PyTorch reference; the
generated module at reduced sizes computes what a hand-written reference of openai whisper's
model.py computes, with the same weights."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import checked, module, published_total, renamed

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
SPEC = Path(__file__).resolve().parent.parent / "specs" / "whisper_tiny.shape"

# sum(p.numel() for p in model.parameters()) of whisper tiny; the 37,760,640 often quoted also
# counts the encoder's sinusoidal buffer (1500 x 384), which is not a parameter.
PARAMETERS = 37_184_640
SINUSOID_BUFFER = 1500 * 384


# ------------------------------------------------------------------ the reference (openai whisper)

def sinusoids(length, channels, max_timescale=10000):
    log_timescale_increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2))
    scaled_time = torch.arange(length)[:, None] * inv_timescales[None, :]
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.n_head = n_head
        self.query = nn.Linear(n_state, n_state)
        self.key = nn.Linear(n_state, n_state, bias=False)
        self.value = nn.Linear(n_state, n_state)
        self.out = nn.Linear(n_state, n_state)

    def forward(self, x, xa=None, mask=None):
        q = self.query(x)
        k = self.key(x if xa is None else xa)
        v = self.value(x if xa is None else xa)
        _n_batch, n_ctx, n_state = q.shape
        # the explicit (non-sdpa) path of the public code: Dh^-0.25 on q and k, additive mask
        scale = (n_state // self.n_head) ** -0.25
        q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        qk = (q * scale) @ (k * scale).transpose(-1, -2)
        if mask is not None:
            qk = qk + mask[:n_ctx, :n_ctx]
        w = F.softmax(qk.float(), dim=-1)
        return self.out((w @ v).permute(0, 2, 1, 3).flatten(start_dim=2))


class ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state, n_head, cross_attention=False):
        super().__init__()
        self.attn = MultiHeadAttention(n_state, n_head)
        self.attn_ln = nn.LayerNorm(n_state)
        self.cross_attn = MultiHeadAttention(n_state, n_head) if cross_attention else None
        self.cross_attn_ln = nn.LayerNorm(n_state) if cross_attention else None
        self.mlp = nn.Sequential(nn.Linear(n_state, 4 * n_state), nn.GELU(), nn.Linear(4 * n_state, n_state))
        self.mlp_ln = nn.LayerNorm(n_state)

    def forward(self, x, xa=None, mask=None):
        x = x + self.attn(self.attn_ln(x), mask=mask)
        if self.cross_attn:
            x = x + self.cross_attn(self.cross_attn_ln(x), xa)
        return x + self.mlp(self.mlp_ln(x))


class AudioEncoder(nn.Module):
    def __init__(self, n_mels, n_ctx, n_state, n_head, n_layer):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, n_state, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(n_state, n_state, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(n_ctx, n_state))
        self.blocks = nn.ModuleList([ResidualAttentionBlock(n_state, n_head) for _ in range(n_layer)])
        self.ln_post = nn.LayerNorm(n_state)

    def forward(self, x):
        x = F.gelu(self.conv1(x))
        x = F.gelu(self.conv2(x))
        x = x.permute(0, 2, 1)
        assert x.shape[1:] == self.positional_embedding.shape
        x = x + self.positional_embedding
        for block in self.blocks:
            x = block(x)
        return self.ln_post(x)


class TextDecoder(nn.Module):
    def __init__(self, n_vocab, n_ctx, n_state, n_head, n_layer):
        super().__init__()
        self.token_embedding = nn.Embedding(n_vocab, n_state)
        self.positional_embedding = nn.Parameter(torch.empty(n_ctx, n_state))
        self.blocks = nn.ModuleList(
            [ResidualAttentionBlock(n_state, n_head, cross_attention=True) for _ in range(n_layer)])
        self.ln = nn.LayerNorm(n_state)
        self.register_buffer("mask", torch.empty(n_ctx, n_ctx).fill_(-math.inf).triu_(1), persistent=False)

    def forward(self, x, xa):
        x = self.token_embedding(x) + self.positional_embedding[: x.shape[-1]]
        for block in self.blocks:
            x = block(x, xa, mask=self.mask)
        x = self.ln(x)
        return (x @ torch.transpose(self.token_embedding.weight, 0, 1)).float()


class Whisper(nn.Module):
    def __init__(self, n_mels, n_audio_ctx, n_state, n_head, n_audio_layer, n_vocab, n_text_ctx,
                 n_text_layer):
        super().__init__()
        self.encoder = AudioEncoder(n_mels, n_audio_ctx, n_state, n_head, n_audio_layer)
        self.decoder = TextDecoder(n_vocab, n_text_ctx, n_state, n_head, n_text_layer)

    def forward(self, mel, tokens):
        return self.decoder(tokens, self.encoder(mel))


# ------------------------------------------------------------------ reference names -> spec names

RENAME = [
    (r"^encoder\.conv1\.", "f1."), (r"^encoder\.conv2\.", "f2."),
    (r"^encoder\.ln_post\.", "xa_ln."), (r"^encoder\.blocks\.", "xa."),
    (r"^decoder\.token_embedding\.weight$", "W_tok"), (r"^decoder\.positional_embedding$", "W_pos"),
    (r"^decoder\.ln\.", "hidden_ln."), (r"^decoder\.blocks\.", "hidden."),
    (r"^(xa\.\d+)\.attn\.", r"\1.h."),
    (r"^(hidden\.\d+)\.attn\.", r"\1.h."),
    (r"\.cross_attn\.", ".c."), (r"\.cross_attn_ln\.", ".c_ln."),
    (r"\.attn_ln\.", ".h_ln."), (r"\.mlp_ln\.", ".out_ln."),
    (r"\.mlp\.0\.", ".out_linear1."), (r"\.mlp\.2\.", ".out_linear2."),
    (r"\.query\.", ".q."), (r"\.key\.", ".k."), (r"\.value\.", ".v."), (r"\.out\.", ".out_linear."),
]


def spec_name(name: str) -> str:
    return renamed(name, RENAME)


def test_parameter_total_is_the_public_models():
    total = published_total(SPEC)
    assert total == PARAMETERS
    # the reference at full size, as openai whisper builds tiny
    with torch.device("meta"):
        ref = Whisper(80, 1500, 384, 6, 4, 51865, 448, 4)
    assert sum(p.numel() for p in ref.parameters()) == total
    state = sum(t.numel() for t in ref.state_dict().values())
    assert state == total + SINUSOID_BUFFER == 37_760_640


SIZES = [{"M": 4, "A": 6, "D": 16, "H": 2, "Le": 1, "Ld": 1, "V": 50, "Ctx": 10, "B": 2, "S": 5},
         {"M": 3, "A": 5, "D": 24, "H": 4, "Le": 2, "Ld": 2, "V": 37, "Ctx": 7, "B": 1, "S": 7}]


@pytest.mark.parametrize("sizes", SIZES, ids=["1-layer", "2-layers"])
def test_generated_module_matches_the_reference(sizes):
    spec = checked(SPEC.read_text(), str(SPEC))
    model, gen = module(spec, "whisper", **sizes)
    # tables built once are buffers outside the state dict: the checkpoint is the parameters
    assert all("persistent=False" in line for line in gen.source.splitlines() if "register_buffer(" in line)
    s = sizes
    ref = Whisper(s["M"], s["A"], s["D"], s["H"], s["Le"], s["V"], s["Ctx"], s["Ld"]).eval()
    ours = dict(model.named_parameters())
    theirs = dict(ref.named_parameters())
    assert sorted(spec_name(n) for n in theirs) == sorted(ours)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in theirs.items():
            p.copy_(torch.randn_like(p) * 0.3)
            ours[spec_name(name)].copy_(p)
        mel = torch.randn(s["B"], s["M"], 2 * s["A"])
        tokens = torch.randint(0, s["V"], (s["B"], s["S"]))
        got, want = model(mel, tokens), ref(mel, tokens)
    assert got.shape == want.shape == (s["B"], s["S"], s["V"])
    diff = (got - want).abs().max().item()
    assert diff <= 1e-5, f"max |generated - reference| = {diff}"
    # the causal mask matters: a later token changes no earlier logit, in both models
    tokens2 = tokens.clone()
    tokens2[:, -1] = (tokens2[:, -1] + 1) % s["V"]
    with torch.no_grad():
        got2 = model(mel, tokens2)
    assert torch.allclose(got2[:, :-1], got[:, :-1], rtol=0, atol=1e-6)
    assert not torch.allclose(got2[:, -1], got[:, -1], rtol=0, atol=1e-3)
