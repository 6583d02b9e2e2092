"""T5-small written whole as a spec (specs/t5_small.shape): the checker's parameter total at
the real sizes is T5Model's, counted on a full-size PyTorch reference; the generated module at
reduced sizes computes what a hand-written reference of Hugging Face's modeling_t5.py computes
(relative position buckets, shared bias tables, padding and causal masks), with the same
weights, at lengths long enough to reach the logarithmic and the capped buckets."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import checked, module, published_total, renamed

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
SPEC = Path(__file__).resolve().parent.parent / "specs" / "t5_small.shape"
PARAMETERS = 60_506_624   # T5Model (no LM head), t5-small


# ------------------------------------------------------------------ the reference (HF modeling_t5)

def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


class T5Attention(nn.Module):
    def __init__(self, d_model, d_kv, n_heads, is_decoder, has_relative_attention_bias):
        super().__init__()
        self.is_decoder, self.n_heads, self.d_kv = is_decoder, n_heads, d_kv
        self.inner_dim = n_heads * d_kv
        self.q = nn.Linear(d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, d_model, bias=False)
        self.has_relative_attention_bias = has_relative_attention_bias
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(32, n_heads)

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position
        bucket = relative_position_bucket(relative_position, bidirectional=not self.is_decoder)
        values = self.relative_attention_bias(bucket)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, hidden_states, mask=None, key_value_states=None, position_bias=None):
        batch_size, seq_length = hidden_states.shape[:2]
        kv = hidden_states if key_value_states is None else key_value_states

        def heads(t):
            return t.view(batch_size, -1, self.n_heads, self.d_kv).transpose(1, 2)

        q, k, v = heads(self.q(hidden_states)), heads(self.k(kv)), heads(self.v(kv))
        scores = torch.matmul(q, k.transpose(3, 2))
        if position_bias is None:
            key_length = k.shape[-2]
            if not self.has_relative_attention_bias:
                position_bias = torch.zeros((1, self.n_heads, seq_length, key_length))
            else:
                position_bias = self.compute_bias(seq_length, key_length)
            if mask is not None:
                position_bias = position_bias + mask[:, :, :, :key_length]
        scores += position_bias
        attn_weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()
        return self.o(attn_output.view(batch_size, -1, self.inner_dim)), position_bias


class T5LayerSelfAttention(nn.Module):
    def __init__(self, d, d_kv, h, is_decoder, has_bias):
        super().__init__()
        self.SelfAttention = T5Attention(d, d_kv, h, is_decoder, has_bias)
        self.layer_norm = T5LayerNorm(d)

    def forward(self, x, mask, position_bias):
        out, position_bias = self.SelfAttention(self.layer_norm(x), mask, position_bias=position_bias)
        return x + out, position_bias


class T5LayerCrossAttention(nn.Module):
    def __init__(self, d, d_kv, h):
        super().__init__()
        self.EncDecAttention = T5Attention(d, d_kv, h, True, False)
        self.layer_norm = T5LayerNorm(d)

    def forward(self, x, kv, mask, position_bias):
        out, position_bias = self.EncDecAttention(self.layer_norm(x), mask, kv, position_bias)
        return x + out, position_bias


class T5DenseActDense(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.wi = nn.Linear(d, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d, bias=False)

    def forward(self, x):
        return self.wo(F.relu(self.wi(x)))


class T5LayerFF(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.DenseReluDense = T5DenseActDense(d, d_ff)
        self.layer_norm = T5LayerNorm(d)

    def forward(self, x):
        return x + self.DenseReluDense(self.layer_norm(x))


class T5Block(nn.Module):
    def __init__(self, d, d_kv, h, d_ff, is_decoder, has_bias):
        super().__init__()
        self.is_decoder = is_decoder
        self.layer = nn.ModuleList([T5LayerSelfAttention(d, d_kv, h, is_decoder, has_bias)])
        if is_decoder:
            self.layer.append(T5LayerCrossAttention(d, d_kv, h))
        self.layer.append(T5LayerFF(d, d_ff))

    def forward(self, x, mask, position_bias, enc=None, enc_mask=None, enc_dec_bias=None):
        x, position_bias = self.layer[0](x, mask, position_bias)
        if self.is_decoder:
            x, enc_dec_bias = self.layer[1](x, enc, enc_mask, enc_dec_bias)
        return self.layer[-1](x), position_bias, enc_dec_bias


class T5Stack(nn.Module):
    def __init__(self, embed_tokens, d, d_kv, h, d_ff, n_layers, is_decoder):
        super().__init__()
        self.embed_tokens, self.is_decoder = embed_tokens, is_decoder
        self.block = nn.ModuleList(
            [T5Block(d, d_kv, h, d_ff, is_decoder, has_bias=i == 0) for i in range(n_layers)])
        self.final_layer_norm = T5LayerNorm(d)

    def forward(self, input_ids, attention_mask, enc=None, enc_attention_mask=None):
        x = self.embed_tokens(input_ids)
        min_dtype = torch.finfo(torch.float32).min
        if self.is_decoder:   # _update_causal_mask without a cache or a decoder padding mask
            seq = input_ids.shape[1]
            mask = torch.full((seq, seq), min_dtype).triu(1)[None, None]
            enc_mask = (1.0 - enc_attention_mask[:, None, None, :].float()) * min_dtype
        else:
            mask = (1.0 - attention_mask[:, None, None, :].float()) * min_dtype
            enc_mask = None
        position_bias = enc_dec_bias = None
        for layer in self.block:
            x, position_bias, enc_dec_bias = layer(x, mask, position_bias, enc, enc_mask, enc_dec_bias)
        return self.final_layer_norm(x)


class T5Model(nn.Module):
    def __init__(self, vocab, d, d_kv, h, d_ff, n_layers):
        super().__init__()
        self.shared = nn.Embedding(vocab, d)
        self.encoder = T5Stack(self.shared, d, d_kv, h, d_ff, n_layers, is_decoder=False)
        self.decoder = T5Stack(self.shared, d, d_kv, h, d_ff, n_layers, is_decoder=True)

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        enc = self.encoder(input_ids, attention_mask)
        return self.decoder(decoder_input_ids, None, enc, attention_mask)


# ------------------------------------------------------------------ reference names -> spec names

RENAME = [
    (r"^shared\.weight$", "shared"),
    (r"^encoder\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.", "enc_bias_embed."),
    (r"^decoder\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.", "dec_bias_embed."),
    (r"^encoder\.final_layer_norm\.", "enc_norm."), (r"^decoder\.final_layer_norm\.", "hidden_norm."),
    (r"^encoder\.block\.", "enc."), (r"^decoder\.block\.", "hidden."),
    (r"\.layer\.0\.layer_norm\.", ".n."), (r"\.layer\.0\.SelfAttention\.", ".h."),
    (r"\.layer\.1\.EncDecAttention\.", ".c."),
    (r"^(hidden\.\d+)\.layer\.1\.layer_norm\.", r"\1.c_norm."),
    (r"\.layer\.\d\.layer_norm\.", ".ff_norm."),
    (r"\.layer\.\d\.DenseReluDense\.wi\.", ".ff_linear1."), (r"\.layer\.\d\.DenseReluDense\.wo\.", ".ff_linear2."),
    (r"\.o\.weight$", ".out_linear.weight"),
]


def spec_name(name: str) -> str:
    return renamed(name, RENAME)


def test_parameter_total_is_t5_smalls():
    total = published_total(SPEC)
    assert total == PARAMETERS
    with torch.device("meta"):   # the reference at full size: t5-small
        ref = T5Model(32128, 512, 64, 8, 2048, 6)
    assert sum(p.numel() for p in ref.parameters()) == total


def test_buckets_reach_every_kind_of_offset():
    """The reference's buckets at the test's lengths: exact, logarithmic and capped ones."""
    rel = torch.arange(140)[None, :] - torch.arange(140)[:, None]
    both = relative_position_bucket(rel, bidirectional=True)
    back = relative_position_bucket(rel, bidirectional=False)
    assert set(both.unique().tolist()) == set(range(32)) - {16}   # 16 would be "offset 0, after"
    assert set(back.unique().tolist()) == set(range(32))


def _block(name: str) -> str:
    text = SPEC.read_text()
    start = text.index(f"block {name}(")
    return text[start:text.index("\nend\n", start) + 5]


def test_spec_buckets_equal_the_references_exactly():
    """The spec's two bucket blocks (torch.min of two tensors written `minimum`), generated
    and run on every offset from -139 to 139: the very buckets of the reference."""
    text = ("dim T, N\nexample T=140, N=140\ninput rel: [T, N] int\n"
            + _block("BidirectionalBuckets") + _block("CausalBuckets")
            + "both: rel -> BidirectionalBuckets\nback: rel -> CausalBuckets\n")
    assert "minimum(" in _block("BidirectionalBuckets") and "minimum(" in _block("CausalBuckets")
    spec = checked(text)
    model, _ = module(spec, "buckets", T=140, N=140)
    rel = torch.arange(140)[None, :] - torch.arange(140)[:, None]
    got = model(rel)
    for name, bidirectional in (("both", True), ("back", False)):
        want = relative_position_bucket(rel, bidirectional=bidirectional)
        assert got[name].dtype == want.dtype == torch.long
        assert (got[name] - want).abs().max().item() == 0


SIZES = [{"V": 50, "D": 16, "H": 2, "Dkv": 4, "F": 24, "L": 1, "B": 2, "Se": 140, "Sd": 9},
         {"V": 40, "D": 12, "H": 3, "Dkv": 5, "F": 20, "L": 2, "B": 2, "Se": 11, "Sd": 150}]


@pytest.mark.parametrize("sizes", SIZES, ids=["1-layer-long-input", "2-layers-long-output"])
def test_generated_module_matches_the_reference(sizes):
    spec = checked(SPEC.read_text(), str(SPEC))
    model, gen = module(spec, "t5", **sizes)
    assert all("persistent=False" in ln for ln in gen.source.splitlines() if "register_buffer(" in ln)
    s = sizes
    ref = T5Model(s["V"], s["D"], s["Dkv"], s["H"], s["F"], s["L"]).eval()
    ours = dict(model.named_parameters())
    theirs = dict(ref.named_parameters())
    assert sorted(spec_name(n) for n in theirs) == sorted(ours)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in theirs.items():
            p.copy_(torch.randn_like(p) * 0.3)
            ours[spec_name(name)].copy_(p)
        ids = torch.randint(0, s["V"], (s["B"], s["Se"]))
        mask = torch.ones(s["B"], s["Se"], dtype=torch.long)
        mask[1, -3:] = 0                                  # the second input is padded
        dec_ids = torch.randint(0, s["V"], (s["B"], s["Sd"]))
        got, want = model(ids, mask, dec_ids), ref(ids, mask, dec_ids)
        assert got.shape == want.shape == (s["B"], s["Sd"], s["D"])
        diff = (got - want).abs().max().item()
        assert diff <= 1e-5, f"max |generated - reference| = {diff}"
        # the padding mask matters: what stands in the padded positions changes nothing
        ids2 = ids.clone()
        ids2[1, -3:] = (ids2[1, -3:] + 1) % s["V"]
        assert torch.allclose(model(ids2, mask, dec_ids), got, rtol=0, atol=1e-6)
        # and the bias table matters: another table gives other outputs
        model.enc_bias_embed.weight.add_(1.0 * torch.arange(32.0)[:, None])
        assert not torch.allclose(model(ids, mask, dec_ids), got, rtol=0, atol=1e-3)


def test_generated_floats_with_large_exponents_are_ruff_formatted(tmp_path):
    """Regression: finfo(float32).max was written 3.4028234663852886e+38, which ruff format
    rewrites; the generated module must already be in ruff's layout, and keep the value."""
    import shutil
    import subprocess

    from shapelang import codegen

    text = ("dim S\nexample S=3\ninput x: [S]\n"
            "big: (x - 1.0) * 3.4028234663852886e38\ntiny: x * 1.5e-30 + 2e20\n")
    spec = checked(text)
    gen = codegen.generate(spec)
    assert "e+" not in gen.source and "3.4028234663852886e38" in gen.source
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    out = tmp_path / "floats.py"
    out.write_text(gen.source)
    done = subprocess.run([ruff, "format", "--isolated", "--check", "--diff", str(out)],
                          check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    model, _ = module(spec, "floats", S=3)
    x = torch.tensor([0.0, 1.0, 2.0])
    got = model(x)
    torch.testing.assert_close(got["big"], (x - 1.0) * 3.4028234663852886e38)
    torch.testing.assert_close(got["tiny"], x * 1.5e-30 + 2e20)
