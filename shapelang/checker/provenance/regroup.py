"""Regrouping: which atoms each axis holds after `view`, `reshape`, `flatten` or
`rearrange` read a tensor's elements in order into a new shape. Cutting and
merging are decided by the prover for all sizes; the plan for a list of sizes is
kept, so repeated layers cost one lookup."""
from __future__ import annotations

from ..lazysympy import sympy as sp
from ..polys import _monomial
from .atoms import TP, Atom


class Regrouper:
    def __init__(self, prover):
        self.prover = prover
        self._pieces: dict = {}
        self._div: dict = {}
        self._plans: dict = {}
        self.failed = None      # (size, atom) where the last regroup mixed atoms

    def divides(self, small, big) -> sp.Expr | None:
        """big / small when it is a whole number for all sizes (polynomial), else None."""
        if self.prover.same(small, big):
            return sp.Integer(1)
        key = (small, big)
        if key not in self._div:
            q = self.prover.canon(big) / self.prover.canon(small)
            if not _monomial(q):
                q = sp.cancel(q)   # a quotient of monomials is in lowest terms as sympy makes it
            _, den = sp.fraction(q)
            ok = den == 1 and not (q.is_Number and (q < 1 or not q.is_Integer))
            self._div[key] = q if ok else None
        return self._div[key]

    def piece(self, atom: Atom, sizes: tuple, names) -> tuple:
        """The pieces of `atom` cut into `sizes` (outermost first), named `names`; the same cut
        gives the same atoms."""
        key = (atom, sizes)
        hit = self._pieces.get(key)
        if hit is None:
            hit = self._pieces[key] = tuple(Atom(sz, nm, atom.feature, atom, k, len(sizes))
                                            for k, (sz, nm) in enumerate(zip(sizes, names)))
        return hit

    # ------------------------------------------------------------ regrouping
    def regroup(self, x: TP, shape) -> list | None:
        """The axes after reading x's elements in order into `shape`; None if an axis of the
        result cannot be formed from whole atoms (or outer pieces of one) in memory order."""
        atoms = [a for ax in x.axes for a in ax]
        key = (tuple(a.size for a in atoms), tuple(shape))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._recipe(self._plan([a.size for a in atoms], shape), shape)
        recipe, failed = plan
        if recipe is None:
            self.failed = (failed[0], atoms[failed[1]])
            return None
        self.failed = None
        out = []
        for g in recipe:
            if g is None:
                out.append(())
            elif len(g) == 1 and g[0][2] is None:   # one whole atom
                out.append((atoms[g[0][0]],))
            else:
                out.append(tuple(self._merge_runs([
                    atoms[i] if cut is None else self.piece(atoms[i], cut, names)[k] for i, k, cut, names in g])))
        return out

    def _recipe(self, plan, shape):
        """The plan as what each result axis takes: per axis None (size 1) or [(atom index, k-th
        cut, the cut sizes or None when the atom stays whole, the pieces' names)]."""
        groups, cuts, failed = plan
        if groups is None:
            return None, failed
        names = {i: [self._piece_name(i, j, cuts, groups, shape) for j in range(len(c))]
                 for i, c in cuts.items() if len(c) > 1}
        return [None if g is None else [(i, k, tuple(cuts[i]), names[i]) if len(cuts[i]) > 1 else (i, k, None, None)
                                        for i, k in g] for g in groups], None

    def _plan(self, sizes: list, shape):
        """How `sizes` (atoms in memory order) are cut and grouped into `shape`: (groups, cuts,
        None), or (None, None, (size, atom index)) where the reading mixes atoms. Depends on
        sizes only, so repeated layers reuse it."""
        one = sp.Integer(1)
        cuts: dict = {}        # atom index -> sizes cut from it, outermost first
        groups: list = []      # per result axis: [(atom index, k-th cut)] or None for size 1
        i, cur, left = 0, None, None
        for size in shape:
            if self.prover.is_one(size):
                groups.append(None)
                continue
            need, group = self.prover.canon(size), []
            while not self.prover.is_one(need):
                if cur is None:
                    if i >= len(sizes):
                        return None, None, (size, max(0, len(sizes) - 1))
                    cur, left = i, sizes[i]
                    cuts[cur] = []
                    i += 1
                if self.prover.same(left, need):
                    take, need, rest = left, one, one
                elif (q := self.divides(need, left)) is not None:
                    take, need, rest = need, one, q
                elif (q := self.divides(left, need)) is not None:
                    take, need, rest = left, q, one
                else:
                    return None, None, (size, cur)
                cuts[cur].append(take)
                group.append((cur, len(cuts[cur]) - 1))
                if self.prover.is_one(rest):
                    cur = None
                else:
                    left = rest
            groups.append(group)
        if cur is not None or any(not self.prover.is_one(s) for s in sizes[i:]):
            return None, None, (shape[-1] if shape else one, cur if cur is not None else max(0, i - 1))
        # an axis made of neighbours in memory (B with the heads of D in `view [S, B*H, Dh]`,
        # PyTorch's own layout) is a flatten: it mixes nothing, and a later split undoes it. An
        # axis cut here whose pieces go into two such merged axes spreads its positions over both
        shared: dict = {}
        for g, size in zip(groups, shape):
            if g and len(g) > 1:
                for a, _ in g:
                    if len(cuts[a]) > 1:
                        shared.setdefault(a, []).append(size)
        for a, sizes_ in shared.items():
            if len(sizes_) > 1:
                return None, None, (sizes_[0], a)
        return groups, cuts, None

    def _piece_name(self, i, j, cuts, groups, shape):
        for g, size in zip(groups, shape):
            if g == [(i, j)]:
                return self.prover.name_of(size)
        return self.prover.name_of(cuts[i][j])

    @staticmethod
    def _merge_runs(axis: list) -> list:
        """Complete, in-order runs of one parent's pieces are the parent again."""
        if len(axis) < 2:
            return axis
        changed = True
        while changed:
            changed = False
            for k, a in enumerate(axis):
                p = a.parent
                n = a.pieces
                if p is not None and a.index == 0 and k + n <= len(axis) and all(
                        axis[k + j].parent is p and axis[k + j].index == j for j in range(n)):
                    axis[k:k + n] = [p]
                    changed = True
                    break
        return axis

    def out_of_order(self, axes) -> Atom | None:
        """A parent whose pieces sit in one axis in the wrong order."""
        for axis in axes:
            if len(axis) < 2:
                continue
            seen = {}
            for a in axis:
                if a.parent is not None:
                    seen.setdefault(a.parent, []).append(a.index)
            for p, idx in seen.items():
                # in memory order; a gap is a piece taken out before (one of q, k, v selected
                # from [.., H, 3, Dh]), not a reordering
                if idx != sorted(idx) or len(set(idx)) != len(idx):
                    return p
        return None

    @staticmethod
    def all_whole(axes) -> bool:
        """No axis merges features with anything else (heads with tokens): what a fix must give."""
        return all(len(ax) <= 1 or len({a.feature for a in ax}) == 1 for ax in axes)
