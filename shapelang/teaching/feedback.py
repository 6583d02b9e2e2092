"""Feedback: a wrong answer described in the learner's terms.

Input: the exercise's reference run (shapelang.teaching.engines.Reference) and what a
learner's answer produced: a shape, the value signature of a binding's steps,
a diagnostic. Output: one sentence about *this* answer ("your shape has the
right sizes in the wrong order: `S` comes before `H`") and, for shapes, the
fraction of the points it earns. Messages never give away the reference shape
of an `expect X: ?` blank that the exercise does not show.
"""
from __future__ import annotations

import re

import sympy as sp

from ..checker.ops.table import TABLE
from ..syntax.diagnostics import Diagnostic
from .engines import Reference
from .shapes import Words, attention_roles, dims_phrase
from .template import _squash

_UNKNOWN_DIM = re.compile(r"unknown dim `([A-Za-z_]\w*'?)`")
# common names of sizes -> words an exercise's comments use for them
ALIASES = {
    "batch": ("batch",), "batchsize": ("batch",), "bs": ("batch",),
    "seq": ("sequence", "tokens"), "seqlen": ("sequence", "tokens"), "seqlength": ("sequence",),
    "nheads": ("heads",), "numheads": ("heads",), "nhead": ("heads",),
    "dmodel": ("dmodel",), "hiddensize": ("dmodel",), "dhead": ("dk", "head"),
    "headdim": ("dk", "head"), "vocab": ("vocabulary",), "vocabsize": ("vocabulary",),
    "dff": ("dff", "feedforward"),
}


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _words(note: str) -> set:
    return {_norm(w) for w in re.split(r"[^A-Za-z0-9_-]+", note) if w}


def did_you_mean(facts, name: str, known) -> str | None:
    """The checker's suggestion of a close name (`did you mean `Dh`?`), or None."""
    return facts._did_you_mean(name, known)


def with_help(d) -> str:
    """A Diagnostic or ShapeError on one line: its message, then its help in parentheses."""
    return d.message + (f" ({d.help})" if d.help else "")


# the operations a learner moves axes with (`transpose`, `movedim`, `swapaxes`, `rearrange`, ..)
MOVERS = frozenset(name for name, d in TABLE.items() if TABLE[d.ir_name].moves in ("move", "rearrange"))


def layout_message(name: str, text: str) -> str:
    """The right shape with the numbers in the wrong places; `text`: the learner's statement."""
    moves = any(w in text for w in MOVERS)
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
        self._notes = None
        self.words = Words(self.prover, attention_roles(self.prover,
                                                        getattr(ref.engine, "ref_spec", None)),
                           self.dim_notes())

    def show(self, shape) -> str:
        """`[B, S, D/H] = [2, 4, 64]`: the shape as `check` shows it."""
        return self.ref.facts.show_shape(shape)

    def same_shape(self, a, b) -> bool:
        return len(a) == len(b) and all(x == y or self.prover.equal(x, y).ok for x, y in zip(a, b))

    # -- diagnostics of a re-check
    def error_text(self, d: Diagnostic, mine: tuple = ()) -> str:
        text = d.message
        m = _UNKNOWN_DIM.search(d.message) if d.code == "E002" else None
        if m:      # the checker's help declares a new dim; an exercise has its own dims
            return self.scrub(self.unknown_dim(m.group(1)), mine)
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
            d = TABLE.get(op)
            keys = d.values if d is not None else ()
            if "dim" in keys and a[1][keys.index("dim")] != b[1][keys.index("dim")]:
                # a softmax's or a reduction's axis: the table says which operations have one
                if d.normalises:
                    return f"`{name}` has the right shape, but `{op}` normalises over the wrong dim " \
                           f"(dim {a[1][keys.index('dim')]} here)"
                if d.reduces:
                    return f"`{name}` has the right shape, but `{op}` reduces over the wrong dim"
            if op == "scale":
                return f"`{name}` has the right shape, but the scale factor `{a[1][0]}` is not right"
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
                detail = self.words.detail(got, want, name)
                return 0.0, f"{that} {label}" + (f"; {detail}" if detail else "")
        env = self.example_env
        if env and len(got) == len(want):
            vals = [(p.value(a, env), p.value(b, env)) for a, b in zip(got, want)]
            if all(x is not None and x == y for x, y in vals):
                only = [k for k, (a, b) in enumerate(zip(got, want)) if not p.equal(a, b).ok]
                which = "it is written with numbers, which are" if len(only) == len(want) else \
                    f"{dims_phrase(only)} {'is' if len(only) == 1 else 'are'}"
                return self.partial, (
                    f"{subject} has the right sizes for the example ({self.example_text()}), "
                    f"but {which} right only for those sizes: write the shape with the dims, "
                    "so that it holds for every size")
        return 0.0, f"{subject} {self.words.describe(got, want, name)}"

    def example_text(self) -> str:
        """`B=1, S=4, D=512, H=8`: the example sizes of the exercise's own dims."""
        p, env = self.prover, self.example_env or {}
        return ", ".join(f"{n}={env[p.user[n]]}" for n in p.user
                         if p.user[n] in env and p.user[n] not in p.definition)

    def factor(self, got, want) -> str | None:
        return self.words.factor(got, want)

    # -- names that are not the exercise's dims
    def unknown_dim(self, name: str) -> str:
        """What to say about a size name that is not a dim of this exercise: its dims, and
        the one meant when its name or its comment says so (`d_k` for `Dh`)."""
        p = self.prover
        close = did_you_mean(self.ref.facts, name, p.user) or self.dim_meant(name)
        hint = f"; {close}" if close else ""
        return f"`{name}` is not a dim of this exercise (its dims are {', '.join(p.user)}){hint}"

    def dim_meant(self, name: str) -> str | None:
        """`did you mean `Dh` (width of one head (d_k))?` when `name` matches one dim's name
        or the words of its comment in the exercise."""
        notes = self.dim_notes()
        want = _norm(name)
        words = ALIASES.get(want, ()) + (want,)
        hits = [dim for dim in self.prover.user if _norm(dim) == want]
        if not hits:
            hits = [dim for dim, note in notes.items() if any(w in _words(note) for w in words)]
        if len(hits) != 1:
            return None
        note = notes.get(hits[0])
        return f"did you mean `{hits[0]}`" + (f" ({note})" if note else "") + "?"

    def dim_notes(self) -> dict:
        """dim name -> its comment in the exercise (`dim Sc  # context length`)."""
        if self._notes is None:
            self._notes = {}
            tmpl = self.ref.tmpl
            for st in tmpl.stmts:
                if st.kind != "dim" or len(st.nodes) != 1:
                    continue
                comment = tmpl.lines[st.end_line - 1].comment
                if comment and not comment.lstrip("#").strip().startswith(("?", "@")):
                    self._notes[st.nodes[0].name] = comment.lstrip("#").strip()
        return self._notes

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
