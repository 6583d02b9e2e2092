"""Totals (parameters, FLOPs) written the way a textbook writes them.

The checker's totals are expanded sympy polynomials (`Ctx*D + 12*D**2*L + 13*D*L + D*V + 2*D`).
Here they are grouped by their structure and printed in the learner's notation:

    L·(12·D² + 13·D) + D·(V + Ctx) + 2·D

Grouping, in this order, at every level of the sum:
1. a factor common to every term (`B·S·(…)`, tokens times the work per token), unless
   taking it out would leave a bare number in the bracket (`12·D² + 13·D` stays as it is);
2. the layer counts of `stack` (`L·(…)`, the work of one layer times the count);
3. terms that differ in one dim only (`V·D + Ctx·D + 2·D` -> `D·(V + Ctx + 2)`).
Within a product: the number, the layer counts, then dims in the order the spec declares
them; terms by falling degree. Anything that is not a polynomial in dims (a `//` or `%`
size) is printed expanded.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..checker.lazysympy import sympy as sp

SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
DOT = "·"


@dataclass(frozen=True)
class Mono:
    """A number times a product of dims with whole exponents (negative: divided by)."""
    coeff: Fraction
    powers: tuple   # ((name, exponent), ...) sorted by name, exponents != 0

    def get(self, name: str) -> int:
        return dict(self.powers).get(name, 0)

    def div(self, factor: dict) -> Mono:
        p = dict(self.powers)
        for k, v in factor.items():
            p[k] = p.get(k, 0) - v
        return Mono(self.coeff, tuple(sorted((k, v) for k, v in p.items() if v)))

    @property
    def degree(self) -> int:
        return sum(v for _, v in self.powers)


@dataclass
class Group:
    """coeff · factor · (terms); a plain sum when both are 1."""
    factor: dict                     # name -> exponent
    terms: list                      # of Mono | Group
    coeff: Fraction = Fraction(1)

    @property
    def plain(self) -> bool:
        return not self.factor and self.coeff == 1


def _monos(e: sp.Expr) -> list[Mono] | None:
    out = []
    for term in sp.Add.make_args(sp.expand(e)):
        coeff, rest = term.as_coeff_Mul()
        if not coeff.is_Rational:
            return None
        powers = {}
        for base, exp in rest.as_powers_dict().items():
            if base == 1:
                continue
            if not (base.is_Symbol and exp.is_Integer):
                return None
            powers[base.name] = powers.get(base.name, 0) + int(exp)
        if coeff == 0:
            continue
        out.append(Mono(Fraction(int(coeff.p), int(coeff.q)),
                        tuple(sorted((k, v) for k, v in powers.items() if v))))
    return out


class Textbook:
    """Prints totals of one spec: `order` is the spec's dims in declaration order, `counts`
    the names used as `stack` layer counts."""

    def __init__(self, order, counts=(), value=None):
        self.counts = list(counts)
        self.value = value
        rank = {name: k for k, name in enumerate(order)}
        self.rank = lambda name: (0, self.counts.index(name)) if name in self.counts else \
            (1, rank.get(name, len(rank)), name)

    # ------------------------------------------------------------ grouping
    def group(self, e: sp.Expr, grouped: bool = True) -> Group | None:
        monos = _monos(e)
        if monos is None:
            return None
        return self._group(monos, list(self.counts)) if grouped else Group({}, monos)

    def _group(self, monos: list, counts: list) -> Group:
        if len(monos) < 2:
            return Group({}, list(monos))
        common = {}
        for name, _ in monos[0].powers:
            low = min(m.get(name) for m in monos)
            if low > 0:
                common[name] = low
        if common:
            inner = [m.div(common) for m in monos]
            if all(m.powers for m in inner):
                return Group(common, [self._group(inner, counts)])
        for k, c in enumerate(counts):
            with_c = [m for m in monos if m.get(c) > 0]
            if len(with_c) >= 2:
                rest = [m for m in monos if m.get(c) <= 0]
                inner = self._group([m.div({c: 1}) for m in with_c], counts[k + 1:])
                out = []
                if rest:        # the rest's own grouping, its common factor kept
                    g = self._group(rest, counts[k + 1:])
                    out = g.terms if g.plain else [g]
                return Group({}, [Group({c: 1}, [inner])] + out)
        return Group({}, self._siblings(monos))

    def _siblings(self, monos: list) -> list:
        """Terms a·M·x + b·M·y + … + c·M (the same product M times one more dim each, and
        perhaps M alone) as M·(a·x + b·y + … + c); at least two of them with a dim of their
        own. A number common to all comes out in front: 2·H·(Dk + Dv)."""
        keys: dict = {}
        for i, m in enumerate(monos):
            if m.powers:
                keys.setdefault(m.powers, []).append((i, None))     # c·M, M = the whole product
            for name, exp in m.powers:
                rest = m.div({name: 1})
                if exp == 1 and rest.powers:
                    keys.setdefault(rest.powers, []).append((i, name))

        def size(members):
            return sum(1 for _, n in members if n is not None), len(members)

        out, used = [], set()
        for powers, members in sorted(keys.items(), key=lambda kv: tuple(-x for x in size(kv[1]))):
            members = [(i, n) for i, n in members if i not in used]
            if size(members)[0] < 2:
                continue
            used.update(i for i, _ in members)
            coeffs = {monos[i].coeff for i, _ in members}
            common = coeffs.pop() if len(coeffs) == 1 else Fraction(1)
            inner = [Mono(monos[i].coeff / common, ((n, 1),) if n else ()) for i, n in members]
            out.append(Group(dict(powers), inner, common))
        return out + [m for i, m in enumerate(monos) if i not in used]

    # ------------------------------------------------------------ printing
    def degree(self, node) -> int:
        if isinstance(node, Mono):
            return node.degree
        inner = max((self.degree(t) for t in node.terms), default=0)
        return inner + sum(node.factor.values())

    def expr(self, node) -> sp.Expr:
        """The sympy expression a node stands for."""
        def power(powers):
            out = sp.Integer(1)
            for name, exp in powers:
                out *= sp.Symbol(name, positive=True, integer=True) ** exp
            return out
        if isinstance(node, Mono):
            return sp.Rational(node.coeff.numerator, node.coeff.denominator) * power(node.powers)
        inner = sum((self.expr(t) for t in node.terms), sp.Integer(0))
        return sp.Rational(node.coeff.numerator, node.coeff.denominator) * power(node.factor.items()) * inner

    def _key(self, node):
        """The largest term first: by its value at the example sizes where there is one,
        else by degree; then by the order of the dims."""
        names = sorted(node.powers if isinstance(node, Mono) else node.factor.items(),
                       key=lambda kv: self.rank(kv[0]))
        if isinstance(node, Mono) and not node.powers:
            return ((2, 0), 0, [])      # a number comes last
        size = self.value(self.expr(node)) if self.value is not None else None
        first = (0, -abs(size)) if size is not None else (1, 0)
        return (first, -self.degree(node), [self.rank(n) for n, _ in names])

    def _product(self, powers: dict, coeff: Fraction = Fraction(1)) -> str:
        """`12·L·D²`, `D²/H`, `3·D/2`: numerator factors, then `/` the denominator."""
        names = sorted(powers, key=self.rank)
        num = [n + (str(powers[n]).translate(SUPERSCRIPT) if powers[n] > 1 else "")
               for n in names if powers[n] > 0]
        den = [n + (str(-powers[n]).translate(SUPERSCRIPT) if powers[n] < -1 else "")
               for n in names if powers[n] < 0]
        if coeff.numerator != 1 or not num:
            num.insert(0, _number(abs(coeff.numerator)))
        if coeff.denominator != 1:
            den.insert(0, _number(coeff.denominator))
        text = DOT.join(num)
        if den:
            text += "/" + (den[0] if len(den) == 1 else "(" + DOT.join(den) + ")")
        return text

    def text(self, node) -> str:
        if isinstance(node, Mono):
            return ("-" if node.coeff < 0 else "") + self._product(dict(node.powers), node.coeff)
        terms = node.terms
        while len(terms) == 1 and isinstance(terms[0], Group) and terms[0].plain:
            terms = terms[0].terms
        if all(isinstance(t, Mono) and (not t.powers or t.coeff == 1 and len(t.powers) == 1
                                        and t.powers[0][1] == 1) for t in terms):
            # a sum of dims (V + Ctx + 2): in the order they are declared, the number last
            terms = sorted(terms, key=lambda t: self.rank(t.powers[0][0]) if t.powers else (2,))
        else:
            terms = sorted(terms, key=self._key)
        parts = [self.text(t) for t in terms]
        body = parts[0] if parts else "0"
        for p in parts[1:]:
            body += f" - {p[1:]}" if p.startswith("-") else f" + {p}"
        if node.plain:
            return body
        prefix = ("-" if node.coeff < 0 else "") + self._product(node.factor, node.coeff)
        if len(parts) == 1 and not parts[0].startswith("-"):
            return f"{prefix}{DOT}{body}"
        return f"{prefix}{DOT}({body})"


def _number(n) -> str:
    return str(n)


def textbook(e: sp.Expr, order, counts=(), value=None, grouped: bool = True) -> str | None:
    """`e` in textbook notation (grouped, or only reordered with grouped=False); None when
    it is not a polynomial in dims. `value(expr)`, when given, is the size at the example:
    terms are then ordered largest first."""
    book = Textbook(order, counts, value)
    node = book.group(e, grouped)
    return None if node is None else book.text(node)
