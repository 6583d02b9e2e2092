"""Provenance rules of whole layers and of tensors computed in the spec: attention,
convolutions, tables and masks. Mixed into the pass (analysis.Provenance); each rule
gets the step, the provenance of its first input and of all inputs, and returns the
provenance of its outputs, or None where it is unknown (then the pass stays silent)."""
from __future__ import annotations

from .atoms import TP, _size


class LayerRules:
    def p_attention(self, s, q: TP, ins):
        """As the written-out form: the scores' keys are K's positions, a causal mask needs
        queries and keys that count the same positions, the scale divides by the width the
        scores contracted; the result has the queries' positions and the values' features."""
        if len(ins) < 3 or any(t is None for t in ins[:3]) or min(len(t.axes) for t in ins[:3]) < 2:
            return None
        k, v = ins[1], ins[2]
        if s.detail.get("mask") and len(ins) > 3:
            self.mask_polarity(s, ins[3], True)
        if s.detail.get("causal"):
            self.findings.check_causal(s, "`is_causal=true`")
        if s.detail.get("scale") is not None:
            scores = TP(q.axes[:-1] + (self.keyed(k.axes[-2]),), None, k.axes[-1] or None)
            self.findings.check_scale(s, scores, s.detail["scale"])
        self.findings.check_reordered(s, (k.axes[:-2], v.axes[:-2]), ("the keys", "the values"), tail=2)
        rank = len(s.out.shape)
        padded = [((),) * (rank - len(t.axes)) + t.axes[:-2] for t in (q, k, v)]
        batch = tuple(next((p[j] for p in padded if p[j]), ()) for j in range(rank - 2))
        if s.detail.get("gqa"):   # the heads are the queries' (K and V heads repeat)
            batch = batch[:-1] + (padded[0][-1],)
        return [TP(batch + (q.axes[-2], v.axes[-1]))]

    def p_outer(self, s, a: TP, ins):
        b = ins[1] if len(ins) > 1 else None
        if b is None or len(a.axes) != 1 or len(b.axes) != 1:
            return None
        return [TP(a.axes + b.axes)]

    def p_meshgrid(self, s, x: TP, ins):
        """Every output's axis j counts the entries of vector j (a copy along the others)."""
        if any(t is None or len(t.axes) > 1 for t in ins):
            return None
        axes = tuple(t.axes[0] if t.axes else () for t in ins)
        return [TP(axes) for _ in s.outputs]

    def p_stack_tensors(self, s, x: TP, ins):
        """The first tensor's axes, and a new axis counting the tensors stacked."""
        d = s.detail["dim"]
        if not ins or ins[0] is None or d > len(ins[0].axes):
            return None
        axes = list(ins[0].axes)
        axes.insert(d, self.fresh(s.out.shape[d]))
        return [TP(tuple(axes))]

    def p_new(self, s, x, ins):
        """A tensor made from sizes alone (arange, full, ..): new axes; an arange counts 0..N-1
        along its axis, ones (or full of true) are True everywhere (a mask to cut a triangle from)."""
        out = TP(tuple(self.fresh(d) for d in s.out.shape))
        det = s.detail
        if s.op == "arange" and det.get("start") == 0 and det.get("step") == 1 and out.axes and out.axes[0]:
            return [out.mark(index=(out.axes[0], det["end"]))]
        if s.op in ("ones", "full") and len(s.out.shape) >= 2 and det.get("value") not in (0, False, None):
            return [out.mark(tri="all")]
        return [out]

    def p_where(self, s, x: TP, ins):
        values = s.detail.get("values")
        if s.op == "where" and values and len(values) == 2 and len(ins) == 2:   # where(M, x, v) or (M, v, x)
            import sympy as sp

            keep = values[0] is None
            self.masked(s, ins[1], ins[0], keep, values[1 if keep else 0] == -sp.oo, "masks the weights")
        return self.elementwise(s, ins)

    def p_conv(self, s, x: TP, ins):
        """Channels are new features (as after `linear`); a spatial axis keeps its positions
        when its size is kept, else it is a new axis of positions."""
        n = s.detail["spatial"]
        if len(x.axes) < n + 1:
            return None
        self.channels(s, x)
        lead = x.axes[:-n - 1]
        chans = self.fresh(s.out.shape[len(lead)], True)
        spatial = []
        for k, ax in enumerate(x.axes[-n:]):
            size = s.out.shape[-n + k]
            spatial.append(ax if ax and self.prover.same(_size(ax), size) else self.fresh(size))
        spatial = tuple(spatial)
        return [TP(lead + (chans,) + spatial)]

    def p_pool(self, s, x: TP, ins):
        """Pools and resizing: the batch and the channels stay; a spatial axis keeps its
        positions when its size is kept, else it is a new axis of positions."""
        n = 1 if s.op.endswith("1d") else 2 if s.op.endswith("2d") else len(s.out.shape) - 2
        if n < 1 or len(x.axes) != len(s.out.shape):
            return None
        spatial = tuple(ax if ax and self.prover.same(_size(ax), size) else self.fresh(size)
                        for ax, size in zip(x.axes[-n:], s.out.shape[-n:]))
        return [TP(x.axes[:-n] + spatial)]

    def p_one_hot(self, s, x: TP, ins):
        return [TP(x.axes + (self.fresh(s.out.shape[-1], True),))]

    # indexing: the positions picked along the indexed axis are a new axis
    def _picked(self, s, x: TP, shape) -> TP | None:
        d = s.detail.get("dim")
        if d is None or len(x.axes) != len(shape):
            return None
        axes = [ax if k != d and ax and self.prover.same(_size(ax), size) else self.fresh(size, any(a.feature for a in ax))
                for k, (ax, size) in enumerate(zip(x.axes, shape))]
        return TP(tuple(axes))

    def p_index(self, s, x: TP, ins):
        """index_select, gather, take_along_dim, topk: the other axes are the input's."""
        out = [self._picked(s, x, t.shape) for t in s.outputs]
        return None if None in out else out

    def p_write(self, s, x: TP, ins):
        """index_add, scatter_add, scatter: the input's axes, written at some positions."""
        return [x]

    def p_data(self, s, x, ins):
        """nonzero, where(M), masked_select: new axes of a data-dependent length."""
        return [TP(tuple(self.fresh(d) for d in t.shape)) for t in s.outputs]

    def p_each(self, s, x: TP, ins):
        """sort: the values and their indices, each with the input's axes."""
        return [x] * len(s.outputs)

    def p_unbind(self, s, x: TP, ins):
        """unbind: each piece is the input without the axis it was cut along."""
        d = s.detail["dim"]
        return [x.carry(x.axes[:d] + x.axes[d + 1:])] * len(s.outputs)
