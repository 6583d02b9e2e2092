"""Elementwise operations (activations with keywords, math functions, tests, `masked_fill`
with any value, logical operations, `glu`, `normalize`, `cosine_similarity`, `clamp_min`):
for an input of each dtype the checker accepts exactly what PyTorch computes, with its shape
and dtype; the generated module computes what torch computes and compiles with TorchScript."""
from __future__ import annotations

import pytest
from op_cases import DTYPES, against_torch, head, run_module, scripted, tensors

from shapelang import check, render_check

torch = pytest.importorskip("torch")
F = torch.nn.functional
INF = float("inf")



def _torch_fn(name: str):
    return lambda x, y, m: getattr(torch, name)(x)


CASES = [
    ("r: x -> masked_fill m -inf", lambda x, y, m: x.masked_fill(m, -INF)),
    ("r: x -> masked_fill m 0", lambda x, y, m: x.masked_fill(m, 0)),
    ("r: y -> masked_fill m true", lambda x, y, m: y.masked_fill(m, True)),
    ("r: x -> masked_fill (x > 0) inf", lambda x, y, m: x.masked_fill(x > 0, INF)),
    ("r: x -> leaky_relu negative_slope=0.2", lambda x, y, m: F.leaky_relu(x, 0.2)),
    ("r: x -> elu alpha=0.5", lambda x, y, m: F.elu(x, 0.5)),
    ("r: x -> selu", lambda x, y, m: F.selu(x)),
    ("r: x -> celu", lambda x, y, m: F.celu(x)),
    ("r: x -> mish", lambda x, y, m: F.mish(x)),
    ("r: x -> hardswish", lambda x, y, m: F.hardswish(x)),
    ("r: x -> hardsigmoid", lambda x, y, m: F.hardsigmoid(x)),
    ("r: x -> relu6", lambda x, y, m: F.relu6(x)),
    ("r: x -> logsigmoid", lambda x, y, m: F.logsigmoid(x)),
    ("r: x -> glu", lambda x, y, m: F.glu(x)),
    ("r: x -> glu 1", lambda x, y, m: F.glu(x.narrow(1, 0, 2), 1)),
    *[(f"r: x -> {n}", _torch_fn(n))
      for n in ("erf", "sign", "reciprocal", "log1p", "expm1", "log2", "trunc", "round", "isnan", "isinf",
                "isfinite", "nan_to_num")],
    ("r: x -> round decimals=2", lambda x, y, m: torch.round(x, decimals=2)),
    ("r: x -> nan_to_num nan=0.5 posinf=1e4 neginf=-1e4",
     lambda x, y, m: torch.nan_to_num(x, 0.5, 1e4, -1e4)),
    ("r: x -> clamp_min 0.5", lambda x, y, m: x.clamp_min(0.5)),
    ("r: x -> clamp_max 1", lambda x, y, m: x.clamp_max(1)),
    ("r: x -> logical_and y", lambda x, y, m: torch.logical_and(x, y)),
    ("r: x -> logical_or m", lambda x, y, m: torch.logical_or(x, m)),
    ("r: m -> logical_xor x", lambda x, y, m: torch.logical_xor(m, x)),
    ("r: x -> normalize -1", lambda x, y, m: F.normalize(x, dim=-1)),
    ("r: x -> normalize", lambda x, y, m: F.normalize(x)),
    ("r: x -> normalize 1 p=1 eps=1e-6", lambda x, y, m: F.normalize(x, p=1, dim=1, eps=1e-6)),
    ("r: x -> cosine_similarity y -1", lambda x, y, m: F.cosine_similarity(x, y, -1)),
    ("r: x -> cosine_similarity y", lambda x, y, m: F.cosine_similarity(x, y)),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("line, fn", CASES, ids=[c[0] for c in CASES])
def test_shape_dtype_and_refusals_are_pytorchs(line, fn, dtype):
    against_torch(line.replace("glu 1", "narrow 1 0 2 -> glu 1"), fn, dtype)


def test_glu_of_an_odd_axis_says_which_assumption_makes_it_even():
    text = head("float").replace("assume D % 2 == 0\n", "") + "r: x -> glu -1\n"
    spec = check(text)
    [err] = spec.errors()
    assert err.code == "E104" and "`glu` halves dim 2 (D)" in err.message, render_check(spec)
    assert "assume D % 2 == 0" in err.help
    spec = check(head("float") + "r: x -> glu 1\n")      # S = 5 at the example, odd
    assert [e.code for e in spec.errors()] == ["E104"]
    with pytest.raises(RuntimeError):
        F.glu(torch.ones(2, 5, 6), 1)


def test_masked_fill_refuses_what_pytorch_refuses():
    spec = check(head("float") + "r: x -> masked_fill (m -> to int) 0\n")
    [err] = spec.errors()
    assert err.code == "E120" and "only a bool mask" in err.message
    spec = check(head("int") + "r: x -> masked_fill m -inf\n")
    [err] = spec.errors()
    assert err.code == "E120" and "int (int64) values cannot hold" in err.message, render_check(spec)
    spec = check(head("float") + "input z: [B, 4, 1] bool\nr: x -> masked_fill z 0\n")
    assert [e.code for e in spec.errors()] == ["E102"]


def test_masked_fill_broadcasts_as_out_of_place_torch_does():
    text = head("float") + "input c: [S, S] bool\nr: y -> masked_fill m 0.5\n"
    spec = check(text)
    assert spec.ok and spec.bindings[-1].types[0].shape == tuple(spec.prover.user[n] for n in "BSD")


SPEC = head("float") + """\
a: x -> masked_fill m -inf
b: x -> leaky_relu negative_slope=0.2
c: x -> elu alpha=0.5
d: x -> mish -> hardswish -> relu6
e: x -> glu -1
f: x -> erf
g: x -> log1p -> isnan
h: x -> round decimals=1
k: x -> clamp_min 0.1
n: x > 0 -> logical_xor m
p: x -> normalize -1 eps=1e-6
q: x -> cosine_similarity y -1
s: x -> masked_fill m inf -> nan_to_num posinf=9.0
"""


def _reference(x, y, m):
    return {"a": x.masked_fill(m, -INF), "b": F.leaky_relu(x, 0.2), "c": F.elu(x, 0.5),
            "d": F.relu6(F.hardswish(F.mish(x))), "e": F.glu(x, -1), "f": torch.erf(x),
            "g": torch.isnan(torch.log1p(x)), "h": torch.round(x, decimals=1), "k": x.clamp_min(0.1),
            "n": torch.logical_xor(x > 0, m), "p": F.normalize(x, dim=-1, eps=1e-6),
            "q": F.cosine_similarity(x, y, -1), "s": torch.nan_to_num(x.masked_fill(m, INF), posinf=9.0)}


def test_generated_module_computes_what_torch_computes_and_scripts(tmp_path):
    ins = tensors("float")
    _model, gen = run_module(SPEC, "pointwise", _reference(**ins), ins)
    assert 'x.masked_fill(m, float("-inf"))' in gen.source
    assert "F.leaky_relu(x, negative_slope=0.2)" in gen.source
    got = scripted(gen, tmp_path, "pointwise")(*ins.values())
    for name, want in _reference(**ins).items():
        torch.testing.assert_close(got[name], want, equal_nan=True, msg=name)


def test_the_pytorch_spelling_of_masked_fill_with_a_value_is_answered():
    spec = check("dim B, S\ninput x: [B, S]\ninput m: [B, S] bool\ny: x.masked_fill(m, 0.0)\n")
    [err] = spec.errors()
    assert "write it as `y: x -> masked_fill m 0.0`" in err.help, render_check(spec)
