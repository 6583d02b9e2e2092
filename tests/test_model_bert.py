"""specs/bert_base.shape is BERT-base whole: its parameter total is Hugging Face's
BertModel with the pooler, and the module generated from it at reduced sizes gives the
numbers of a hand-written BertModel (HF's structure, eval mode, eager attention) with the
same weights: LayerNorm eps 1e-12, the exact GELU and the additive extended attention mask
computed from a [B, S] padding mask.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from shapelang.checker.checker import check_file
from shapelang.codegen import runner
from shapelang.codegen.generator import generate
from shapelang.render import check_text

SPEC = Path(__file__).resolve().parent.parent / "specs" / "bert_base.shape"
SMALL = {"V": 50, "P": 16, "T": 2, "D": 24, "H": 4, "F": 40, "L": 2}


def test_the_parameter_total_is_the_published_one():
    spec = check_file(str(SPEC))
    assert spec.ok, check_text(spec)
    assert spec.example_value(spec.total_params) == 109_482_240


def _reference(torch, V, P, T, D, H, F, L):
    nn = torch.nn

    class SelfAttention(nn.Module):     # BertSelfAttention + BertSelfOutput
        def __init__(self):
            super().__init__()
            self.query, self.key, self.value = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
            self.dense = nn.Linear(D, D)
            self.LayerNorm = nn.LayerNorm(D, eps=1e-12)

        def heads(self, x):
            return x.view(x.shape[0], x.shape[1], H, D // H).permute(0, 2, 1, 3)

        def forward(self, x, ext):
            q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // H) + ext
            ctx = torch.matmul(scores.softmax(dim=-1), v).permute(0, 2, 1, 3).contiguous()
            ctx = ctx.view(x.shape[0], x.shape[1], D)
            return self.LayerNorm(self.dense(ctx) + x)

    class Layer(nn.Module):             # BertLayer: attention, intermediate, output
        def __init__(self):
            super().__init__()
            self.attention = SelfAttention()
            self.intermediate = nn.Linear(D, F)
            self.output = nn.Linear(F, D)
            self.LayerNorm = nn.LayerNorm(D, eps=1e-12)

        def forward(self, x, ext):
            a = self.attention(x, ext)
            h = nn.functional.gelu(self.intermediate(a))      # HF's "gelu": the erf form
            return self.LayerNorm(self.output(h) + a)

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(V, D)
            self.position_embeddings = nn.Embedding(P, D)
            self.token_type_embeddings = nn.Embedding(T, D)
            self.LayerNorm = nn.LayerNorm(D, eps=1e-12)
            self.layer = nn.ModuleList([Layer() for _ in range(L)])
            self.pooler = nn.Linear(D, D)
            self.register_buffer("position_ids", torch.arange(P).expand((1, -1)), persistent=False)

        def forward(self, input_ids, token_type_ids, attention_mask):
            S = input_ids.shape[1]
            emb = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
                   + self.position_embeddings(self.position_ids[:, :S]))
            x = self.LayerNorm(emb)
            ext = attention_mask[:, None, None, :].to(torch.float32)     # get_extended_attention_mask
            ext = (1.0 - ext) * torch.finfo(torch.float32).min
            for layer in self.layer:
                x = layer(x, ext)
            return x, torch.tanh(self.pooler(x[:, 0]))

    return Bert().eval()


def test_the_generated_module_matches_a_hand_written_bert():
    torch = pytest.importorskip("torch")
    spec = check_file(str(SPEC))
    gen = generate(spec)
    assert gen.source.count("eps=cfg.eps") == 3 and "eps: float = 1e-12" in gen.source
    assert "ext_mask * -3.4028234663852886e38" in gen.source     # as ruff format writes it
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, SMALL))
    ref = _reference(torch, **SMALL)
    got, want = list(model.parameters()), list(ref.parameters())
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p, q in zip(got, want):
            q.copy_(torch.randn(q.shape, generator=g) * (0.3 if q.dim() > 1 else 1.0))
            p.copy_(q)

    hidden = []
    model.hidden[-1].register_forward_hook(lambda _m, _i, out: hidden.append(out))
    B, S = 3, 7
    ids = torch.randint(0, SMALL["V"], (B, S), generator=g)
    types = torch.randint(0, SMALL["T"], (B, S), generator=g)
    mask = torch.ones(B, S, dtype=torch.long)
    mask[1, 4:] = 0                      # padded sentences of different lengths
    mask[2, 2:] = 0
    with torch.no_grad():
        pooled = model(ids, types, mask)
        want_hidden, want_pooled = ref(ids, types, mask)
    assert (pooled - want_pooled).abs().max() <= 1e-5
    assert (hidden[0] - want_hidden).abs().max() <= 1e-5
    # the mask matters: the padded keys are ignored, and without the mask they would not be
    with torch.no_grad():
        unmasked, _ = ref(ids, types, torch.ones_like(mask))
        ids2 = ids.clone()
        ids2[1, 4:] = (ids2[1, 4:] + 1) % SMALL["V"]     # change only padded tokens of sentence 1
        hidden.clear()
        model(ids2, types, mask)
    assert (unmasked[1] - want_hidden[1]).abs().max() > 1e-3
    assert (hidden[0][1, :4] - want_hidden[1, :4]).abs().max() <= 1e-5
