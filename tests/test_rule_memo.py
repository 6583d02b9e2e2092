"""A shape rule is applied once per operation and input type in a check (checker/rulememo.py):
what a learner sees is exactly what applying every rule anew gives, on every kind of spec and on
the cases where a rule's result must not be reused (a warning at each place, a tensor argument
looked up by name, a data-dependent size, an einsum whose layout is not modelled), and a spec
that repeats its layers applies no rule again for the layers after the first."""
from __future__ import annotations

import json
import re
from unittest import mock

import pytest
from tiers import LIBRARY, examples, sample

from bench.specgen import FORMS, gpt_spec, llama_spec
from shapelang.api import render_check, to_json
from shapelang.checker import arith, ops, rulememo
from shapelang.checker.checker import check_text

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note, settings
from hypothesis import strategies as st


def _seen(spec) -> tuple[str, str]:
    """What a user sees of a check: the printed diagnostics and the JSON of the trace."""
    return render_check(spec), json.dumps(to_json(spec, trace=True), sort_keys=True, default=str)


def anew(fn):
    """fn(), its checks applying every rule again (nothing kept)."""
    with mock.patch.object(rulememo.RuleMemo, "result", lambda self, c, key, compute: compute()):
        return fn()


@pytest.mark.parametrize("path", sample(LIBRARY, every=16))
def test_every_spec_checks_as_with_every_rule_applied_anew(path):
    text = path.read_text(encoding="utf-8")
    assert _seen(check_text(text, str(path))) == anew(lambda: _seen(check_text(text, str(path))))


# the same operation on the same type twice, where the second must not take the first's result
CASES = {
    "a warning at each place": """\
dim B, C, L
assume L >= 3
input x: [B, C, L]
a: x -> conv1d C 3 stride=2
b: x -> conv1d C 3 stride=2
""",
    "a tensor argument looked up by name": """\
dim B, S, V, D
input ids: [B, S] int
param T: [V, D]
param U: [V, D] bfloat16
block Emb(i: [B, S] int, table: [V, D]):
  return i -> embed table
end
a: ids -> Emb(T)
b: ids -> Emb(U)
""",
    "a word that a tensor is named after later": """\
dim B, S
input s: [B, S, S]
param W: [S, S]
a: s -> mask causal
causal: W > 0
b: s -> mask causal
""",
    "data-dependent sizes, a new one each time": """\
dim B, C
input x: [B, C]
m: x -> sum 1 -> nonzero
n: x -> sum 1 -> nonzero
both: m + n
""",
    "an einsum whose layout is not modelled, twice": """\
dim B, I
input x: [B, I, I]
a: x -> einsum "bii->bi"
b: x -> einsum "bii->bi"
s: a + b -> view [B * I]
""",
    "an error at each place": """\
dim B, D, H
input x: [B, D]
a: x -> view [B, H, D]
b: x -> view [B, H, D]
""",
    "the same step inside a block and outside it": """\
dim B, S, D
input x: [B, S, D]
block Mlp(y: [B, S, D], dim F)
  return y -> linear F -> gelu -> linear D
end
a: x -> linear 4*D -> gelu -> linear D
b: x -> Mlp(F=4*D)
c: x -> Mlp(F=2*D)
""",
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_result_is_not_reused_where_it_must_not_be(name):
    text = CASES[name]
    assert _seen(check_text(text)) == anew(lambda: _seen(check_text(text)))


def test_each_rounding_warning_is_reported_where_it_is():
    spec = check_text(CASES["a warning at each place"])
    assert [d.span.line for d in spec.diagnostics if d.code == "W202"] == [4, 5]


def test_two_einsums_of_unknown_layout_get_strides_of_their_own():
    spec = check_text(CASES["an einsum whose layout is not modelled, twice"])
    a, b = (b.types[0].strides for b in spec.bindings if b.names[0] in ("a", "b"))
    assert not set(a) & set(b)


def test_the_same_step_on_another_tensor_of_the_same_name_takes_its_dtype():
    """`embed table` in a block called with a float table, then a bfloat16 one."""
    spec = check_text(CASES["a tensor argument looked up by name"])
    assert [b.types[0].dtype for b in spec.bindings] == ["float", "bfloat16"]


def test_mask_causal_is_the_word_until_a_tensor_is_named_causal():
    spec = check_text(CASES["a word that a tensor is named after later"])
    assert [st.detail["kind"] for b in spec.bindings for st in b.steps if st.op == "mask"] == \
        ["causal", "tensor"]


def test_two_nonzero_give_two_sizes():
    spec = check_text(CASES["data-dependent sizes, a new one each time"])
    m, n = (b.types[0].shape[0] for b in spec.bindings if b.names[0] in ("m", "n"))
    assert m != n
    assert any(d.code == "E102" for d in spec.diagnostics)   # m + n: the sizes may differ


def _rules_applied(text: str) -> int:
    """How many shape rules a check of `text` applies (not answered from what it keeps)."""
    with mock.patch.object(ops, "apply", wraps=ops.apply) as applied:
        check_text(text)
    return applied.call_count


def test_layers_that_repeat_the_first_apply_no_rule_again():
    """An unrolled GPT of 8 layers against one of 4: the same operations on the same types,
    4 layers more; with every rule applied anew, each layer's rules again."""
    more = _rules_applied(gpt_spec(8, "unrolled")) - _rules_applied(gpt_spec(4, "unrolled"))
    assert more == 0
    more_anew = anew(lambda: _rules_applied(gpt_spec(8, "unrolled")) - _rules_applied(gpt_spec(4, "unrolled")))
    assert more_anew >= 4 * 15


@pytest.mark.parametrize("form", FORMS)
def test_a_model_written_in_another_style_checks_as_with_every_rule_applied_anew(form):
    """The Llama-like model (bench/specgen.py: rotary halves negated and concatenated, grouped
    key/value heads repeated, one operation per statement in places), clean in both forms."""
    text = llama_spec(2, form)
    seen = _seen(check_text(text))
    assert seen == anew(lambda: _seen(check_text(text)))
    assert seen[0].startswith("<input>: ok")


@pytest.mark.parametrize("form", FORMS)
def test_the_gpt_in_another_layout_is_the_same_model_and_checks_as_with_every_rule_applied_anew(form):
    """bench/specgen.py's GPT written another way (reshape and permute, one split, K permuted
    straight to [B, H, Dh, S], one statement per step of the scores): clean, with the same
    parameters and FLOPs as the usual layout, and the same findings with every rule anew."""
    text = gpt_spec(2, form, "spelled")
    spelled, usual = check_text(text), check_text(gpt_spec(2, form))
    assert spelled.ok and usual.ok
    assert spelled.total_params == usual.total_params and spelled.total_flops == usual.total_flops
    assert _seen(spelled) == anew(lambda: _seen(check_text(text)))


def _layouts_made(text: str) -> int:
    """How many elementwise layouts (`-x`, `x * 2`) a check of `text` works out."""
    with mock.patch.object(arith, "dense_like", wraps=arith.dense_like) as made:
        check_text(text)
    return made.call_count


def test_layers_written_in_another_style_apply_no_rule_again():
    """The Llama-like model unrolled, 8 layers against 4: no shape rule and no layout is worked
    out again for the layers after the first; with every rule applied anew, each layer's again."""
    for count in (_rules_applied, _layouts_made):
        assert count(llama_spec(8, "unrolled")) - count(llama_spec(4, "unrolled")) == 0
    assert anew(lambda: _layouts_made(llama_spec(8, "unrolled")) - _layouts_made(llama_spec(4, "unrolled"))) >= 4 * 2


_SHORT = [p for p in LIBRARY if len(p.read_text(encoding="utf-8").splitlines()) <= 60]
_BINDING = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*:\s*(?!\s*\[)(.*->.*)$")


@settings(max_examples=examples(100), deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_statements_written_again_check_as_with_every_rule_applied_anew(data):
    """A library spec with some of its top-level pipelines written again under new names, further
    down (the same operations on the same types, after other statements, where an error, a
    warning or a data-dependent size must come again)."""
    path = data.draw(st.sampled_from(_SHORT), label="spec")
    lines = path.read_text(encoding="utf-8").splitlines()
    pipelines = [i for i, ln in enumerate(lines) if _BINDING.match(ln)]
    if not pipelines:
        return
    for k in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.sampled_from(pipelines))
        names, rest = _BINDING.match(lines[i]).groups()
        copy = ", ".join(f"{n.strip()}_again{k}" for n in names.split(",")) + ": " + rest
        at = data.draw(st.integers(i + 1, len(lines)))
        lines.insert(at, copy)
        pipelines = [j + (j >= at) for j in pipelines]
    text = "\n".join(lines) + "\n"
    note(text)
    assert _seen(check_text(text, str(path))) == anew(lambda: _seen(check_text(text, str(path))))
