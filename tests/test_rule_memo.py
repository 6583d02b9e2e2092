"""A shape rule is applied once per operation and input type in a check (checker/rulememo.py):
what a learner sees is exactly what applying every rule anew gives, on every kind of spec and on
the cases where a rule's result must not be reused (a warning at each place, a tensor argument
looked up by name, a data-dependent size, an einsum whose layout is not modelled), and a spec
that repeats its layers does the work of one layer per repetition no more."""
from __future__ import annotations

import json

import pytest
from tiers import LIBRARY, sample
from work import calls

from bench.specgen import gpt_spec
from shapelang.api import render_check, to_json
from shapelang.checker import rulememo
from shapelang.checker.checker import check_text


def _seen(spec) -> tuple[str, str]:
    """What a user sees of a check: the printed diagnostics and the JSON of the trace."""
    return render_check(spec), json.dumps(to_json(spec, trace=True), sort_keys=True, default=str)


@pytest.fixture
def anew(monkeypatch):
    """Checks made inside `anew()` apply every rule again (nothing kept)."""
    def run(fn):
        with monkeypatch.context() as m:
            m.setattr(rulememo.RuleMemo, "result", lambda self, c, key, compute: compute())
            return fn()
    return run


@pytest.mark.parametrize("path", sample(LIBRARY, every=16))
def test_every_spec_checks_as_with_every_rule_applied_anew(path, anew):
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
a: ids -> embed T
T2: U -> relu
b: ids -> embed U
""",
    "data-dependent sizes, a new one each time": """\
dim B, C
input x: [B, C]
m: x -> sum 1 -> nonzero
n: x -> sum 1 -> nonzero
both: m + n
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
def test_a_result_is_not_reused_where_it_must_not_be(name, anew):
    text = CASES[name]
    assert _seen(check_text(text)) == anew(lambda: _seen(check_text(text)))


def test_each_rounding_warning_is_reported_where_it_is():
    spec = check_text(CASES["a warning at each place"])
    assert [d.span.line for d in spec.diagnostics if d.code == "W202"] == [4, 5]


def test_two_nonzero_give_two_sizes():
    spec = check_text(CASES["data-dependent sizes, a new one each time"])
    m, n = (b.types[0].shape[0] for b in spec.bindings if b.names[0] in ("m", "n"))
    assert m != n
    assert any(d.code == "E102" for d in spec.diagnostics)   # m + n: the sizes may differ


def test_repeated_layers_cost_a_fraction_of_their_first_check(anew):
    """4 more identical layers (each its own statements, as an unrolled GPT writes them):
    what they add to a check, counted in calls, with the rules' results kept and without."""
    from sympy.core.cache import clear_cache

    def added():
        counts, seen = [], []
        for layers in (4, 8):
            text = gpt_spec(layers, "unrolled")

            def check(text=text):
                clear_cache()   # each check as in a new process
                return check_text(text)
            check()
            spec, n = calls(check)
            counts.append(n)
            seen.append(_seen(spec))
        return counts[1] - counts[0], seen
    kept, seen = added()
    anew_cost, anew_seen = anew(added)
    assert seen == anew_seen
    assert kept < 0.6 * anew_cost, f"{kept:,} calls for 4 more layers against {anew_cost:,} with every rule anew"
