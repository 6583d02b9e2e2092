"""Axis provenance: where the elements of every axis come from.

Shapes alone cannot tell `view [B, S, H, Dh] -> transpose 1 2` from
`view [B, H, S, Dh]`: both give [B, H, S, Dh], but the second makes the axis of
size H out of token positions. This pass walks the checked IR and records, for
every axis of every tensor, an ordered product of logical *atoms*: the axes of
inputs and parameters, the new axes of learned maps, and the pieces a split
creates (D = H·Dh after `view [B, S, H, Dh]`). From that it reports what
shapes miss (codes W301-W313, see docs/diagnostics.md):

- W301 an axis made of parts of different axes (heads mixed with tokens);
- W302 pieces of one axis merged back out of order (heads merged without
  moving H back next to Dh);
- W305 a causal mask on scores whose query and key lengths are unrelated;
- W306 `scale 1/sqrt(X)` where X is not the size the scores contracted;
- W307 an elementwise op or a product between tensors whose same-sized axes (or the
  pieces of one axis) are swapped;
- W308 a bias added to scores that is constant along the keys (softmax cancels it);
- W303, W304 and W309-W313: the contracts of contracts.py (a softmax's weights used
  along their axis, one normalisation's statistics along one axis, channels at axis 1,
  rotations within a head, arange lookups, scale and mask before the softmax, masks
  that leave every query a key).

Every decision about sizes goes through the prover, so it holds for all sizes
that satisfy the assumptions. Where the pass does not know an operation, the
provenance is unknown and it stays silent rather than guess.
"""
from __future__ import annotations

import weakref

from .. import dims as dimlib
from ..arith import ELEMENTWISE
from ..lazysympy import sympy as sp
from ..ops import patterns
from ..ops.table import TABLE
from ..ops.tables import COMPARISONS
from ..polys import expanded
from .atoms import NEGATED, TP, Atom, Axis, root_base
from .contracts import ContractRules, triangle
from .findings import Findings
from .layers import LayerRules
from .regroup import Regrouper

_COMPARISONS = frozenset(COMPARISONS.values())
_SOFTMAX = frozenset(d.ir_name for d in TABLE.values() if d.normalises)
# the operations that choose along their axis by comparing the entries there (OpDef.ranks)
_PICKS = frozenset(name for name, d in TABLE.items() if d.ranks)


class Provenance(LayerRules, ContractRules):
    """The pass; `c` is the checker that has just produced the IR (prover, example, report)."""

    def __init__(self, checker):
        self.c = checker
        self.prover = checker.prover
        self.rg = Regrouper(self.prover)
        self._rules = _RULES
        self.producer: dict = {}   # ref -> (step, provenance of its first input)
        self._names = None   # canonical size -> the dim it is, made when a message needs it
        self.findings = Findings(weakref.proxy(self))   # no reference cycle: freed with the check
        self._canon: dict = {}   # size -> its canonical form (None: it is 1)
        # contracts (contracts.py): findings made once, rotated axes, the widths of the spec
        self._consumed: set = set()
        self._rotated: dict = {}
        self._rotation_of: dict = {}
        self._rotation_warned: set = set()
        self._cut_at: dict = {}   # a half of an axis -> the step that cut it
        self._half_sizes: dict = {}   # (size, name) of an axis -> those of its halves
        self._twice: dict = {}   # the size of a half -> the size of the whole
        self._width_cache = None
        self._declared_last: set = set()
        self._allowed = None
        self._spec = None

    # ------------------------------------------------------------ walking the IR
    def run(self, spec) -> None:
        self._spec = spec
        env = {d.name: self.decl(d) for d in spec.decls}
        for b in spec.bindings:
            self.binding(b, env)

    def binding(self, b, env) -> None:
        get, producer = env.get, self.producer
        for s in b.steps:
            ins = [get(r) for r in s.inputs]
            try:
                outs = self.step(s, ins)
            except (KeyError, IndexError, ValueError, TypeError):
                outs = None   # an operation form this pass does not know: unknown, not a guess
            ref = s.ref
            producer[ref] = (s, ins[0] if ins else None)
            s.provenance = outs
            if outs is None:
                continue
            if len(outs) == 1:
                env[ref] = outs[0]
            else:
                for k, tp in enumerate(outs):
                    env[f"{ref}.{k}"] = tp

    def _all_steps(self):
        seen, todo = set(), [self._spec]
        while todo:
            ir = todo.pop()
            for b in getattr(ir, "bindings", ()) or ():
                for s in b.steps:
                    yield s
                    blk = getattr(s, "block", None)
                    if blk is not None and id(blk) not in seen:
                        seen.add(id(blk))
                        todo.append(blk)

    def decl(self, d) -> TP:
        t = d.type
        rank = len(t.shape)
        axes = []
        for k, size in enumerate(t.shape):
            convention = d.kind != "param" and t.dtype == "float" and rank >= 2 and k == rank - 1
            axes.append(self.fresh(size, d.kind == "param" or convention))
            if convention:   # features by convention only ([.., D] last): layers' widths come first
                self._declared_last.update(axes[-1])
        return TP(tuple(axes))

    def fresh(self, size, feature=False) -> Axis:
        """A new atom of this size (none for size 1)."""
        canon = self._canon.get(size)
        if canon is None:
            canon = self._canon[size] = None if self.prover.is_one(size) else self.prover.canon(size)
        return () if canon is None else (Atom(canon, size, feature),)

    def step(self, s, ins):
        op = s.op
        rule = self._rules.get(op)
        if rule is not None:
            x = ins[0] if ins else None
            if x is None and s.inputs:   # an input of unknown provenance (no inputs: a new tensor)
                return None
            if x is not None and op in _PICKS and "dim" in s.detail and s.detail["dim"] is not None \
                    and s.detail["dim"] < len(x.axes):
                self.consumed(s, x, x.axes[s.detail["dim"]], "picks")
            if op == "masked_fill":
                self.masked(s, x, ins[1] if len(ins) > 1 else None, False, s.detail.get("value") == -sp.oo,
                            "fills some of the weights")
            out = rule(self, s, x, ins)
            if op == "masked_fill" and out and len(ins) > 1 and ins[1] is not None:
                out = [out[0].mark(masked_by=ins[1])] + list(out[1:])
            return None if out is None else tuple(out)
        if op == "input":
            return (TP(tuple(self.fresh(d) for d in s.out.shape)),)
        if op in ("block", "stack"):
            return self.block(s, ins)
        if not ins or ins[0] is None:
            return None
        if op == "matmul":
            return self.matmul(s, ins[0], ins[1])
        if op in ELEMENTWISE or op == "neg" or op in _COMPARISONS:
            return self.elementwise(s, ins)
        return None

    def block(self, s, ins):
        ir = s.block
        if ir is None or any(t is None for t in ins) or len(ins) < len(ir.inputs):
            return None
        sliced = (False,) + tuple(s.detail.get("sliced", ()))   # a scan: layer i gets past_k[i]
        ins = [TP(tp.axes[1:]) if k < len(sliced) and sliced[k] else tp for k, tp in enumerate(ins)]
        env = {d.name: tp for d, tp in zip(ir.inputs, ins)}
        env.update({d.name: self.decl(d) for d in ir.params + ir.buffers})
        for b in ir.bindings:
            self.binding(b, env)
        outs = tuple(env.get(r) for r in (ir.results or (ir.result,)))
        if any(o is None for o in outs):
            return None
        if s.op == "stack":   # what a scan collects gains the layer axis
            outs = outs[:1] + tuple(TP((self.fresh(s.detail["count"]),) + o.axes) for o in outs[1:])
        return outs

    # ------------------------------------------------------------ sizes
    def user(self, e) -> str:
        """A size in the learner's dims (the prover keeps them substituted)."""
        e = self.prover.name_of(e)
        if self._names is None:
            self._names = {expanded(self.prover.canon(sym)): sym for sym in reversed(list(self.prover.user.values()))}
        return dimlib.show(self._names.get(expanded(e), e), self.prover.notation)

    def p_regroup(self, s, x: TP, ins):
        out = self.read_into(s, x, s.out.shape, fixes=True)
        return None if out is None else [out]

    def read_into(self, s, x: TP, shape, fixes: bool = False) -> TP | None:
        """x's elements read in order into `shape`; a finding (and None) if that mixes them."""
        if len(shape) == len(x.axes) and all(len(ax) == 1 and self.prover.same(ax[0].size, d)
                                             for ax, d in zip(x.axes, shape)):
            return x
        axes = self.rg.regroup(x, shape)
        if axes is None:
            # a size not proved whole (a missing assume, reported as E104) says nothing of values
            if all(self._whole(d) for d in shape):
                self.findings.warn_mixed(s, x, shape, fixes)
            return None
        self.split_rotated(s, axes)
        parent = self.rg.out_of_order(axes)
        if parent is not None:
            self.findings.warn(s, "W302", f"`{s.text}` puts the pieces of the axis {parent.label} back "
                               "together in the wrong order, so the values land in the wrong places",
                               fix=self.findings.regroup_fixes(s, x, shape) if fixes else None)
        # the pieces, in the order they now have: values reordered within one axis (DeepSeek's
        # rotary pairs, meant; heads merged the wrong way, warned above) are still that axis's
        return x.carry(axes)

    def _whole(self, size) -> bool:
        """The size is proved whole, and so is every derived dim it names (`dim Dh = D / H`
        without `assume D % H == 0` is an E104 of its own)."""
        pr = self.prover
        if not pr.whole(size).ok:
            return False
        free = getattr(size, "free_symbols", set())
        return all(pr.whole(value).ok for sym, value in pr.definition.items() if sym in free)

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
        rep = self.fresh(s.detail["repeats"], any(a.feature for a in x.axes[d]))
        return [x.carry(x.axes[:d] + (x.axes[d] + rep,) + x.axes[d + 1:])]

    def p_rearrange(self, s, x: TP, ins):
        """einops: read into the elementary axes, permute, read into the output groups."""
        det = s.detail
        t = self.read_into(s, x, list(det["flat"]))
        if t is None:
            return None
        axes = [t.axes[p] for p in det["perm"]]
        for pos, size in det.get("new", ()):     # einops' repeat: new axes, copies along them
            axes.insert(pos, self.fresh(size))
        t = self.read_into(s, t.carry(axes), list(det["final"]))
        return None if t is None else [t]

    # ------------------------------------------------------------ value ops
    def p_same(self, s, x: TP, ins):
        op = s.op
        if op in _SOFTMAX:
            return [self.softmax_out(s, x)]
        if op == "normalize" and s.detail.get("dim") is not None:
            self.single_statistic(s, x, s.detail["dim"])
        if op == "scale":
            factor = s.detail.get("factor")
            self.findings.check_scale(s, x, factor)
            if root_base(factor) is not None:
                self.after_softmax(s, x, "scales the weights")
        if op == "mask":
            m = ins[1] if len(ins) > 1 and s.detail.get("kind") != "causal" else None
            self.masked(s, x, m, False, m is not None, "masks the weights")
            if s.detail.get("kind") == "causal":
                self.findings.check_causal(s)
            else:
                out = self.p_expand(s, x, ins)     # masked_fill broadcasts the input to the mask
                return [out[0].mark(masked_by=m)] if m is not None else out
        if op in ("tril", "triu"):
            return [x.mark(tri=triangle(op, s.detail.get("diagonal"), x.marks.get("tri")))]
        if op == "logical_not" and x.marks.get("tri"):
            return [x.mark(tri=NEGATED.get(x.marks["tri"]))]
        if op in ("groupnorm", "batchnorm"):
            self.channels(s, x)
            return [TP(x.axes)]
        if op == "square":
            return [x.mark(squared=x)]   # a mean of it is a mean of squares (RMS, or a variance)
        return [x]

    def p_norm(self, s, x: TP, ins):
        self.findings.check_features(s, x, len(x.axes) - 1, "normalises")
        return [TP(x.axes)]

    def p_reduce(self, s, x: TP, ins):
        d = s.detail["dim"]
        if x.marks.get("weighted") and TABLE[s.op].statistic in ("sum", "mean") and d < len(x.axes):
            self.consumed(s, x, x.axes[d], "sums")
        axes = x.axes[:d] + (((),) if s.detail.get("keepdim") else ()) + x.axes[d + 1:]
        return [self.statistic(s, x, d, x.carry(axes))]

    def p_select(self, s, x: TP, ins):
        d = s.detail["dim"]
        return [x.carry(x.axes[:d] + x.axes[d + 1:])]

    def p_slice(self, s, x: TP, ins):
        d = s.detail["dim"]
        half = self.half_slice(s, x, d)
        piece = half if half is not None else self._derived(x.axes[d], s.out.shape[d])
        return [x.carry(x.axes[:d] + (piece,) + x.axes[d + 1:])]

    def p_linear(self, s, x: TP, ins):
        return [TP(x.axes[:-1] + (self.fresh(s.out.shape[-1], True),))]

    def p_embed(self, s, x: TP, ins):
        self.index_range(s, x, ins[1] if len(ins) > 1 else None)
        return [TP(x.axes + (self.fresh(s.out.shape[-1], True),))]

    def p_concat(self, s, x: TP, ins):
        d = s.detail["dim"]
        first = ins[0] if s.inputs and len(ins) == len(s.inputs) else x
        if first is None or d >= len(first.axes):
            return None
        axes = list(first.axes)
        rot = self.joined(s, ins, d) if len(ins) == len(s.inputs) else None
        axes[d] = (rot,) if rot is not None else self._derived(first.axes[d], s.out.shape[d])
        return [TP(tuple(axes))]

    def p_split(self, s, x: TP, ins):
        d = s.detail["dim"]
        outs = [x.carry(x.axes[:d] + (self._derived(x.axes[d], t.shape[d]),) + x.axes[d + 1:])
                for t in s.outputs]
        return self.halves(s, x, outs)

    def _derived(self, axis: Axis, size) -> Axis:
        feature = any(a.feature for a in axis)
        return self.fresh(size, feature)

    def p_einsum(self, s, x: TP, ins):
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
        for lets, tp in zip(spec.inputs, ins):   # weights summed along another index than theirs
            dist = tp.marks.get("dist")
            if dist is not None and dist[0] in tp.axes:
                mine = lets[tp.axes.index(dist[0])]
                summed = [ch for ch in lets if ch not in spec.output and tp.axes[lets.index(ch)]]
                if mine in spec.output and summed:
                    ch = summed[0]
                    other = next(((t, t.axes[ls.index(ch)]) for ls, t in zip(spec.inputs, ins)
                                  if t is not tp and ch in ls), (None, None))
                    self.consumed(s, tp, tp.axes[lets.index(ch)], "sums", *other)
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
        self.findings.check_reordered(s, (bx, by), tail=2)
        self.consumed(s, x, x.axes[-1], "sums", y, y.axes[-2])
        self.consumed(s, y, y.axes[-2], "sums", x, x.axes[-1])
        # paired batch axes count the same thing; take the right operand's, as the values do
        batch = tuple(b if b else a for a, b in zip(bx, by))
        if not any(by) and all(t.feature for ax in y.axes[-2:] for t in ax):   # x @ W: a projection
            return (TP(batch + (x.axes[-2], y.axes[-1])),)
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
            self.findings.check_swapped(s, ts[0], ts[1])
        if len(ts) == 1 and s.op in ("div", "mul") and "scalar" in s.detail:
            sc = s.detail["scalar"]
            factor = 1 / sc if s.op == "div" and not s.detail.get("scalar_left") else sc
            self.findings.check_scale(s, ts[0], factor)
            if root_base(factor) is not None:
                self.after_softmax(s, ts[0], "scales the weights")
        if len(ts) == 1:   # with a number: the same axes, the same facts (a + eps, x / 2), but no
            # longer a count (arange + 1) nor a mask
            if s.op in _COMPARISONS:
                return (self.comparison(s, ins, ts[0].carry(ts[0].axes)),)
            out = ts[0].mark(index=None, tri=None)
            return (out if s.op in ("add", "sub", "mul", "div", "neg") else out.carry(out.axes),)
        rank = len(s.out.shape)
        base = next((t for t in ts if t.keys is not None), ts[0])
        # scores keep their axes (and so their key axis) whichever side a bias is added on
        ordered = [base] + [t for t in ts if t is not base]
        padded = [((),) * (rank - len(t.axes)) + t.axes for t in ordered]
        axes = tuple(_first_axis(padded, k) for k in range(rank))
        axes = self._outer_axes(axes, padded)
        self.rotation_pairs(s, padded)
        out = base.carry(axes)
        if len(ts) == 2 and ts[0].contracted and ts[1].contracted and ts[0].contracted != ts[1].contracted:
            out.contracted = None   # a sum of products over different widths: no one width to scale by
        out = self._contracts(s, ts, out)
        if out.keys is not None and out.flat_bias is None and s.op in ("add", "sub") and len(padded) == 2 \
                and out.keys and out.keys in padded[0]:
            k = padded[0].index(out.keys)
            if not padded[1][k] and any(padded[1]):   # a term that varies, but not along the keys
                out.flat_bias = s
        return (out,)

    def _contracts(self, s, ts, out: TP) -> TP:
        if s.op in _COMPARISONS:
            return self.comparison(s, ts, out)
        out = out.mark(index=None, tri=None) if out.marks else out
        if len(ts) != 2:
            return out
        a, b = ts
        if s.op in ("sub", "div", "mul"):
            out = self.normalised(s, a, b, out)
            if s.op == "mul":
                out = self.normalised(s, b, a, out)
        if s.op == "div":
            out = self.divided(s, a, b, out)
        if s.op == "mul" and (a.marks.get("dist") is None) != (b.marks.get("dist") is None):
            dist = (a.marks.get("dist") or b.marks.get("dist"))
            # a softmax over a size-1 axis (all ones) stays marked: broadcast, it weighs nothing
            out = out.mark(weighted=True, dist=dist if dist[0] in out.axes or dist[0] == () else None)
        return out

    @staticmethod
    def _outer_axes(axes, padded) -> tuple:
        """An outer combination of one vector with itself (`(r -> unsqueeze 1) * 3 + r`, Swin's
        window labels; `pos > (pos -> unsqueeze 1)`) has a row axis and a column axis over the
        same positions: two axes, each its own identity. Without this they would share their
        atoms, and a later cut of both into windows would read as one axis's pieces merged out
        of order. An axis that one operand already pairs with the other keeps its atoms."""
        atoms = [a for ax in axes for a in ax]
        if len(set(atoms)) == len(atoms):   # no atom on two axes: nothing to tell apart
            return axes
        out = list(axes)
        for k, ax in enumerate(axes):
            if not ax:
                continue
            for j in range(k):
                if not set(ax) & set(out[j]):
                    continue
                if any(p[j] == out[j] and p[k] == ax for p in padded):
                    continue
                out[k] = tuple(Atom(a.size, a.name, a.feature) for a in ax)
                break
        return tuple(out)


def _first_axis(padded, k: int) -> tuple:
    """The first operand's axis k that is not of size 1 (broadcast, the others follow it)."""
    for p in padded:
        if p[k]:
            return p[k]
    return ()


# operation -> its provenance rule (a method of Provenance, called with the pass)
_RULES = {name: getattr(Provenance, "p_" + d.provenance) for name, d in TABLE.items()
          if d.provenance and hasattr(Provenance, "p_" + d.provenance)}
