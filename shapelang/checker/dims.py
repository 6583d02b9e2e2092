"""Dim expressions and the prover.

Input: dim-expression nodes, `dim` definitions, `assume` lines and the
`example`. Output: sympy expressions over positive-integer symbols and
verdicts (proved / refuted / unknown, with a counterexample) for the side
conditions the shape rules raise.

How it proves: assumptions that define a size (`D % H == 0`, `D == H*Dk`,
`dim Dk = D/H`) become substitutions into a canonical set of free variables
(`D % H == 0` makes D = H*k for a fresh positive integer k). Equalities are then
polynomial identities, checked by expansion; whole-ness and positivity have
cheap sufficient tests. Anything not proved is searched for a counterexample
among small assignments that satisfy every assumption. No user text is ever
handed to sympify or eval: expressions are built node by node.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import BinOp, Call, Expr, Hole, Name, Neg, Num, Pipeline
from .lazysympy import sympy as sp
from .notation import ADD, ATOM, DEFAULT, MUL, NEG, POW, Notation, elide, float_text

MAX_EXPONENT = 16
MAX_DEGREE = 4 * MAX_EXPONENT   # of a whole size expression: `((D**16)**16)**16` is refused
MAX_NUMBER_BITS = 4096          # of a number a size expression makes (1234 digits at most)
MAX_TERMS = 2000  # bound on the terms of an expanded size expression: keeps proofs fast
SCALAR_FUNCTIONS = ("sqrt", "min", "max")
CONSTANTS = ("pi",)  # named numbers of scalars (`p * pi`; sympy's `sp.pi`), unless a dim or tensor has the name
SEARCH_BUDGET = 400  # candidate assignments tried per undecided condition


def dim_symbol(name: str) -> sp.Symbol:
    """The symbol of a declared dim: one object per name for the whole process (sympy's own
    cache may let it go), so that what is kept per shape finds it again by identity."""
    return _kept(_DIMS, name, lambda: sp.Symbol(name, positive=True, integer=True))


def fresh_symbol(after, name: str) -> sp.Dummy:
    """A size the prover brings in (`D = H*k` for `assume D % H == 0`): the same object for
    the same name after the same one (`after`, the prover's one before, or None), so that
    provers built from the same assumptions share them (what a check session keeps of one
    check stays valid in the next), while one prover's are distinct and ordered as made."""
    return _kept(_FRESH, (after, name), lambda: sp.Dummy(name, positive=True, integer=True))


_DIMS: dict = {}
_FRESH: dict = {}


def _kept(cache: dict, key, make):
    """cache[key], made on first use; a full cache starts again (4,096 entries at most)."""
    hit = cache.get(key)
    if hit is None:
        if len(cache) >= 4096:
            cache.clear()
        hit = cache[key] = make()
    return hit


def show(e, notation: Notation | None = None, *, code: bool = False) -> str:
    """A size in the learner's notation (checker/notation.py): their own spelling where
    they wrote it, else shapelang syntax with dims in declaration order. Readable back
    with sympy's parse_expr; `code` keeps long numbers whole (for JSON)."""
    return (notation or DEFAULT).show(e, code=code)


# ---------------------------------------------------------------- building

def build(node: Expr, lookup: Callable[[Name], sp.Expr], *, allow_real: bool = False,
          notation: Notation | None = None) -> sp.Expr:
    """Turn an expression node into a sympy expression, refusing ones too big to prove with.
    With `notation`, the way each composite size is written is remembered for messages."""
    e = _build(node, lookup, allow_real, notation)[0]
    if expanded_terms(e) > MAX_TERMS:
        raise ShapeError("E004", "this size expression is too large to reason about",
                         span=node.span, help="sizes in a spec are short products and sums of dims")
    if allow_real and e.has(sp.Float) and any(not abs(f) <= sp.Float(FLOAT_MAX) for f in e.atoms(sp.Float)):
        raise _too_big(node)
    return e


def _too_big(node) -> ShapeError:
    return ShapeError("E005", "this number is beyond what a float can hold (about 1.8e308)",
                      span=node.span, help="a scale or probability in a model is a modest number")


FLOAT_MAX = 1.7976931348623157e308


def expanded_terms(e: sp.Expr) -> int:
    """An upper bound on the number of terms of e once multiplied out."""
    if e.is_Add:
        return sum(expanded_terms(a) for a in e.args)
    if e.is_Mul:
        out = 1
        for a in e.args:
            out *= expanded_terms(a)
        return out
    if e.is_Pow and e.exp.is_Integer:
        n, k = expanded_terms(e.base), abs(int(e.exp))
        return math.comb(n + k - 1, k) if n > 1 else 1
    if e.args:
        return sum(expanded_terms(a) for a in e.args) or 1
    return 1


_OPS = {"+": ADD, "-": ADD, "*": MUL, "/": MUL, "//": MUL, "%": MUL, "**": POW}


def _build(node: Expr, lookup: Callable[[Name], sp.Expr], allow_real: bool = False,
           notation: Notation | None = None) -> tuple[sp.Expr, str, int]:
    """An expression node as a sympy expression, with its text as written (spacing
    normalised) and the precedence of that text.

    `lookup` resolves a name to a symbol (or raises ShapeError). `allow_real`
    permits decimals and sqrt, for scalars such as `scale 1/sqrt(Dk)`.
    """
    def sub(n):
        return _build(n, lookup, allow_real, notation)

    if isinstance(node, Num):
        if isinstance(node.value, float):
            if not allow_real:
                raise ShapeError("E005", f"`{node.text}` is not a whole number", span=node.span,
                                 help="sizes are whole numbers")
            if not math.isfinite(node.value):
                raise _too_big(node)
            return sp.Float(node.value), float_text(node.value), ATOM
        return sp.Integer(node.value), str(node.value), ATOM
    if isinstance(node, Name):
        try:
            e = lookup(node)
        except ShapeError as err:
            if err.code != "E002" or node.name not in CONSTANTS:
                raise
            if not allow_real:
                raise ShapeError("E005", f"`{node.name}` is not a whole number", span=node.span,
                                 help="sizes are whole numbers; `pi` stands in scalars such as "
                                      "`x * pi`") from None
            return getattr(sp, node.name), node.name, ATOM
        return (e, *(notation or DEFAULT).text(e))
    if isinstance(node, Hole):
        raise unfilled(node)
    if isinstance(node, Neg):
        e, text, prec = sub(node.operand)
        return -e, "-" + (text if prec >= NEG else f"({text})"), NEG
    if isinstance(node, Pipeline) and not node.ops:
        return sub(node.head)
    if isinstance(node, BinOp) and node.op != "@":
        a, ta, pa = sub(node.left)
        b, tb, pb = sub(node.right)
        e = _combine(node, a, b, allow_real)
        prec = _OPS[node.op]
        if node.op == "**":
            text = f"{ta if pa > POW else f'({ta})'}**{tb if pb >= POW else f'({tb})'}"
        else:
            # `a + (b - c)` reads as `a + b - c`, `a*(b/c)` as `a*b/c`; `a*(b % c)` keeps them
            right_ok = pb > prec or (pb == prec and node.op in ("+", "*")
                                     and not ("%" in tb or "//" in tb))
            sep = "" if prec >= MUL and node.op in ("*", "/") else " "
            text = (f"{ta if pa >= prec else f'({ta})'}{sep}{node.op}{sep}"
                    f"{tb if right_ok else f'({tb})'}")
        if notation is not None and not _substituted(node, lookup):
            notation.record(e, text, prec)
        return e, text, prec
    if isinstance(node, Call) and node.func in SCALAR_FUNCTIONS:
        args = [sub(a) for a in node.args]
        exprs = [a[0] for a in args]
        text = f"{node.func}({', '.join(a[1] for a in args)})"
        if node.func == "sqrt" and len(args) == 1:
            if not allow_real:
                raise ShapeError("E005", "`sqrt` is not a size", span=node.span,
                                 help="sqrt is allowed in scalars such as `scale 1/sqrt(Dk)`")
            return sp.sqrt(exprs[0]), text, ATOM
        if node.func in ("min", "max") and len(args) == 2:
            e = (sp.Min if node.func == "min" else sp.Max)(*exprs)
            if notation is not None:
                notation.record(e, text, ATOM)
            return e, text, ATOM
        raise ShapeError("E110", f"`{node.func}` takes {'1' if node.func == 'sqrt' else '2'} arguments",
                         span=node.span)
    raise ShapeError("E005", "this is not a size expression", span=node.span,
                     help="a size is built from numbers, dims, + - * / // % and **")


def _substituted(node, lookup, depth: int = 0) -> bool:
    """Whether a name in `node` stands for another size here (a block's `C` bound to `2*D`
    at a call): the text built from it (`2*2*D` for `2*C`) is not the learner's spelling."""
    if isinstance(node, Name):
        try:
            return str(lookup(node)) != node.name
        except ShapeError:
            return False
    if depth > 50:
        return True
    if isinstance(node, BinOp):
        return _substituted(node.left, lookup, depth + 1) or _substituted(node.right, lookup, depth + 1)
    if isinstance(node, Neg):
        return _substituted(node.operand, lookup, depth + 1)
    if isinstance(node, Pipeline) and not node.ops:
        return _substituted(node.head, lookup, depth + 1)
    return False


def _combine(node: BinOp, a: sp.Expr, b: sp.Expr, allow_real: bool = False) -> sp.Expr:
    e = _combined(node, a, b, allow_real)
    if node.op in ("*", "**"):
        _bounded(node, e)
    return e


def degree(e: sp.Expr, depth: int = 0) -> int:
    """The total degree of a size expression in its dims (powers nested in any way count
    in full: `(D**16)**16` is 256); functions count as their highest argument."""
    if e.is_Number or depth > 200:
        return 0
    if e.is_Symbol:
        return 1
    if e.is_Pow:
        k = abs(int(e.exp)) if e.exp.is_Integer else 1
        return degree(e.base, depth + 1) * k
    parts = [degree(a, depth + 1) for a in e.args]
    if e.is_Mul:
        return sum(parts)
    return max(parts, default=0)


def _bounded(node: BinOp, e: sp.Expr) -> None:
    """A product or a power too big to prove or to print is refused where it is written,
    before the prover or an example value sees it."""
    if e.is_Rational and max(abs(e.p).bit_length(), e.q.bit_length()) > MAX_NUMBER_BITS:
        raise ShapeError("E004", "number is too large", span=node.span,
                         help=f"numbers in sizes stay below 2**{MAX_NUMBER_BITS}")
    if not e.is_Number and degree(e) > MAX_DEGREE:
        raise ShapeError("E004", f"this size is a polynomial of degree {degree(e)}, too high "
                         "to be a size", span=node.span,
                         help=f"a size has degree at most {MAX_DEGREE} in its dims "
                              "(`D**2` has degree 2)")


def _combined(node: BinOp, a: sp.Expr, b: sp.Expr, allow_real: bool = False) -> sp.Expr:
    if node.op == "+":
        return a + b
    if node.op == "-":
        return a - b
    if node.op == "*":
        return a * b
    if node.op in ("/", "//", "%"):
        if b == 0:
            raise ShapeError("E005", "division by zero", span=node.span)
        if node.op == "/":
            return a / b
        return sp.floor(a / b) if node.op == "//" else mod(a, b)
    if node.op != "**":
        raise ShapeError("E005", f"`{node.op}` is not an operator of sizes", span=node.span,
                         help="a size is built from numbers, dims, + - * / // % and **")
    if allow_real:
        b = _scalar_exponent(node, b)
    elif not (b.is_Integer and 0 <= int(b) <= MAX_EXPONENT):
        raise ShapeError("E004", f"exponent `{b}` is not allowed here", span=node.right.span,
                         help=f"exponents of sizes are whole numbers from 0 to {MAX_EXPONENT}")
    if a.is_Number and abs(a) > 2 ** 64:
        raise ShapeError("E004", "number is too large", span=node.span)
    return a ** b


def mod(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    """a % b as sympy's Mod gives it. Of a dim (a positive whole symbol) by another dim or by a
    number above 1, Mod finds no simpler form, but only after asking a dozen questions of them:
    a few milliseconds the first time in a process, for the `assume D % H == 0` of nearly every
    spec. Those cases are made as written (tests/test_prover.py compares them with sympy's own)."""
    if a.is_Symbol and a.is_integer and a.is_positive and a.is_even is None and (
            (b.is_Symbol and a != b and b.is_integer and b.is_positive and b.is_even is None)
            or (b.is_Integer and b > 1)):
        return sp.Mod(a, b, evaluate=False)
    return sp.Mod(a, b)


def _scalar_exponent(node: BinOp, b: sp.Expr) -> sp.Expr:
    """The exponent of a scalar (`scale D**-0.5`, `x ** 2`), exact: a whole or half number
    of at most MAX_EXPONENT either way (0.5 is sqrt)."""
    if b.is_Float and math.isfinite(float(b)) and float(2 * b).is_integer():
        b = sp.Rational(int(2 * b), 2)
    if not (b.is_Rational and (2 * b).is_Integer and abs(b) <= MAX_EXPONENT):
        shown = float_text(float(b)) if b.is_Float else str(b)
        raise ShapeError("E004", f"exponent `{shown}` is not allowed here", span=node.right.span,
                         help=f"exponents of scalars are whole or half numbers from "
                              f"-{MAX_EXPONENT} to {MAX_EXPONENT} (`D**-0.5` is 1/sqrt(D))")
    return b


def unfilled(node: Hole) -> ShapeError:
    return ShapeError("E116", f"the blank `?{node.name}` is not filled in", span=node.span,
                      help="replace it with your answer")


# ---------------------------------------------------------------- evaluation

def evaluate(e: sp.Expr, env: dict[sp.Symbol, int]):
    """Exact value of `e` under `env` (a Fraction; a float where sqrt appears)."""
    if e.is_Integer:
        return Fraction(int(e))
    if e.is_Rational:
        return Fraction(int(e.p), int(e.q))
    if e.is_Symbol:
        return Fraction(env[e])
    if e.is_Float:
        return float(e)
    if e is sp.pi:
        return math.pi
    if e.is_Add:
        return sum((evaluate(a, env) for a in e.args), Fraction(0))
    if e.is_Mul:
        out = Fraction(1)
        for a in e.args:
            out = out * evaluate(a, env)
        return out
    if e.is_Pow:
        base = evaluate(e.args[0], env)
        exp = e.args[1]
        if exp.is_Integer:
            if base == 0 and int(exp) < 0:
                raise ZeroDivisionError
            return base ** int(exp)
        return float(base) ** float(evaluate(exp, env))
    if isinstance(e, sp.Mod):
        a, b = (evaluate(x, env) for x in e.args)
        return a % b
    if isinstance(e, sp.floor):
        return Fraction(math.floor(evaluate(e.args[0], env)))
    if isinstance(e, (sp.Min, sp.Max)):
        vals = [evaluate(a, env) for a in e.args]
        return min(vals) if isinstance(e, sp.Min) else max(vals)
    raise ValueError(f"cannot evaluate {e}")


def as_int(v) -> int | None:
    if isinstance(v, Fraction) and v.denominator == 1:
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def fmt_value(v) -> str:
    """An example value for people: whole numbers in full (elided past notation.ELIDE
    digits), others to 4 significant digits."""
    if isinstance(v, Fraction):
        if max(abs(v.numerator).bit_length(), v.denominator.bit_length()) > 10_000:
            return f"a number of about {int(max(abs(v.numerator), v.denominator).bit_length() * 0.30103)} digits"
        if v.denominator == 1:
            return elide(str(v.numerator))
        try:
            return f"{float(v):.4g}"
        except OverflowError:
            return f"{elide(str(v.numerator))}/{elide(str(v.denominator))}"
    return f"{v:.4g}"


# ---------------------------------------------------------------- verdicts


# comparisons of an `assume` line, evaluated on numbers
_CMP = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
