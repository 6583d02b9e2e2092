"""The step at fault: a learner's statement compared with the reference step by step.

Input: the learner's statement (its filled code, its checked steps, or the steps
done before it failed), the reference's steps, and where the answers sit in
both (shapelang.teaching.steps). Output: a sentence that names the mistake where
it happens, in the words of shapelang.teaching.shapes:

- a `view` or `reshape` whose sizes are off: "`view` cannot turn [B, S, D] into
  [B, S, H, D]: the last size, `D`, is H times too big: divide by H";
- a fixed operation that fails because the answer gave it another input:
  "with your answer, `view [B, Sc, H, Dh]` gets [B, St, D]: dim 1 is `St`, the
  query length; here it must be `Sc`, the key length";
- a step inside the answer whose shape differs although the statement's result
  has the right shape: "after your `linear 3*D` the width, `3*D`, is 3/4 of the
  size needed: multiply by 4/3";
- a `transpose` that exchanges the wrong pair of axes.
"""
from __future__ import annotations

from ..checker import dims as dimlib
from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Binding, Name, Neg, Num, Pipeline, ShapeLit
from ..syntax.parser import ParseFailure, parse
from . import steps as stepmap
from .shapes import Words

REGROUP = ("view", "reshape")
MOVES = ("transpose", "permute")


class Context:
    """One statement with the learner's answers, next to the reference's."""

    def __init__(self, code: str, line: int, mine, ref, my_ranges, ref_ranges, env: dict):
        self.code, self.line = code, line
        self.mine, self.ref = mine, ref            # UnitResult of each
        self.my_ranges, self.ref_ranges = my_ranges, ref_ranges
        self.env = env                             # tensor name -> type, in the reference

    def pipeline(self) -> Pipeline | None:
        """The learner's pipeline (nodes), parsed from the filled code."""
        try:
            spec = parse("\n" * (self.line - 1) + self.code)
        except (ParseFailure, RecursionError):
            return None
        found = [s.value for s in spec.statements
                 if isinstance(s, Binding) and isinstance(s.value, Pipeline)]
        return found[0] if len(found) == 1 else None


class Diagnose:
    def __init__(self, feedback, words: Words, lookup):
        self.fb = feedback
        self.words = words
        self.lookup = lookup          # a dim name node -> its size (raises ShapeError)

    # -- a failed statement
    def failure(self, d, cx: Context) -> str | None:
        """A better sentence for error `d` of the learner's statement, or None."""
        if d.span.line != cx.line:
            return None
        col = d.span.column - 1
        pipe = cx.pipeline()
        ops = pipe.ops if pipe is not None else ()
        k = next((k for k, o in enumerate(ops) if o.span.line == cx.line
                  and o.span.column - 1 <= col < o.span.end_column - 1), None)
        if k is None:
            return None
        op = ops[k]
        span = (op.span.column - 1, op.span.end_column - 1)
        done = cx.mine.partial
        if done:
            got_in = done[-1].out.shape
        elif k == 0 and isinstance(pipe.head, Name) and cx.env.get(pipe.head.name) is not None:
            got_in = cx.env[pipe.head.name].shape
        else:
            return None
        key = stepmap.key_of_next(done, span, cx.my_ranges, op.name)
        twin = stepmap.lookup((cx.ref.steps, cx.ref_ranges), key)
        if twin is None:
            return None
        want_in = stepmap.input_shape(cx.ref.steps, twin)
        if want_in is None and twin.inputs and twin.inputs[0] in cx.env:
            t = cx.env[twin.inputs[0]]
            want_in = t.shape if t is not None else None
        if want_in is None:
            return None
        show = self.fb.show
        if not self.words.same(got_in, want_in):
            what = self.words.describe(got_in, want_in, "it", need=True)
            return f"with your answer, `{op.text}` gets {show(got_in)}: that shape {what}"
        if op.name in REGROUP and twin.op in REGROUP and d.code == "E103":
            target = self.target(op)
            if target is not None:
                return (f"`{op.name}` cannot turn {show(got_in)} into {show(target)}: "
                        f"{self.sizes(target, twin.out.shape)}")
        return None

    def target(self, op) -> tuple | None:
        """The sizes a `view`/`reshape` asks for (None with a `-1` or a name that is not a dim)."""
        if not op.args or not isinstance(op.args[0], ShapeLit):
            return None
        out = []
        for node in op.args[0].dims:
            if isinstance(node, Neg) and isinstance(node.operand, Num):
                return None
            try:
                out.append(dimlib.build(node, self.lookup))
            except ShapeError:
                return None
        return tuple(out)

    def sizes(self, got, want) -> str:
        """The sizes a view asks for, against the ones it needs."""
        w = self.words
        if len(got) == len(want):
            diff = [k for k in range(len(got)) if not w.eq(got[k], want[k])]
            if len(diff) == 1:
                k = diff[0]
                size = "the last size" if k == len(want) - 1 else f"size {k}"
                swap = w.role_swap(got[k], want[k])
                if swap:
                    return f"{size} is `{got[k]}`, {swap}"
                f = w.factor(got[k], want[k])
                if f:
                    return f"{size}, `{got[k]}`, is {f}"
                return f"{size}, {w.named(got[k])}, is not the size needed"
        return "the result " + w.describe(got, want, "it", need=True)

    # -- a statement that checks, but differs inside the answer
    def inner_step(self, cx: Context, last: bool = True) -> str | None:
        """The first step of the answer whose shape differs from the reference's (`last`:
        also when it is the statement's last step, whose shape is the result's)."""
        for m, r in stepmap.pairs(cx.mine.steps, cx.my_ranges, cx.ref.steps, cx.ref_ranges):
            if r is None or len(m.outputs) != len(r.outputs):
                continue
            a, b = m.out.shape, r.out.shape
            if self.words.same(a, b):
                continue
            if not stepmap.in_answer(m, cx.my_ranges) or (not last and m is cx.mine.steps[-1]):
                return None
            if m.op == "linear" and len(a) == len(b) and \
                    all(self.words.eq(x, y) for x, y in zip(a[:-1], b[:-1])):
                f = self.words.factor(a[-1], b[-1])
                if f:
                    return f"after your `{m.text}` the width, `{a[-1]}`, is {f}"
            return (f"after your `{m.text}` the tensor is {self.fb.show(a)}: that shape "
                    f"{self.words.describe(a, b, 'it', need=True)}")
        return None

    # -- a wrong order of axes
    def moves(self, cx: Context, got, want) -> str | None:
        """For a result in the wrong order: the pair of axes the answer's `transpose` (or
        `permute`) exchanged, and the pair that must change places."""
        moved = [s for s in cx.mine.steps if s.op in MOVES and stepmap.in_answer(s, cx.my_ranges)]
        if not moved:
            return None
        t = moved[-1]
        last = [s for s in cx.mine.steps if s.op != "input"][-1]
        if t is last or self.words.same(t.out.shape, got):
            need = want
        else:
            twin = {id(m): r for m, r in stepmap.pairs(
                cx.mine.steps, cx.my_ranges, cx.ref.steps, cx.ref_ranges)}.get(id(t))
            if twin is None:
                return None
            need = twin.out.shape
        start = stepmap.input_shape(cx.mine.steps, t)
        if start is None and t.inputs and t.inputs[0] in cx.env and cx.env[t.inputs[0]]:
            start = cx.env[t.inputs[0]].shape
        if start is None:
            return None
        pair = self.words.swap_for(start, need)
        if pair is None:
            return None
        i, j = pair
        if t.op == "transpose":
            a, b = (k % len(start) for k in t.detail.get("dims", (0, 0)))
            did = "exchanges nothing" if self.words.eq(start[a], start[b]) else \
                f"exchanges `{start[a]}` and `{start[b]}` (dims {min(a, b)} and {max(a, b)})"
        else:
            did = f"puts the dims in the order {self.fb.show(t.out.shape).split(' = ')[0]}"
        return (f"your `{t.text}` {did}; the dims that must change places are `{start[i]}` "
                f"and `{start[j]}` (dims {i} and {j})")
