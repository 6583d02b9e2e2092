"""Feedback: a wrong answer described in the learner's terms.

Input: the exercise's reference run (shapelang.teaching.engines.Reference) and what a
learner's answer produced: a shape, the value signature of a binding's steps,
a diagnostic. Output: one sentence about *this* answer ("your shape has the
right sizes in the wrong order: `S` comes before `H`") and, for shapes, the
fraction of the points it earns. Messages never give away the reference shape
of an `expect X: ?` blank that the exercise does not show.
"""
from __future__ import annotations

import sympy as sp

from ..syntax.diagnostics import Diagnostic
from .engines import Reference
from .template import _squash


def did_you_mean(facts, name: str, known) -> str | None:
    """The checker's suggestion of a close name (`did you mean `Dh`?`), or None."""
    return facts._did_you_mean(name, known)


def with_help(d) -> str:
    """A Diagnostic or ShapeError on one line: its message, then its help in parentheses."""
    return d.message + (f" ({d.help})" if d.help else "")


def dims_phrase(ks: list) -> str:
    if len(ks) == 1:
        return f"dim {ks[0]}"
    return "dims " + ", ".join(str(k) for k in ks[:-1]) + f" and {ks[-1]}"


def layout_message(name: str, text: str) -> str:
    """The right shape with the numbers in the wrong places; `text`: the learner's statement."""
    moves = any(w in text for w in ("transpose", "permute", "rearrange"))
    msg = f"`{name}` has the right shape, but its numbers end up in the wrong places"
    if "view" in text or "reshape" in text or "flatten" in text:
        msg += (": `view`, `reshape` and `flatten` only regroup the numbers in memory order; "
                "moving an axis to another position takes `transpose` or `permute`")
        if moves:
            msg += " (check which axes are swapped, and whether that happens before or "  \
                   "after the reshaping)"
    return msg


class Feedback:
    """Comparisons and messages for one exercise, against its reference run."""

    def __init__(self, ref: Reference, partial: float):
        self.ref = ref
        self.prover = ref.prover
        self.example_env = ref.example_env
        self.partial = partial          # points for a shape right only at the example sizes
        self._visible = None

    def show(self, shape) -> str:
        """`[B, S, D/H] = [2, 4, 64]`: the shape as `check` shows it."""
        return self.ref.facts.show_shape(shape)

    def same_shape(self, a, b) -> bool:
        return len(a) == len(b) and all(x == y or self.prover.equal(x, y).ok for x, y in zip(a, b))

    # -- diagnostics of a re-check
    def error_text(self, d: Diagnostic, mine: tuple = ()) -> str:
        text = d.message
        if d.help:
            text += f" (help: {d.help})"
        return self.scrub(text, mine)

    def scrub(self, text: str, mine: tuple = ()) -> str:
        """Hide reference shapes of `expect X: ?` blanks that a message would give away
        (unless the exercise shows that shape in its code anyway)."""
        tmpl = self.ref.tmpl
        if self._visible is None:
            self._visible = _squash(" ".join(st.code for st in tmpl.stmts))
        for b in tmpl.blanks.values():
            if not b.whole_shape:
                continue
            st = tmpl.stmts[b.stmt]
            t = self.ref.env.get(st.names[0]) if st.names else None
            if t is None:
                continue
            shown = self.show(t.shape)
            sym = shown.split(" = ")[0]
            if _squash(sym) in self._visible:
                continue
            if any(_squash(sym) in _squash(a) for a in mine):
                continue
            for s in (shown, sym):
                text = text.replace(s, f"[the shape that {b.label} asks for]")
        return text

    # -- the right shape, different values: which step differs
    def sig_difference(self, mine: tuple, ref: tuple, name: str) -> str | None:
        if len(mine) == len(ref) and all(self.sig_entry_equal(a, b) for a, b in zip(mine, ref)):
            return None
        mine_ops = [e[0] for e in mine]
        ref_ops = [e[0] for e in ref]
        extra = [op for op in mine_ops if op not in ref_ops]
        if extra:
            return f"`{name}` has the right shape, but `{extra[0]}` is not the operation needed here"
        if len(mine_ops) < len(ref_ops):
            return f"`{name}` has the right shape, but a step is missing"
        if len(mine_ops) > len(ref_ops):
            return f"`{name}` has the right shape, but there is a step too many"
        for a, b in zip(mine, ref):
            if self.sig_entry_equal(a, b):
                continue
            op = a[0]
            if a[0] != b[0]:
                return f"`{name}` has the right shape, but its steps are in a different order"
            if a[2] != b[2]:
                return f"`{name}` has the right shape, but `{op}` takes the wrong tensors (or " \
                       "takes them in the wrong order)"
            if op in ("softmax", "log_softmax"):
                return f"`{name}` has the right shape, but `{op}` normalises over the wrong dim " \
                       f"(dim {a[1][0]} here)"
            if op == "scale":
                return f"`{name}` has the right shape, but the scale factor `{a[1][0]}` is not right"
            if op in ("sum", "mean", "var", "amax"):
                return f"`{name}` has the right shape, but `{op}` reduces over the wrong dim"
            if op == "mask":
                return f"`{name}` has the right shape, but the mask is not the right one"
            return f"`{name}` has the right shape, but `{op}` is used with different arguments"
        return f"`{name}` has the right shape, but computes something else"

    def sig_entry_equal(self, a, b) -> bool:
        if a[0] != b[0] or a[2] != b[2] or len(a[1]) != len(b[1]):
            return False
        for x, y in zip(a[1], b[1]):
            if isinstance(x, sp.Basic) and isinstance(y, sp.Basic):
                if not (x == y or self.prover.equal(x, y).ok):
                    return False
            elif x != y:
                return False
        return True

    # -- a wrong shape
    def compare(self, got, want, unit_index, name, subject) -> tuple[float, str]:
        """Points (a fraction) and a message for shape `got` where `name` must be `want`."""
        if self.same_shape(got, want):
            return 1.0, ""
        p = self.prover
        shown = self.show(got)
        if subject == "your shape":
            subject = f"your shape {shown}: it"
            that = f"your shape {shown} is"
        else:
            that = subject + " is"
            subject = subject + " shape"
        earlier = self.earlier_shapes(unit_index, name,
                                      hidden_steps=subject.startswith("your shape"))
        for label, shape in earlier:
            if self.same_shape(got, shape):
                return 0.0, f"{that} {label}"
        if len(got) != len(want):
            return 0.0, (f"{subject} has {len(got)} dim{'s' if len(got) != 1 else ''}; "
                         f"`{name}` has {len(want)}")
        env = self.example_env
        if env:
            vals = [(p.value(a, env), p.value(b, env)) for a, b in zip(got, want)]
            if all(x is not None and x == y for x, y in vals):
                only = [k for k, (a, b) in enumerate(zip(got, want)) if not p.equal(a, b).ok]
                dims = ", ".join(f"{n}={env[p.user[n]]}" for n in p.user
                                 if p.user[n] in env and p.user[n] not in p.definition)
                which = "it is written with numbers, which are" if len(only) == len(want) else \
                    f"{dims_phrase(only)} {'is' if len(only) == 1 else 'are'}"
                return self.partial, (
                    f"{subject} has the right sizes for the example ({dims}), but {which} right "
                    "only for those sizes: write the shape with the dims, so that it holds for "
                    "every size")
        perm = self.permutation(got, want)
        if perm is not None:
            a, b = perm
            return 0.0, f"{subject} has the right sizes in the wrong order: `{a}` comes before `{b}`"
        diff = [k for k, (a, b) in enumerate(zip(got, want)) if not p.equal(a, b).ok]
        if len(diff) == 1:
            k = diff[0]
            factor = self.factor(got[k], want[k])
            where = f"dim {k}" + (" (the last)" if k == len(want) - 1 and k > 0 else "")
            if factor:
                return 0.0, f"{subject} is off by a factor in {where}: `{got[k]}` is {factor}"
            return 0.0, f"{subject} has {where} wrong (`{got[k]}`); the other dims are right"
        return 0.0, f"{subject} has {dims_phrase(diff)} wrong"

    def permutation(self, got, want):
        used = [False] * len(want)
        for a in got:
            for j, b in enumerate(want):
                if not used[j] and (a == b or self.prover.equal(a, b).ok):
                    used[j] = True
                    break
            else:
                return None
        for k, a in enumerate(got):
            if not self.prover.equal(a, want[k]).ok:
                # `a` is out of place: name a dim it should come after
                for b in got[k + 1:]:
                    ia = next(j for j, w in enumerate(want) if self.prover.equal(a, w).ok)
                    ib = next(j for j, w in enumerate(want) if self.prover.equal(b, w).ok)
                    if ib < ia:
                        return a, b
                return a, want[k]
        return None

    def factor(self, got, want) -> str | None:
        p = self.prover
        try:
            ratio = sp.cancel(p.canon(got) / p.canon(want))
        except (TypeError, ValueError, ZeroDivisionError):
            return None
        if ratio.free_symbols - set(p.user.values()):
            return None
        num, den = sp.fraction(ratio)
        if ratio.is_Number:
            if ratio > 1 and ratio.is_Integer:
                return f"{ratio} times too big"
            if ratio < 1 and (1 / ratio).is_Integer:
                return f"{1 / ratio} times too small"
            return None
        monomial = (sp.Symbol, sp.Mul, sp.Pow)
        if den == 1 and isinstance(num, monomial):
            return f"{num} times too big"
        if num == 1 and isinstance(den, monomial):
            return f"{den} times too small"
        return None

    def earlier_shapes(self, unit_index, name, hidden_steps: bool = True) -> list:
        """(how to describe it, shape) for shapes a learner may confuse with the answer."""
        out = []
        if unit_index is None:
            return out
        units = self.ref.engine.units
        ref = self.ref.units[unit_index]
        steps = ref.steps
        st = self.ref.tmpl.stmts[units[unit_index].stmt]
        hidden = self._hole_ranges(st)
        for k in range(len(steps) - 2, -1, -1):
            s = steps[k]
            if s.op == "input":
                continue
            nxt = steps[k + 1]
            col = nxt.span.column - 1
            is_hidden = any(a <= col < b for a, b in hidden)
            if is_hidden and not hidden_steps:
                continue
            where = f"partway through line {units[unit_index].line}"
            out.append((f"the shape `{name}` has {where}, before `{nxt.text}`"
                        if not is_hidden else f"the shape `{name}` has {where}, not at its end",
                        s.out.shape))
        reads = set(ref.deps) if ref.deps else self._reads(st)
        for k in range(unit_index - 1, -1, -1):
            u = units[k]
            for n in u.names:
                t = self.ref.units[k].defs.get(n)
                if t is not None and n in reads:
                    what = "declared" if u.kind in ("input", "param", "buffer") else "computed"
                    out.append(((f"the shape of `{n}` ({what} on line {u.line}), which `{name}` "
                                 "is computed from"), t.shape))
        return out

    def _reads(self, st) -> set:
        names = self.ref.engine.tensor_names
        return {n for n in st.mentioned() if n in names}

    def _hole_ranges(self, st) -> list:
        """Character ranges of the reference answers in the filled statement."""
        out = []
        shift = 0
        for b in sorted((b for b in self.ref.tmpl.blanks.values() if b.stmt == st.index),
                        key=lambda b: b.hole):
            text, start, end = st.holes[b.hole]
            ans = self.ref.answers.get(b.name) or text
            out.append((start + shift, start + shift + len(ans)))
            shift += len(ans) - (end - start)
        return out
