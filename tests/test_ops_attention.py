"""`attention` (F.scaled_dot_product_attention as one operation): the shapes the checker
proves are the ones PyTorch computes, at several sizes; the errors it reports are ones
PyTorch raises; its provenance findings are those of the written-out form; the generated
code computes what the written-out form and a hand-written reference compute."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from torch_shapes import checked, codes, module, shape_at

from shapelang import check

torch = pytest.importorskip("torch")
F = torch.nn.functional
ROOT = Path(__file__).resolve().parent.parent

HEAD = "dim B, H, G, L, S, E, Ev\nassume H % G == 0\n"
SIZES = [{"B": 2, "H": 4, "G": 2, "L": 3, "S": 5, "E": 8, "Ev": 6}, {"B": 1, "H": 6, "G": 3, "L": 7, "S": 2, "E": 4, "Ev": 4},
         {"B": 3, "H": 2, "G": 1, "L": 1, "S": 1, "E": 2, "Ev": 5}]

# (inputs, operation, PyTorch call given the tensors)
CASES = {
    "plain": ("q: [B, H, L, E]\nk: [B, H, S, E]\nv: [B, H, S, Ev]", "attention k v",
              lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v)),
    "broadcast": ("q: [H, L, E]\nk: [B, 1, S, E]\nv: [1, H, S, Ev]", "attention k v scale=0.5",
                  lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, scale=0.5)),
    "gqa": ("q: [B, H, L, E]\nk: [B, G, S, E]\nv: [B, G, S, Ev]", "attention k v enable_gqa=true",
            lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
    "mask": ("q: [B, H, L, E]\nk: [B, H, S, E]\nv: [B, H, S, Ev]\nm: [L, S] bool", "attention k v m",
             lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    "padding": ("q: [B, H, L, E]\nk: [B, H, S, E]\nv: [B, H, S, Ev]\nm: [B, 1, 1, S] bool",
                "attention k v attn_mask=m",
                lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    "matrices": ("q: [L, E]\nk: [S, E]\nv: [S, Ev]", "attention k v is_causal=true dropout_p=0.2",
                 lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
}


def _spec(inputs: str, op: str, sizes: dict) -> str:
    decls = "".join(f"input {line}\n" for line in inputs.split("\n"))
    example = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return HEAD + f"example {example}\n" + decls + f"o: q -> {op}\n"


def _tensor(spec, name, sizes):
    decl = next(d for d in spec.decls if d.name == name)
    env = spec.prover.user_env(sizes)
    shape = [int(spec.prover.value(d, env)) for d in decl.type.shape]
    if decl.type.dtype == "bool":
        t = torch.rand(shape) > 0.3
        if t.dim():
            t[..., 0] = True   # every query sees a key
        return t
    if decl.type.dtype == "int":
        return torch.randint(0, 2, shape)
    return torch.randn(shape)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(map(str, s.values())))
def test_shapes_are_pytorchs(case, sizes):
    inputs, op, call = CASES[case]
    spec = checked(_spec(inputs, op, sizes))
    names = [line.split(":")[0] for line in inputs.split("\n")]
    tensors = [_tensor(spec, n, sizes) for n in names] + [None] * (4 - len(names))
    assert shape_at(spec, "o", sizes) == tuple(call(*tensors).shape)


ERRORS = {
    # what is wrong: (inputs, operation, code, the sizes at which PyTorch raises)
    "key width": ("q: [B, H, L, E]\nk: [B, H, S, Ev]\nv: [B, H, S, Ev]", "attention k v", "E101",
                  {"B": 1, "H": 2, "G": 1, "L": 3, "S": 4, "E": 8, "Ev": 6}),
    "value length": ("q: [B, H, L, E]\nk: [B, H, S, E]\nv: [B, H, L, Ev]", "attention k v", "E101",
                     {"B": 1, "H": 2, "G": 1, "L": 3, "S": 4, "E": 8, "Ev": 6}),
    "heads without gqa": ("q: [B, H, L, E]\nk: [B, G, S, E]\nv: [B, G, S, E]", "attention k v",
                          "E102", {"B": 1, "H": 4, "G": 2, "L": 3, "S": 4, "E": 8, "Ev": 6}),
    "mask grows": ("q: [B, H, L, E]\nk: [B, H, S, E]\nv: [B, H, S, E]\nm: [G, B, H, L, S] bool",
                   "attention k v m", "E102", {"B": 1, "H": 2, "G": 2, "L": 3, "S": 4, "E": 8, "Ev": 6}),
    "int mask": ("q: [B, H, L, E]\nk: [B, H, S, E]\nv: [B, H, S, E]\nm: [L, S] int",
                 "attention k v m", "E120", {"B": 1, "H": 2, "G": 1, "L": 3, "S": 4, "E": 8, "Ev": 6}),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_are_ones_pytorch_raises(case):
    inputs, op, code, sizes = ERRORS[case]
    text = _spec(inputs, op, sizes)
    assert codes(text) == [code]
    spec = check(text.replace(f"o: q -> {op}\n", ""))   # the inputs alone
    names = [line.split(":")[0] for line in inputs.split("\n")]
    tensors = [_tensor(spec, n, sizes) for n in names]
    mask = {"attn_mask": tensors[3]} if len(tensors) == 4 else {}
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(*tensors[:3], **mask)


def test_grouped_heads_need_an_assumption_and_it_is_suggested():
    text = ("dim B, H, G, S, E\nexample B=1, H=4, G=2, S=3, E=8\ninput q: [B, H, S, E]\n"
            "input k: [B, G, S, E]\nv: q -> attention k k enable_gqa=true\n")
    spec = check(text)
    [d] = spec.diagnostics
    assert d.code == "E104" and "assume H % G == 0" in d.help
    # a counterexample PyTorch refuses too
    cex = d.counterexample
    assert cex and cex["H"] % cex["G"] != 0
    q, k = torch.randn(1, cex["H"], 3, 8), torch.randn(1, cex["G"], 3, 8)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    assert codes(text.replace("example", "assume H % G == 0\nexample")) == []


@pytest.mark.parametrize("op, message", [
    ("attention k k m is_causal=true", "either a mask or `is_causal=true`"),
    ("attention k k causal=true", "no keyword `causal=`"),
    ("attention k k dropout_p=1.5", "probability"),
    ("attention k", "takes 2 to 3 arguments"),
    ("attention k k attn_mask=m m", "given twice"),
])
def test_wrong_arguments_are_refused(op, message):
    text = ("dim B, S, E\nexample B=1, S=3, E=8\ninput q: [B, S, E]\ninput k: [B, S, E]\n"
            f"input m: [S, S] bool\no: q -> {op}\n")
    [d] = check(text).diagnostics
    assert d.code == "E110" and message in d.message


# ------------------------------------------------------------------ provenance

CROSS = """\
dim B, S, T, D
example B=1, S=4, T=6, D=8
input x: [B, S, D]
input y: [B, T, D]
q: y -> linear D
k: x -> linear D
v: x -> linear D
"""


@pytest.mark.parametrize("fused, written", [
    ("o: q -> attention k v is_causal=true",
     "o: q @ (k -> transpose -2 -1) -> mask causal -> softmax -1 -> matmul_v"),
    ("o: q -> attention k v scale=1/sqrt(S)",
     "o: q @ (k -> transpose -2 -1) -> scale 1/sqrt(S) -> softmax -1 -> matmul_v"),
])
def test_provenance_findings_are_those_of_the_written_out_form(fused, written):
    written = written.replace(" -> matmul_v", "\nw: o @ v")
    got = [d.code for d in check(CROSS + fused).diagnostics]
    want = [d.code for d in check(CROSS + written).diagnostics]
    assert got == want and got and got[0] in ("W305", "W306")


def test_causal_on_a_longer_key_axis_warns_like_mask_causal():
    text = ("dim B, P, S, D\nexample B=1, P=2, S=3, D=8\ninput x: [B, S, D]\ninput past: [B, P, D]\n"
            "q: x -> linear D\nkv: concat(1, past, x)\n")
    [fused] = check(text + "o: q -> attention kv kv is_causal=true\n").diagnostics
    [written] = check(text + "o: q @ (kv -> transpose -2 -1) -> mask causal\n").diagnostics
    assert fused.code == written.code == "W305"
    assert "`is_causal=true`" in fused.message and "cached positions" in fused.message


def test_self_attention_with_is_causal_is_silent():
    assert codes(CROSS + "o: k -> attention k v is_causal=true scale=1/sqrt(D)\n") == []


# ------------------------------------------------------------------ generated code

def _randomize(model):
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model


@pytest.mark.parametrize("sizes", [{"B": 2, "S": 5, "D": 16, "H": 4, "G": 2}, {"B": 1, "S": 3, "D": 24, "H": 6, "G": 3},
                                   {"B": 3, "S": 1, "D": 8, "H": 2, "G": 2}])
def test_fused_and_written_out_forms_give_the_same_result(sizes):
    spec = checked((ROOT / "specs" / "fused_attention.shape").read_text(), "fused_attention.shape")
    model, _gen = module(spec, "fused_attention", **sizes)
    _randomize(model)
    x = torch.randn(sizes["B"], sizes["S"], sizes["D"])
    out = model(x)
    assert out["fused"].shape == (sizes["B"], sizes["S"], sizes["D"])
    torch.testing.assert_close(out["fused"], out["written"], atol=1e-5, rtol=1e-5)


MASKED = """\
dim B, H, S, Dh
example B=2, H=3, S=5, Dh=4
input q: [B, H, S, Dh]
input k: [B, H, S, Dh]
input v: [B, H, S, Dh]
input keep: [B, 1, 1, S] bool
o: q -> attention k v attn_mask=keep scale=0.3 dropout_p=0.5
"""


def test_generated_code_matches_a_hand_written_reference():
    spec = checked(MASKED)
    model, gen = module(spec, "masked_attention")
    flat = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", " ".join(gen.source.split())))  # ruff may wrap it
    assert "F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=0.5 if self.training " \
           "else 0.0, scale=0.3)" in flat
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    keep = torch.rand(2, 1, 1, 5) > 0.4
    keep[..., 0] = True
    scores = (q @ k.transpose(-2, -1) * 0.3).masked_fill(~keep, float("-inf"))
    want = scores.softmax(-1) @ v
    torch.testing.assert_close(model(q, k, v, keep), want, atol=1e-5, rtol=1e-5)
    model.train()   # dropout only while training
    assert not torch.allclose(model(q, k, v, keep), want)


def test_flops_and_parameters_are_those_of_the_written_out_form():
    spec = checked((ROOT / "specs" / "fused_attention.shape").read_text())

    def flops(name):
        b = next(b for b in spec.bindings if b.names == (name,))
        return sum(s.flops for s in b.steps)

    scores = next(b for b in spec.bindings if b.names == ("scores",))
    written = sum(s.flops for s in scores.steps) + flops("written")
    assert spec.prover.same(flops("fused"), written)
