"""Reductions and scans (`std`, `prod`, `argmax`, `logsumexp`, `norm`, `any`, `cumsum`, `sort`,
..): for an input of each dtype the checker accepts exactly what PyTorch computes, with
PyTorch's shape and dtype, and the generated module computes what torch computes."""
from __future__ import annotations

import pytest
from op_cases import DTYPES, against_torch, head, run_module, scripted, tensors

from shapelang import check, render_check

torch = pytest.importorskip("torch")
F = torch.nn.functional

CASES = [
    ("r: x -> std -1", lambda x, y, m: x.std(-1)),
    ("r: x -> std 1 keepdim correction=0", lambda x, y, m: x.std(1, keepdim=True, correction=0)),
    ("r: x -> std", lambda x, y, m: x.std()),
    ("r: x -> prod -1", lambda x, y, m: x.prod(-1)),
    ("r: x -> prod 1 dtype=float64", lambda x, y, m: x.prod(1, dtype=torch.float64)),
    ("r: x -> argmax -1", lambda x, y, m: x.argmax(-1)),
    ("r: x -> argmax 1 keepdim", lambda x, y, m: x.argmax(1, keepdim=True)),
    ("r: x -> argmin", lambda x, y, m: x.argmin()),
    ("r: x -> argmin 0 keepdim=true", lambda x, y, m: x.argmin(0, keepdim=True)),
    ("r: x -> logsumexp -1", lambda x, y, m: torch.logsumexp(x, -1)),
    ("r: x -> logsumexp 1 keepdim", lambda x, y, m: torch.logsumexp(x, 1, keepdim=True)),
    ("r: x -> norm -1", lambda x, y, m: torch.linalg.vector_norm(x, dim=-1)),
    ("r: x -> norm 1 p=1 keepdim", lambda x, y, m: torch.linalg.vector_norm(x, 1, dim=1, keepdim=True)),
    ("r: x -> norm p=inf", lambda x, y, m: torch.linalg.vector_norm(x, float("inf"))),
    ("r: x -> any -1", lambda x, y, m: x.any(-1)),
    ("r: x -> all 1 keepdim", lambda x, y, m: x.all(1, keepdim=True)),
    ("r: x -> all", lambda x, y, m: x.all()),
    ("r: x -> cumsum 1", lambda x, y, m: x.cumsum(1)),
    ("r: x -> cumsum -1 dtype=float64", lambda x, y, m: x.cumsum(-1, dtype=torch.float64)),
    ("r: x -> cumprod 0", lambda x, y, m: x.cumprod(0)),
    ("r: x -> cummax 1", lambda x, y, m: x.cummax(1).values),
    ("r: x -> cummin -1", lambda x, y, m: x.cummin(-1).values),
    ("r: x -> logcumsumexp 1", lambda x, y, m: x.logcumsumexp(1)),
    ("r: x -> nansum -1", lambda x, y, m: x.nansum(-1)),
    ("r: x -> nanmean 1 keepdim", lambda x, y, m: x.nanmean(1, keepdim=True)),
    ("r: x -> median -1", lambda x, y, m: x.median(-1).values),
    ("r: x -> median", lambda x, y, m: x.median()),
    ("r: x -> kthvalue 2 -1 keepdim", lambda x, y, m: x.kthvalue(2, -1, keepdim=True).values),
    ("r: x -> kthvalue S 1", lambda x, y, m: x.kthvalue(x.shape[1], 1).values),
    ("v, i: x -> sort -1 descending=true", lambda x, y, m: tuple(x.sort(-1, descending=True))),
    ("v, i: x -> sort 1", lambda x, y, m: tuple(x.sort(1))),
    ("r: x -> argsort 1 descending=true", lambda x, y, m: x.argsort(1, descending=True)),
    ("r: x -> softmin -1", lambda x, y, m: F.softmin(x, -1)),
    ("r: x -> softmin 1 dtype=float64", lambda x, y, m: F.softmin(x, 1, dtype=torch.float64)),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("line, fn", CASES, ids=[c[0] for c in CASES])
def test_shape_dtype_and_refusals_are_pytorchs(line, fn, dtype):
    against_torch(line, fn, dtype)


def test_at_other_sizes_too():
    sizes = {"B": 3, "S": 4, "D": 2, "G": 1}
    for line, fn in CASES:
        against_torch(line, fn, "float", sizes)


@pytest.mark.parametrize("line, needle", [
    ("r: x -> std -1", "`std` needs floating-point values (a dtype such as float32, bfloat16, float16 or float64), but the input [B, S, D] = [2, 5, 6] holds int (int64) values"),
    ("r: x -> nanmean -1", "holds int (int64) values"),
    ("r: x -> logcumsumexp 1", "`logcumsumexp` needs floating-point values"),
])
def test_refusals_name_the_dtype(line, needle):
    spec = check(head("int") + line + "\n")
    [err] = spec.errors()
    assert err.code == "E120" and needle in err.message, render_check(spec)
    assert "to float" in err.help


def test_argmax_of_bool_is_refused_as_pytorch_refuses_it():
    spec = check(head("bool") + "r: x -> argmax -1\n")
    [err] = spec.errors()
    assert err.code == "E120" and "bool" in err.message
    with pytest.raises(RuntimeError):
        torch.ones(3, dtype=torch.bool).argmax()


def test_kthvalue_past_the_axis_is_an_error_with_the_assumption():
    spec = check(head("float") + "r: x -> kthvalue (S + 1) 1\n")
    [err] = spec.errors()
    assert err.code == "E105" and (err.span.line, err.span.column) == (9, 19)
    spec = check(head("float").replace("dim B, S, D, G", "dim B, S, D, G, K") + "r: x -> kthvalue K 1\n")
    [err] = spec.errors()
    assert "assume K <= S" in err.help


def test_keepdim_without_an_axis_is_refused():
    spec = check(head("float") + "r: x -> any keepdim\n")
    [err] = spec.errors()
    assert err.code == "E110" and "needs the axis it keeps" in err.message


def test_a_lost_axis_proposes_keepdim_for_the_new_reductions():
    spec = check(head("float") + "mu: x -> logsumexp -1\nz: x - mu\n")
    [err] = spec.errors()
    assert "write line 9 as `mu: x -> logsumexp -1 keepdim`" in err.help, render_check(spec)


SPEC = head("float") + """\
a: x -> std -1 keepdim correction=0
b: x -> prod 1 dtype=float64
c: x -> argmax -1 keepdim
d: x -> logsumexp 1
e: x -> norm -1 p=1
f: x > 0 -> any -1
g: x -> cumsum 1
h: x -> cummax -1
k: x -> logcumsumexp 1
n: x -> median 1 keepdim
q: x -> kthvalue 2 -1
v, i: x -> sort 1 descending=true
j: x -> argsort -1
s: x -> softmin -1
"""


def _reference(x, y, m):
    v, i = x.sort(1, descending=True)
    return {"a": x.std(-1, keepdim=True, correction=0), "b": x.prod(1, dtype=torch.float64),
            "c": x.argmax(-1, keepdim=True), "d": torch.logsumexp(x, 1),
            "e": torch.linalg.vector_norm(x, 1, dim=-1), "f": (x > 0).any(-1), "g": x.cumsum(1),
            "h": x.cummax(-1).values, "k": x.logcumsumexp(1), "n": x.median(1, keepdim=True).values,
            "q": x.kthvalue(2, -1).values, "v": v, "i": i, "j": x.argsort(-1), "s": F.softmin(x, -1)}


def test_generated_module_computes_what_torch_computes_and_scripts(tmp_path):
    ins = tensors("float")
    _model, gen = run_module(SPEC, "reductions", _reference(**ins), ins)
    assert "x.std(dim=-1, keepdim=True, correction=0)" in gen.source
    assert "torch.linalg.vector_norm(x, ord=1.0, dim=-1)" in gen.source
    got = scripted(gen, tmp_path, "reductions")(*ins.values())
    for name, want in _reference(**ins).items():
        torch.testing.assert_close(got[name], want, msg=name)


@pytest.mark.parametrize("pytorch, shapelang", [
    ("x.argmax(dim=-1)", "x -> argmax -1"),
    ("x.cumsum(-1, dtype=torch.float64)", "x -> cumsum -1 dtype=float64"),
    ("x.std(dim=1, keepdim=True)", "x -> std 1 keepdim"),
    ("torch.logsumexp(x, dim=-1)", "x -> logsumexp -1"),
])
def test_pytorch_spellings_of_the_new_operations_are_answered_from_the_table(pytorch, shapelang):
    spec = check(f"dim B, S\ninput x: [B, S]\ny: {pytorch}\n")
    [err] = spec.errors()
    assert f"write it as `y: {shapelang}`" in err.help, render_check(spec)
