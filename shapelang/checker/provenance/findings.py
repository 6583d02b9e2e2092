"""The findings of the provenance pass (W301, W302, W305-W308), in the learner's terms, each with
candidate fixes that shapelang.checker.advice.fixes proves before they are shown."""
from __future__ import annotations

from ...syntax.diagnostics import Diagnostic
from .. import dims as dimlib
from .atoms import TP, _size, label_of, root_base


class Findings:
    def __init__(self, analysis):
        self.p = analysis
        self.found: list[Diagnostic] = []

    def warn_mixed(self, s, x: TP, shape, fixes: bool = True) -> None:
        atoms = [a for ax in x.axes for a in ax]
        split = {a.parent for a in atoms if a.parent is not None}
        merging = [p for p in split if any(self.p.prover.same(p.size, d) for d in shape)
                   and len({a.index for a in atoms if a.parent is p}) == max(
                       a.pieces for a in atoms if a.parent is p)]
        have = "[" + ", ".join(label_of(ax) for ax in x.axes) + "]"
        if merging:
            p = merging[0]
            parts = " and ".join(a.label for a in atoms if a.parent is p)
            self.warn(s, "W302", f"`{s.text}` merges {parts} back into {p.label}, but they are not next to "
                      f"each other in that order in {have}: heads and tokens get mixed",
                      fix=self.regroup_fixes(s, x, shape) if fixes else None,
                      notes=(f"move {parts} next to each other first (a transpose), then merge",))
            return
        features = [a for a in atoms if a.feature]
        if len(features) >= 2 and any(self.p.prover.same(_size(features), d) for d in shape):
            parts = " and ".join(a.label for a in features)
            self.warn(s, "W302", f"`{s.text}` merges the features {parts} into one axis, but they are not "
                      f"next to each other in that order in {have}: heads and tokens get mixed",
                      fix=self.regroup_fixes(s, x, shape) if fixes else None,
                      notes=(f"move {parts} next to each other first (a transpose), then merge",))
            return
        target = "[" + ", ".join(dimlib.show(d, self.p.prover.notation) for d in shape) + "]"
        culprit = self._mixed_axis(x, shape)
        self.warn(s, "W301", f"`{s.text}` reads the elements of {have} in order into {target}, so "
                  f"{culprit}: values of different axes get mixed",
                  fix=self.regroup_fixes(s, x, shape) if fixes else None,
                  notes=(("`view` and `reshape` never move elements; split an axis where it is, "
                         "then move the pieces with `transpose` or `permute`"),))

    def _mixed_axis(self, x: TP, shape) -> str:
        if self.p.rg.failed is None:
            return "an axis is made of parts of several others"
        size, atom = self.p.rg.failed
        name = dimlib.show(self.p.prover.name_of(size), self.p.prover.notation)
        return f"the axis of size {name} is made of positions of {atom.label}"

    # ------------------------------------------------------------ findings
    def check_flat_bias(self, softmax, x: TP) -> None:
        """A term added to the scores that does not vary along the keys shifts every score of
        a query's row by the same amount, which the softmax over the keys takes away."""
        add = x.flat_bias
        if add is None:
            return
        k = len(x.axes) - 1 - x.axes.index(x.keys)
        self.warn(add, "W308", f"`{add.text}` shifts the attention scores by a term that is the same "
                  f"for every key (size 1 on axis {-k - 1}, where the scores have the keys, "
                  f"{label_of(x.keys)}), so `{softmax.text}` on line {softmax.span.line} cancels it",
                  help="lay the bias (a position bias, or a padding mask) out along the keys: "
                  "size 1 on the query axis, the key length on the last",
                  notes=(("softmax(s + c) = softmax(s) for any c that is constant along the axis "
                          "it normalises"),))

    def check_features(self, s, x: TP, d: int, verb: str) -> None:
        if not x.axes or d >= len(x.axes):
            return
        here = any(a.feature for a in x.axes[d])
        feat = [k for k, ax in enumerate(x.axes) if ax and all(a.feature for a in ax)]
        if here or not x.axes[d] or not feat:
            return
        k = feat[-1]
        self.warn(s, "W304", f"`{s.text}` {verb} over {label_of(x.axes[d])}, not over the features "
                  f"({label_of(x.axes[k])}, axis {k})",
                  help="normalise before moving the feature axis away from the end, "
                  "or move it back with a transpose first")

    def check_causal(self, s, what: str = "`mask causal`", rows=None, cols=None) -> None:
        if rows is None:
            rows, cols = s.detail["rows"], s.detail["cols"]
        if self.p.prover.same(rows, cols):
            return
        if self.p.prover.leq(rows, cols).ok:
            self.warn(s, "W305", f"{what} on scores with {dimlib.show(rows, self.p.prover.notation)} queries and "
                      f"{dimlib.show(cols, self.p.prover.notation)} keys lines query i up with key i, as PyTorch's `is_causal` "
                      "does: when the keys start with cached positions, it hides keys the queries "
                      "should see", help="mask with a tensor that shifts the diagonal by the past length "
                      "(`mask M` with M: [S, P + S] true above the shifted diagonal)")
            return
        self.warn(s, "W305", f"{what} on scores with {dimlib.show(rows, self.p.prover.notation)} queries and "
                  f"{dimlib.show(cols, self.p.prover.notation)} keys: the lengths are unrelated, so position i of one says "
                  "nothing about position i of the other",
                  help="cross-attention needs no causal mask; remove "
                  f"{'`-> mask causal`' if what == '`mask causal`' else what} (or use a padding mask)",
                  notes=(("a causal mask hides the keys after each query, which needs both to count "
                         "the same positions (or keys = past + queries)"),))

    def check_scale(self, s, x: TP, factor) -> None:
        base = root_base(factor)
        if x.contracted is None or base is None:
            return
        contracted = _size(x.contracted)
        if self.p.prover.same(base, contracted):
            return
        want = self.p.user(contracted)
        fix = [(s.span, f"scale 1/sqrt({want})", (f"if you meant scaled dot-product attention's 1/sqrt of "
                f"the width the scores summed over ({want})"))] if s.op == "scale" else None
        self.warn(s, "W306", f"`{s.text}` divides the scores by sqrt({self.p.user(base)}), but the "
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
        self.check_reordered(s, (pa, pb))

    def check_reordered(self, s, sides, names=("one side", "the other"), tail: int = 0) -> None:
        """Operands whose axis at one position holds the same pieces in another order: keys
        repeated per head (`repeat_interleave`, heads G·Nrep) against values tiled
        (`expand [B, Nrep, G, ..]`, heads Nrep·G). Head h then takes its keys from one key/value
        head and its values from another. `sides`: the operands' axes, lined up from the right,
        `tail` more axes after them (the matrix axes of a product)."""
        rank = max(len(a) for a in sides)
        padded = [((),) * (rank - len(a)) + tuple(a) for a in sides]
        for x in range(len(padded)):
            for y in range(x + 1, len(padded)):
                for i in range(rank):
                    a, b = padded[x][i], padded[y][i]
                    if a == b or not self._moved_piece(a, b):
                        continue
                    axis = i - rank - tail
                    self.warn(s, "W307", f"`{s.text}` lines up axis {axis} ({label_of(a)}) of "
                              f"{names[0]} with axis {axis} ({label_of(b)}) of {names[1]}: the "
                              "same pieces merged in another order, so the sizes agree but position j "
                              "of one is not position j of the other",
                              help="split, repeat and merge both the same way (for key/value heads "
                              "repeated to the query heads: `repeat_interleave` on both, as Hugging "
                              "Face's repeat_kv)",
                              notes=(f"one side counts {a[-1].label} fastest, the other {b[-1].label}",))
                    return

    def _moved_piece(self, a, b) -> bool:
        """The same pieces, merged in another order: a piece both axes hold, counted with
        another stride in each; or, where the pieces are each side's own (the key heads and the
        value heads, the copies a repeat makes), pieces of the same sizes in another order."""
        same = self.p.prover.same
        for k, g in enumerate(a):
            if g in b and not same(_size(a[k + 1:]), _size(b[b.index(g) + 1:])):
                return True
        if len(a) < 2 or len(a) != len(b) or all(same(x.size, y.size) for x, y in zip(a, b)):
            return False
        left = list(b)
        for x in a:
            match = next((y for y in left if same(x.size, y.size)), None)
            if match is None:
                return False
            left.remove(match)
        return True

    def warn(self, s, code, message, *, help=None, notes=(), fix=None) -> None:
        """A finding at step `s`; `fix`: candidate rewrites [(span, text)], shown only once proved."""
        if isinstance(fix, tuple):
            fix = [(fix[0].span, fix[1])]
        self.found.append(Diagnostic(code, message, s.span, help, tuple(notes), None, "warning",
                                        fixes=tuple(fix or ())))

    # ------------------------------------------------------------ fixes for regrouping
    def regroup_fixes(self, s, x: TP, shape) -> list:
        """Rewrites of a regrouping step that read the elements without mixing them:
        move axes first (`transpose 1 2 -> reshape [..]`), or split in place and move the
        pieces after (`view [B, S, H, Dh] -> transpose 1 2`); also in place of a transpose
        that came just before. Ordered by how little they change."""
        out = []
        target = [dimlib.show(self.p.prover.name_of(d), self.p.prover.notation) for d in shape]
        verb = "reshape" if s.op in ("view", "reshape") and s.op == "reshape" else s.op
        if verb not in ("view", "reshape"):
            verb = "reshape"
        prev = self.p.producer.get(s.inputs[0]) if s.inputs else None
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
                axes = self.p.rg.regroup(moved, shape)
                if axes is not None and self.p.rg.out_of_order(axes) is None and self.p.rg.all_whole(axes):
                    out.append((span, f"{_perm_text(perm)} -> {verb} [{', '.join(target)}]"))
                    break
            if len(shape) <= 5:
                # split in place, then move: of the orders that read whole pieces, the one that
                # keeps the pieces of each axis in the order the learner wrote them (`[3, B, H,
                # S, Dh]` cuts 3·D as 3, H, Dh, not H, 3, Dh), then the one that moves least
                best = None
                for perm in _perms(len(shape)):
                    axes = self.p.rg.regroup(src, [shape[k] for k in perm])
                    if axes is None or self.p.rg.out_of_order(axes) is not None or not self.p.rg.all_whole(axes):
                        continue
                    key = (_swapped_pieces(perm, axes), sum(1 for k, v in enumerate(perm) if k != v))
                    if best is None or key < best[0]:
                        best = (key, perm)
                if best is not None:
                    perm = best[1]
                    inv = [perm.index(k) for k in range(len(shape))]
                    out.append((span, f"{verb} [{', '.join(target[k] for k in perm)}] -> {_perm_text(inv)}"))
        return out[:4]


def _perms(n: int):
    """Permutations of range(n), fewest moved axes first, the identity excluded."""
    import itertools

    perms = [p for p in itertools.permutations(range(n)) if p != tuple(range(n))]
    return sorted(perms, key=lambda p: (sum(1 for k, v in enumerate(p) if k != v), p))


def _swapped_pieces(perm, axes) -> int:
    """Pairs of pieces of one axis that the permuted order puts in the other order than the
    target written (axes[i] is the axis read for target position perm[i])."""
    where = {}
    for i, axis in enumerate(axes):
        for a in axis:
            if a.parent is not None:
                where.setdefault(a.parent, []).append((a.index, perm[i]))
    return sum(1 for pieces in where.values() for x in pieces for y in pieces if x[0] < y[0] and x[1] > y[1])


def _perm_text(perm) -> str:
    moved = [k for k, v in enumerate(perm) if k != v]
    if len(moved) == 2:
        return f"transpose {moved[0]} {moved[1]}"
    return "permute " + " ".join(str(v) for v in perm)

