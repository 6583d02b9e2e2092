"""Contracts over logical axes: what each operation promises about the axes of its operands,
checked where a later step relies on it (W303, W304, W309-W313).

A finding here is a contract that fails for all sizes, not a guess about roles:
- a softmax makes weights that add up to 1 along one axis; the step that uses them as
  weights (`@`, einsum, a weighted sum, a top-k) must sum or pick along that axis (W303);
- normalisation statistics: the mean and the variance of one normalisation run along one
  axis (W304); statistics over an axis with no features, where another axis holds them, are
  reported as what the spec does, with both readings (the design of RevIN, or a slip);
- channels: conv1d/conv2d, groupnorm and batchnorm read channels at axis 1; an axis there
  that is not a width while a width of the spec lies along the positions they slide over or
  normalise is channels and positions swapped (W309);
- a rotation (rotate_half) pairs element i with i + n/2 along one axis: the angle tables it
  is multiplied with must vary along that axis, and a later split of that axis must keep each
  pair inside one piece (one head) (W310);
- an index made by `arange(N)` into a table of R rows needs N <= R for all sizes (W311);
- the scale of the scores and a -inf mask belong before the softmax (W312);
- a mask that hides its own diagonal, or keeps no key for some query, gives a row of -inf
  and a NaN softmax (W313).
Each hook takes provenance (atoms.TP) and returns provenance; the analysis calls them.
"""
from __future__ import annotations

from ..ops.table import TABLE
from .atoms import NEGATED, TP, Atom, _size, label_of

_COMPARE = {"ge": "lower", "gt": "slower", "le": "upper", "lt": "supper"}   # rows OP columns
_MIRROR = {"ge": "le", "le": "ge", "gt": "lt", "lt": "gt"}


class ContractRules:
    """Mixed into the pass (analysis.Provenance): `self.findings`, `self.prover`."""

    def allowed(self, code: str) -> set:
        """The lines whose comment says the author means what `code` would warn about."""
        if self._allowed is None:
            from ..advice import acknowledged

            self._allowed = acknowledged.codes_by_line(getattr(self.c.out, "source", "") or "")
        return {line for line, codes in self._allowed.items() if code in codes}

    # ------------------------------------------------------------ distributions (W303, W312)
    def softmax_out(self, s, x: TP) -> TP:
        d = s.detail["dim"]
        if x.keys is not None and x.axes[d] == x.keys:
            self.findings.check_flat_bias(s, x)
        if s.op in ("softmax", "softmin"):
            return x.mark(dist=(x.axes[d], s, x.axes), weighted=None, stat=None, centred=None)
        return x.mark(dist=None, weighted=None)

    def consumed(self, s, t: TP | None, axis, verb: str, other: TP | None = None, paired=None) -> None:
        """`t` used as weights by step `s`, which sums (or picks) along `axis`. `other` and
        `paired`: the operand summed with it and its axis; when that operand is the weights
        along the summed axis, `t` is what they average (a mixture of distributions)."""
        if t is None or not axis:
            return
        dist = t.marks.get("dist")
        if dist is None or dist[0] == axis:
            return
        if other is not None and (other.marks.get("dist") or (None,))[0] == paired:
            return   # averaged by the other operand's weights (a mixture of distributions)
        along, softmax, axes = dist
        if verb == "picks" and not (self.is_width(axis) and not self.is_width(along)):
            return    # choosing positions by weights over features: expert-choice routing
        if id(softmax) in self._consumed or id(s) in self._consumed:
            return    # one finding per softmax, and per step that uses weights
        self._consumed.update((id(softmax), id(s)))
        if along not in axes:
            return
        d = axes.index(along)
        rank = len(axes)
        fix = None
        if axis in axes:
            k = axes.index(axis)
            fix = [(softmax.span, f"{softmax.op} {-1 if k == rank - 1 else k}",
                    (f"if the weights should add up to 1 along {label_of(axis)}, the axis `{s.text}` "
                    f"{verb} them along"))]
        why = ("each sum mixes weights that belong to different distributions" if verb == "sums" else
               "it compares weights that do not share a sum")
        notes = ["a softmax's axis is the one its weights are then summed or chosen along"]
        if verb == "picks":
            notes.append(f"choosing along {label_of(axis)} the entries normalised along {label_of(along)} "
                         "can be the design (expert-choice routing); then say so with `# allow W303: <why>`")
        self.findings.warn(softmax, "W303", f"`{softmax.text}` makes weights that add up to 1 along "
                           f"axis {d} ({label_of(along)}), but `{s.text}` on line {s.span.line} {verb} "
                           f"them along {label_of(axis)}: {why}", fix=fix, notes=tuple(notes))

    def after_softmax(self, s, x: TP, what: str, mask: TP | None = None) -> None:
        """A scale or a mask on attention weights a softmax has already made (W312). Not: a
        softmax that made no weights over keys (a feature map, as in linear attention); a mask
        that is constant along the weights' axis (whole rows zeroed, Longformer's padded
        queries); the mask the scores already had before the softmax (DeBERTa's refill)."""
        dist = x.marks.get("dist")
        if dist is None or x.keys is None:
            return
        softmax = dist[1]
        if mask is not None:
            if mask is x.marks.get("masked_by"):
                return
            rank = len(x.axes)
            padded = ((),) * (rank - len(mask.axes)) + mask.axes
            if dist[0] in x.axes and len(padded) == rank and not padded[x.axes.index(dist[0])]:
                return
        self.findings.warn(s, "W312", f"`{s.text}` {what} after `{softmax.text}` on line "
                           f"{softmax.span.line}: the weights no longer add up to 1",
                           help=f"put `{s.text}` before the softmax, on the scores",
                           notes=(("softmax(scores) comes after the scale and the mask: "
                                   "softmax(mask(scale(scores)))"),))

    def masked(self, s, x: TP | None, m: TP | None, keep: bool, fill_inf: bool, what: str) -> None:
        """Scores (or weights) `x` masked by `m`: `mask M` and masked_fill hide where M is True,
        where(M, x, -inf) keeps there (`keep`). Checked: a mask after the softmax (W312); when
        the fill is -inf, a mask that empties a row or lines up unrelated lengths (W313, W305)."""
        if x is not None:
            self.after_softmax(s, x, what, m)
        if fill_inf:
            self.mask_polarity(s, m, keep)

    def divided(self, s, a: TP, b: TP, out: TP) -> TP:
        """a / b: a divided by its own sum along an axis adds up to 1 along it."""
        stat = b.marks.get("stat")
        if stat is not None and stat[2] == "sum" and stat[0] and stat[0] in a.axes:
            return out.mark(dist=(stat[0], s, a.axes), weighted=None)
        return out

    # ------------------------------------------------------------ statistics (W304)
    def statistic(self, s, x: TP, d: int, out: TP) -> TP:
        if not s.detail.get("keepdim") or d >= len(x.axes) or not x.axes[d]:
            return out
        kind = _statistic(s.op)
        if not kind:
            return out
        if kind == "mean" and x.marks.get("squared") is not None:
            kind = "var"      # a mean of squares: RMS (or a variance of a centred tensor)
        return out.mark(stat=(x.axes[d], s, kind, x.marks.get("squared", x)))

    def normalised(self, s, a: TP, b: TP, out: TP) -> TP:
        """a - b, a / b or a * b where b is a statistic of a (or of what a came from)."""
        stat = b.marks.get("stat")
        if stat is None:
            return out
        along, step, kind, source = stat
        if not _same_axes(source, a):
            return out
        if s.op == "sub" and kind == "mean":
            return out.mark(centred=(along, step), stat=None)
        if s.op in ("div", "mul") and kind == "var":
            centred = a.marks.get("centred") or (_centred_source(source))
            self._check_statistics(a, [c for c in (centred, (along, step)) if c is not None])
        return out

    def _check_statistics(self, x: TP, stats: list) -> None:
        feat = [k for k, ax in enumerate(x.axes) if self.is_width(ax)]
        axes = {ax for ax, _ in stats}
        if len(axes) > 1:   # mean and variance along different axes: a slip for all sizes
            meant = self.allowed("W304")   # lines whose axis the author says is meant
            wrong = [(ax, st) for ax, st in stats if st.span.line not in meant]
            wrong = [(ax, st) for ax, st in wrong if not self.is_width(ax)] or wrong or stats[-1:]
            ax, st = wrong[0]
            other = next(a for a, _ in stats if a is not ax)
            self.findings.warn(st, "W304", f"`{st.text}` takes its statistics along {label_of(ax)}, but "
                               f"the other statistic of this normalisation runs along {label_of(other)}: "
                               "the mean and the variance of one normalisation share their axis",
                               fix=self._stat_fix(st, x, other, "if both should run along "
                                                  f"{label_of(other)}"))
            return
        self._single(x, *stats[0], feat)

    def single_statistic(self, s, x: TP, d: int) -> None:
        """A normalisation by one statistic along axis d (F.normalize)."""
        if d < len(x.axes) and x.axes[d]:
            self._single(x, x.axes[d], s, [k for k, ax in enumerate(x.axes) if self.is_width(ax)])

    def _single(self, x: TP, ax, st, feat) -> None:
        if self.is_width(ax) or not feat:
            return
        k = feat[-1]
        self.findings.warn(st, "W304", f"`{st.text}` takes its statistics along {label_of(ax)}, not along "
                           f"the features ({label_of(x.axes[k])}, axis {k}): each feature is normalised "
                           f"over {label_of(ax)}", fix=self._stat_fix(
                               st, x, x.axes[k], f"if you meant a norm of each position over its "
                               f"features ({label_of(x.axes[k])}), as LayerNorm and RMSNorm do"),
                           notes=((f"statistics over {label_of(ax)} can be the design (RevIN, instance "
                                   "norm over time): then say so with `# allow W304: <why>` on the line"),))

    def _stat_fix(self, st, x: TP, axis, why: str):
        if axis not in x.axes or _statistic(st.op) not in ("mean", "var"):
            return None
        k = x.axes.index(axis)
        parts = st.text.split()
        if len(parts) < 2:
            return None
        parts[1] = str(k - len(x.axes) if k == len(x.axes) - 1 else k)
        return [(st.span, " ".join(parts), why)]

    # ------------------------------------------------------------ channels (W309)
    def channels(self, s, x: TP) -> None:
        if len(x.axes) < 3 or not all(x.axes[1:]):
            return
        shape = [_size(ax) for ax in x.axes]
        widths = self._widths(exclude=s)
        c, spatial = shape[1], shape[2:]
        # no layer saying what a width is, nothing is known: `[B, C, L]` and `[B, S, D]` inputs
        # differ only by their names
        if not widths or any(self.prover.same(c, w) for w in widths):
            return
        hit = next((d for d in spatial if any(self.prover.same(d, w) for w in widths)), None)
        if hit is None:
            return
        name = self.user(hit)
        self.findings.warn(s, "W309", f"`{s.text}` reads channels at axis 1, which has {self.user(c)} "
                           f"entries, and {'slides along' if s.op.startswith('conv') else 'normalises over'} "
                           f"an axis of {name}, a width of this spec: channels and positions are swapped",
                           help="move the features to axis 1 first (`transpose 1 2` on [B, S, D], "
                                "`permute 0 3 1 2` on [B, H, W, C]) and back after",
                           notes=((f"{s.op} takes [batch, channels, positions..]; a [B, S, D] activation "
                                   "has its features last"),))

    def _widths(self, exclude=None) -> list:
        """Sizes the spec uses as widths: what `linear`, `embed` and norms of the last axis give,
        the channels convolutions make (but `exclude`'s own), a weight's last axis, a gain's
        length."""
        if self._width_cache is None:
            out, weights = [], set()   # weights: names used as the right operand of a product
            for step in self._all_steps():
                d = TABLE.get(step.op)
                if d is not None and d.features is not None and len(step.out.shape) >= -d.features:
                    out.append((step, step.out.shape[d.features]))
                elif step.op in ("matmul", "einsum") and len(step.inputs) > 1:
                    weights.add(step.inputs[1])
            for d in getattr(self._spec, "decls", ()):
                if d.kind == "param" and (len(d.type.shape) == 1 or d.name in weights and d.type.shape):
                    out.append((None, d.type.shape[-1]))
            self._width_cache = out
        return [w for step, w in self._width_cache if exclude is None or step is not exclude]

    def is_width(self, axis) -> bool:
        """An axis of features: of a size the spec's layers use as a width; in a spec with no
        such layer, by convention (parameters, the last axis of a float input)."""
        if not axis:
            return False
        widths = self._widths()
        if widths:
            return any(self.prover.same(_size(axis), w) for w in widths) or all(t.feature for t in axis) \
                and not any(t.parent is None and t in self._declared_last for t in axis)
        return all(t.feature for t in axis)

    # ------------------------------------------------------------ rotations (W310)
    def halves(self, s, x: TP, outs: list) -> list:
        """chunk 2 / split into two halves: each half a piece of the axis, so that a concat
        can tell the halves swapped (rotate_half) from the halves restored."""
        d = s.detail["dim"]
        ax = x.axes[d] if d < len(x.axes) else ()
        if len(outs) != 2 or len(ax) != 1:
            return outs
        half = s.outputs[0].shape[d]
        twice = self._twice.get(half)   # (each layer cuts the same sizes)
        if twice is None:
            twice = self._twice[half] = 2 * half
        if not self.prover.same(twice, _size(ax)) or not self.prover.same(half, s.outputs[1].shape[d]):
            return outs
        return [o.carry(o.axes[:d] + (self._half(s, ax[0], k),) + o.axes[d + 1:]) for k, o in enumerate(outs)]

    def half_slice(self, s, x: TP, d: int):
        """`slice d 0 n/2`, `narrow d (n/2) (n/2)`, ...: the first or the second half of an axis."""
        ax = x.axes[d] if d < len(x.axes) else ()
        det = s.detail
        if len(ax) != 1 or det.get("step", 1) != 1:
            return None
        n = _size(ax)
        start = det.get("start")
        end = det.get("end", None if "length" not in det else (start + det["length"] if start is not None else None))
        if start is None or end is None:
            return None
        same = self.prover.same
        for k, (a, b) in enumerate(((0, n / 2), (n / 2, n))):
            if (same(start, a) if a != 0 else start == 0) and same(end, b):
                return self._half(s, ax[0], k)
        return None

    def _half(self, s, whole: Atom, k: int):
        sizes = self._half_sizes.get((whole.size, whole.name))   # each layer cuts the same sizes
        if sizes is None:
            sizes = self._half_sizes[whole.size, whole.name] = (whole.size / 2, whole.name / 2)
        half = Atom(sizes[0], sizes[1], whole.feature, whole, k, 2)
        self._cut_at[half] = s
        return (half,)

    def joined(self, s, ins: list, d: int) -> Atom | None:
        """concat of the two halves of one axis in swapped order: the axis rotated by half."""
        if len(ins) != 2 or any(t is None or d >= len(t.axes) or len(t.axes[d]) != 1 for t in ins):
            return None
        a, b = ins[0].axes[d][0], ins[1].axes[d][0]
        if a.parent is None or a.parent is not b.parent or a.pieces != 2 or (a.index, b.index) != (1, 0):
            return None
        rot = Atom(a.parent.size, a.parent.name, a.parent.feature)
        self._rotated[rot] = (a.parent, self._cut_at.get(a, s), s)   # reported where the halves are cut
        return rot

    def rotation_pairs(self, s, padded: list) -> None:
        """An elementwise step whose operand holds a rotated axis: the other operands (the angle
        tables) must vary along it."""
        for k in range(len(padded[0]) if padded else 0):
            for p in padded:
                ax = p[k]
                if len(ax) != 1 or ax[0] not in self._rotated:
                    continue
                whole, cut, concat = self._rotated[ax[0]]
                if any(q is not p and not q[k] and any(q) for q in padded):
                    self._warn_rotation(cut, concat, f"the angle table that `{s.text}` multiplies it "
                                        f"with does not vary along {whole.label}: the pairs are not "
                                        "the pairs of one position's vector that RoPE turns")
                if any(q is not p and q[k] == (whole,) for q in padded):
                    self._rotation_of[whole] = (cut, concat)

    def split_rotated(self, s, axes) -> None:
        """A rotated axis cut into pieces: a pair (i, i + n/2) must stay inside one piece."""
        for axis in axes:
            for a in axis:
                steps = self._rotation_of.get(a.parent) if a.parent is not None else None
                if steps is not None and a.index == 0 and a.pieces >= 2:
                    self._warn_rotation(*steps, f"`{s.text}` on line {s.span.line} then cuts "
                                        f"{a.parent.label} into {a.label} pieces (heads): each pair "
                                        "lies in two different heads")
                    return

    def _warn_rotation(self, cut, concat, why: str) -> None:
        if id(cut) in self._rotation_warned:
            return
        self._rotation_warned.add(id(cut))
        where = "" if concat is cut else f" that `{concat.text}` on line {concat.span.line} swaps"
        self.findings.warn(cut, "W310", f"`{cut.text}` cuts an axis into the halves{where}: a rotation "
                           f"(rotate_half) that pairs element i with element i + n/2 of that axis, but {why}",
                           help="rotate the halves of each head's width (the last axis of [B, H, S, Dh]), "
                                "the axis the cos and sin tables run along",
                           notes=("rotate_half pairs the two halves of one head's vector",))

    # ------------------------------------------------------------ indices (W311)
    def index_range(self, s, idx: TP | None, table: TP | None) -> None:
        if idx is None or table is None or not table.axes or not table.axes[0]:
            return
        index = idx.marks.get("index")
        if index is None:
            return
        rows = _size(table.axes[0])
        end = index[1]
        verdict = self.prover.leq(end, rows)
        if verdict.status != "refuted" and not self._unbounded(end, rows):
            return   # proved, or true for all the prover can tell (`T/2 <= P` from `T <= 2*P`)
        cex = verdict.counterexample
        at = f" (for instance {', '.join(f'{k}={v}' for k, v in cex.items())})" if cex else ""
        self.findings.warn(s, "W311", f"`{s.text}` looks up rows 0..{self.user(end)}-1 of a table of "
                           f"{self.user(rows)} rows, but {self.user(end)} <= {self.user(rows)} does not "
                           f"follow from the assumptions{at}: the positions are counted by the wrong size",
                           help=f"count the positions of the axis they are added along (the tokens), "
                                f"with an `assume` that the table covers them (`assume S <= {self.user(rows)}` "
                                "for S tokens)")

    def _unbounded(self, end, rows) -> bool:
        """`end` grows without `rows`: its dims are in no assumption and not in `rows` (the
        batch size against a table of 32 rows, beyond the sizes a search tries)."""
        pr = self.prover
        mine = pr.canon(end).free_symbols
        bound = set().union(*(r.left.free_symbols | r.right.free_symbols for r in pr.relations)) \
            if pr.relations else set()
        return bool(mine) and not (mine & (bound | pr.canon(rows).free_symbols)) \
            and not (mine & set(pr.definition) | mine & set(pr.fresh))

    # ------------------------------------------------------------ masks (W313)
    def mask_polarity(self, s, m: TP | None, keep: bool) -> None:
        """`mask M` / masked_fill(M, -inf) hide where M is True (keep=False); an attention mask
        and where(M, scores, -inf) keep where it is True (keep=True). Square scores only: there
        a triangle with its diagonal hidden (or only the other side kept) empties a row."""
        tri = m.marks.get("tri") if m is not None else None
        rows, cols = (s.detail.get("rows"), s.detail.get("cols")) if s.op == "attention" else \
            (s.out.shape[-2:] if len(s.out.shape) >= 2 else (None, None))
        if tri is None or tri == "all" or rows is None:
            return
        if not self.prover.same(rows, cols):   # a causal triangle between two unrelated lengths
            self.findings.check_causal(s, f"the triangle of `{s.text}`", rows, cols)
            return
        empty = tri in ("lower", "upper") if not keep else tri in ("supper", "slower")
        if not empty:
            return
        side = {"lower": "the diagonal and everything before it", "upper": "the diagonal and every later key",
                "supper": "only the keys after the query", "slower": "only the keys before the query"}[tri]
        what = "hides" if not keep else "keeps"
        row = "the last query" if tri in ("lower", "supper") else "the first query"
        self.findings.warn(s, "W313", f"`{s.text}` {what} {side}: {row} sees no key at all, and its "
                           "softmax over a row of -inf is NaN",
                           help="a causal mask hides the keys after each query: `triu 1` of ones as the "
                                "positions to hide (`mask M`, masked_fill), `tril` as the positions to keep "
                                "(an attention mask, `where`)")

    def comparison(self, s, ins: list, out: TP) -> TP:
        if len(ins) == 1 and ins[0] is not None:
            tri = ins[0].marks.get("tri")
            sc = s.detail.get("scalar")
            if tri is not None and s.op in ("eq", "ne") and sc is not None:
                zero = sc in (0, False)
                flip = (s.op == "eq") == zero
                return out.mark(tri=(NEGATED.get(tri) if flip else tri) if tri != "all" else None)
            return out
        if len(ins) == 2 and all(t is not None for t in ins) and s.op in _COMPARE:
            a, b = (t.marks.get("index") for t in ins)
            # both count from 0: the triangle is anchored at (0, 0), whatever the two lengths
            if a and b and len(s.out.shape) >= 2:
                ra, rb = ((),) * (len(s.out.shape) - len(ins[0].axes)) + ins[0].axes, \
                    ((),) * (len(s.out.shape) - len(ins[1].axes)) + ins[1].axes
                if ra[-2] and not ra[-1] and rb[-1] and not rb[-2]:
                    return out.mark(tri=_COMPARE[s.op])
                if rb[-2] and not rb[-1] and ra[-1] and not ra[-2]:   # columns OP rows: mirrored
                    return out.mark(tri=_COMPARE[_MIRROR[s.op]])
        return out


def triangle(op: str, diagonal, tri) -> str | None:
    """Where `tril`/`triu` of a tensor that is True (non-zero) everywhere is True."""
    if tri != "all" or diagonal not in (0, 1, -1):
        return None
    if op == "tril":
        return {0: "lower", -1: "slower"}.get(diagonal)
    return {0: "upper", 1: "supper"}.get(diagonal)


def _statistic(op: str) -> str:
    """The statistic of its axis that operation `op` is (OpDef.statistic): mean, var, sum or ''."""
    d = TABLE.get(op)
    return d.statistic if d is not None else ""


def _same_axes(a: TP | None, b: TP) -> bool:
    return a is not None and (a is b or a.axes == b.axes)


def _centred_source(source: TP | None):
    return None if source is None else source.marks.get("centred")
