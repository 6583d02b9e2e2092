"""Feedback from the reference's structure: the learner's statement and the reference's,
parsed, compared operation by operation.

When both are the same pipeline but for the arguments of one operation, the difference is
named in the terms of that operation's table entry (shapelang.checker.ops.table):

- an axis argument (the entry's PyTorch parameter is `dim`, `dim0`, `start_dim`, ...): the
  axis the learner's operation runs along and the one it must run along, with their sizes
  ("your `repeat_interleave Nrep 2` runs along dim 2 (`S`); here it must run along dim 1
  (`G`)"), for every transpose, repeat, softmax, flatten, ... alike;
- a size argument (`linear`'s width, a convolution's kernel): the factor it is off by
  ("`H*Dh` is H/G times too big");
- a keyword: missing, extra, or with a size off by a factor (`stride=P`).

Shape literals are left to the shape comparison (shapelang.teaching.shapes); anything this
module cannot name exactly gives None, so the other explanations are tried.
"""
from __future__ import annotations

from ..checker import dims as dimlib
from ..checker.ops.table import TABLE
from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Binding, Neg, Num, Pipeline, ShapeLit
from ..syntax.parser import ParseFailure, parse
from .template import _squash

AXIS_PARAMETERS = frozenset({"dim", "dim0", "dim1", "start_dim", "end_dim", "source",
                             "destination", "axis0", "axis1"})


def _pipeline(code: str) -> Pipeline | None:
    try:
        spec = parse(code)
    except (ParseFailure, RecursionError):
        return None
    found = [s.value for s in spec.statements
             if isinstance(s, Binding) and isinstance(s.value, Pipeline)]
    return found[0] if len(found) == 1 else None


def _text(code: str, node) -> str:
    sp = node.span
    return code[sp.column - 1:sp.end_column - 1] if sp.line == sp.end_line == 1 else ""


def _int(node) -> int | None:
    if isinstance(node, Num) and isinstance(node.value, int):
        return node.value
    if isinstance(node, Neg):
        v = _int(node.operand)
        return -v if v is not None else None
    return None


class Structure:
    """Compares one statement's pipeline with the reference's (`words`: the exercise's
    shapes.Words; `lookup`: a dim name node -> its size)."""

    def __init__(self, words, lookup):
        self.words = words
        self.lookup = lookup

    def explain(self, mine: str, ref: str, shape_before) -> str | None:
        """What differs between the learner's statement `mine` and the reference's `ref`
        (one line each), when it is one operation's arguments; `shape_before(k)`: the
        reference's input shape of operation k, or None."""
        a, r = _pipeline(mine), _pipeline(ref)
        if a is None or r is None or len(a.ops) != len(r.ops) or \
                _squash(_text(mine, a.head)) != _squash(_text(ref, r.head)):
            return None
        if any(x.name != y.name for x, y in zip(a.ops, r.ops)):
            return None
        diff = [k for k, (x, y) in enumerate(zip(a.ops, r.ops))
                if _squash(_text(mine, x)) != _squash(_text(ref, y))]
        if len(diff) != 1:
            return None
        k = diff[0]
        try:
            return self._op(a.ops[k], r.ops[k], mine, ref, shape_before(k))
        except (ShapeError, TypeError, ValueError, ZeroDivisionError, RecursionError):
            return None

    def _op(self, a, r, mine: str, ref: str, shape) -> str | None:
        entry = TABLE.get(a.name)
        names = entry.positional if entry is not None else ()
        said = []
        if len(a.args) != len(r.args):
            return None
        for i, (x, y) in enumerate(zip(a.args, r.args)):
            tx, ty = _text(mine, x), _text(ref, y)
            if _squash(tx) == _squash(ty):
                continue
            name = names[i] if i < len(names) else None
            if name in AXIS_PARAMETERS:
                said.append(self._axis(a, _text(mine, a), _int(x), _int(y), shape))
            elif isinstance(x, ShapeLit) or isinstance(y, ShapeLit):
                return None
            else:
                said.append(self._size(f"`{tx}` in your `{_text(mine, a)}`", x, y))
        mk, rk = {kw.name: kw for kw in a.kwargs}, {kw.name: kw for kw in r.kwargs}
        for n in rk:
            if n not in mk:
                said.append(f"your `{_text(mine, a)}` has no `{n}=`, which this step needs")
        for n, kw in mk.items():
            if n not in rk:
                said.append(f"`{_text(mine, kw)}` is not needed here")
            elif _squash(_text(mine, kw.value)) != _squash(_text(ref, rk[n].value)):
                said.append(self._size(f"`{_text(mine, kw)}`", kw.value, rk[n].value))
        if not said or any(s is None for s in said):
            return None
        return "; ".join(said)

    def _axis(self, op, text: str, got: int | None, want: int | None, shape) -> str | None:
        entry = TABLE.get(op.name)
        if got is None or want is None or not shape or \
                (entry is not None and entry.provenance == "unsqueeze"):
            return None          # a new axis's place: the shape comparison says it
        rank = len(shape)
        if not (-rank <= got < rank and -rank <= want < rank):
            return None
        g, w = got % rank, want % rank
        if g == w:
            return None

        def axis(k):
            return f"dim {k} (`{shape[k]}`)" if k < len(shape) else f"dim {k}"
        return f"your `{text}` runs along {axis(g)}; here it must run along {axis(w)}"

    def _size(self, what: str, x, y) -> str | None:
        got = dimlib.build(x, self.lookup)
        want = dimlib.build(y, self.lookup)
        f = self.words.factor(got, want)
        return f"{what} is {f}" if f else None
