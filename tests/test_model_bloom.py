"""BLOOM-560m written whole as a spec (specs/bloom_560m.shape): the checker's parameter
total is Hugging Face's (tied head counted once), and the generated module at reduced
sizes computes what a hand-written reference of HF's BloomForCausalLM forward (eval)
computes with the same weights: ALiBi slopes from the head count, the bias added in
baddbmm, word_embeddings_layernorm, the per-head fused query_key_value, the tanh GELU."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import checked, module, outputs_match, renamed, same_random_weights, shape_at

SPEC = Path(__file__).resolve().parent.parent / "specs" / "bloom_560m.shape"
SIZES = [{"V": 97, "D": 32, "H": 4, "L": 2},
         {"V": 61, "D": 64, "H": 8, "L": 1}]
NAMES = [(r"^W_embed$", "transformer.word_embeddings.weight"), (r"^x\.", "transformer.word_embeddings_layernorm."),
         (r"\.h\.", ".input_layernorm."), (r"^hidden\.", "transformer.h."),
         (r"\.fused\.", ".self_attention.query_key_value."), (r"\.x2\.", ".self_attention.dense."),
         (r"\.m_ln\.", ".post_attention_layernorm."), (r"\.m_linear1\.", ".mlp.dense_h_to_4h."),
         (r"\.m_linear2\.", ".mlp.dense_4h_to_h."), (r"^hidden_ln\.", "transformer.ln_f.")]


def _spec():
    return checked(SPEC.read_text(), "bloom_560m.shape")


def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.example_value(spec.total_params) == 559_214_592


def build_alibi_tensor(torch, attention_mask, num_heads):
    """HF's build_alibi_tensor (modeling_bloom.py): [B * H, 1, S]."""
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float32)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length)


def test_the_slopes_are_hfs_at_the_published_head_count():
    torch = pytest.importorskip("torch")
    spec = _spec()
    assert shape_at(spec, "alibi", {"B": 1, "S": 8}) == (16, 1, 8)
    ours = 2.0 ** (-8.0 * torch.arange(1, 17) / 16)                   # the spec's formula at H = 16
    hf = build_alibi_tensor(torch, torch.ones(1, 2, dtype=torch.long), 16)[:, 0, 1]
    torch.testing.assert_close(ours, hf)


# ------------------------------------------------------------------ a hand-written reference

def _reference(torch, V, D, H, L, eps=1e-5, with_alibi=True):
    """HF's BloomForCausalLM forward in eval mode, written from modeling_bloom.py
    (apply_residual_connection_post_layernorm=False, no padding); `with_alibi=False` drops
    the bias (all slopes times position 0)."""
    nn = torch.nn
    Dh = D // H

    def bloom_gelu(x):
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

    class Attention(nn.Module):          # BloomAttention
        def __init__(self):
            super().__init__()
            self.query_key_value = nn.Linear(D, 3 * D)
            self.dense = nn.Linear(D, D)

        def forward(self, x, residual, alibi):
            b, s, _ = x.shape
            fused = self.query_key_value(x).view(b, s, H, 3, Dh)          # _split_heads
            q = fused[..., 0, :].transpose(1, 2).reshape(b * H, s, Dh)
            k = fused[..., 1, :].permute(0, 2, 3, 1).reshape(b * H, Dh, s)
            v = fused[..., 2, :].transpose(1, 2).reshape(b * H, s, Dh)
            scores = alibi.baddbmm(batch1=q, batch2=k, beta=1.0, alpha=1 / math.sqrt(Dh))
            scores = scores.view(b, H, s, s)
            causal = torch.ones(s, s, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(causal, torch.finfo(scores.dtype).min)
            probs = nn.functional.softmax(scores, dim=-1, dtype=torch.float32)
            context = (probs.view(b * H, s, s) @ v).view(b, H, s, Dh).permute(0, 2, 1, 3)
            return self.dense(context.reshape(b, s, D)) + residual

    class MLP(nn.Module):                # BloomMLP
        def __init__(self):
            super().__init__()
            self.dense_h_to_4h = nn.Linear(D, 4 * D)
            self.dense_4h_to_h = nn.Linear(4 * D, D)

        def forward(self, x, residual):
            return self.dense_4h_to_h(bloom_gelu(self.dense_h_to_4h(x))) + residual

    class Block(nn.Module):              # BloomBlock
        def __init__(self):
            super().__init__()
            self.input_layernorm = nn.LayerNorm(D, eps=eps)
            self.self_attention = Attention()
            self.post_attention_layernorm = nn.LayerNorm(D, eps=eps)
            self.mlp = MLP()

        def forward(self, x, alibi):
            attention_output = self.self_attention(self.input_layernorm(x), x, alibi)
            return self.mlp(self.post_attention_layernorm(attention_output), attention_output)

    class BloomModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(V, D)
            self.word_embeddings_layernorm = nn.LayerNorm(D, eps=eps)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(D, eps=eps)

        def forward(self, ids):
            x = self.word_embeddings_layernorm(self.word_embeddings(ids))
            alibi = build_alibi_tensor(torch, torch.ones_like(ids) if with_alibi else torch.zeros_like(ids), H)
            for block in self.h:
                x = block(x, alibi)
            return self.ln_f(x)

    class BloomForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = BloomModel()
            self.lm_head = nn.Linear(D, V, bias=False)
            self.lm_head.weight = self.transformer.word_embeddings.weight   # tied

        def forward(self, ids):
            return self.lm_head(self.transformer(ids))

    return BloomForCausalLM().eval()


@pytest.mark.parametrize("sizes", SIZES, ids=["4heads", "8heads"])
def test_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    model, gen = module(_spec(), f"bloom_{sizes['H']}", **sizes)
    assert 'approximate="tanh"' in gen.source
    ref = _reference(torch, **sizes)
    theirs = dict(ref.named_parameters())            # the tied head once
    ours = {renamed(n, NAMES): p for n, p in model.named_parameters()}
    assert {n: tuple(p.shape) for n, p in ours.items()} == {n: tuple(p.shape) for n, p in theirs.items()}
    same_random_weights((ours[n], theirs[n]) for n in theirs)
    ids = torch.randint(0, sizes["V"], (2, 9), generator=torch.Generator().manual_seed(1))
    outputs_match(model, ref, ids, (2, 9, sizes["V"]))
    no_alibi = _reference(torch, **sizes, with_alibi=False)
    no_alibi.load_state_dict(ref.state_dict())
    with torch.no_grad():                 # the bias matters: without it the logits change
        assert (model(ids) - no_alibi(ids)).abs().max().item() > 1e-3
