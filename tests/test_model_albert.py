"""specs/albert_base.shape is ALBERT-base (v2) whole: its parameter total is Hugging Face's
AlbertModel with the pooler (the shared layer counted once), and the module generated from it
at reduced sizes gives the numbers of a hand-written AlbertModel (HF's structure and names,
eval mode, eager attention) with the same weights: the factorised embedding, one layer's
weights applied L times, the tanh GELU, the extended attention mask."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import same_random_weights

from shapelang.checker.checker import check_file
from shapelang.codegen import runner
from shapelang.codegen.generator import generate
from shapelang.render import check_text

SPEC = Path(__file__).resolve().parent.parent / "specs" / "albert_base.shape"
SMALL = {"V": 50, "E": 8, "P": 16, "T": 2, "D": 24, "H": 4, "F": 40, "L": 3}

# HF's parameter names -> the generated module's
NAMES = {
    "embeddings.word_embeddings.weight": "word.weight",
    "embeddings.position_embeddings.weight": "posn.weight",
    "embeddings.token_type_embeddings.weight": "ttype.weight",
    "embeddings.LayerNorm.weight": "emb.weight", "embeddings.LayerNorm.bias": "emb.bias",
    "encoder.embedding_hidden_mapping_in.weight": "x.weight",
    "encoder.embedding_hidden_mapping_in.bias": "x.bias",
    "pooler.weight": "pooled.weight", "pooler.bias": "pooled.bias",
}
LAYER = {"attention.query": "q", "attention.key": "k", "attention.value": "v", "attention.dense": "ctx",
         "attention.LayerNorm": "a", "ffn": "f_linear1", "ffn_output": "f_linear2",
         "full_layer_layer_norm": "out_ln"}
NAMES.update({f"encoder.albert_layer_groups.0.albert_layers.0.{hf}.{w}": f"hidden.{ours}.{w}"
              for hf, ours in LAYER.items() for w in ("weight", "bias")})


def test_the_parameter_total_is_the_published_one():
    spec = check_file(str(SPEC))
    assert spec.ok, check_text(spec)
    assert spec.example_value(spec.total_params) == 11_683_584


def _reference(torch, V, E, P, T, D, H, F, L):
    nn = torch.nn

    class Attention(nn.Module):          # AlbertAttention (eager)
        def __init__(self):
            super().__init__()
            self.query, self.key, self.value = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
            self.dense = nn.Linear(D, D)
            self.LayerNorm = nn.LayerNorm(D, eps=1e-12)

        def heads(self, x):
            return x.view(x.shape[0], x.shape[1], H, D // H).transpose(1, 2)

        def forward(self, x, ext):
            q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // H) + ext
            ctx = torch.matmul(scores.softmax(dim=-1), v).transpose(2, 1).flatten(2)
            return self.LayerNorm(x + self.dense(ctx))

    class Layer(nn.Module):              # AlbertLayer
        def __init__(self):
            super().__init__()
            self.full_layer_layer_norm = nn.LayerNorm(D, eps=1e-12)
            self.attention = Attention()
            self.ffn, self.ffn_output = nn.Linear(D, F), nn.Linear(F, D)

        def forward(self, x, ext):
            a = self.attention(x, ext)
            f = self.ffn_output(nn.functional.gelu(self.ffn(a), approximate="tanh"))   # gelu_new
            return self.full_layer_layer_norm(f + a)

    class Group(nn.Module):              # AlbertLayerGroup with inner_group_num = 1
        def __init__(self):
            super().__init__()
            self.albert_layers = nn.ModuleList([Layer()])

    class Encoder(nn.Module):            # AlbertTransformer with num_hidden_groups = 1
        def __init__(self):
            super().__init__()
            self.embedding_hidden_mapping_in = nn.Linear(E, D)
            self.albert_layer_groups = nn.ModuleList([Group()])

        def forward(self, x, ext):
            x = self.embedding_hidden_mapping_in(x)
            for i in range(L):           # every layer is group int(i / (L / groups)) = 0
                x = self.albert_layer_groups[int(i / L)].albert_layers[0](x, ext)
            return x

    class Embeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(V, E)
            self.position_embeddings = nn.Embedding(P, E)
            self.token_type_embeddings = nn.Embedding(T, E)
            self.LayerNorm = nn.LayerNorm(E, eps=1e-12)
            self.register_buffer("position_ids", torch.arange(P).expand((1, -1)), persistent=False)

        def forward(self, ids, types):
            S = ids.shape[1]
            return self.LayerNorm(self.word_embeddings(ids) + self.token_type_embeddings(types)
                                  + self.position_embeddings(self.position_ids[:, :S]))

    class Albert(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings, self.encoder, self.pooler = Embeddings(), Encoder(), nn.Linear(D, D)

        def forward(self, ids, types, attention_mask):
            ext = attention_mask[:, None, None, :].to(torch.float32)
            ext = (1.0 - ext) * torch.finfo(torch.float32).min
            x = self.encoder(self.embeddings(ids, types), ext)
            return x, torch.tanh(self.pooler(x[:, 0]))

    return Albert().eval()


def test_the_generated_module_matches_a_hand_written_albert():
    torch = pytest.importorskip("torch")
    spec = check_file(str(SPEC))
    gen = generate(spec)
    assert "for _ in range(L):" in gen.source and 'approximate="tanh"' in gen.source
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, SMALL))
    ref = _reference(torch, **SMALL)
    got = dict(model.named_parameters())
    assert sorted(got) == sorted(NAMES.values())
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in ref.parameters())
    same_random_weights([(got[NAMES[n]], q) for n, q in ref.named_parameters()], seed=2)
    hidden = []
    model.hidden.register_forward_hook(lambda _m, _i, out: hidden.append(out))
    g = torch.Generator().manual_seed(3)
    B, S = 3, 7
    ids = torch.randint(0, SMALL["V"], (B, S), generator=g)
    types = torch.randint(0, SMALL["T"], (B, S), generator=g)
    mask = torch.ones(B, S, dtype=torch.long)
    mask[1, 5:] = 0
    with torch.no_grad():
        pooled = model(ids, types, mask)
        want_hidden, want_pooled = ref(ids, types, mask)
    assert len(hidden) == SMALL["L"]                  # the one layer ran L times
    assert (pooled - want_pooled).abs().max() <= 1e-5
    assert (hidden[-1] - want_hidden).abs().max() <= 1e-5
    # one application fewer gives other numbers: the depth is real, not the parameters'
    with torch.no_grad():
        short = _reference(torch, **{**SMALL, "L": SMALL["L"] - 1})
        short.load_state_dict(ref.state_dict())
        assert (short(ids, types, mask)[0] - want_hidden).abs().max() > 1e-3
