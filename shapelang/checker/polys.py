"""Polynomial tests the prover builds on: sufficient conditions for signs of size
polynomials, linear bounds, divisors. Sizes are whole numbers of at least 1 here; a
data-dependent size (which may be 0) is never treated as one of them."""
from __future__ import annotations

import functools
import itertools

from .lazysympy import sympy as sp


def _monomial(e: sp.Expr) -> bool:
    """A product of a rational and powers of symbols (most sizes and strides)."""
    if e.is_Symbol or e.is_Rational:
        return True
    if e.is_Pow:
        return e.base.is_Symbol and e.exp.is_Integer
    if e.is_Mul:
        return all(_monomial(a) and not a.is_Mul for a in e.args)
    return False


def expanded(e: sp.Expr) -> sp.Expr:
    """`sp.expand(e)`: a monomial (most sizes) is its own expansion, as sympy builds it."""
    return e if _monomial(e) else sp.expand(e)


def integer_polynomial(e: sp.Expr, depth: int = 0) -> bool:
    """Whole numbers and whole symbols put together with +, - and * (and whole powers): whole
    for every size, read off the expression without asking sympy (`linear 3*D`; `D/H` once
    `assume D % H == 0` has made D = H*k is k)."""
    if e.is_Integer:
        return True
    if e.is_Symbol:
        return e.is_integer is True
    if depth > 20:
        return False
    if e.is_Add or e.is_Mul:
        return all(integer_polynomial(a, depth + 1) for a in e.args)
    if e.is_Pow:
        return e.exp.is_Integer and e.exp >= 0 and integer_polynomial(e.base, depth + 1)
    return False


def _shift_nonneg(e: sp.Expr, strict: bool = False) -> bool:
    """Sufficient test that polynomial e >= 0 (> 0 if strict) for all vars >= 1."""
    syms = sorted(e.free_symbols, key=str)
    if any(not s.is_positive for s in syms) or len(syms) > 8:
        return False   # (the shifted expansion grows exponentially with the symbols)
    linear = _linear_terms(e) if syms else None
    if linear is not None:   # shifted, each symbol keeps its coefficient; the constant gains them all
        coeffs, const = linear
        total = const + sum(coeffs.values())
        return all(c >= 0 for c in coeffs.values()) and bool(total > 0 if strict else total >= 0)
    shifted = sp.expand(e.xreplace({s: s + 1 for s in syms})) if syms else sp.expand(e)
    try:
        poly = sp.Poly(shifted, *syms) if syms else None
    except sp.PolynomialError:
        return False
    if poly is None:
        return bool(shifted > 0) if strict else bool(shifted >= 0)
    coeffs = poly.as_dict()
    if any(not c.is_Rational or c < 0 for c in coeffs.values()):
        return False
    if strict:
        return coeffs.get((0,) * len(syms), 0) > 0
    return True


def _linear_terms(e: sp.Expr) -> tuple[dict, sp.Expr] | None:
    """({symbol: coefficient}, constant) of e written as a sum of rational numbers and rational
    multiples of symbols (`Ctx - S`); None for any other form."""
    coeffs, const = {}, sp.S.Zero
    for t in e.args if e.is_Add else (e,):
        if t.is_Rational:
            const += t
        elif t.is_Symbol:
            coeffs[t] = coeffs.get(t, 0) + 1
        elif t.is_Mul and len(t.args) == 2 and t.args[0].is_Rational and t.args[1].is_Symbol:
            coeffs[t.args[1]] = coeffs.get(t.args[1], 0) + t.args[0]
        else:
            return None
    return coeffs, const


def cancel_by_number(num: sp.Expr, den: sp.Expr) -> sp.Expr:
    """`sp.cancel(num / den)`. A sum of rational multiples of symbols and a number over a whole
    number (`(Dh + 1)/2`, arange's length) is already in that form as sympy builds the quotient
    (the number distributes over the sum), so the polynomial machinery is not asked."""
    if isinstance(num, sp.Expr) and den.is_Integer and den != 0 and _linear_terms(num) is not None:
        return num / den
    return sp.cancel(num / den)


def _root_divisor(x: sp.Expr, y: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """`v**n % m == 0` for a number m holds exactly when v % m' == 0, m' the product of
    p**ceil(e/n) over m's prime powers p**e (R**2 even: R even)."""
    if x.is_Pow and x.base.is_Symbol and x.exp.is_Integer and x.exp > 0 and \
            y.is_Integer and 0 < y < 10 ** 12:
        n = int(x.exp)
        root = 1
        for p, e in sp.factorint(int(y)).items():
            root *= p ** (-(-e // n))
        return x.base, sp.Integer(root)
    return x, y


def _linear_bound(slack: sp.Expr, v: sp.Symbol) -> tuple[int, sp.Rational] | None:
    """slack = A*v + B with A of one sign for all sizes >= 1 and -B/A a number c: the sign
    of A (v >= c when positive, v <= c when negative, for slack >= 0) and c."""
    parts = _linear_parts(slack, v)
    if parts is not None and parts[0].is_Number:   # A a number: c = -B/A without a polynomial
        a, b = parts
        return None if a == 0 or not b.is_Number else _signed_bound(a, -b / a)
    return polynomial_bound(slack, v)


def polynomial_bound(slack: sp.Expr, v: sp.Symbol) -> tuple[int, sp.Rational] | None:
    """`_linear_bound` through sympy's polynomials, for any A."""
    parts = linear_coeffs(slack, v)
    return None if parts is None else _signed_bound(parts[0], sp.cancel(-parts[1] / parts[0]))


def linear_coeffs(e: sp.Expr, v: sp.Symbol) -> tuple[sp.Expr, sp.Expr] | None:
    """(A, B) with e = A*v + B by sympy's polynomials; None where e is not of degree 1 in v."""
    try:
        poly = sp.Poly(e, v)
    except sp.PolynomialError:
        return None
    if poly.degree() != 1:
        return None
    a, b = poly.all_coeffs()
    return a, b


def _signed_bound(a: sp.Expr, c: sp.Expr) -> tuple[int, sp.Rational] | None:
    if not c.is_Rational:
        return None
    if _shift_nonneg(a, strict=True):
        return 1, c
    if _shift_nonneg(-a, strict=True):
        return -1, c
    return None


def _linear_parts(e: sp.Expr, v: sp.Symbol) -> tuple[sp.Expr, sp.Expr] | None:
    """(A, B) with e = A*v + B, read off the terms of an expanded e; None where v appears in a
    term other than as a factor to the first power (a polynomial then decides)."""
    lin, rest = [], []
    for t in e.args if e.is_Add else (e,):
        if v not in t.free_symbols:
            rest.append(t)
            continue
        coeff, dep = t.as_independent(v, as_Add=False)
        if dep != v:
            return None
        lin.append(coeff)
    return sp.Add(*lin), sp.Add(*rest)


def divisor_alternatives(n: int, near: int, count: int = 3) -> list[int]:
    """Values near `near` that divide n: offered when an example breaks divisibility."""
    if n <= 0 or near <= 0 or n > 10 ** 12 or near > 10 ** 6:
        return []
    lo, hi = max(1, near // 2), near * 3
    divs = [d for d in range(lo, hi + 1) if n % d == 0]
    return sorted(sorted(divs, key=lambda d: abs(d - near))[:count])


@functools.cache
def numeric_product(values: tuple) -> int:
    out = 1
    for v in values:
        out *= v
    return out


MAX_CASE_ATOMS = 4   # 2**4 cases at most: a size with more min/max terms stays unproved


def minmax_cases(e: sp.Expr):
    """The branches of a size with `min`/`max` in it: each term replaced by one of its two
    arguments, with the condition under which it is that one (`min(a, b)` is a where
    b - a >= 0). The size equals one branch's value for every assignment, so what holds for
    every branch (under its conditions) holds for the size. None when there are too many."""
    atoms = sorted(e.atoms(sp.Min, sp.Max), key=sp.default_sort_key)
    if len(atoms) > MAX_CASE_ATOMS or any(len(m.args) != 2 for m in atoms):
        return None
    if any(a.has(sp.Min, sp.Max) for m in atoms for a in m.args):
        return None    # nested: innermost first would be needed; rare in shapes
    cases = []
    for picks in itertools.product((0, 1), repeat=len(atoms)):
        chosen, conditions = {}, []
        for m, k in zip(atoms, picks):
            this, other = m.args[k], m.args[1 - k]
            chosen[m] = this
            conditions.append(other - this if isinstance(m, sp.Min) else this - other)
        cases.append((e.xreplace(chosen), conditions))
    return cases


def nonneg_given(d: sp.Expr, conditions: list[sp.Expr]) -> bool:
    """Sufficient test that d >= 0 for all sizes >= 1 where every condition is >= 0: d, or d
    minus one condition, or d minus all of them, is non-negative as a polynomial."""
    d = sp.expand(d)
    tries = [d] + [d - c for c in conditions] + ([d - sum(conditions)] if len(conditions) > 1 else [])
    return any(_shift_nonneg(sp.expand(t)) for t in tries)


def without_rounding(d: sp.Expr) -> sp.Expr | None:
    """A lower bound of `d` with each `floor(x)`, `ceiling(x)` and `a % b` (`S // 2`, a conv's
    output length) replaced by a bound on the side that keeps it a lower bound:
    floor(x) <= x and ceiling(x) >= x; for x = p/q with whole p and a whole q > 0, also
    floor(x) >= (p - q + 1)/q and ceiling(x) <= (p + q - 1)/q (else x - 1 and x + 1); and
    0 <= a % b <= b - 1 for a whole b > 0. None when `d` has none, or one that is not a
    term of its own with a numeric coefficient."""
    rounded = d.atoms(sp.floor, sp.ceiling, sp.Mod)
    if not rounded:
        return None
    for f in rounded:
        c = d.coeff(f)
        if not c.is_Number or c == 0 or f.args[0].has(sp.floor, sp.ceiling, sp.Mod):
            return None
        if isinstance(f, sp.Mod):
            b = f.args[1]
            if c < 0 and not (b.is_Integer and b > 0):
                return None
            d = d.xreplace({f: 0 if c > 0 else b - 1})
            continue
        x = f.args[0]
        p, q = sp.fraction(sp.together(x))
        slack = (q - 1) / q if q.is_Integer and q > 0 and p.is_integer else 1
        if isinstance(f, sp.floor):
            d = d.xreplace({f: x if c < 0 else x - slack})
        else:
            d = d.xreplace({f: x if c > 0 else x + slack})
    return sp.expand(d)
