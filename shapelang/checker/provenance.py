"""Axis provenance: where the elements of every axis come from.

Shapes alone cannot tell `view [B, S, H, Dh] -> transpose 1 2` from
`view [B, H, S, Dh]`: both give [B, H, S, Dh], but the second makes the axis of
size H out of token positions. This pass walks the checked IR and records, for
every axis of every tensor, an ordered product of logical *atoms*: the axes of
inputs and parameters, the new axes of learned maps, and the pieces a split
creates (D = H·Dh after `view [B, S, H, Dh]`). From that it reports what
shapes miss (codes W301-W307, see docs/diagnostics.md):

- W301 an axis made of parts of different axes (heads mixed with tokens);
- W302 pieces of one axis merged back out of order (heads merged without
  moving H back next to Dh);
- W303 softmax of attention scores over an axis other than the keys;
- W304 normalisation statistics over an axis other than the features;
- W305 a causal mask on scores whose query and key lengths are unrelated;
- W306 `scale 1/sqrt(X)` where X is not the size the scores contracted;
- W307 an elementwise op between tensors whose same-sized axes are swapped.

Every decision about sizes goes through the prover, so it holds for all sizes
that satisfy the assumptions. Where the pass does not know an operation, the
provenance is unknown and it stays silent rather than guess.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from ..syntax.diagnostics import Diagnostic
from . import dims as dimlib
from .ops.table import TABLE


class Atom:
    """A logical axis (or a piece of one); compared by identity.

    size: in the prover's canonical form; name: the size as the learner names it (for
    messages and traces); feature: an axis of features (model width, heads, their width);
    parent, index, pieces: for a piece, the atom it was cut from, its position among the
    pieces (outermost first) and how many there are."""
    __slots__ = ("feature", "index", "name", "parent", "pieces", "size")

    def __init__(self, size, name, feature=False, parent=None, index=0, pieces=1):
        self.size, self.name, self.feature = size, name, feature
        self.parent, self.index, self.pieces = parent, index, pieces

    @property
    def label(self) -> str:
        text = _LABELS.get(self.name)
        if text is None:
            text = _LABELS[self.name] = dimlib.show(self.name)
        return text

    def __repr__(self) -> str:
        return self.label


_LABELS: dict = {}   # size expression -> its text: printing sympy is slow, labels repeat


Axis = tuple  # of Atom, outermost first; () for an axis of size 1


@dataclass(frozen=True)
class TP:
    """A tensor's provenance: one Axis per dim, plus what attention scores carry."""
    axes: tuple
    keys: Axis | None = None          # the key axis of attention scores
    contracted: Axis | None = None    # the axis the score product summed over

    def carry(self, axes) -> TP:
        """Same scores markers if the key axis survives."""
        axes = tuple(axes)
        keep = self.keys is not None and self.keys in axes
        return TP(axes, self.keys if keep else None, self.contracted if keep else None)


def label_of(axis: Axis) -> str:
    return "1" if not axis else "·".join(a.label for a in axis)


class Provenance:
    """The pass; `c` is the checker that has just produced the IR (prover, example, report)."""

    def __init__(self, checker):
        self.c = checker
        self.prover = checker.prover
        self._pieces: dict = {}
        self._div: dict = {}
        self._plans: dict = {}
        self._rules = {name: getattr(self, "p_" + d.provenance) for name, d in TABLE.items()
                       if d.provenance and hasattr(self, "p_" + d.provenance)}
        self.producer: dict = {}   # ref -> (step, provenance of its first input)
        self._names = {sp.expand(self.prover.canon(sym)): sym
                       for sym in reversed(list(self.prover.user.values()))}
        self.failed = None
        self.findings: list[Diagnostic] = []

    # ------------------------------------------------------------ walking the IR
    def run(self, spec) -> None:
        env = {d.name: self.decl(d) for d in spec.decls}
        for b in spec.bindings:
            self.binding(b, env)

    def binding(self, b, env) -> None:
        for s in b.steps:
            ins = [env.get(r) for r in s.inputs]
            try:
                outs = self.step(s, ins)
            except (KeyError, IndexError, ValueError, TypeError):
                outs = None   # an operation form this pass does not know: unknown, not a guess
            ref = s.ref
            self.producer[ref] = (s, ins[0] if ins else None)
            s.provenance = outs
            if outs is None:
                continue
            if len(outs) == 1:
                env[ref] = outs[0]
            else:
                for k, tp in enumerate(outs):
                    env[f"{ref}.{k}"] = tp

    def decl(self, d) -> TP:
        t = d.type
        rank = len(t.shape)
        axes = []
        for k, size in enumerate(t.shape):
            feature = d.kind == "param" or (t.dtype == "float" and rank >= 2 and k == rank - 1)
            axes.append(self.fresh(size, feature))
        return TP(tuple(axes))

    def fresh(self, size, feature=False) -> Axis:
        if self.prover.is_one(size):
            return ()
        return (Atom(self.prover.canon(size), size, feature),)

    def step(self, s, ins):
        op = s.op
        rule = self._rules.get(op)
        if rule is not None:
            x = ins[0] if ins else None
            if x is None:
                return None
            out = rule(s, x, ins)
            return None if out is None else tuple(out)
        if op == "input":
            return (TP(tuple(self.fresh(d) for d in s.out.shape)),)
        if op in ("block", "stack"):
            return self.block(s, ins)
        if not ins or ins[0] is None:
            return None
        if op == "matmul":
            return self.matmul(s, ins[0], ins[1])
        if op in ("add", "sub", "mul", "div", "pow", "floordiv", "mod", "neg"):
            return self.elementwise(s, ins)
        return None

    def block(self, s, ins):
        ir = s.block
        if ir is None or any(t is None for t in ins) or len(ins) < len(ir.inputs):
            return None
        env = {d.name: tp for d, tp in zip(ir.inputs, ins)}
        env.update({d.name: self.decl(d) for d in ir.params + ir.buffers})
        for b in ir.bindings:
            self.binding(b, env)
        out = env.get(ir.result)
        return None if out is None else (out,)

    # ------------------------------------------------------------ sizes
    def user(self, e) -> str:
        """A size in the learner's dims (the prover keeps them substituted)."""
        e = self.prover.name_of(e)
        return dimlib.show(self._names.get(sp.expand(e), e))

    def divides(self, small, big) -> sp.Expr | None:
        """big / small when it is a whole number for all sizes (polynomial), else None."""
        if self.prover.same(small, big):
            return sp.Integer(1)
        key = (small, big)
        if key not in self._div:
            q = sp.cancel(self.prover.canon(big) / self.prover.canon(small))
            _, den = sp.fraction(q)
            ok = den == 1 and not (q.is_Number and (q < 1 or not q.is_Integer))
            self._div[key] = q if ok else None
        return self._div[key]

    def piece(self, atom: Atom, sizes: tuple, names: tuple) -> tuple:
        """The pieces of `atom` cut into `sizes` (outermost first); the same cut gives the same atoms."""
        key = (atom, sizes)
        if key not in self._pieces:
            self._pieces[key] = tuple(Atom(sz, nm, atom.feature, atom, k, len(sizes))
                                      for k, (sz, nm) in enumerate(zip(sizes, names)))
        return self._pieces[key]

    # ------------------------------------------------------------ regrouping
    def regroup(self, x: TP, shape) -> list | None:
        """The axes after reading x's elements in order into `shape`; None if an axis of the
        result cannot be formed from whole atoms (or outer pieces of one) in memory order."""
        atoms = [a for ax in x.axes for a in ax]
        key = (tuple(a.size for a in atoms), tuple(shape))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan([a.size for a in atoms], shape)
        groups, cuts, failed = plan
        if groups is None:
            self.failed = (failed[0], atoms[failed[1]])
            return None
        self.failed = None
        out = []
        for g, size in zip(groups, shape):
            if g is None:
                out.append(())
                continue
            axis = []
            for i, k in g:
                atom = atoms[i]
                if len(cuts[i]) == 1:
                    axis.append(atom)
                    continue
                names = tuple(self._piece_name(i, j, cuts, groups, shape) for j in range(len(cuts[i])))
                axis.append(self.piece(atom, tuple(cuts[i]), names)[k])
            out.append(tuple(self._merge_runs(axis)))
        return out

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
        # a piece cut here that shares its axis with anything else mixes values
        for g, size in zip(groups, shape):
            if g and len(g) > 1 and any(len(cuts[a]) > 1 for a, _ in g):
                return None, None, (size, next(a for a, _ in g if len(cuts[a]) > 1))
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

    def _out_of_order(self, axes) -> Atom | None:
        """A parent whose pieces sit in one axis in the wrong order."""
        for axis in axes:
            if len(axis) < 2:
                continue
            seen = {}
            for a in axis:
                if a.parent is not None:
                    seen.setdefault(a.parent, []).append(a.index)
            for p, idx in seen.items():
                if idx != sorted(idx) or len(idx) > 1 and idx != list(range(idx[0], idx[0] + len(idx))):
                    return p
        return None

    def p_regroup(self, s, x: TP, ins):
        shape = s.out.shape
        if len(shape) == len(x.axes) and all(len(ax) == 1 and self.prover.same(ax[0].size, d)
                                             for ax, d in zip(x.axes, shape)):
            return [x]
        axes = self.regroup(x, shape)
        if axes is None:
            self.warn_mixed(s, x, shape)
            return None
        parent = self._out_of_order(axes)
        if parent is not None:
            self.warn(s, "W302", f"`{s.text}` puts the pieces of the axis {parent.label} back together "
                      "in the wrong order, so the values land in the wrong places",
                      fix=self.regroup_fixes(s, x, shape))
            return None
        return [x.carry(axes)]

    def warn_mixed(self, s, x: TP, shape) -> None:
        atoms = [a for ax in x.axes for a in ax]
        split = {a.parent for a in atoms if a.parent is not None}
        merging = [p for p in split if any(self.prover.same(p.size, d) for d in shape)
                   and len({a.index for a in atoms if a.parent is p}) == max(
                       a.pieces for a in atoms if a.parent is p)]
        have = "[" + ", ".join(label_of(ax) for ax in x.axes) + "]"
        if merging:
            p = merging[0]
            parts = " and ".join(a.label for a in atoms if a.parent is p)
            self.warn(s, "W302", f"`{s.text}` merges {parts} back into {p.label}, but they are not next to "
                      f"each other in that order in {have}: heads and tokens get mixed",
                      fix=self.regroup_fixes(s, x, shape),
                      notes=(f"move {parts} next to each other first (a transpose), then merge",))
            return
        target = "[" + ", ".join(dimlib.show(d) for d in shape) + "]"
        culprit = self._mixed_axis(x, shape)
        self.warn(s, "W301", f"`{s.text}` reads the elements of {have} in order into {target}, so "
                  f"{culprit}: values of different axes get mixed",
                  fix=self.regroup_fixes(s, x, shape),
                  notes=(("`view` and `reshape` never move elements; split an axis where it is, "
                         "then move the pieces with `transpose` or `permute`"),))

    def _mixed_axis(self, x: TP, shape) -> str:
        if self.failed is None:
            return "an axis is made of parts of several others"
        size, atom = self.failed
        name = dimlib.show(self.prover.name_of(size))
        return f"the axis of size {name} is made of positions of {atom.label}"

    # ------------------------------------------------------------ other layout ops
    def p_permute(self, s, x: TP, ins):
        order = s.detail.get("dims")
        if s.op == "transpose":
            i, j = order
            order = list(range(len(x.axes)))
            order[i], order[j] = order[j], order[i]
        return [x.carry(x.axes[k] for k in order)]

    def p_unsqueeze(self, s, x: TP, ins):
        d = s.detail["dim"]
        return [x.carry(x.axes[:d] + ((),) + x.axes[d:])]

    def p_squeeze(self, s, x: TP, ins):
        d = s.detail.get("dim")
        if d is None:
            return [x.carry(ax for ax in x.axes if ax)]
        return [x.carry(x.axes[:d] + x.axes[d + 1:])]

    def p_expand(self, s, x: TP, ins):
        lead = len(s.out.shape) - len(x.axes)
        axes = [self.fresh(d) for d in s.out.shape[:lead]]
        for k, ax in enumerate(x.axes):
            size = s.out.shape[lead + k]
            axes.append(ax if ax or self.prover.is_one(size) else
                        (Atom(self.prover.canon(size), size),))
        return [x.carry(axes)]

    def p_repeat(self, s, x: TP, ins):
        d = s.detail["dim"]
        rep = self.fresh(s.detail["repeats"])
        return [x.carry(x.axes[:d] + (x.axes[d] + rep,) + x.axes[d + 1:])]

    def p_rearrange(self, s, x: TP, ins):
        det = s.detail
        flat = list(det["flat"])
        t = x
        if len(flat) != len(x.axes) or not all(self.prover.same(a, b) for a, b in zip(flat, _sizes(x))):
            axes = self.regroup(x, flat)
            if axes is None:
                self.warn_mixed(s, x, flat)
                return None
            t = x.carry(axes)
        t = t.carry(t.axes[p] for p in det["perm"])
        final = list(det["final"])
        if len(final) != len(t.axes) or not all(self.prover.same(a, b) for a, b in zip(final, _sizes(t))):
            axes = self.regroup(t, final)
            if axes is None:
                self.warn_mixed(s, t, final)
                return None
            parent = self._out_of_order(axes)
            if parent is not None:
                self.warn(s, "W302", f"`{s.text}` puts the pieces of the axis {parent.label} back together "
                          "in the wrong order, so the values land in the wrong places")
                return None
            t = t.carry(axes)
        return [t]

    # ------------------------------------------------------------ value ops
    def p_same(self, s, x: TP, ins):
        if s.op in ("softmax", "log_softmax"):
            self.check_softmax(s, x)
        if s.op == "scale":
            self.check_scale(s, x, s.detail.get("factor"))
        if s.op == "mask" and s.detail.get("kind") == "causal":
            self.check_causal(s)
        return [x]

    def p_norm(self, s, x: TP, ins):
        self.check_features(s, x, len(x.axes) - 1, "normalises")
        return [TP(x.axes)]

    def p_reduce(self, s, x: TP, ins):
        d = s.detail["dim"]
        if s.detail.get("keepdim") and s.op in ("mean", "var"):
            self.check_features(s, x, d, "takes its statistics")
        axes = x.axes[:d] + (((),) if s.detail.get("keepdim") else ()) + x.axes[d + 1:]
        return [x.carry(axes)]

    def p_select(self, s, x: TP, ins):
        d = s.detail["dim"]
        return [x.carry(x.axes[:d] + x.axes[d + 1:])]

    def p_slice(self, s, x: TP, ins):
        d = s.detail["dim"]
        return [x.carry(x.axes[:d] + (self._derived(x.axes[d], s.out.shape[d]),) + x.axes[d + 1:])]

    def p_linear(self, s, x: TP, ins):
        return [TP(x.axes[:-1] + (self.fresh(s.out.shape[-1], True),))]

    def p_embed(self, s, x: TP, ins):
        return [TP(x.axes + (self.fresh(s.out.shape[-1], True),))]

    def p_concat(self, s, x: TP, ins):
        d = s.detail["dim"]
        first = ins[0] if s.inputs and len(ins) == len(s.inputs) else x
        if first is None or d >= len(first.axes):
            return None
        axes = list(first.axes)
        axes[d] = self._derived(first.axes[d], s.out.shape[d])
        return [TP(tuple(axes))]

    def p_split(self, s, x: TP, ins):
        d = s.detail["dim"]
        return [x.carry(x.axes[:d] + (self._derived(x.axes[d], t.shape[d]),) + x.axes[d + 1:])
                for t in s.outputs]

    def _derived(self, axis: Axis, size) -> Axis:
        feature = any(a.feature for a in axis)
        return self.fresh(size, feature)

    def p_einsum(self, s, x: TP, ins):
        from . import patterns

        try:
            spec = patterns.parse_einsum(s.detail["equation"])
        except ValueError:
            return None
        if any(t is None for t in ins) or "." in "".join(spec.inputs) + spec.output:
            return None
        letters: dict = {}
        owners: dict = {}
        for k, (lets, tp) in enumerate(zip(spec.inputs, ins)):
            if len(lets) != len(tp.axes):
                return None
            for ch, ax in zip(lets, tp.axes):
                if ax or ch not in letters:   # paired axes: the later operand's, as in matmul
                    letters[ch] = ax
                owners.setdefault(ch, set()).add(k)
        if len(ins) != len(spec.inputs) or any(ch not in letters for ch in spec.output):
            return None
        axes = tuple(letters[ch] for ch in spec.output)
        out = TP(axes)
        if len(ins) == 2:
            mine = [ch for ch in spec.output if owners.get(ch) == {1}]
            contracted = [ch for ch in letters if ch not in spec.output and owners.get(ch) == {0, 1}]
            if len(mine) == 1 and contracted:
                summed = tuple(a for ch in contracted for a in letters[ch])
                keys = self.keyed(letters[mine[0]])
                k = spec.output.index(mine[0])
                out = TP(axes[:k] + (keys,) + axes[k + 1:], keys or None, summed or None)
        return [out]

    # ------------------------------------------------------------ binary ops
    def matmul(self, s, x: TP, y: TP):
        if y is None or len(x.axes) < 2 or len(y.axes) < 2:
            return None
        bx, by = x.axes[:-2], y.axes[:-2]
        n = max(len(bx), len(by))
        bx, by = ((),) * (n - len(bx)) + bx, ((),) * (n - len(by)) + by
        # paired batch axes count the same thing; take the right operand's, as the values do
        batch = tuple(b if b else a for a, b in zip(bx, by))
        keys = self.keyed(y.axes[-1])
        return (TP(batch + (x.axes[-2], keys), keys or None, x.axes[-1] or None),)

    @staticmethod
    def keyed(axis: Axis) -> Axis:
        """The key axis of new scores: the same positions, but an identity of their own, so
        that a softmax or an add can tell keys from queries of the same tokens."""
        return tuple(Atom(a.size, a.name, a.feature, a.parent, a.index, a.pieces) for a in axis)

    def elementwise(self, s, ins):
        ts = [t for t in ins if t is not None]
        if len(ts) != len(ins) or not ts:
            return None
        if len(ts) == 2 and s.op in ("add", "sub", "mul", "div"):
            self.check_swapped(s, ts[0], ts[1])
        if len(ts) == 1 and s.op in ("div", "mul") and "scalar" in s.detail:
            sc = s.detail["scalar"]
            self.check_scale(s, ts[0], 1 / sc if s.op == "div" and not s.detail.get("scalar_left") else sc)
        rank = len(s.out.shape)
        padded = [((),) * (rank - len(t.axes)) + t.axes for t in ts]
        axes = tuple(next((p[k] for p in padded if p[k]), ()) for k in range(rank))
        base = next((t for t in ts if t.keys is not None), ts[0])
        return (replace(base.carry(axes)),)

    # ------------------------------------------------------------ findings
    def check_softmax(self, s, x: TP) -> None:
        if x.keys is None:
            return
        d = s.detail["dim"]
        if x.axes[d] == x.keys:
            return
        k = x.axes.index(x.keys)
        rank = len(x.axes)
        right = -1 if k == rank - 1 else k
        self.warn(s, "W303", f"`{s.text}` normalises the attention scores over axis {d} "
                  f"({label_of(x.axes[d])}), but each query's weights over the keys must add up to 1, "
                  f"and the keys are axis {k} ({label_of(x.keys)})",
                  fix=(s, f"{s.op} {right}"),
                  notes=(("the key axis is the one that came from the columns of the right operand "
                         "of the product that made the scores"),))

    def check_features(self, s, x: TP, d: int, verb: str) -> None:
        if not x.axes or d >= len(x.axes):
            return
        here = any(a.feature for a in x.axes[d])
        feat = [k for k, ax in enumerate(x.axes) if ax and all(a.feature for a in ax)]
        if here or not x.axes[d] or not feat:
            return
        k = feat[-1]
        fix = None
        if s.op in ("mean", "var"):
            fix = (s, s.text.replace(str(_axis_text(s)), str(k - len(x.axes) if k == len(x.axes) - 1 else k), 1))
        self.warn(s, "W304", f"`{s.text}` {verb} over {label_of(x.axes[d])}, not over the features "
                  f"({label_of(x.axes[k])}, axis {k})", fix=fix,
                  help=None if fix else "normalise before moving the feature axis away from the end, "
                  "or move it back with a transpose first")

    def check_causal(self, s) -> None:
        rows, cols = s.detail["rows"], s.detail["cols"]
        if self.prover.same(rows, cols) or self.prover.leq(rows, cols).ok:
            return
        self.warn(s, "W305", f"`mask causal` on scores with {dimlib.show(rows)} queries and "
                  f"{dimlib.show(cols)} keys: the lengths are unrelated, so position i of one says "
                  "nothing about position i of the other",
                  help="cross-attention needs no causal mask; remove `-> mask causal` (or use a padding mask)",
                  notes=(("a causal mask hides the keys after each query, which needs both to count "
                         "the same positions (or keys = past + queries)"),))

    def check_scale(self, s, x: TP, factor) -> None:
        if x.contracted is None or factor is None:
            return
        f = sp.sympify(factor) if not isinstance(factor, sp.Basic) else factor
        if not (f.is_Pow and f.exp == sp.Rational(-1, 2)):
            return
        base = f.base
        contracted = _size(x.contracted)
        if self.prover.same(base, contracted):
            return
        want = self.user(contracted)
        fix = (s, f"scale 1/sqrt({want})") if s.op == "scale" else None
        self.warn(s, "W306", f"`{s.text}` divides the scores by sqrt({self.user(base)}), but the "
                  f"product that made them summed over {want} terms", fix=fix,
                  notes=((f"scaled dot-product attention divides by the square root of the width "
                         f"each query and key share ({want})"),))

    def check_swapped(self, s, a: TP, b: TP) -> None:
        rank = max(len(a.axes), len(b.axes))
        pa = ((),) * (rank - len(a.axes)) + a.axes
        pb = ((),) * (rank - len(b.axes)) + b.axes
        for i in range(rank):
            if not pa[i] or not pb[i] or pa[i] == pb[i]:
                continue
            for j in range(rank):
                if j != i and pa[i] == pb[j] and pb[j] != pa[j]:
                    self.warn(s, "W307", f"`{s.text}` lines up axis {i - rank} ({label_of(pa[i])}) "
                              f"of one side with axis {i - rank} ({label_of(pb[i])}) of the other, "
                              f"but {label_of(pa[i])} sits at axis {j - rank} there: the sizes agree, "
                              "the elements do not", help="transpose one side so the axes match")
                    return

    def warn(self, s, code, message, *, help=None, notes=(), fix=None) -> None:
        """A finding at step `s`; `fix`: candidate rewrites [(span, text)], shown only once proved."""
        if isinstance(fix, tuple):
            fix = [(fix[0].span, fix[1])]
        self.findings.append(Diagnostic(code, message, s.span, help, tuple(notes), None, "warning",
                                        fixes=tuple(fix or ())))

    # ------------------------------------------------------------ fixes for regrouping
    def regroup_fixes(self, s, x: TP, shape) -> list:
        """Rewrites of a regrouping step that read the elements without mixing them:
        move axes first (`transpose 1 2 -> reshape [..]`), or split in place and move the
        pieces after (`view [B, S, H, Dh] -> transpose 1 2`); also in place of a transpose
        that came just before. Ordered by how little they change."""
        out = []
        target = [dimlib.show(self.prover.name_of(d)) for d in shape]
        verb = "reshape" if s.op in ("view", "reshape") and s.op == "reshape" else s.op
        if verb not in ("view", "reshape"):
            verb = "reshape"
        prev = self.producer.get(s.inputs[0]) if s.inputs else None
        starts = [(s.span, x)]
        if prev is not None and prev[0].op in ("transpose", "permute") and prev[0].span.line == s.span.line \
                and prev[1] is not None:
            span = type(s.span)(prev[0].span.line, prev[0].span.column, s.span.end_line, s.span.end_column)
            starts.insert(0, (span, prev[1]))
        for span, src in starts:
            rank = len(src.axes)
            if rank > 5:
                continue
            for perm in _perms(rank):
                moved = src.carry(src.axes[k] for k in perm)
                axes = self.regroup(moved, shape)
                if axes is not None and self._out_of_order(axes) is None and self._all_whole(axes):
                    out.append((span, f"{_perm_text(perm)} -> {verb} [{', '.join(target)}]"))
                    break
            if len(shape) <= 5:
                for perm in _perms(len(shape)):
                    if perm == tuple(range(len(shape))):
                        continue
                    axes = self.regroup(src, [shape[k] for k in perm])
                    if axes is not None and self._out_of_order(axes) is None and self._all_whole(axes):
                        inv = [perm.index(k) for k in range(len(shape))]
                        out.append((span, f"{verb} [{', '.join(target[k] for k in perm)}] -> {_perm_text(inv)}"))
                        break
        return out[:4]

    @staticmethod
    def _all_whole(axes) -> bool:
        """No axis mixes a piece with other atoms (a clean split or a clean merge)."""
        return all(len(ax) <= 1 or all(a.parent is None for a in ax) for ax in axes)


def _perms(n: int):
    """Permutations of range(n), fewest moved axes first, the identity excluded."""
    import itertools

    perms = [p for p in itertools.permutations(range(n)) if p != tuple(range(n))]
    return sorted(perms, key=lambda p: (sum(1 for k, v in enumerate(p) if k != v), p))


def _perm_text(perm) -> str:
    moved = [k for k, v in enumerate(perm) if k != v]
    if len(moved) == 2:
        return f"transpose {moved[0]} {moved[1]}"
    return "permute " + " ".join(str(v) for v in perm)


def _axis_text(s):
    parts = s.text.split()
    return parts[1] if len(parts) > 1 else ""


def _sizes(t: TP):
    return [sp.Mul(*[a.size for a in ax]) if ax else sp.Integer(1) for ax in t.axes]


def _size(axis):
    return sp.Mul(*[a.size for a in axis])


