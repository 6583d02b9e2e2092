"""The prover on its own: proved, refuted (with a real counterexample) and unknown."""
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from shapelang.checker import congruence
from shapelang.checker.dims import _CMP
from shapelang.checker.prover import Prover, Relation


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


def test_asking_only_whether_it_is_proved_answers_as_the_decision_and_keeps_nothing():
    """A rule that only asks whether a condition is proved (arange's rounding, the sizes a
    reshape may find at 1) skips the search; the answer is the decision's, and a later full
    decision still finds its counterexample."""
    p, (D, H, S) = prover("D", "H", "S", example={"D": 512, "H": 8, "S": 16})
    p.assume(sp.Mod(D, H), "==", sp.Integer(0), "assume D % H == 0")
    for ask, args in ((p.whole, (D / H,)), (p.whole, (D / 2,)), (p.whole, ((D / H + 1) / 2,)),
                      (p.whole, (S * D / H,)), (p.leq, (sp.Integer(2), S)), (p.leq, (H, D)),
                      (p.leq, (sp.Integer(1), S)), (p.leq, (S, D))):
        quick = ask(*args, search=False)
        full = ask(*args)
        assert quick.ok == full.ok, args
        if not full.ok:
            assert quick.counterexample is None and full.status == "refuted", args
            assert full.counterexample, args


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


def test_rounded_sizes_are_bounded_by_what_they_round():
    # `S // 2` keeps at most S positions; `2 * ceil(S / 2)` is at least S; the reverse fails
    p, (S, C) = prover("S", "C")
    assert p.leq(sp.floor(S / 2), S).ok
    assert p.leq(S, 2 * sp.ceiling(S / 2)).ok
    p.assume(S, "<=", C, "assume S <= C")
    assert p.leq(sp.floor(S / 2) + sp.floor(S / 3), C).ok
    v = p.leq(S, sp.floor(S / 2))
    assert v.status == "refuted" and v.counterexample["S"] > v.counterexample["S"] // 2


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


# ---------------------------------------------------------------- combining assumptions

def test_divisibility_with_an_upper_bound_gives_equality():
    p, (Z, N) = prover("Z", "N")
    p.assume(sp.Mod(Z, N), "==", sp.Integer(0), "assume Z % N == 0")
    p.assume(Z, "<=", N, "assume Z <= N")
    assert p.equal(Z, N).ok


def test_divisibility_with_inequality_gives_at_least_twice():
    p, (D, K) = prover("D", "K")
    p.assume(sp.Mod(D, K), "==", sp.Integer(0), "assume D % K == 0")
    p.assume(K, "!=", D, "assume K != D")
    assert p.leq(2 * K, D).ok
    v = p.leq(3 * K, D)
    assert v.status == "refuted" and v.counterexample["D"] < 3 * v.counterexample["K"]


def test_square_divisible_by_a_prime_gives_the_root_divisible():
    p, (R,) = prover("R")
    p.assume(sp.Mod(R ** 2, 2), "==", sp.Integer(0), "assume R**2 % 2 == 0")
    assert p.whole(R / 2).ok
    v = p.whole(R / 4)
    assert v.status == "refuted" and v.counterexample["R"] % 4 != 0


ASSUMPTIONS = [
    lambda Z, N: (sp.Mod(Z, N), "==", 0), lambda Z, N: (sp.Mod(N, Z), "==", 0),
    lambda Z, N: (Z, "<=", N), lambda Z, N: (Z, "<", 2 * N), lambda Z, N: (Z, "!=", N),
    lambda Z, N: (Z, ">", N), lambda Z, N: (N, ">=", 3), lambda Z, N: (sp.Mod(Z ** 2, 4), "==", 0),
    lambda Z, N: (2 * Z, "<=", N + 1), lambda Z, N: (Z, "!=", 2 * N),
]
CONDITIONS = [
    ("equal", lambda Z, N: (Z, N)), ("equal", lambda Z, N: (Z, 2 * N)),
    ("leq", lambda Z, N: (2 * N, Z)), ("leq", lambda Z, N: (Z, N)), ("whole", lambda Z, N: (Z / N,)),
    ("whole", lambda Z, N: (Z / 2,)), ("positive", lambda Z, N: (Z - N,)),
    ("positive", lambda Z, N: (N - Z,)),
    ("leq", lambda Z, N: (sp.floor(Z / 2), Z)), ("leq", lambda Z, N: (sp.floor(Z / N), N)),
    ("leq", lambda Z, N: (Z, 2 * sp.ceiling(Z / 2))), ("leq", lambda Z, N: (sp.ceiling(Z / N), Z)),
    ("leq", lambda Z, N: (Z, sp.floor(Z / 2) + 1)),
]
HOLDS = {"equal": lambda a, b: a == b, "leq": lambda a, b: a <= b,
         "whole": lambda a: a.denominator == 1, "positive": lambda a: a > 0}


@settings(max_examples=examples(300), deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(range(len(ASSUMPTIONS))), max_size=3, unique=True),
       st.sampled_from(range(len(CONDITIONS))))
def test_verdicts_are_sound_against_brute_force(assumed, cond):
    """proved: no small assignment that satisfies the assumptions breaks it; refuted: the
    counterexample satisfies the assumptions and breaks it. Never a wrong claim."""
    from fractions import Fraction
    p, (Z, N) = prover("Z", "N")
    rels = []

    def value(e, z, n):
        return Fraction(str(sp.sympify(e).subs({Z: z, N: n})))

    def allowed(z, n):
        return all(_CMP[cmp](value(a, z, n), value(b, z, n)) for a, cmp, b in rels)

    for k in assumed:
        a, cmp, b = ASSUMPTIONS[k](Z, N)
        rels.append((sp.sympify(a), cmp, sp.sympify(b)))
        try:
            p.assume(sp.sympify(a), cmp, sp.sympify(b), f"assume {k}")
        except ValueError:   # refused as impossible: it must be
            assert not any(allowed(z, n) for z in range(1, 25) for n in range(1, 25)), assumed
            return
    kind, make = CONDITIONS[cond]
    args = make(Z, N)
    verdict = getattr(p, kind)(*args)

    def breaks(z, n):
        return not HOLDS[kind](*(value(e, z, n) for e in args))

    if verdict.status == "proved":
        bad = [(z, n) for z in range(1, 25) for n in range(1, 25) if allowed(z, n) and breaks(z, n)]
        assert not bad, (assumed, kind, args, bad[:3])
    elif verdict.status == "refuted":
        cex = verdict.counterexample
        z, n = cex.get("Z"), cex.get("N")
        if z is not None and n is not None:
            assert allowed(z, n) and breaks(z, n), (assumed, kind, args, cex)


def test_mod_of_two_dims_is_sympys_own():
    """`assume D % H == 0` builds D % H without sympy's evaluation where two different dims
    have no simpler form; every other pair goes through sympy. Both give the same expression."""
    from shapelang.checker.dims import dim_symbol, fresh_symbol, mod

    D, H = dim_symbol("D"), dim_symbol("H")
    k = fresh_symbol(None, "k")
    n = sp.Symbol("n", integer=True, nonnegative=True)
    x = sp.Symbol("x")
    pairs = [(D, H), (H, D), (D, k), (k, D), (D, D), (D, n), (n, D), (x, D), (2 * D, D), (D * H, H),
             (D, sp.Integer(4)), (D, sp.Integer(2)), (D, sp.Integer(1)), (D, sp.Integer(-3)), (k, sp.Integer(2)),
             (n, sp.Integer(2)), (sp.Symbol("e", even=True, positive=True), sp.Integer(2)),
             (sp.Symbol("o", odd=True, positive=True), sp.Integer(2)), (sp.Integer(7), D), (D + H, H)]
    for a, b in pairs:
        mine, theirs = mod(a, b), sp.Mod(a, b)
        assert mine == theirs and type(mine) is type(theirs) and mine.args == theirs.args, (a, b)


def test_a_remainder_in_the_provers_terms_is_sympys_own():
    """`assume Dh % 2 == 0` after `assume D % H == 0`: the remainder rewritten in the prover's
    own sizes is the Mod sympy's substitution makes, in every shape it can take."""
    p, (D, H, Dh, S) = prover("D", "H", "Dh", "S")
    p.define(Dh, D / H)
    p.assume(sp.Mod(D, H), "==", sp.Integer(0), "assume D % H == 0")
    for e in (sp.Mod(Dh, 2), sp.Mod(D, H), sp.Mod(Dh, H), sp.Mod(S, 2), sp.Mod(D, S), sp.Mod(Dh + 1, 2),
              sp.Mod(2 * Dh, 4), sp.Mod(D, 2 * H), sp.Mod(S, S + 1)):
        mine, theirs = p.canon(e), e.xreplace(p.subst)
        assert sp.srepr(mine) == sp.srepr(theirs), e


_DIMS = st.sampled_from(["B", "S", "D", "H"])
_TERMS = st.lists(st.tuples(st.integers(-5, 5), st.lists(_DIMS, max_size=3)), min_size=1, max_size=4)


@settings(max_examples=examples(60), deadline=None)
@given(_TERMS, st.integers(1, 4))
def test_whole_without_sympy_agrees_with_the_proof(terms, den):
    """The prover reads whole-ness off a polynomial with whole coefficients without asking
    sympy; the proof it would otherwise run agrees, and a quotient still goes to the proof."""
    from shapelang.checker.polys import integer_polynomial

    p, syms = prover("B", "S", "D", "H")
    p.assume(sp.Mod(syms[2], syms[3]), "==", sp.Integer(0), "assume D % H == 0")
    names = dict(zip(["B", "S", "D", "H"], syms))
    e = sp.Add(*[c * sp.Mul(*[names[n] for n in ns]) for c, ns in terms])
    def proof(x):   # the congruence proof the prover runs when the expression does not say
        return congruence.prove_whole(p.canon(x), p.relations, p._free() - set(p.unbacked), p._prove_whole)

    assert integer_polynomial(e)
    assert proof(e)
    q = e / den
    assert p.whole(q).ok == proof(q)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.fractions(-4, 4, max_denominator=4), st.sampled_from("BSHKt")), max_size=4),
       st.fractions(-6, 6, max_denominator=4), st.booleans())
def test_whole_sums_read_off_their_terms_agree_with_the_polynomials(terms, const, congruent):
    """`Dh/2 + 1/2`: a sum of rational multiples of sizes is whole exactly when the polynomial
    proof says so; with a congruence among the assumptions the polynomials still decide."""
    names = {n: sp.Symbol(n, positive=True, integer=True) for n in "BSHK"}
    names["t"] = sp.Symbol("t")   # a symbol sympy knows nothing of: integer points all the same
    e = sp.Add(*[sp.Rational(c.numerator, c.denominator) * names[n] for c, n in terms]) + \
        sp.Rational(const.numerator, const.denominator)
    relations = [Relation(sp.Mod(names["K"], 2), "==", sp.Integer(0), "assume K % 2 == 0")] if congruent else []
    free = {names[n] for n in "BSHK"}

    def whole(x):
        return congruence.prove_whole(x, relations, free, whole)

    mine = congruence.prove_whole(e, relations, free, whole)
    assert mine == congruence._by_polynomials(e, relations, free, whole), e
    if congruent and e == names["K"] / 2:
        assert mine   # K/2 with K even: the congruence decides, not the terms


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.fractions(-4, 4, max_denominator=4), st.lists(st.sampled_from("BSHt"), max_size=2)),
                max_size=4), st.fractions(-6, 6, max_denominator=4), st.integers(-6, 6))
def test_a_quotient_by_a_number_is_sympys_cancel(terms, const, den):
    """arange's length `(end - start + step - 1)/step`: the quotient of a sum of sizes by a
    number is the expression `sp.cancel` gives, the same object tree (what messages print)."""
    from shapelang.checker.polys import cancel_by_number

    names = {n: sp.Symbol(n, positive=True, integer=True) for n in "BSH"}
    names["t"] = sp.Symbol("t")
    num = sp.Add(*[sp.Rational(c.numerator, c.denominator) * sp.Mul(*[names[n] for n in ns]) for c, ns in terms]) + \
        sp.Rational(const.numerator, const.denominator)
    if den == 0:
        return
    mine, theirs = cancel_by_number(num, sp.Integer(den)), sp.cancel(num / den)
    assert sp.srepr(mine) == sp.srepr(theirs), (num, den)


@settings(max_examples=examples(100), deadline=None)
@given(st.fractions(-6, 6, max_denominator=4), st.lists(st.tuples(st.sampled_from("BSHt"), st.integers(-2, 3)), max_size=4))
def test_a_monomial_is_its_own_expansion(coeff, powers):
    """Sizes named by the dims they equal (`G*Nrep` shown as H) are compared expanded; a
    product of powers of sizes is taken as it is, which is what sympy's expand gives."""
    from shapelang.checker.polys import _monomial, expanded

    names = {n: sp.Symbol(n, positive=True, integer=True) for n in "BSH"}
    names["t"] = sp.Symbol("t")
    m = sp.Rational(coeff.numerator, coeff.denominator) * sp.Mul(*[names[n] ** k for n, k in powers])
    for e in (m, m + names["B"], (names["S"] + 1) * m):
        assert sp.srepr(expanded(e)) == sp.srepr(sp.expand(e)), e
    assert _monomial(m) or m.is_Number


def test_roots_of_sizes_are_float_as_sympy_says():
    """`scale 1/sqrt(Dh)`: a root of a size is a float scalar, which sympy also answers (after
    milliseconds of questions); whole numbers and whole sizes stay int."""
    from shapelang.checker.dims import dim_symbol
    from shapelang.checker.dtypes import scalar_dtype

    D, H = dim_symbol("D"), dim_symbol("H")
    for e in (1 / sp.sqrt(D), sp.sqrt(D), D ** sp.Rational(3, 2), sp.sqrt(D * H), 1 / sp.sqrt(D / H),
              sp.sqrt(2), sp.Integer(4), D, 2 * D, 1 / D, sp.Rational(1, 2)):
        assert scalar_dtype(e) == ("int" if e.is_integer else "float"), e


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.integers(-4, 4), st.lists(st.sampled_from(["V", "B", "S", "H"]), max_size=2)),
                min_size=1, max_size=4), st.integers(-6, 6))
def test_linear_bound_read_off_the_terms_agrees_with_polynomials(terms, const):
    from shapelang.checker.polys import _linear_bound, polynomial_bound

    names = {n: sp.Symbol(n, positive=True, integer=True) for n in "VBSH"}
    slack = sp.expand(sp.Add(*[c * sp.Mul(*[names[n] for n in ns]) for c, ns in terms]) + const)
    v = names["V"]
    for e in (slack, sp.expand(slack + sp.Mod(names["B"], names["H"])), sp.expand(slack / 2)):
        assert _linear_bound(e, v) == polynomial_bound(e, v), e


def _nonneg_by_polynomial(e, strict):
    """The shifted-polynomial test as sympy's polynomials give it (before linear sums were read
    off their terms)."""
    syms = sorted(e.free_symbols, key=str)
    if any(not s.is_positive for s in syms) or len(syms) > 8:
        return False
    shifted = sp.expand(e.xreplace({s: s + 1 for s in syms})) if syms else sp.expand(e)
    if not syms:
        return bool(shifted > 0) if strict else bool(shifted >= 0)
    coeffs = sp.Poly(shifted, *syms).as_dict()
    if any(not c.is_Rational or c < 0 for c in coeffs.values()):
        return False
    return coeffs.get((0,) * len(syms), 0) > 0 if strict else True


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.fractions(-4, 4, max_denominator=3), st.lists(st.sampled_from("BSHK"), max_size=2)),
                min_size=1, max_size=4), st.integers(-6, 6))
def test_linear_sums_are_signed_as_the_polynomial_test_signs_them(terms, const):
    from shapelang.checker.polys import _shift_nonneg

    names = {n: sp.Symbol(n, positive=True, integer=True) for n in "BSHK"}
    e = sp.Add(*[sp.Rational(c.numerator, c.denominator) * sp.Mul(*[names[n] for n in ns]) for c, ns in terms]) + const
    for strict in (False, True):
        assert _shift_nonneg(e, strict) == _nonneg_by_polynomial(e, strict), (e, strict)
