"""The prover on its own: proved, refuted (with a real counterexample) and unknown."""
import sympy as sp

from shapelang.checker.prover import Prover


def prover(*names, example=None):
    p = Prover()
    syms = [p.declare(n) for n in names]
    if example:
        p.example = example
    return p, syms


def breaks(cex, fn):
    """The counterexample really violates the condition."""
    return fn(**cex)


def test_polynomial_identity_is_proved():
    p, (B, S, D) = prover("B", "S", "D")
    assert p.equal(B * S * D, D * (S * B)).status == "proved"
    assert p.equal((B + S) ** 2, B**2 + 2 * B * S + S**2).ok


def test_different_sizes_are_refuted_with_a_counterexample():
    p, (D, E) = prover("D", "E")
    v = p.equal(D, E)
    assert v.status == "refuted"
    assert v.counterexample["D"] != v.counterexample["E"]


def test_divisibility_assumption_makes_quotient_whole():
    p, (D, H) = prover("D", "H")
    assert p.whole(D / H).status == "refuted"
    p.assume(sp.Mod(D, H), "==", sp.Integer(0), "assume D % H == 0")
    assert p.whole(D / H).ok
    assert p.whole(3 * D / H).ok
    assert p.equal(H * (D / H), D).ok


def test_refuted_whole_counterexample_breaks_it():
    p, (D, H) = prover("D", "H", example={"D": 512, "H": 8})
    v = p.whole(D / H)
    assert v.status == "refuted"
    assert v.counterexample["D"] % v.counterexample["H"] != 0


def test_chained_divisibility():
    p, (D, H, G) = prover("D", "H", "G")
    p.assume(sp.Mod(D, H), "==", sp.Integer(0), "")
    p.assume(sp.Mod(H, G), "==", sp.Integer(0), "")
    assert p.whole(D / G).ok
    assert p.whole(H / G).ok
    assert not p.whole(G / H).ok


def test_derived_dim_definition_is_used():
    p, (H, Dk, D) = prover("H", "Dk", "D")
    p.define(D, H * Dk)
    assert p.whole(D / H).ok
    assert p.equal(D / H, Dk).ok


def test_equation_assumption_is_used_both_ways():
    p, (H, Dv, D) = prover("H", "Dv", "D")
    p.assume(H * Dv, "==", D, "assume H*Dv == D")
    assert p.equal(H * Dv, D).ok


def test_bounds_from_assumptions():
    p, (S, C) = prover("S", "C")
    assert p.leq(S, C).status == "refuted"
    p.assume(S, "<=", C, "assume S <= C")
    assert p.leq(S, C).ok
    assert p.leq(S - 1, C).ok
    v = p.leq(S + 1, C)
    assert v.status == "refuted" and v.counterexample["S"] + 1 > v.counterexample["C"]


def test_positivity():
    p, (S, C) = prover("S", "C")
    assert p.positive(S * C + 1).ok
    v = p.positive(S - 1)
    assert v.status == "refuted" and v.counterexample == {"S": 1}
    p.assume(S, "<", C, "")
    assert p.positive(C - S).ok


def test_unknown_when_true_but_not_provable():
    # (D*D) % H == 0 does not give D % H == 0 in general, but with it as the only
    # constraint the search finds nothing: the verdict must be unknown, not proved
    p, (D, H) = prover("D", "H")
    p.assume(sp.Mod(D * D, H), "==", sp.Integer(0), "")
    p.assume(H, "==", sp.Integer(4), "")
    v = p.whole(D * D / H)
    assert v.ok or v.status == "unknown"
    w = p.whole(D / H)
    assert w.status == "refuted" and (w.counterexample["D"] ** 2) % 4 == 0


def test_example_values_guide_the_counterexample():
    p, (D, H) = prover("D", "H", example={"D": 512, "H": 8})
    v = p.whole(D / H)
    assert v.counterexample["D"] == 512  # the learner's own D, with an H that breaks it
