"""The prover: decides equalities, whole-ness, positivity and bounds of sizes for all
assignments that satisfy the assumptions, and searches counterexamples when it cannot."""
from __future__ import annotations

from dataclasses import dataclass

from . import congruence
from .dims import _CMP, as_int, dim_symbol, evaluate, fresh_symbol, mod
from .lazysympy import sympy as sp
from .notation import Notation
from .polys import (  # noqa: F401
    _linear_bound,
    _monomial,
    _root_divisor,
    _shift_nonneg,
    divisor_alternatives,
    expanded,
    integer_polynomial,
    linear_coeffs,
    minmax_cases,
    nonneg_given,
    numeric_product,
    without_rounding,
)
from .search import Search


@dataclass(frozen=True)
class Verdict:
    status: str  # proved | refuted | unknown
    counterexample: dict[str, int] | None = None   # {} when no size matters (`7/3`)
    tried: int = 0   # unknown: how many valid assignments the search tried

    @property
    def ok(self) -> bool:
        return self.status == "proved"


PROVED = Verdict("proved")
UNPROVED = Verdict("unknown")   # not proved, and not searched (Prover._decide without `search`)


@dataclass(frozen=True)
class Relation:
    left: sp.Expr
    cmp: str
    right: sp.Expr
    text: str

    def holds(self, env) -> bool:
        return _CMP[self.cmp](evaluate(self.left, env), evaluate(self.right, env))


class Prover(Search):
    """Decides conditions over all sizes that satisfy the spec's assumptions."""

    def __init__(self):
        self.user: dict[str, sp.Symbol] = {}       # every declared dim
        self.definition: dict[sp.Symbol, sp.Expr] = {}  # derived dims, in user terms
        self.subst: dict[sp.Symbol, sp.Expr] = {}  # canonical substitution
        self.fresh: dict[sp.Symbol, sp.Expr] = {}  # fresh var -> its meaning in user terms
        self.unbacked: dict[sp.Symbol, sp.Expr] = {}  # data-dependent size -> its upper bound
        self.relations: list[Relation] = []        # constraints left for the search
        self.example: dict[str, int] = {}
        self._cache: dict = {}
        self._canons: dict = {}   # size -> its canonical form under `subst`
        self.notation = Notation()   # how the learner writes sizes, for messages
        self.zero_ok: set[sp.Symbol] = set()   # dims that may be 0 (`assume P >= 0`)
        self.work = 0   # conditions decided and sizes tried: what tests bound, not seconds
        self.last_fresh = None   # the last size brought in (dims.fresh_symbol)

    def fresh_symbol(self, name: str) -> sp.Dummy:
        self.last_fresh = fresh_symbol(self.last_fresh, name)
        return self.last_fresh

    # -- set up
    def declare(self, name: str) -> sp.Symbol:
        sym = dim_symbol(name)
        self.user[name] = sym
        self.notation.declare(sym)
        return sym

    def data_dependent(self, name: str, bound: sp.Expr) -> sp.Symbol:
        """A fresh size that depends on the values (`nonzero`, `where(M)`): a whole number from 0
        to `bound` (in user terms), a new one per occurrence, as torch.export's unbacked sizes.
        Named `name`, `name_2`, .. so that a trace shows which step made it."""
        taken = set(self.user) | {str(k) for k in self.unbacked}
        base, k = name, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        sym = sp.Symbol(name, integer=True, nonnegative=True)
        self.unbacked[sym] = bound
        self.notation.declare(sym)
        self._cache.clear()
        return sym

    def define(self, sym: sp.Symbol, value: sp.Expr) -> None:
        self.definition[sym] = value
        self._substitute(sym, self.canon(value))

    def _substitute(self, sym: sp.Symbol, value: sp.Expr) -> None:
        self.subst = {k: v.xreplace({sym: value}) for k, v in self.subst.items()}
        self.subst[sym] = value
        self._canons = {}
        relations = [Relation(self.canon(r.left), r.cmp, self.canon(r.right), r.text) for r in self.relations]
        if any(r.left.is_Number and r.right.is_Number and not r.holds({}) for r in relations):
            raise ValueError("it contradicts an assumption before it")
        self.relations = [r for r in relations if not (r.left.is_Number and r.right.is_Number)]
        self._cache.clear()

    def assume(self, left: sp.Expr, cmp: str, right: sp.Expr, text: str) -> None:
        """Record an assumption; ValueError if it cannot hold for positive sizes."""
        a, b = self.canon(left), self.canon(right)
        if a.is_Number and b.is_Number:   # decided by the assumptions before it
            if not _CMP[cmp](a, b):
                raise ValueError("the assumptions before it rule it out")
            return
        if cmp == "==" and ((a.is_Number and a < 1 and b.is_Symbol) or
                            (b.is_Number and b < 1 and a.is_Symbol)):
            raise ValueError("sizes are whole numbers of at least 1, so this can never hold")
        if cmp in ("==", "!=") and a == 0:   # `0 == X % Y` reads like `X % Y == 0`
            a, b, left, right = b, a, right, left
        x = a if (cmp, b) == (">=", 0) else b if (cmp, a) == ("<=", 0) else None
        if x is not None and x.is_Symbol and x in self._free_user():   # `P >= 0`: P = k - 1, k >= 1
            k = self.fresh_symbol(f"{x}_plus_1")
            self.fresh[k] = x + 1
            self.zero_ok.add(x)
            return self._substitute(x, k - 1)
        # `X % Y == 0` with X a free size: X = Y * k
        if cmp == "==" and isinstance(a, sp.Mod) and b == 0:
            x, y = _root_divisor(*a.args)
            if y == 1:
                return   # always true
            if x.is_Symbol and x in self._free() and x not in y.free_symbols:
                k = sp.Symbol(f"{x}_over_{y}".replace(" ", ""), positive=True, integer=True)
                k = self.fresh_symbol(str(k))
                lx, ly = _root_divisor(*left.args) if isinstance(left, sp.Mod) else (x, y)
                self.fresh[k] = lx / ly
                self._substitute(x, y * k)
                self._tighten()
                return
            if congruence.assume_step(self, a.args[0], a.args[1]):
                return
        if cmp == "==":
            for x, other in ((b, a), (a, b)):
                if x.is_Symbol and x in self._free() and x not in other.free_symbols:
                    self._substitute(x, other)
                    self._tighten()
                    return
        self.relations.append(Relation(a, cmp, b, text))
        self._cache.clear()
        self._tighten()

    def _tighten(self) -> None:
        """Combine assumptions into substitutions (a sound, cheap step, not a decision
        procedure): a relation that bounds a free size v linearly, `A*v + B >= 0` with A of
        one sign and -B/A a number c, gives v <= c or v >= c. Sizes are whole and at least 1, so
        v <= 1 makes v = 1 (`Z % N == 0` with `Z <= N`: Z = N*k, k <= 1, Z = N), and for a
        quotient k of a divisibility assumption v != 1 or v >= 2 makes k = k' + 1
        (`D % K == 0` with `K != D`: D = K*(k' + 1) >= 2*K)."""
        for _ in range(len(self.relations) + 4):   # each round substitutes one variable
            if not self._tighten_once():
                return

    def _tighten_once(self) -> bool:
        for r in self.relations:   # a congruence a substitution left in one free size
            if congruence.is_congruence(r) and len(congruence.reduced(*r.left.args).free_symbols) == 1:
                self.relations = [q for q in self.relations if q is not r]
                if congruence.assume_step(self, *r.left.args):
                    return True
                self.relations.append(r)
        free = self._free()
        for r in self.relations:
            diff = r.left - r.right
            slack, strict = {"<=": (-diff, False), "<": (-diff, True), ">=": (diff, False),
                             ">": (diff, True), "!=": (diff, False)}.get(r.cmp, (None, False))
            if slack is None or len(slack.free_symbols) > 6:
                continue
            for v in sorted(slack.free_symbols & free - set(self.unbacked), key=str):
                bound = _linear_bound(sp.expand(slack), v)
                if bound is None:
                    continue
                sign, c = bound
                if r.cmp == "!=":
                    if c == 1 and v in self.fresh:
                        return self._at_least_two(v)
                    continue
                if sign < 0:   # v <= c, or v < c
                    most = sp.ceiling(c) - 1 if strict else sp.floor(c)
                    if most < 1:
                        raise ValueError(f"`{r.text}` forces a size below 1")
                    if most == 1:
                        self._substitute(v, sp.Integer(1))
                        return True
                elif v in self.fresh and (sp.floor(c) + 1 if strict else sp.ceiling(c)) >= 2:
                    return self._at_least_two(v)
        return False

    def _at_least_two(self, k: sp.Symbol) -> bool:
        k2 = self.fresh_symbol(f"{k}_minus_1")
        self.fresh[k2] = self.fresh[k] - 1
        self._substitute(k, k2 + 1)
        return True

    def _free_user(self) -> set:
        return {s for s in self.user.values() if s not in self.subst}

    def _free(self) -> set:
        """The canonical free variables: unsubstituted dims and fresh quotients."""
        return self._free_user() | {k for k in self.fresh if k not in self.subst} | set(self.unbacked)

    def canon(self, e: sp.Expr) -> sp.Expr:
        if not self.subst:
            return e
        hit = self._canons.get(e)   # (sizes repeat: each layer asks about the same ones)
        if hit is None:
            hit = self._canons[e] = self._mod(e) if isinstance(e, sp.Mod) else e.xreplace(self.subst)
        return hit

    def _mod(self, e: sp.Mod) -> sp.Expr:
        """`e.xreplace(subst)` for `X % Y` (`assume Dh % 2 == 0`): remade by dims.mod, which
        gives sympy's own Mod without its questions where they cannot simplify it."""
        a, b = e.args
        ca, cb = self.canon(a), self.canon(b)
        return e if ca is a and cb is b else mod(ca, cb)

    # -- example values
    def user_env(self, values: dict[str, int]) -> dict[sp.Symbol, int] | None:
        """Complete an assignment of base dims with the derived ones (None if not whole)."""
        env = {self.user[n]: v for n, v in values.items() if n in self.user}
        for sym, value in self.definition.items():
            open_ = value.free_symbols - set(env)
            if open_ and not open_ & set(self.definition):
                continue       # made of a dim the assignment leaves open (bound at block calls)
            try:
                v = as_int(evaluate(value, env))
            except (KeyError, ZeroDivisionError, ValueError):
                return None
            if v is None:
                return None
            env.setdefault(sym, v)
        return env

    def value(self, e: sp.Expr, env: dict | None):
        if env is None:
            return None
        try:
            return evaluate(e, env)
        except (KeyError, ZeroDivisionError, ValueError, OverflowError):
            return None

    # -- decisions
    def equal(self, a: sp.Expr, b: sp.Expr, *, broadcast: bool = False) -> Verdict:
        """a == b for every allowed assignment. With broadcast, a counterexample must also
        keep both sides above 1 (where PyTorch would broadcast a size 1)."""
        if a == b:
            return PROVED

        def broken(env):
            va, vb = evaluate(a, env), evaluate(b, env)
            return va != vb and not (broadcast and (va == 1 or vb == 1))
        return self._decide(("eq", a, b, broadcast), lambda: self._prove_zero(self.canon(a - b)),
                            broken, a - b)

    def whole(self, e: sp.Expr, search: bool = True) -> Verdict:
        """`search`: see `_decide`."""
        if e.is_Integer or (e.is_Symbol and e.is_integer) or isinstance(e, (sp.Mod, sp.floor)) \
                or integer_polynomial(e) or (e.has(sp.Mod, sp.floor) and e.is_integer):   # `A*(B % C)`
            return PROVED
        return self._decide(("int", e), lambda: self._prove_whole(self.canon(e)),
                            lambda env: evaluate(e, env).denominator != 1, e, search)

    def positive(self, e: sp.Expr) -> Verdict:
        if (e.is_Symbol and e.is_positive and e not in self.zero_ok) or (e.is_Integer and e > 0):
            return PROVED
        c = self.canon(e)
        if _monomial(c) and c.as_coeff_Mul()[0] > 0 and all(s.is_positive for s in c.free_symbols):
            return PROVED
        return self._decide(("pos", e), lambda: self._prove_positive(self.canon(e)),
                            lambda env: evaluate(e, env) <= 0, e)

    def leq(self, a: sp.Expr, b: sp.Expr, search: bool = True) -> Verdict:
        """`search`: see `_decide`."""
        return self._decide(("leq", a, b), lambda: self._prove_leq(self.canon(a), self.canon(b)),
                            lambda env: evaluate(a, env) > evaluate(b, env), b - a, search)

    def same(self, a: sp.Expr, b: sp.Expr) -> bool:
        """Equal as polynomials after substitution; no counterexample search."""
        key = ("same", a, b)
        hit = self._cache.get(key)
        if hit is None:
            ca, cb = self.canon(a), self.canon(b)
            if _monomial(ca) and _monomial(cb):
                hit = ca == cb  # sympy keeps monomials in one canonical form
            else:
                hit = sp.expand(ca - cb) == 0
            self._cache[key] = hit
        return hit

    def name_of(self, e: sp.Expr) -> sp.Expr:
        """A computed size shown as the declared dim it equals (G*Nrep -> H, Himg/P -> Nh)."""
        if not (e.is_Mul or e.is_Add or e.is_Pow):
            return e
        key = ("name", e)
        hit = self._cache.get(key)
        if hit is None:
            if "names" not in self._cache:
                self._cache["names"] = {expanded(self.canon(sym)): sym for sym in
                                        reversed(list(self.user.values()))}
            c = expanded(self.canon(e))
            hit = self._cache["names"].get(c, e)
            if c.is_Number and hit is not e and not self._same_by_definitions(e, hit):
                hit = e   # fixed sizes that happen to be equal (Dh/2 = 32 = L) are not the same dim
            self._cache[key] = hit
        return hit

    def _same_by_definitions(self, a: sp.Expr, b: sp.Expr) -> bool:
        """Equal once derived dims are written out, fixed sizes (`dim L = 32`) kept as names."""
        derived = {k: v for k, v in self.definition.items() if v.free_symbols}
        for _ in range(len(derived) + 1):
            a, b = a.xreplace(derived), b.xreplace(derived)
        return sp.cancel(a - b) == 0

    def is_one(self, e: sp.Expr) -> bool:
        return e == 1 or self.canon(e) == 1

    def _decide(self, key, prove, broken, expr, search: bool = True) -> Verdict:
        """The verdict on a condition: proved, or else refuted by the counterexample the search
        finds, or unknown. Without `search` (a caller that only asks whether it is proved, as
        a fast path does) an unproved condition is answered `UNPROVED` at once, and nothing is
        kept for it: asked again with the search, it is decided in full."""
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self.work += 1
        try:
            ok = prove()
        except (sp.PolynomialError, TypeError, ValueError, RecursionError):
            ok = False
        if ok:
            verdict = PROVED
        elif not search:
            return UNPROVED
        else:
            cex, tried = self.search(broken, expr)
            verdict = Verdict("refuted", cex) if cex is not None else Verdict("unknown", tried=tried)
        self._cache[key] = verdict
        return verdict

    def _prove_zero(self, d: sp.Expr) -> bool:
        if d == 0 or (d.is_Add and len(d.args) == 2 and all(_monomial(a) for a in d.args)):
            return d == 0  # two different monomials never cancel
        if sp.expand(d) == 0:
            return True
        return sp.cancel(sp.together(d)) == 0

    @staticmethod
    def _by_cases(e: sp.Expr, prove) -> bool | None:
        """A size with `min`/`max` in it: `prove(branch, conditions)` for each of its branches
        (polys.minmax_cases); None when it has none."""
        if not e.has(sp.Min, sp.Max):
            return None
        cases = minmax_cases(e)
        return cases is not None and all(prove(branch, conds) for branch, conds in cases)

    def _prove_whole(self, e: sp.Expr) -> bool:
        split = True if integer_polynomial(e) else self._by_cases(e, lambda b, _c: self._prove_whole(b))
        if split is not None:
            return split
        return congruence.prove_whole(e, self.relations, self._free() - set(self.unbacked),
                                      self._prove_whole)

    def _prove_positive(self, e: sp.Expr) -> bool:
        split = self._by_cases(e, lambda branch, conds: self._prove_positive(branch)
                               or nonneg_given(branch - 1, conds))
        if split is not None:
            return split
        num, den = sp.fraction(sp.cancel(sp.together(e)))
        for n, d in ((num, den), (-num, -den)):
            if _shift_nonneg(n, strict=True) and _shift_nonneg(d, strict=True):
                return True
        return den.is_Number and den > 0 and self._prove_leq(sp.Integer(1), num)

    def _prove_leq(self, a: sp.Expr, b: sp.Expr) -> bool:
        split = self._by_cases(b - a, lambda branch, conds: self._prove_leq(sp.Integer(0), branch)
                               or nonneg_given(branch, conds))
        if split is not None:
            return split
        d = sp.expand(b - a)
        if _shift_nonneg(d):
            return True
        if d.free_symbols & set(self.unbacked):
            return self._leq_by_bounds(d)
        for slack in congruence.slacks(self.relations):
            if _shift_nonneg(sp.expand(d - slack)):
                return True
        bound = without_rounding(d)
        return bound is not None and self._prove_leq(sp.Integer(0), bound)

    def _leq_by_bounds(self, d: sp.Expr) -> bool:
        """d >= 0 where d is linear in the data-dependent sizes: each with a positive
        coefficient is at least 0, each with a negative one at most its bound."""
        for u in sorted(d.free_symbols & set(self.unbacked), key=str):
            parts = linear_coeffs(d, u)
            if parts is None:
                return False
            coeff, rest = parts
            if _shift_nonneg(coeff):
                d = rest
            elif _shift_nonneg(-coeff):
                d = sp.expand(rest + coeff * self.canon(self.unbacked[u]))
            else:
                return False
        return _shift_nonneg(d) or self._prove_leq(sp.Integer(0), d)
