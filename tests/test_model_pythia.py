"""Pythia-160M written whole as a spec (specs/pythia_160m.shape): the checker's parameter
total is Hugging Face's, and the generated module at reduced sizes computes what a
hand-written reference of HF's GPTNeoXForCausalLM forward (eval) computes with the same
weights: the fused query_key_value laid out per head, rotary embeddings on the first
quarter of each head only, and the parallel residual with its two layernorms."""
from __future__ import annotations

from pathlib import Path

import pytest
from torch_shapes import checked, module, outputs_match, renamed, same_random_weights, shape_at

SPEC = Path(__file__).resolve().parent.parent / "specs" / "pythia_160m.shape"
SIZES = [{"V": 97, "D": 64, "H": 4, "L": 2},      # Dh = 16: 4 rotated features a head
         {"V": 61, "D": 48, "H": 2, "L": 1}]      # Dh = 24: 6 rotated
# the generated module's parameter names -> HF's
NAMES = [(r"^x\.", "gpt_neox.embed_in."), (r"^hidden\.", "gpt_neox.layers."),
         (r"\.h\.", ".input_layernorm."), (r"\.fused\.", ".attention.query_key_value."),
         (r"\.attn\.", ".attention.dense."), (r"\.mlp_ln\.", ".post_attention_layernorm."),
         (r"\.mlp_linear1\.", ".mlp.dense_h_to_4h."), (r"\.mlp_linear2\.", ".mlp.dense_4h_to_h."),
         (r"^hidden_ln\.", "gpt_neox.final_layer_norm."), (r"^logits\.", "embed_out.")]


def _spec():
    return checked(SPEC.read_text(), "pythia_160m.shape")


def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.example_value(spec.total_params) == 162_322_944


def test_only_a_quarter_of_each_head_is_rotated():
    spec = _spec()
    assert shape_at(spec, "cos_table", {"B": 1, "S": 8}) == (8, 16)     # R = 64 / 4
    assert shape_at(spec, "inv_freq", {"B": 1, "S": 8}) == (8,)


# ------------------------------------------------------------------ a hand-written reference

def _reference(torch, V, D, H, L, eps=1e-5, base=10000.0, rotary_pct=0.25):
    """HF's GPTNeoXForCausalLM forward in eval mode, written from modeling_gpt_neox.py
    (use_parallel_residual=True, hidden_act="gelu", tie_word_embeddings=False)."""
    nn = torch.nn
    Dh = D // H
    R = int(Dh * rotary_pct)

    def rotate_half(t):
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return torch.cat((-t2, t1), dim=-1)

    class Attention(nn.Module):          # GPTNeoXAttention (eager)
        def __init__(self):
            super().__init__()
            self.query_key_value = nn.Linear(D, 3 * D)
            self.dense = nn.Linear(D, D)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            qkv = self.query_key_value(x).view(b, s, H, 3 * Dh).transpose(1, 2)
            q, k, v = qkv.chunk(3, dim=-1)
            q = torch.cat((q[..., :R] * cos + rotate_half(q[..., :R]) * sin, q[..., R:]), dim=-1)
            k = torch.cat((k[..., :R] * cos + rotate_half(k[..., :R]) * sin, k[..., R:]), dim=-1)
            scores = (q @ k.transpose(2, 3)) * Dh ** -0.5
            causal = torch.ones(s, s, dtype=torch.bool).triu(1)
            weights = scores.masked_fill(causal, float("-inf")).softmax(-1, dtype=torch.float32)
            return self.dense((weights @ v).transpose(1, 2).reshape(b, s, D))

    class MLP(nn.Module):                # GPTNeoXMLP
        def __init__(self):
            super().__init__()
            self.dense_h_to_4h = nn.Linear(D, 4 * D)
            self.dense_4h_to_h = nn.Linear(4 * D, D)

        def forward(self, x):
            return self.dense_4h_to_h(nn.functional.gelu(self.dense_h_to_4h(x)))

    class Layer(nn.Module):              # GPTNeoXLayer
        def __init__(self):
            super().__init__()
            self.input_layernorm = nn.LayerNorm(D, eps=eps)
            self.post_attention_layernorm = nn.LayerNorm(D, eps=eps)
            self.attention = Attention()
            self.mlp = MLP()

        def forward(self, x, cos, sin):
            attn_output = self.attention(self.input_layernorm(x), cos, sin)
            mlp_output = self.mlp(self.post_attention_layernorm(x))   # the same x: parallel
            return mlp_output + attn_output + x

    class GPTNeoXModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_in = nn.Embedding(V, D)
            self.layers = nn.ModuleList(Layer() for _ in range(L))
            self.final_layer_norm = nn.LayerNorm(D, eps=eps)

        def forward(self, ids):
            x = self.embed_in(ids)
            inv_freq = 1.0 / (base ** (torch.arange(0, R, 2, dtype=torch.int64).float() / R))
            freqs = torch.arange(ids.shape[1]).float()[:, None] * inv_freq[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[None, None], emb.sin()[None, None]
            for layer in self.layers:
                x = layer(x, cos, sin)
            return self.final_layer_norm(x)

    class GPTNeoXForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt_neox = GPTNeoXModel()
            self.embed_out = nn.Linear(D, V, bias=False)

        def forward(self, ids):
            return self.embed_out(self.gpt_neox(ids))

    return GPTNeoXForCausalLM().eval()


def _built(torch, sizes, **options):
    """The generated module and the reference, with the same weights matched by HF's names."""
    model, _gen = module(_spec(), f"pythia_{sizes['H']}", **sizes)
    ref = _reference(torch, **sizes, **options)
    theirs = dict(ref.named_parameters())
    ours = {renamed(n, NAMES): p for n, p in model.named_parameters()}
    assert {n: tuple(p.shape) for n, p in ours.items()} == {n: tuple(p.shape) for n, p in theirs.items()}
    same_random_weights((ours[n], theirs[n]) for n in theirs)
    return model, ref


@pytest.mark.parametrize("sizes", SIZES, ids=["Dh16", "Dh24"])
def test_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    model, ref = _built(torch, sizes)
    ids = torch.randint(0, sizes["V"], (2, 9), generator=torch.Generator().manual_seed(2))
    outputs_match(model, ref, ids, (2, 9, sizes["V"]))


def test_rotating_every_feature_gives_other_numbers():
    """What the test above tells apart: rotary_pct 1.0 changes the logits."""
    torch = pytest.importorskip("torch")
    sizes = SIZES[0]
    model, full_rotary = _built(torch, sizes, rotary_pct=1.0)
    ids = torch.randint(0, sizes["V"], (1, 7), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert (full_rotary(ids) - model(ids)).abs().max().item() > 1e-3
