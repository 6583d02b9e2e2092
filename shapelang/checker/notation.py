"""Sizes printed the way the learner writes them.

sympy keeps expressions in a canonical form: `H*Dv` becomes `Dv*H`, `D % H`
becomes `Mod(D, H)`, `D // H` becomes `floor(D/H)`. A learner should read back
their own notation, so every size a message, a table or a picture shows goes
through `Notation.show`:

- an expression the learner wrote (`H*Dv`, `(D + H)/2`) is shown as written
  (spacing normalised), wherever the same size turns up again;
- any other size in shapelang's own syntax: factors in the order the dims were
  declared, `%` and `//`, `D*D` for a small power, `1/sqrt(Dk)`;
- a number of more than ELIDE digits is elided: `1234…(694 digits)…789`.

The output (without elision, `code=True`) reads back with sympy's parse_expr
and with shapelang's own parser.
"""
from __future__ import annotations

import re

from .lazysympy import sympy as sp

ELIDE = 40          # numbers with more digits are shown as `1234…(N digits)…789`
SMALL_POWER = 3     # D**2 and D**3 are shown as D*D and D*D*D

# precedence of the printed form, as shapelang's grammar reads it
ADD, MUL, NEG, POW, ATOM = 1, 2, 3, 4, 5

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*'?")


def elide(digits: str) -> str:
    """A long run of digits cut in the middle, with the count of digits."""
    sign = "-" if digits.startswith("-") else ""
    body = digits.lstrip("-")
    if len(body) <= ELIDE:
        return digits
    return f"{sign}{body[:4]}…({len(body)} digits)…{body[-3:]}"


def float_text(v: float) -> str:
    text = repr(float(v))
    return text.removesuffix(".0")


class Notation:
    """The learner's spellings of sizes and the order their dims were declared in."""

    def __init__(self):
        self.spelled: dict[sp.Expr, tuple[str, int]] = {}
        self.order: dict[sp.Symbol, int] = {}
        self.log: list | None = None   # every spelling recorded, while a shape rule is kept

    # -- what the learner wrote
    def declare(self, sym: sp.Symbol) -> None:
        self.order.setdefault(sym, len(self.order))

    def record(self, expr: sp.Expr, text: str, prec: int) -> None:
        """Remember how a composite size was written: the first spelling of it wins. A
        spelling that names dims more often than the simplified size (`2*D + 2*D` for
        `4*D`) is not kept: it reads better simplified."""
        if self.log is not None:
            self.log.append((expr, text, prec))
        if not isinstance(expr, sp.Expr) or expr.is_Atom or expr in self.spelled:
            return
        if "…" in text:
            return
        try:
            plain = self._print(expr, True)[0]
        except (RecursionError, TypeError, ValueError, AttributeError):
            return
        if len(_NAME.findall(text)) > len(_NAME.findall(plain)):
            return
        self.spelled[expr] = (text, prec)

    # -- printing
    def show(self, e, *, code: bool = False) -> str:
        """`e` in the learner's notation; `code`: numbers in full (for JSON)."""
        if isinstance(e, int):
            return str(e) if code else elide(str(e))
        if not isinstance(e, sp.Basic):
            return str(e)
        try:
            return self._print(e, code)[0]
        except (RecursionError, TypeError, ValueError, AttributeError):
            return str(e)

    def text(self, e) -> tuple[str, int]:
        """The shown text of `e` and its precedence (ADD < MUL < NEG < POW < ATOM)."""
        try:
            return self._print(e, False)
        except (RecursionError, TypeError, ValueError, AttributeError):
            return str(e), ATOM

    def _print(self, e, code: bool) -> tuple[str, int]:
        hit = self.spelled.get(e)
        if hit is not None:
            return hit
        if e.is_Integer:
            text = str(int(e)) if code else elide(str(int(e)))
            return text, (NEG if e < 0 else ATOM)
        if e.is_Rational:
            p, q = self._print(sp.Integer(e.p), code)[0], self._print(sp.Integer(e.q), code)[0]
            return f"{p}/{q}", MUL if e > 0 else NEG
        if e.is_Float:
            return float_text(e), ATOM
        if e.is_Symbol:   # a dim's own name, without sympy's printer (which costs 100x more)
            return (e.name if type(e) is sp.Symbol else str(e)), ATOM
        if e is sp.S.Infinity:
            return "oo", ATOM
        if e.is_Add:
            return self._add(e, code)
        if e.is_Mul or e.is_Pow:
            return self._mul(e, code)
        if isinstance(e, sp.Mod):
            a, b = e.args
            return f"{self._wrap(a, MUL, code)} % {self._wrap(b, MUL + 1, code)}", MUL
        if isinstance(e, sp.floor):
            num, den = sp.fraction(sp.together(e.args[0]))
            if den == 1:
                return f"{self._wrap(num, MUL, code)} // 1", MUL
            return f"{self._wrap(num, MUL, code)} // {self._wrap(den, MUL + 1, code)}", MUL
        if isinstance(e, sp.ceiling):
            num, den = sp.fraction(sp.together(e.args[0]))
            return f"-(-{self._wrap(num, POW, code)} // {self._wrap(den, MUL + 1, code)})", NEG
        if isinstance(e, (sp.Min, sp.Max)):
            name = "min" if isinstance(e, sp.Min) else "max"
            args = sorted(e.args, key=self._key)
            text = self.show(args[0], code=code)
            for a in args[1:]:   # shapelang's min and max take two arguments
                text = f"{name}({text}, {self.show(a, code=code)})"
            return text, ATOM
        return str(e), ATOM

    def _wrap(self, e, prec: int, code: bool) -> str:
        text, p = self._print(e, code)
        return f"({text})" if p < prec else text

    def _key(self, e) -> tuple:
        """Learner order: numbers first, then by the first declared dim an expression uses."""
        syms = [s for s in e.free_symbols if isinstance(s, sp.Symbol)]
        if not syms:
            return (0, 0, "")
        first = min((self.order.get(s, len(self.order)), str(s)) for s in syms)
        return (1,) + first

    def _add(self, e, code: bool) -> tuple[str, int]:
        def degree(t):
            try:
                return -sp.Poly(t).total_degree()
            except (sp.PolynomialError, sp.GeneratorsNeeded):
                return 0
        terms = sorted(e.args, key=lambda t: (bool(t.could_extract_minus_sign()), t.is_Number,
                                              degree(t), self._key(t)))
        out = ""
        for k, t in enumerate(terms):
            negative = t.could_extract_minus_sign()
            body = self._wrap(-t if negative else t, MUL, code)
            if k == 0:
                out = f"-{body}" if negative else body
            else:
                out += f" - {body}" if negative else f" + {body}"
        return out, ADD

    def _mul(self, e, code: bool) -> tuple[str, int]:
        coeff, rest = e.as_coeff_Mul()
        negative = coeff < 0
        coeff = -coeff if negative else coeff
        factors = sp.Mul.make_args(rest) if rest != 1 else ()
        num, den = [], []
        for f in factors:
            if f.is_Pow and f.exp.is_Rational and f.exp < 0:
                den.append(f.base ** -f.exp if f.exp != -1 else f.base)
            else:
                num.append(f)
        num.sort(key=self._key)
        den.sort(key=self._key)
        parts = [] if coeff.p == 1 and num else [self._print(sp.Integer(coeff.p), code)[0]]
        parts += [self._factor(f, code) for f in num]
        text = "*".join(parts)
        dens = ([self._print(sp.Integer(coeff.q), code)[0]] if coeff.q != 1 else []) + \
            [self._factor(f, code) for f in den]
        if dens:
            if len(dens) == 1 and (len(den) != 1 or self._factor_prec(den[0]) > MUL):
                text += f"/{dens[0]}"
            else:
                text += f"/({'*'.join(dens)})"
        prec = MUL if (dens or len(parts) > 1) else self._factor_prec(num[0]) if num else ATOM
        if negative:
            return f"-{text}" if prec >= MUL else f"-({text})", NEG
        return text, prec

    def _factor_prec(self, f) -> int:
        return self._factor_text(f, True)[1]

    def _factor(self, f, code: bool) -> str:
        text, prec = self._factor_text(f, code)
        if prec < MUL or (prec == MUL and any(op in text for op in ("/", "%"))):
            return f"({text})"
        return text

    def _factor_text(self, f, code: bool) -> tuple[str, int]:
        """A factor of a product: `D*D` for a small power, `sqrt(Dk)`, `D**4`."""
        if f.is_Pow and f not in self.spelled:
            base, exp = f.args
            if exp == sp.Rational(1, 2):
                return f"sqrt({self.show(base, code=code)})", ATOM
            if exp.is_Integer and 1 < exp <= SMALL_POWER and base.is_Symbol:
                return "*".join([str(base)] * int(exp)), MUL
            if exp.is_Integer and exp > 1:
                return f"{self._wrap(base, ATOM, code)}**{int(exp)}", POW
            return f"{self._wrap(base, ATOM, code)}**({self.show(exp, code=code)})", POW
        return self._print(f, code)


DEFAULT = Notation()
