"""Falcon-7B written whole as a spec (specs/falcon_7b.shape): the checker's parameter
total is Hugging Face's (tied LM head counted once), and the generated module at reduced
sizes computes what a hand-written reference of HF's FalconForCausalLM forward (eval,
parallel_attn, multi_query, new_decoder_architecture=False) computes with the same
weights. Also the regression found while writing it: a fixed size that happens to equal
another (Falcon's Dh/2 = 32 = L) is not shown as that dim."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import checked, module, outputs_match, same_random_weights, shape_at

from shapelang import trace

SPEC = Path(__file__).resolve().parent.parent / "specs" / "falcon_7b.shape"


def _spec():
    return checked(SPEC.read_text(), "falcon_7b.shape")


def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.example_value(spec.total_params) == 6_921_720_704


def test_a_fixed_size_equal_by_chance_is_not_named_by_another_dim():
    spec = _spec()
    table = trace(spec)
    shapes = {n: t.shape for b in spec.bindings for n, t in zip(b.names, b.types)}
    assert [str(d) for d in shapes["freqs"]] == ["S", "Dh/2"]      # not [S, L]: L = 32 is the depth
    assert shape_at(spec, "freqs", {"B": 1, "S": 8}) == (8, 32)
    assert "[S, Dh/2]" in table and "[S, L]" not in table
    # A size that IS another dim by definition keeps that dim's name, fixed or not.
    spec = checked("dim B, S\ndim H = 8\ndim G = 2\ndim Nrep = H / G\ndim L = 16\n"
                   "example B=1, S=3\ninput x: [B, S, G]\n"
                   "y: x -> linear G*Nrep\nz: x -> linear 2*G*Nrep\n")
    shapes = {n: t.shape for b in spec.bindings for n, t in zip(b.names, b.types)}
    assert [str(d) for d in shapes["y"]] == ["B", "S", "H"]
    assert str(shapes["z"][2]) != "L"                                 # 16 = L by chance only


# ------------------------------------------------------------------ a hand-written reference

def _reference(torch, V, D, H, L, eps=1e-5, theta=10000.0):
    """HF's FalconForCausalLM forward in eval mode, written from modeling_falcon.py
    (parallel_attn=True, multi_query=True, new_decoder_architecture=False, bias=False)."""
    nn = torch.nn
    Dh = D // H

    def rotate_half(t):
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return torch.cat((-t2, t1), dim=-1)

    class Attention(nn.Module):          # FalconAttention
        def __init__(self):
            super().__init__()
            self.query_key_value = nn.Linear(D, D + 2 * Dh, bias=False)
            self.dense = nn.Linear(D, D, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            fused = self.query_key_value(x).view(b, s, H + 2, Dh)    # _split_heads
            q, k, v = fused[..., :-2, :], fused[..., [-2], :], fused[..., [-1], :]
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            scores = q @ k.transpose(-1, -2) / math.sqrt(Dh)         # the one key head broadcasts
            causal = torch.ones(s, s, dtype=torch.bool).triu(1)
            weights = scores.masked_fill(causal, float("-inf")).softmax(-1)
            out = (weights @ v).transpose(1, 2).reshape(b, s, H * Dh)
            return self.dense(out)

    class MLP(nn.Module):                # FalconMLP
        def __init__(self):
            super().__init__()
            self.dense_h_to_4h = nn.Linear(D, 4 * D, bias=False)
            self.act = nn.GELU()
            self.dense_4h_to_h = nn.Linear(4 * D, D, bias=False)

        def forward(self, x):
            return self.dense_4h_to_h(self.act(self.dense_h_to_4h(x)))

    class Layer(nn.Module):              # FalconDecoderLayer, parallel attention
        def __init__(self):
            super().__init__()
            self.input_layernorm = nn.LayerNorm(D, eps=eps)
            self.self_attention = Attention()
            self.mlp = MLP()

        def forward(self, x, cos, sin):
            ln = self.input_layernorm(x)
            attention_output = self.self_attention(ln, cos, sin)
            mlp_output = self.mlp(ln)                                 # the same normalised input
            return mlp_output + attention_output + x

    class FalconForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(V, D)
            self.h = nn.ModuleList(Layer() for _ in range(L))
            self.ln_f = nn.LayerNorm(D, eps=eps)
            self.lm_head = nn.Linear(D, V, bias=False)
            self.lm_head.weight = self.word_embeddings.weight        # tied

        def forward(self, ids):
            x = self.word_embeddings(ids)
            # FalconRotaryEmbedding
            inv_freq = 1.0 / (theta ** (torch.arange(0, Dh, 2, dtype=torch.int64).float() / Dh))
            position_ids = torch.arange(ids.shape[1])[None, :].float()
            freqs = (inv_freq[None, :, None] @ position_ids[:, None, :]).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[:, None], emb.sin()[:, None]
            for layer in self.h:
                x = layer(x, cos, sin)
            return self.lm_head(self.ln_f(x))

    return FalconForCausalLM().eval()


def _pairs(ref):
    """The reference's parameters in the generated module's order, by role."""
    out = [ref.word_embeddings.weight]
    for layer in ref.h:
        a, m = layer.self_attention, layer.mlp
        out += [layer.input_layernorm.weight, layer.input_layernorm.bias, a.query_key_value.weight,
                a.dense.weight, m.dense_h_to_4h.weight, m.dense_4h_to_h.weight]
    return out + [ref.ln_f.weight, ref.ln_f.bias]


@pytest.mark.parametrize("sizes", [
    {"V": 53, "D": 32, "H": 4, "L": 2},
    {"V": 40, "D": 48, "H": 3, "L": 1},
], ids=["4heads-2layers", "3heads-1layer"])
def test_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    model, gen = module(_spec(), f"falcon_{sizes['H']}", **sizes)
    assert all("persistent=False" in ln for ln in gen.source.splitlines() if "register_buffer(" in ln) and "eps: float = 1e-05" in gen.source
    ref = _reference(torch, **sizes)
    got, want = list(model.parameters()), _pairs(ref)
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    assert len(got) == len(list(ref.parameters()))                    # the tied head counted once
    assert sum(p.numel() for p in got) == sum(p.numel() for p in ref.parameters())
    same_random_weights(zip(got, want))
    ids = torch.randint(0, sizes["V"], (2, 9))
    outputs_match(model, ref, ids, (2, 9, sizes["V"]))
    with torch.no_grad():                 # the GELU is exact: the tanh form gives other numbers
        for layer in ref.h:
            layer.mlp.act = torch.nn.GELU(approximate="tanh")
        assert (model(ids) - ref(ids)).abs().max().item() > 1e-5
