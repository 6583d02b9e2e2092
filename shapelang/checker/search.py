"""The prover's search for counterexamples: assignments of the sizes that satisfy every
assumption and break a condition the prover could not prove (a mixin of prover.Prover, which
holds the assumptions it reads)."""
from __future__ import annotations

import itertools
import random
from collections.abc import Callable

from .dims import SEARCH_BUDGET, as_int
from .lazysympy import sympy as sp


class Search:
    def free_vars(self) -> list[sp.Symbol]:
        return sorted(self._free(), key=str)

    def _canon_example(self) -> dict[sp.Symbol, int]:
        env = self.user_env(self.example) or {}
        out = {}
        for v in self.free_vars():
            if v in self.fresh:
                val = self.value(self.fresh[v], env)
                out[v] = as_int(val) if val is not None and as_int(val) else 2
            elif v in self.unbacked:
                bound = as_int(self.value(self.unbacked[v], env) or 0)
                out[v] = min(2, bound or 0)
            else:
                out[v] = env.get(v, 2)
        return out

    def _to_user(self, canon_env: dict, exempt=frozenset()) -> dict[sp.Symbol, int] | None:
        """User-level assignment from canonical values, or None if it is not valid. A dim in
        `exempt` (a derived dim whose own definition is under test) may be fractional."""
        env = {}
        for sym in self.user.values():
            val = self.value(self.canon(sym), canon_env)
            iv = as_int(val) if val is not None else None
            if iv is None or iv < (sym not in self.zero_ok):
                if sym in exempt and val is not None:
                    env[sym] = val
                    continue
                return None
            env[sym] = iv
        for sym, bound in self.unbacked.items():   # 0 <= N <= its bound
            val, most = canon_env.get(sym), self.value(bound, env)
            if val is None or most is None or not 0 <= val <= most:
                return None
            env[sym] = val
        for r in self.relations:
            try:
                if not r.holds(canon_env):
                    return None
            except (ZeroDivisionError, ValueError, KeyError):
                return None
        return env

    def candidates(self, focus: list[sp.Symbol]):
        """Assignments of the canonical variables to try, the ones that differ from the
        example in a single size first (smallest values first), then pairs and triples of
        small sizes, then the example itself, then random ones."""
        base = self._canon_example()
        small = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16]
        # change one size at a time, the smallest first: `D=512, H=3` teaches more than `D=1`
        for v in sorted(focus, key=lambda s: (base.get(s, 2), str(s))):
            for val in ([0] + small if v in self.unbacked else small):
                if val != base.get(v):
                    yield {**base, v: val}
        for i, v in enumerate(focus):
            for w in focus[i + 1:]:
                for x in ([0] + small[:5] if v in self.unbacked else small[:6]):
                    for y in ([0] + small[:5] if w in self.unbacked else small[:6]):
                        yield {**base, v: x, w: y}
        if len(focus) == 3:   # every triple of sizes 1..6: the search is exhaustive there
            for values in itertools.product(small[:6], repeat=3):
                yield {**base, **dict(zip(focus, values))}
        yield dict(base)
        rng = random.Random(0)
        free = self.free_vars()
        while True:
            env = dict(base)
            for v in focus or free:
                env[v] = rng.randint(0 if v in self.unbacked else 1, 24)
            yield env

    def counterexample(self, broken: Callable, expr: sp.Expr) -> dict[str, int] | None:
        return self.search(broken, expr)[0]

    def search(self, broken: Callable, expr: sp.Expr) -> tuple[dict[str, int] | None, int]:
        """Sizes that satisfy every assumption and break the condition (`broken`), shown for
        the dims of the condition (`expr`) only: {} when it has none (`7/3` is never
        whole); None if the bounded search finds none. Also: how many valid assignments
        were tried."""
        c = self.canon(expr)
        focus = sorted(c.free_symbols & set(self.free_vars()), key=str)
        exempt = {sym for sym in self.definition if self.canon(sym) == c}
        tried = 0
        for i, canon_env in enumerate(self.candidates(focus)):
            if i >= SEARCH_BUDGET:
                return None, tried
            env = self._to_user(canon_env, exempt)
            if env is None:
                continue
            tried += 1
            self.work += 1
            try:
                if broken(env):
                    names = sorted(expr.free_symbols, key=str)
                    return {str(s): int(env[s]) for s in names
                            if s in env and int(env[s]) == env[s]}, tried
            except (ZeroDivisionError, ValueError, KeyError, OverflowError, TypeError):
                continue
            if not focus and not expr.free_symbols:
                return None, tried   # a condition on numbers: one try decides it
        return None, tried

