"""Shape differences in words: what is wrong with a learner's shape, dim by dim.

Input: the exercise's prover (every comparison holds for all sizes that satisfy
the assumptions) and the roles its sizes play in attention (the query length
and the key length, read from the reference's axis provenance). Output: the
part of a sentence that follows "your shape ...": which dim is missing or one
too many, which two dims must change places, by which factor a size is off
("`D` in dim 3 (the last) is H times too big: divide by H"), or that a length
is the query length where the key length belongs.
"""
from __future__ import annotations

from itertools import combinations

import sympy as sp

MAX_RANK = 12      # longer shapes are compared dim by dim only


def where(k: int, rank: int) -> str:
    """`dim 3 (the last)`."""
    return f"dim {k}" + (" (the last)" if k == rank - 1 and k > 0 else "")


def dims_phrase(ks: list) -> str:
    if len(ks) == 1:
        return f"dim {ks[0]}"
    return "dims " + ", ".join(str(k) for k in ks[:-1]) + f" and {ks[-1]}"


def attention_roles(prover, spec) -> dict:
    """size -> (its role, the tensors it comes from) for the query and key lengths of the
    attention scores in the reference: a matrix product whose key axis (provenance marks
    it) and whose rows are token axes, not features, and whose two lengths differ."""
    roles: dict = {}
    if spec is None:
        return roles
    for b in spec.bindings:
        for s in b.steps:
            tp = s.provenance[0] if s.op in ("matmul", "einsum") and s.provenance else None
            if tp is None or tp.keys is None or len(tp.axes) < 2 or len(s.out.shape) < 2:
                continue
            rows, cols = tp.axes[-2], tp.axes[-1]
            if tp.keys is not cols or not rows or not cols or \
                    any(a.feature for a in rows + cols):
                continue
            q, k = s.out.shape[-2], s.out.shape[-1]
            if q == k or prover.equal(q, k).ok:
                continue
            roles.setdefault(q, ("the query length", _sources(spec, q, prover)))
            roles.setdefault(k, ("the key length", _sources(spec, k, prover)))
    return roles


def _sources(spec, size, prover) -> tuple:
    """The inputs with an axis of this size (where the tokens come from)."""
    return tuple(d.name for d in spec.decls if d.kind == "input"
                 and any(x == size or prover.equal(x, size).ok for x in d.type.shape[:-1]))


class Words:
    """Shape comparisons of one exercise, in words."""

    def __init__(self, prover, roles: dict | None = None, notes: dict | None = None):
        self.prover = prover
        self.roles = roles or {}
        self.notes = notes or {}      # dim name -> what the exercise's comment says it is

    # -- sizes
    def eq(self, a, b) -> bool:
        return a == b or self.prover.equal(a, b).ok

    def same(self, a, b) -> bool:
        return len(a) == len(b) and all(self.eq(x, y) for x, y in zip(a, b))

    def factor(self, got, want) -> str | None:
        """`H times too big: divide by H`, `4 times too small: multiply by 4`, or None when
        `got` is not `want` times a number or a product of dims."""
        p = self.prover
        try:
            ratio = sp.cancel(p.canon(got) / p.canon(want))
        except (TypeError, ValueError, ZeroDivisionError):
            return None
        for _ in range(4):       # the prover's own sizes (`H = G*k` from `H % G == 0`)
            fresh = ratio.free_symbols & p.fresh.keys()
            if not fresh:
                break
            ratio = sp.cancel(ratio.xreplace({k: p.fresh[k] for k in fresh}))
        if ratio.free_symbols - set(p.user.values()) or ratio == 1:
            return None
        if ratio.is_Rational:
            r = sp.Rational(ratio)
            if r <= 0:
                return None
            if r.q == 1:
                return f"{r} times too big: divide by {r}"
            if r.p == 1:
                return f"{r.q} times too small: multiply by {r.q}"
            return f"{r} of the size needed: multiply by {1 / r}"
        num, den = sp.fraction(ratio)
        monomial = (sp.Symbol, sp.Mul, sp.Pow)
        if den == 1 and isinstance(num, monomial) and _positive_monomial(num):
            return f"{num} times too big: divide by {num}"
        if num == 1 and isinstance(den, monomial) and _positive_monomial(den):
            return f"{den} times too small: multiply by {den}"
        if isinstance(num, monomial) and isinstance(den, monomial) and \
                _positive_monomial(num) and _positive_monomial(den):   # `H/G` (GQA's groups)
            if p.leq(den, num).ok:
                return f"{ratio} times too big: divide by {ratio}"
            if p.leq(num, den).ok:
                return f"{1 / ratio} times too small: multiply by {1 / ratio}"
        return None

    def role(self, size):
        for k, v in self.roles.items():
            if self.eq(k, size):
                return k, v
        return None

    # -- whole shapes
    def describe(self, got, want, name: str, need: bool = False) -> str:
        """What is wrong with shape `got` where `name` must be `want` (not equal), as the
        rest of a sentence whose subject is the shape: "has 3 dims; `x` has 4: ...";
        `need`: say "where 4 are needed" (for a shape that has no name)."""
        if len(got) != len(want):
            head = f"has {len(got)} dim{'s' if len(got) != 1 else ''}" + (
                f" where {len(want)} {'are' if len(want) != 1 else 'is'} needed" if need
                else f"; `{name}` has {len(want)}")
            why = self.rank(got, want) if max(len(got), len(want)) <= MAX_RANK else None
            return f"{head}: {why}" if why else head
        order = self.order(got, want)
        if order:
            return f"has the right sizes in the wrong order: {order}"
        diff = [k for k, (a, b) in enumerate(zip(got, want)) if not self.eq(a, b)]
        if len(diff) == 1:
            return self.one_dim(got, want, diff[0])
        roles = [self.role_swap(got[k], want[k]) for k in diff]
        if all(roles):
            return f"has {dims_phrase(diff)} wrong: " + "; ".join(
                f"dim {k} is `{got[k]}`, {r}" for k, r in zip(diff, roles))
        factors = [self.factor(got[k], want[k]) for k in diff]
        if all(factors):          # a patch grid P times too big in both of its dims
            return f"is off by a factor in {dims_phrase(diff)}: " + "; ".join(
                f"`{got[k]}` in dim {k} is {f}" for k, f in zip(diff, factors))
        return f"has {dims_phrase(diff)} wrong"

    def one_dim(self, got, want, k: int) -> str:
        """The sentence for shapes that differ only in dim k."""
        at = where(k, len(want))
        swap = self.role_swap(got[k], want[k])
        if swap:
            return f"has {at} wrong: it is `{got[k]}`, {swap}"
        f = self.factor(got[k], want[k])
        if f:
            return f"is off by a factor in {at}: `{got[k]}` is {f}"
        return f"has {at} wrong ({self.named(got[k])}); the other dims are right"

    def detail(self, got, want, name: str) -> str | None:
        """Only the specific part (which dim is missing, which factor, which pair), to add
        to another sentence; None when there is nothing specific to say."""
        if len(got) != len(want):
            return self.rank(got, want) if max(len(got), len(want)) <= MAX_RANK else None
        order = self.order(got, want)
        if order:
            return order
        diff = [k for k, (a, b) in enumerate(zip(got, want)) if not self.eq(a, b)]
        if len(diff) > 1:
            factors = [self.factor(got[k], want[k]) for k in diff]
            if all(factors):
                return "; ".join(f"`{got[k]}` in {where(k, len(want))} is {f}"
                                 for k, f in zip(diff, factors))
            return None
        if not diff:
            return None
        k = diff[0]
        swap = self.role_swap(got[k], want[k])
        if swap:
            return f"{where(k, len(want))} is `{got[k]}`, {swap}"
        f = self.factor(got[k], want[k])
        return f"`{got[k]}` in {where(k, len(want))} is {f}" if f else None

    def role_swap(self, got, want) -> str | None:
        """`the query length; here it must be `Sc`, the key length (...)` when a query
        length stands where the key length belongs, or the other way round."""
        a, b = self.role(got), self.role(want)
        if a is None or b is None or a[1][0] == b[1][0]:
            return None
        (_, (ra, sa)), (kb, (rb, sb)) = a, b
        why = []
        for role, src in ((ra, sa), (rb, sb)):
            if len(src) == 1:
                who = {"query": "queries", "key": "keys"}.get(role.split()[1], role)
                why.append(f"{who} come from `{src[0]}`")
        reason = f" (the {', the '.join(why)})" if why else ""
        return f"{ra}; here it must be `{kb}`, {rb}{reason}"

    def rank(self, got, want) -> str | None:
        """Which dims are missing or too many, or which should be merged or split."""
        got, want = tuple(got), tuple(want)
        n, m = len(got), len(want)
        if 0 < m - n <= 3:
            for drop in sorted(combinations(range(m), m - n), reverse=True):
                if self.same(got, tuple(d for k, d in enumerate(want) if k not in drop)):
                    return self._missing(want, list(drop))
        if 0 < n - m <= 3:
            for drop in sorted(combinations(range(n), n - m), reverse=True):
                if self.same(tuple(d for k, d in enumerate(got) if k not in drop), want):
                    ks = list(drop)
                    if len(ks) == 1:
                        return f"{where(ks[0], n)} (`{got[ks[0]]}`) is one too many"
                    return f"{dims_phrase(ks)} ({', '.join(f'`{got[k]}`' for k in ks)}) " \
                           "are too many"
        if n > m:
            for i, j in combinations(range(n + 1), 2):
                if j - i == n - m + 1 and \
                        self.same(got[:i] + (sp.Mul(*got[i:j]),) + got[j:], want):
                    return f"{dims_phrase(list(range(i, j)))} " \
                           f"({', '.join(f'`{d}`' for d in got[i:j])}) must be one dim"
        if m > n:
            for i, j in combinations(range(m + 1), 2):
                if j - i == m - n + 1 and \
                        self.same(want[:i] + (sp.Mul(*want[i:j]),) + want[j:], got):
                    return f"dim {i} (`{got[i]}`) must be split into {j - i} dims"
        return None

    def _missing(self, want, ks: list) -> str:
        m = len(want)
        if all(self.eq(want[k], sp.Integer(1)) for k in ks):
            if len(ks) == 1:
                return f"a dim of size 1 is missing at {where(ks[0], m)}"
            return f"{len(ks)} dims of size 1 are missing, at {dims_phrase(ks)}"
        if len(ks) == 1:
            return f"{self.named(want[ks[0]])} is missing at {where(ks[0], m)}"
        return f"{', '.join(self.named(want[k]) for k in ks)} are missing, at {dims_phrase(ks)}"

    def named(self, size) -> str:
        """`Dk` with what the exercise says it is, when it says so: `Dk` (key width)."""
        note = self.notes.get(str(size))
        return f"`{size}`" + (f" ({note})" if note else "")

    def order(self, got, want) -> str | None:
        """For a permutation of `want`: which dim comes too early, and, when exchanging two
        dims puts it right, which two."""
        got, want = tuple(got), tuple(want)
        used = [False] * len(want)
        for a in got:
            for j, b in enumerate(want):
                if not used[j] and self.eq(a, b):
                    used[j] = True
                    break
            else:
                return None
        diff = [k for k in range(len(got)) if not self.eq(got[k], want[k])]
        if not diff:
            return None
        if len(diff) == 2:
            i, j = diff
            return f"`{got[i]}` comes before `{got[j]}`; dims {i} and {j} must change places"
        for k in diff:
            a = got[k]
            ia = next(j for j, w in enumerate(want) if self.eq(a, w))
            for b in got[k + 1:]:
                ib = next(j for j, w in enumerate(want) if self.eq(b, w))
                if ib < ia:
                    return f"`{a}` comes before `{b}`"
        return None

    def swap_for(self, start, want) -> tuple | None:
        """(i, j) such that exchanging dims i and j of `start` gives `want`, or None."""
        if len(start) != len(want) or len(start) > MAX_RANK:
            return None
        for i, j in combinations(range(len(start)), 2):
            s = list(start)
            s[i], s[j] = s[j], s[i]
            if not self.same(start, s) and self.same(s, want):
                return i, j
        return None


def _positive_monomial(e) -> bool:
    return all(not (isinstance(a, sp.Number) and a < 0) for a in sp.Mul.make_args(e))
