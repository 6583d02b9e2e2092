"""Llama-2-7B written whole as a spec (specs/llama2_7b.shape): the checker's parameter
total is Hugging Face's, Llama-2-70B's grouped-query layout is the same spec with other
sizes, and the generated module at reduced sizes computes what a hand-written reference
of HF's LlamaForCausalLM forward (eval) computes with the same weights."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import checked, module, outputs_match, same_random_weights, total_at

SPEC = Path(__file__).resolve().parent.parent / "specs" / "llama2_7b.shape"


def _spec():
    return checked(SPEC.read_text(), "llama2_7b.shape")



def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.example_value(spec.total_params) == 6_738_415_616
    assert total_at(spec) == 6_738_415_616


def test_llama2_70b_is_the_same_spec_with_grouped_heads():
    # Llama-2-70B: hidden 8192, 80 layers, 64 query heads, 8 key/value heads,
    # intermediate 28672; Hugging Face counts 68,976,648,192 parameters.
    spec = _spec()
    assert total_at(spec, D=8192, L=80, H=64, G=8, F=28672) == 68_976_648_192


# ------------------------------------------------------------------ a hand-written reference

def _reference(torch, V, D, H, G, F, L, eps=1e-5, theta=10000.0, mlp=None, mlp_name="mlp", window=None,
               qkv_bias=False, tied=False, head_dim=None, gemma=False):
    """HF's LlamaForCausalLM forward in eval mode, written from modeling_llama.py. `mlp`
    (a function giving a layer's MLP module, stored as `mlp_name`) replaces LlamaMLP: Mixtral
    is this model with its sparse mixture of experts there and theta 1e6. `window`: Mistral,
    HF's sliding-window overlay on the causal mask (key j is seen by query i when j <= i and
    i - j < window). `qkv_bias`: Qwen2's biases on q_proj, k_proj and v_proj only. `tied`: the
    LM head is the token table (Qwen2, Gemma). `head_dim`: a head width other than D/H
    (Gemma's config.head_dim). `gemma`: GemmaModel's differences, the embeddings times
    sqrt(D) (the normalizer a tensor of the hidden dtype), GemmaRMSNorm's x * (1 + weight)
    with the weight initialised to zeros, and GemmaMLP's gelu(approximate="tanh")."""
    nn = torch.nn
    Dh = D // H if head_dim is None else head_dim

    class RMSNorm(nn.Module):            # LlamaRMSNorm, or GemmaRMSNorm
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(D) if gemma else torch.ones(D))

        def forward(self, x):
            var = x.float().pow(2).mean(-1, keepdim=True)
            if gemma:
                return ((x.float() * torch.rsqrt(var + eps)) * (1.0 + self.weight.float())).type_as(x)
            return self.weight * (x * torch.rsqrt(var + eps))

    def rotate_half(t):
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return torch.cat((-t2, t1), dim=-1)

    def repeat_kv(t, n):
        b, g, s, d = t.shape
        return t[:, :, None, :, :].expand(b, g, n, s, d).reshape(b, g * n, s, d)

    class Attention(nn.Module):          # LlamaAttention (sdpa path, no cache)
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(D, H * Dh, bias=qkv_bias)
            self.k_proj = nn.Linear(D, G * Dh, bias=qkv_bias)
            self.v_proj = nn.Linear(D, G * Dh, bias=qkv_bias)
            self.o_proj = nn.Linear(H * Dh, D, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, -1, Dh).transpose(1, 2)
            k = self.k_proj(x).view(b, s, -1, Dh).transpose(1, 2)
            v = self.v_proj(x).view(b, s, -1, Dh).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k, v = repeat_kv(k, H // G), repeat_kv(v, H // G)
            scores = q @ k.transpose(2, 3) / math.sqrt(Dh)
            causal = torch.ones(s, s, dtype=torch.bool).triu(1)
            if window is not None:
                q_idx, kv_idx = torch.arange(s)[:, None], torch.arange(s)[None, :]
                causal = ~((kv_idx <= q_idx) & (q_idx - kv_idx < window))
            weights = scores.masked_fill(causal, float("-inf")).softmax(-1, dtype=torch.float32)
            out = (weights @ v).transpose(1, 2).reshape(b, s, -1)
            return self.o_proj(out)

    class MLP(nn.Module):                # LlamaMLP
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(D, F, bias=False)
            self.up_proj = nn.Linear(D, F, bias=False)
            self.down_proj = nn.Linear(F, D, bias=False)

        def forward(self, x):
            gate = self.gate_proj(x)
            gate = nn.functional.gelu(gate, approximate="tanh") if gemma else nn.functional.silu(gate)
            return self.down_proj(gate * self.up_proj(x))

    class Layer(nn.Module):              # LlamaDecoderLayer
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm()
            setattr(self, mlp_name, MLP() if mlp is None else mlp())

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + getattr(self, mlp_name)(self.post_attention_layernorm(x))

    class LlamaForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, D)
            self.layers = nn.ModuleList(Layer() for _ in range(L))
            self.norm = RMSNorm()
            self.lm_head = nn.Linear(D, V, bias=False)
            if tied:
                self.lm_head.weight = self.embed_tokens.weight

        def forward(self, ids):
            x = self.embed_tokens(ids)
            if gemma:
                x = x * torch.tensor(D**0.5, dtype=x.dtype)
            # LlamaRotaryEmbedding
            inv_freq = 1.0 / (theta ** (torch.arange(0, Dh, 2, dtype=torch.int64).float() / Dh))
            position_ids = torch.arange(ids.shape[1])[None, :].float()
            freqs = (inv_freq[None, :, None] @ position_ids[:, None, :]).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[:, None], emb.sin()[:, None]     # unsqueeze the head axis
            for layer in self.layers:
                x = layer(x, cos, sin)
            return self.lm_head(self.norm(x))

    return LlamaForCausalLM().eval()


def _pairs(ref, L):
    """The reference's parameters in the generated module's order, by role (a bias after its
    weight; a tied LM head is the token table, once)."""
    out = [ref.embed_tokens.weight]
    for layer in ref.layers:
        a, m = layer.self_attn, layer.mlp
        out += [layer.input_layernorm.weight]
        for proj in (a.q_proj, a.k_proj, a.v_proj):
            out += [proj.weight] + ([proj.bias] if proj.bias is not None else [])
        out += [a.o_proj.weight, layer.post_attention_layernorm.weight, m.gate_proj.weight,
                m.up_proj.weight, m.down_proj.weight]
    tied = ref.lm_head.weight is ref.embed_tokens.weight
    return out + [ref.norm.weight] + ([] if tied else [ref.lm_head.weight])


@pytest.mark.parametrize("sizes", [
    {"V": 97, "D": 32, "H": 4, "G": 4, "F": 88, "L": 2},    # Llama-2-7B's layout: G = H
    {"V": 61, "D": 48, "H": 6, "G": 2, "F": 72, "L": 1},    # Llama-2-70B's layout: G < H
], ids=["mha", "gqa"])
def test_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    model, gen = module(_spec(), f"llama2_{sizes['G']}", **sizes)
    assert all("persistent=False" in ln for ln in gen.source.splitlines() if "register_buffer(" in ln) and "eps: float = 1e-05" in gen.source
    ref = _reference(torch, **sizes)
    got, want = list(model.parameters()), _pairs(ref, sizes["L"])
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    assert len(got) == len(list(ref.parameters()))
    same_random_weights(zip(got, want))
    ids = torch.randint(0, sizes["V"], (2, 9))
    _out, expected = outputs_match(model, ref, ids, (2, 9, sizes["V"]))
    with torch.no_grad():                 # the eps is honoured: another eps changes the output
        for mod in model.modules():
            if isinstance(mod, torch.nn.RMSNorm):
                mod.eps = 1.0
        assert (model(ids) - expected).abs().max().item() > 1e-3
