"""`shapelang import` round trips: a module is imported, the spec checks clean, codegen writes
its module, the original's weights are copied by the mapping the importer wrote, and the
outputs equal the original's to 1e-5 with the same parameter count.

Each round trip is done here step by step with the public API (not through the importer's
own verification), on a nanoGPT-style GPT written below, nn.TransformerEncoderLayer and
nn.MultiheadAttention."""
from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
from import_kit import floats as _floats
from import_kit import round_trip
from torch import nn

from bench import nanogpt
from bench.nanogpt import GPTConfig
from shapelang import api
from shapelang.codegen import runner
from shapelang.importer import copy_weights, import_module

# ------------------------------------------------------------------ a nanoGPT-style GPT


class GPT(nanogpt.GPT):
    def __init__(self, config):
        super().__init__(config)
        torch.manual_seed(0)
        for p in self.parameters():          # not the default init: the norms' weights must matter too
            nn.init.normal_(p, 0.0, 0.3)


def test_gpt_round_trip(tmp_path):
    gpt = GPT(GPTConfig())

    def make(b, s, seed=0):
        return [torch.randint(0, 101, (b, s), generator=torch.Generator().manual_seed(seed))]

    text = round_trip(tmp_path, gpt, ["idx=2x8:int"], make, sizes_list=((2, 8), (3, 5), (1, 16)))
    # read like nanoGPT: the config's names, the modules' names, one block stacked n_layer times
    for line in ("dim D  # n_embd", "dim H  # n_head", "dim V  # vocab_size", "dim Ctx  # block_size",
                 "assume S <= Ctx", "c_attn: x -> linear 3*D", "q, k, v: c_attn -> split D -1",
                 "-> mask causal -> softmax -1", "h: ", "-> stack L Block", "tok_emb: idx -> embed wte",
                 "pos_emb: wpe -> slice 0 0 S", "ln_f @ (wte -> transpose 0 1)", "param wte: [V, D]"):
        assert line in text, line


def test_gpt_the_importer_refuses_sizes_it_cannot_tell_apart():
    from shapelang.importer import ImportFailure

    gpt = GPT(GPTConfig(block_size=48))          # block_size == n_embd: is a 48 D or Ctx?
    with pytest.raises(ImportFailure, match="cannot tell them apart"):
        import_module(gpt, ["idx=2x8:int"])


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_layer_round_trip(tmp_path, norm_first, activation):
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(32, 4, 80, dropout=0.1, activation=activation, batch_first=True,
                                       norm_first=norm_first)
    text = round_trip(tmp_path, layer, ["src=2x8x32"], _floats(lambda b, s: [(b, s, 32)]))
    assert "dim D  # embed_dim" in text and "linear F" in text and "dropout 0.1" in text
    assert "block MultiheadAttention(x: [B, S, D])" in text


def test_multihead_attention_round_trip_cross(tmp_path):
    torch.manual_seed(2)
    mha = nn.MultiheadAttention(32, 4, batch_first=True)
    make = _floats(lambda b, s: [(b, s, 32), (b, s + 3, 32), (b, s + 3, 32)])
    text = round_trip(tmp_path, mha, ["query=2x8x32", "key=2x6x32", "value=2x6x32"], make,
                      call_kwargs={"need_weights": False})
    assert "input key: [B, T, D]" in text and "scale 1/sqrt(Dh)" in text


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


def test_multihead_attention_round_trip_self(tmp_path):
    torch.manual_seed(3)
    text = round_trip(tmp_path, SelfAttention(), ["x=2x8x32"], _floats(lambda b, s: [(b, s, 32)]))
    assert "linear 3*D" in text          # the packed in_proj: one learned step


def test_the_weights_mapping_names_every_parameter_once():
    gpt = GPT(GPTConfig())
    imported = import_module(gpt, ["idx=2x8:int"])
    named = [s for step in imported.mapping["steps"] for s in step["tensors"].values()]
    named += [d["source"] for d in imported.mapping["declared"]]
    assert sorted(named) == sorted(n for n, _ in gpt.named_parameters())
    assert imported.verified.max_diff <= 1e-5
    assert math.isclose(imported.verified.params_spec, sum(p.numel() for p in gpt.parameters()))


class Tagger(nn.Module):
    """An owned embedding table, an RMS norm and a head: the other learned steps."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.emb = nn.Embedding(50, 24)
        self.norm = nn.RMSNorm(24)
        self.head = nn.Linear(24, 7, bias=False)

    def forward(self, ids):
        return self.head(self.norm(self.emb(ids)))


def test_embedding_rmsnorm_and_a_linear_without_bias(tmp_path):
    def make(b, s, seed=0):
        return [torch.randint(0, 50, (b, s), generator=torch.Generator().manual_seed(seed))]

    text = round_trip(tmp_path, Tagger(), ["ids=2x8:int"], make)
    # no configuration to read: the table's sizes get the usual names, the head's width its own
    assert "emb: ids -> embed V D" in text and "-> rmsnorm" in text and "linear F bias=false" in text


class Bounded(nn.Module):
    """torch.minimum / maximum of two tensors, clamp by numbers and amin."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        h = self.lin(x)
        low = torch.minimum(h, x).clamp(min=-0.5, max=2.0)
        return low + torch.maximum(h, x).amin(-1, keepdim=True).clamp(max=1)


def test_minimum_maximum_clamp_and_amin(tmp_path):
    text = round_trip(tmp_path, Bounded(), ["x=2x8x16"], _floats(lambda b, s: [(b, s, 16)]))
    for written in ("minimum(", "maximum(", "clamp min=(-0.5) max=2.0", "amin -1 keepdim", "clamp max=1"):
        assert written in text, text


# ------------------------------------------------------------------ nanoGPT's manual attention path


def test_gpt_with_nanogpts_manual_attention_round_trip(tmp_path):
    """The comparison with the causal buffer is a step of the spec (`s == 0`), not opaque;
    the scale after the product reads 1/sqrt(Dh); the spec checks clean and round-trips."""
    gpt = GPT(GPTConfig(flash=False))
    torch.manual_seed(1)
    for p in gpt.parameters():
        nn.init.normal_(p, 0.0, 0.3)

    def make(b, s, seed=0):
        return [torch.randint(0, 101, (b, s), generator=torch.Generator().manual_seed(seed))]

    text = round_trip(tmp_path, gpt, ["idx=2x8:int"], make, sizes_list=((2, 8), (3, 5), (1, 16)))
    assert "opaque" not in text
    # the causal buffer belongs to the attention module: a buffer of its block, stacked
    assert "  buffer bias: [1, 1, Ctx, Ctx]" in text and " == 0" in text and "-> stack L Block" in text
    assert "-> scale 1/sqrt(Dh)" in text and "softmax -1" in text


class PaddedSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x, pad):
        return self.attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]


def test_multihead_attention_with_a_key_padding_mask_round_trip(tmp_path):
    """key_padding_mask is read as attention with `mask pad` (pad viewed as [B, 1, 1, S]),
    not as the module's kernel steps; a sequence padded throughout gives what PyTorch gives."""
    torch.manual_seed(4)
    module = PaddedSelfAttention()

    def make(b, s, seed=0):
        g = torch.Generator().manual_seed(seed)
        pad = torch.rand(b, s, generator=g) < 0.3
        pad[:, 0] = False
        return [torch.randn(b, s, 32, generator=g), pad]

    text = round_trip(tmp_path, module, ["x=2x8x32", "pad=2x8:bool"], make)
    assert "opaque" not in text and "linear 3*D" in text
    assert "-> scale 1/sqrt(Dh) -> mask " in text and "reshape [B, 1, 1, S]" in text
    # every key of sequence 0 is padding: zeros from attention, so out_proj's bias, as from
    # PyTorch's MultiheadAttention outside its inference fast path (which gives NaN there)
    spec = api.check_file(str(tmp_path / "imported.shape"))
    _mod, model = runner.build(api.codegen(spec), dict(spec.example))
    copy_weights(model, module, json.loads((tmp_path / "imported.weights.json").read_text()))
    x, pad = make(3, 6, seed=5)
    pad[0] = True
    want = module(x, pad).detach()
    with torch.no_grad():
        got = model(x, pad)
    assert torch.isfinite(want).all() and torch.isfinite(got).all()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[0], module.attn.out_proj.bias.detach().expand(6, 32), atol=1e-6, rtol=0)


class NumberedHeads(nn.Module):
    """Heads split with plain numbers (`view(B, S, 4, D // 4)`) and no attribute naming 4."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        B, S, D = x.shape
        return self.lin(x).view(B, S, 4, D // 4).transpose(1, 2)


def test_a_reshape_with_plain_numbers_pins_the_fixed_sizes(tmp_path):
    # with D free the spec would have to prove B*S*D == 16*B*S for every D: it writes the
    # module's fixed size as it is (`dim D = 16`), checks clean and still round-trips
    text = round_trip(tmp_path, NumberedHeads(), ["x=2x8x16"], _floats(lambda b, s: [(b, s, 16)]))
    assert "dim D = 16" in text and "reshape [B, S, 4, 4]" in text, text
    assert "example B=2, S=8" in text and "D=16" not in text.split("example", 1)[1], text
