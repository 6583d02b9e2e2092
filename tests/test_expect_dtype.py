"""`expect NAME: [..] DTYPE`: a spec states the dtype of a tensor as it states its shape,
and the check holds it to the dtype PyTorch gives (type promotion, casts, comparisons)."""
from __future__ import annotations

import pytest

from shapelang import check, render_check
from shapelang.checker import dtypes

HEAD = "dim B, S\nexample B=2, S=3\ninput ids: [B, S] int\ninput pad: [B, S] bool\ninput x: [B, S]\n"

# (binding, what PyTorch computes from ids, pad, x, dtype names that spell PyTorch's answer)
CASES = [
    ("ones([S, S]) -> tril -> bool", lambda t, ids, pad, x: t.ones(3, 3).tril().bool(), ["bool"]),
    ("ids * 0.5", lambda t, ids, pad, x: ids * 0.5, ["float", "float32"]),
    ("ids + 1", lambda t, ids, pad, x: ids + 1, ["int", "long", "int64"]),
    ("ids / 2", lambda t, ids, pad, x: ids / 2, ["float"]),
    ("x -> half", lambda t, ids, pad, x: x.half(), ["half", "float16"]),
    ("pad -> logical_not", lambda t, ids, pad, x: pad.logical_not(), ["bool"]),
    ("x + ids", lambda t, ids, pad, x: x + ids, ["float"]),
]
ALL = ["bool", "int", "float", "half", "bfloat16", "double", "int32"]


@pytest.mark.parametrize("expr, torch_expr, names", CASES, ids=[c[0] for c in CASES])
def test_the_expected_dtype_is_pytorchs(expr, torch_expr, names):
    torch = pytest.importorskip("torch")
    ids, pad, x = torch.randint(0, 5, (2, 3)), torch.rand(2, 3) > 0.5, torch.randn(2, 3)
    want = torch_expr(torch, ids, pad, x).dtype
    spec = check(HEAD + f"y: {expr}\n")
    shape = "[S, S]" if "ones" in expr else "[B, S]"
    for name in names:
        ok = check(HEAD + f"y: {expr}\nexpect y: {shape} {name}\n")
        assert ok.ok and not ok.diagnostics, render_check(ok)
    torch_of = {"bool": torch.bool, "int": torch.int64, "float": torch.float32, "half": torch.float16,
                "bfloat16": torch.bfloat16, "double": torch.float64, "int32": torch.int32}
    assert torch_of[names[0]] == want
    for other in (n for n in ALL if torch_of[n] != want):
        bad = check(HEAD + f"y: {expr}\nexpect y: {shape} {other}\n")
        errors = [d for d in bad.diagnostics if d.severity == "error"]
        assert [d.code for d in errors] == ["E107"], render_check(bad)
        wanted = dtypes.show(dtypes.canonical(other))
        assert errors[0].message.startswith("`y` holds ") and errors[0].message.endswith(f"expects {wanted}")
        assert (errors[0].span.line, errors[0].span.column) == (7, len(f"expect y: {shape} ") + 1)
    assert spec.ok


def test_a_wrong_dtype_points_at_where_the_tensor_is_made():
    spec = check(HEAD + "m: ids -> float\nexpect m: [B, S] int\n")
    text = render_check(spec)
    assert "`m` holds float (float32) values, but the spec expects int (int64)" in text
    assert "`m` is computed here: float (float32) values" in text
    assert "-> to int" in text


def test_an_unknown_dtype_is_named():
    spec = check(HEAD + "expect ids: [B, S] integer\n")
    (d,) = spec.diagnostics
    assert d.code == "E110" and d.message == "unknown dtype `integer`"
    assert (d.span.line, d.span.column) == (6, 20)


def test_shape_and_dtype_are_both_checked():
    spec = check(HEAD + "expect ids: [B, B] float\n")
    assert [d.code for d in spec.diagnostics] == ["E107"]
    assert "[B, B]" in spec.diagnostics[0].message
