"""Whole numbers and multiples: what `assume X % m == 0` says about sizes, and when a
fraction of sizes is always whole. The prover builds on these; each is sound for every
assignment of whole sizes (most for every integer one), never a guess.

- `progression(x, m, v)`: the sizes v >= 1 for which x (linear in v) is a multiple of m form
  one arithmetic progression v = P*k - r, k >= 1, or none, or all of them.
- `integer_valued(p)`: a polynomial with rational coefficients whose value is whole at every
  integer point (`D*(D + 1)/2`: a product of consecutive integers is even). Exact: such a
  polynomial is whole everywhere exactly when it is whole on the grid 0..deg in each
  variable (its Newton form in binomial coefficients has whole coefficients).
- `parametrize(x, m)`: every integer solution of x = 0 (mod m), x linear with a coefficient
  +-1 in some variable v: v = m*t - rest, t any integer, for the whole-number test.
"""
from __future__ import annotations

import itertools
import math

from .lazysympy import sympy as sp
from .polys import _linear_terms, _shift_nonneg

MAX_PERIOD = 10 ** 6     # `assume X % m == 0` with a larger period stays a relation
MAX_GRID = 4096          # points the integer-valued test evaluates at most


def reduced(x: sp.Expr, m: sp.Expr) -> sp.Expr:
    """x with its whole coefficients taken modulo the whole number m: the same remainder
    (`(2*k - 1)*(j + 1) % 2` is `(j + 1) % 2`). x itself when that does not apply."""
    if not (m.is_Integer and m >= 2):
        return x
    try:
        poly = sp.Poly(sp.expand(x), *sorted(x.free_symbols, key=str)) if x.free_symbols else None
    except sp.PolynomialError:
        return x
    if poly is None or any(not c.is_Integer for c in poly.coeffs()):
        return x
    return sp.expand(sum((int(c) % int(m)) * sp.Mul(*(g ** e for g, e in zip(poly.gens, mono)))
                         for mono, c in poly.terms()))


def progression(x: sp.Expr, m: int, v: sp.Symbol):
    """For x = a*v + c (a, c numbers, a != 0) and a whole m >= 1: ("all",) when x is a multiple
    of m for every v >= 1 where it is whole, ("none",) when for none, ("step", P, r) when exactly
    for v = P*k - r with k >= 1 (0 <= r < P); None when x is not of that form or P is too large."""
    try:
        poly = sp.Poly(sp.expand(x), v)
    except sp.PolynomialError:
        return None
    if poly.degree() != 1:
        return None
    a, c = (sp.nsimplify(t) for t in poly.all_coeffs())
    if not (a.is_Rational and c.is_Rational) or a == 0:
        return None
    period = m * math.lcm(int(a.q), int(c.q))
    if period > MAX_PERIOD:
        return None

    def ok(n):
        val = a * n + c
        return val.is_Integer and int(val) % m == 0
    first = next((n for n in range(1, period + 1) if ok(n)), None)
    if first is None:
        return ("none",)
    # the solutions of a linear congruence are one residue class: the next one gives its step
    second = next((n for n in range(first + 1, first + period + 1) if ok(n)), first + period)
    step = second - first
    if step == 1:
        return ("all",)
    return ("step", step, step - first)


def integer_valued(p: sp.Expr) -> bool:
    """Whether polynomial p (rational coefficients) is whole at every integer point."""
    p = sp.expand(p)
    syms = sorted(p.free_symbols, key=str)
    try:
        poly = sp.Poly(p, *syms) if syms else None
    except sp.PolynomialError:
        return False
    if poly is None:
        return p.is_Integer
    terms = poly.terms()
    if any(not c.is_Rational for _, c in terms):
        return False
    den = math.lcm(*(int(c.q) for _, c in terms))
    if den == 1:
        return True
    degrees = poly.degree_list()
    if math.prod(d + 1 for d in degrees) > MAX_GRID:
        return False
    ints = [(e, int(c * den)) for e, c in terms]
    for point in itertools.product(*(range(d + 1) for d in degrees)):
        total = sum(c * math.prod(x ** k for x, k in zip(point, e)) for e, c in ints)
        if total % den:
            return False
    return True


def parametrize(x: sp.Expr, m: sp.Expr, candidates) -> tuple[sp.Symbol, sp.Expr] | None:
    """(v, value): substituting v = value (with a new integer t) gives every integer solution
    of `x % m == 0`, for x linear with a coefficient +-1 in v (v among `candidates`), m a whole
    number. None when there is no such v."""
    if not (m.is_Integer and m >= 1):
        return None
    x = reduced(sp.expand(x), m)
    for v in sorted(x.free_symbols & set(candidates), key=str):
        try:
            poly = sp.Poly(x, v)
        except sp.PolynomialError:
            continue
        if poly.degree() != 1:
            continue
        a, rest = poly.all_coeffs()
        if a not in (1, -1):
            continue
        try:
            if not integer_valued(rest):
                continue
        except (TypeError, ValueError):
            continue
        t = sp.Dummy("t", integer=True)
        return v, sp.expand(a * (m * t - rest))
    return None


def whole_given(p: sp.Expr, relations, free) -> bool:
    """A polynomial that is whole wherever the assumptions `X % m == 0` among `relations` hold
    (m a number, or the number in a product: `X % (2*A) == 0` makes X even): each one's integer
    solutions substituted (`parametrize`), then tested."""
    for r in relations:
        if is_congruence(r):
            x, y = r.left.args
            m = y if y.is_Integer else y.as_coeff_Mul()[0]   # a multiple of 2*A is even
            found = parametrize(x, m, free) if m.is_Integer and m >= 2 else None
            if found is not None:
                p = sp.expand(p.xreplace({found[0]: found[1]}))
    return integer_valued(p)


def slacks(relations):
    """Expressions the assumptions make >= 0: each bound, and for `X % Y == 0` with X at least
    1, X - Y (a positive multiple of Y is at least Y: an even product is at least 2)."""
    for r in relations:
        slack = {"<=": r.right - r.left, ">=": r.left - r.right,
                 "<": r.right - r.left - 1, ">": r.left - r.right - 1}.get(r.cmp)
        if slack is not None:
            yield slack
        elif is_congruence(r):
            x, y = r.left.args
            x = -x if x.could_extract_minus_sign() else x   # `Mod(-B, 2)`: B is the multiple
            if _shift_nonneg(sp.expand(x - 1)) and _shift_nonneg(sp.expand(y - 1)):
                yield x - y


def solve(x: sp.Expr, m: sp.Expr, free):
    """`X % m == 0` with X linear in one size v of `free` (`Dk = E + 1`, `Np = D/2`) and m a
    number: ("step", v, P, r) for v = P*k - r with k >= 1, ("all",) when it always holds,
    None when it is not of that form; ValueError when no whole size makes it hold."""
    x = reduced(x, m)
    if not (m.is_Integer and m >= 2) or len(x.free_symbols) != 1:
        return None
    (v,) = x.free_symbols
    if v not in free:
        return None
    found = progression(x, int(m), v)
    if found is None or found[0] == "all":
        return found
    if found[0] == "none":
        raise ValueError("no whole size makes this hold")
    return ("step", v, found[1], found[2])


def prove_whole(e: sp.Expr, relations, free, whole) -> bool:
    """e is whole for every assignment the assumptions allow: a polynomial over a number that
    is integer-valued, also once the congruences are solved; or a quotient by a divisor that an
    assumption `X % Y == 0` names, X times something `whole` proves whole.

    A sum of rational multiples of sizes and a number (`Dh/2 + 1/2`, arange's length before
    its rounding) is read off its terms where no assumption is a congruence: integer-valued
    exactly when every coefficient is whole (its values at 0 and at each unit point), which
    is what the polynomials below conclude, without building them."""
    linear = _linear_terms(e)
    if linear is not None and not any(is_congruence(r) for r in relations):
        coeffs, const = linear
        return const.is_Integer and all(c == int(c) for c in coeffs.values())
    return _by_polynomials(e, relations, free, whole)


def is_congruence(r) -> bool:
    """Whether relation r is an assumption `X % Y == 0`."""
    return r.cmp == "==" and r.right == 0 and isinstance(r.left, sp.Mod)


def _by_polynomials(e: sp.Expr, relations, free, whole) -> bool:
    """prove_whole, with sympy's polynomials."""
    num, den = sp.fraction(sp.together(sp.cancel(sp.together(e))))
    if den.is_Integer and (integer_valued(num / den) or whole_given(num / den, relations, free)):
        return True
    for r in relations:
        if is_congruence(r):
            x, y = r.left.args
            c = y.as_coeff_Mul()[0]   # `X % (2*A) == 0`: X/2 is whole too
            if sp.expand(y - den) == 0 or (den.is_Integer and c.is_Integer and c % den == 0):
                q = sp.cancel(num / x)
                if sp.fraction(q)[1] == 1 and whole(q):
                    return True
    return False


def assume_step(prover, x: sp.Expr, m: sp.Expr) -> bool:
    """Record `X % m == 0` (X linear in one free size v) in the prover as v = P*k - r with a
    new k >= 1 (`solve`); False when it is not of that form."""
    found = solve(x, m, prover._free() - set(prover.unbacked))
    if found is None:
        return False
    if found[0] == "step":
        _kind, v, step, r = found
        k = prover.fresh_symbol(f"{v}_step_{step}")
        prover.fresh[k] = (prover.fresh.get(v, v) + r) / step
        prover._substitute(v, step * k - r)
        prover._tighten()
    return True
