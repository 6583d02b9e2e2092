"""`softcap C`: Gemma-2's logit soft-capping, tanh(x / C) * C. The generated module gives what
PyTorch computes from the formula, and the checker's shape and dtype are those PyTorch gives."""
from __future__ import annotations

import pytest
import tiers
from hypothesis import given, settings
from hypothesis import strategies as st

from shapelang import check, render_check
from shapelang.codegen import runner
from shapelang.codegen.generator import generate

torch = pytest.importorskip("torch")

DTYPES = {"float": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "int": torch.int64, "bool": torch.bool}


def spec_text(cap: str, dtype: str = "float") -> str:
    return (f"dim B, S, V\nexample B=2, S=3, V=7\ninput x: [B, S, V] {dtype}\n"
            f"logits: x -> softcap {cap}\n")


def generated_output(text: str, x, sizes: dict):
    spec = check(text)
    assert spec.ok, render_check(spec)
    _mod, model = runner.build(generate(spec), runner.resolve_sizes(spec, sizes))
    with torch.no_grad():
        out = model(x)
    return out if not isinstance(out, dict) else next(iter(out.values()))


@settings(max_examples=tiers.examples(60), deadline=None)
@given(b=st.integers(1, 3), s=st.integers(1, 5), v=st.integers(1, 9),
       cap=st.sampled_from(["30.0", "50.0", "0.5", "V", "2 * S"]), seed=st.integers(0, 2**16))
def test_the_module_computes_tanh_of_x_over_c_times_c(b, s, v, cap, seed):
    sizes = {"B": b, "S": s, "V": v}
    x = torch.randn(b, s, v, generator=torch.Generator().manual_seed(seed)) * 100
    c = {"V": v, "2 * S": 2 * s}.get(cap) or float(cap)
    got = generated_output(spec_text(cap), x, sizes)
    want = torch.tanh(x / c) * c
    assert got.shape == want.shape == (b, s, v)
    torch.testing.assert_close(got, want)
    assert bool((got.abs() <= c).all())     # capped


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_shape_and_dtype_are_pytorchs(dtype):
    spec = check(spec_text("30.0", dtype))
    assert spec.ok, render_check(spec)
    (t,) = spec.bindings[-1].types
    x = torch.ones(2, 3, 7).to(DTYPES[dtype])
    want = torch.tanh(x / 30.0) * 30.0
    assert [spec.example_value(d) for d in t.shape] == list(want.shape)
    assert DTYPES[t.dtype] == want.dtype


@pytest.mark.parametrize("cap, code", [("0", "E110"), ("-1.5", "E110"), ("(V - S)", "E109")])
def test_a_cap_that_may_not_be_positive_is_refused_where_it_is_written(cap, code):
    text = spec_text(cap)
    line = text.splitlines()[3]
    column = line.index(cap.lstrip("(")) + 1
    spec = check(text)
    errors = spec.errors()
    assert [e.code for e in errors] == [code], render_check(spec)
    assert (errors[0].span.line, errors[0].span.column) == (4, column)
