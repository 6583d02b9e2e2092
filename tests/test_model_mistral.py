"""Mistral-7B written whole as a spec (specs/mistral_7b.shape): the checker's parameter
total is Hugging Face's, and the generated module at reduced sizes computes what a
hand-written reference of HF's MistralForCausalLM forward (eval) computes with the same
weights, with a window shorter than the text, so that the band of the sliding-window mask
is exercised, and with a window longer than the text, where it is Llama's causal mask."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import checked, module, outputs_match, same_random_weights, shape_at

SPEC = Path(__file__).resolve().parent.parent / "specs" / "mistral_7b.shape"
SIZES = [{"V": 97, "D": 32, "H": 4, "G": 2, "F": 40, "L": 2, "W": 3},    # GQA, a window of 3
         {"V": 61, "D": 48, "H": 6, "G": 3, "F": 56, "L": 1, "W": 5}]


def _spec():
    return checked(SPEC.read_text(), "mistral_7b.shape")


def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.example_value(spec.total_params) == 7_241_732_096


def test_the_mask_is_square_and_bool_at_every_size():
    torch = pytest.importorskip("torch")
    spec = _spec()
    keep = next(b for b in spec.bindings if "keep" in b.names).types[0]
    assert keep.dtype == "bool"
    assert shape_at(spec, "keep", {"B": 2, "S": 9}) == (9, 9)
    # the band the spec writes (`tril` then `triu (1 - W)`) keeps W keys per query
    band = torch.ones(9, 9).tril().triu(1 - 3).bool()
    assert band.sum(-1).tolist() == [1, 2, 3, 3, 3, 3, 3, 3, 3]


# ------------------------------------------------------------------ a hand-written reference

def _reference(torch, V, D, H, G, F, L, W, eps=1e-5, theta=10000.0):
    """HF's MistralForCausalLM forward in eval mode, written from modeling_mistral.py: Llama's
    layout with config.sliding_window. The mask is HF's sliding-window overlay on the causal
    one: key j is seen by query i when j <= i and i - j < W."""
    nn = torch.nn
    Dh = D // H

    class RMSNorm(nn.Module):            # MistralRMSNorm
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(D))

        def forward(self, x):
            var = x.float().pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(var + eps))

    def rotate_half(t):
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return torch.cat((-t2, t1), dim=-1)

    def repeat_kv(t, n):
        b, g, s, d = t.shape
        return t[:, :, None, :, :].expand(b, g, n, s, d).reshape(b, g * n, s, d)

    class Attention(nn.Module):          # MistralAttention (eager path, no cache)
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(D, H * Dh, bias=False)
            self.k_proj = nn.Linear(D, G * Dh, bias=False)
            self.v_proj = nn.Linear(D, G * Dh, bias=False)
            self.o_proj = nn.Linear(H * Dh, D, bias=False)

        def forward(self, x, cos, sin, hidden):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, -1, Dh).transpose(1, 2)
            k = self.k_proj(x).view(b, s, -1, Dh).transpose(1, 2)
            v = self.v_proj(x).view(b, s, -1, Dh).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k, v = repeat_kv(k, H // G), repeat_kv(v, H // G)
            scores = q @ k.transpose(2, 3) / math.sqrt(Dh)
            weights = scores.masked_fill(hidden, float("-inf")).softmax(-1, dtype=torch.float32)
            return self.o_proj((weights @ v).transpose(1, 2).reshape(b, s, -1))

    class MLP(nn.Module):                # MistralMLP
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(D, F, bias=False)
            self.up_proj = nn.Linear(D, F, bias=False)
            self.down_proj = nn.Linear(F, D, bias=False)

        def forward(self, x):
            return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):              # MistralDecoderLayer
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm()
            self.mlp = MLP()

        def forward(self, x, cos, sin, hidden):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, hidden)
            return x + self.mlp(self.post_attention_layernorm(x))

    class MistralForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, D)
            self.layers = nn.ModuleList(Layer() for _ in range(L))
            self.norm = RMSNorm()
            self.lm_head = nn.Linear(D, V, bias=False)

        def forward(self, ids):
            x = self.embed_tokens(ids)
            s = ids.shape[1]
            inv_freq = 1.0 / (theta ** (torch.arange(0, Dh, 2, dtype=torch.int64).float() / Dh))
            freqs = torch.arange(s).float()[:, None] * inv_freq[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[None, None], emb.sin()[None, None]
            q_idx, kv_idx = torch.arange(s)[:, None], torch.arange(s)[None, :]
            seen = (kv_idx <= q_idx) & (q_idx - kv_idx < W)       # causal, inside the window
            for layer in self.layers:
                x = layer(x, cos, sin, ~seen)
            return self.lm_head(self.norm(x))

    return MistralForCausalLM().eval()


def _pairs(ref):
    """The reference's parameters in the generated module's order, by role."""
    out = [ref.embed_tokens.weight]
    for layer in ref.layers:
        a, m = layer.self_attn, layer.mlp
        out += [layer.input_layernorm.weight, a.q_proj.weight, a.k_proj.weight, a.v_proj.weight,
                a.o_proj.weight, layer.post_attention_layernorm.weight, m.gate_proj.weight,
                m.up_proj.weight, m.down_proj.weight]
    return out + [ref.norm.weight, ref.lm_head.weight]


def _built(torch, sizes):
    model, gen = module(_spec(), f"mistral_{sizes['G']}_{sizes['W']}", **sizes)
    ref = _reference(torch, **sizes)
    got, want = list(model.parameters()), _pairs(ref)
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    assert len(got) == len(list(ref.parameters()))
    same_random_weights(zip(got, want))
    return model, gen, ref


@pytest.mark.parametrize("sizes", SIZES, ids=["window3", "window5"])
def test_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    model, gen, ref = _built(torch, sizes)
    assert "W: int = " in gen.source and "triu(diagonal=1 - W)" in gen.source
    ids = torch.randint(0, sizes["V"], (2, 11), generator=torch.Generator().manual_seed(3))
    outputs_match(model, ref, ids, (2, 11, sizes["V"]))


def test_the_window_is_honoured():
    """Past the window the logits are not the causal model's; within it they are."""
    torch = pytest.importorskip("torch")
    sizes = SIZES[0]
    model, _, ref = _built(torch, sizes)
    wide = _reference(torch, **{**sizes, "W": 64})
    wide.load_state_dict(ref.state_dict())
    ids = torch.randint(0, sizes["V"], (1, 8), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        got, causal = model(ids), wide(ids)
    w = sizes["W"]
    torch.testing.assert_close(got[:, :w], causal[:, :w], atol=1e-5, rtol=1e-5)   # all keys inside
    assert (got[:, w:] - causal[:, w:]).abs().max().item() > 1e-3
