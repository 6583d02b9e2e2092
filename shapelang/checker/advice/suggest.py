"""Candidate fixes for errors whose likely cause is a rewrite of the line: a `view`
after a transpose, a matrix product whose right operand is not transposed (or is
transposed the wrong way, or after the product because `->` binds looser than
`@`). Candidates are only proposals: shapelang.checker.advice.fixes re-checks each one
and shows the first that leaves the line and everything after it clean.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import BinOp, Neg, Num, Pipeline, ShapeLit, Span

_VALUES_ONLY = {"max": "amax", "min": "amin"}
_LEFT = re.compile(r"\s*(?:return\s+|[A-Za-z_][\w']*(?:\s*,\s*[A-Za-z_][\w']*)*\s*:\s*)")
_LAST_MOVE = re.compile(r"^(.*\S)\s*->\s*(?:transpose\s+-?\d+\s+-?\d+|permute(?:\s+-?\d+)+)$")


class Suggestions:
    def __init__(self, source: str):
        self.lines = source.split("\n")

    def text(self, span: Span) -> str | None:
        if span.line != span.end_line or not 0 < span.line <= len(self.lines):
            return None
        return self.lines[span.line - 1][span.column - 1:span.end_column - 1]

    def _paren_span(self, span: Span) -> tuple[Span, bool]:
        """The span with the parentheses around it, if there are any."""
        line = self.lines[span.line - 1] if 0 < span.line <= len(self.lines) else ""
        if span.column > 1 and line[span.column - 2:span.column - 1] == "(" \
                and line[span.end_column - 1:span.end_column] == ")":
            return Span(span.line, span.column - 1, span.end_line, span.end_column + 1), True
        return span, False

    def _whole(self, span: Span) -> bool:
        """Whether `span` is all of a binding's (or a `return`'s) right-hand side."""
        line = self.lines[span.line - 1]
        rest = line[span.end_column - 1:].strip()
        return bool(_LEFT.fullmatch(line[:span.column - 1])) and (not rest or rest.startswith("#"))

    @staticmethod
    def _with(err: ShapeError, fixes, help=None) -> ShapeError:
        return replace(err, fixes=tuple(err.fixes) + tuple(f for f in fixes if f[1]),
                       help=help if help is not None else err.help)

    # ------------------------------------------------------------ `A @ B`
    def matmul(self, err: ShapeError, node: BinOp) -> ShapeError:
        if err.code == "E102" and node.op == "@":
            return self._with(err, self._drop_moves(node))
        if err.code != "E101" or node.op != "@":
            return err
        span, _ = self._paren_span(node.right.span)
        inner = self.text(node.right.span)
        if inner is None:
            return err
        fixes = []
        m = _LAST_MOVE.match(inner.strip())
        if m:
            fixes.append((span, f"({m.group(1)} -> transpose -2 -1)"))
        fixes.append((span, f"({inner} -> transpose -2 -1)"))
        return self._with(err, fixes, "the inner dims of a matrix product must be equal")

    def _drop_moves(self, node: BinOp) -> list:
        """The batch dims of `A @ B` do not line up: each operand with one of its axis moves
        (`transpose`, `permute`) left out, as candidates."""
        fixes = []
        for side in (node.right, node.left):
            if not isinstance(side, Pipeline) or not side.ops:
                continue
            span, _ = self._paren_span(side.span)
            head = self.text(side.head.span)
            ops = [self.text(op.span) for op in side.ops]
            if head is None or None in ops:
                continue
            for k, op in enumerate(side.ops):
                if op.name in ("transpose", "permute"):
                    rest = ops[:k] + ops[k + 1:]
                    text = " -> ".join([head] + rest)
                    fixes.append((span, f"({text})" if rest else text,
                                  (f"the batch dims of the two operands must line up: leave out "
                                  f"`{ops[k]}`")))
        return fixes[:4]

    def head(self, err: ShapeError, node: Pipeline) -> ShapeError:
        """`Q @ K -> transpose -2 -1`: the transpose was meant for K."""
        head = node.head
        if err.code != "E101" or not isinstance(head, BinOp) or head.op != "@" or not node.ops \
                or node.ops[0].name not in ("transpose", "permute"):
            return err
        first = node.ops[0]
        right = self.text(head.right.span)
        if right is None or first.span.line != head.right.span.line:
            return err
        span = Span(head.right.span.line, head.right.span.column, first.span.end_line, first.span.end_column)
        err = replace(err, fixes=(), notes=tuple(err.notes) + (
            ("`->` binds looser than `@`: `Q @ K -> transpose -2 -1` transposes the product, "
             "not K; put the operand's pipeline in parentheses"),))
        return self._with(err, [(span, f"({right} -> {first.text})")],
                          "the inner dims of a matrix product must be equal")

    # ------------------------------------------------------------ several tensors
    def several(self, binding, n: int) -> ShapeError:
        """A pipeline gives n tensors to a different number of names."""
        names = len(binding.names)
        err = ShapeError("E110", f"the pipeline gives {n} tensor{'s' if n != 1 else ''} but {names} "
                         f"name{'s are' if names != 1 else ' is'} given", span=binding.span,
                         help="split, chunk and a block that returns several tensors give several: "
                         "`q, k, v: x -> chunk 3 -1`, `h, k, v: x -> Layer(past_k, past_v)`")
        value = binding.value
        last = value.ops[-1] if isinstance(value, Pipeline) and value.ops else None
        return self._values_only(err, last) if names == 1 and last is not None else err

    def several_into(self, node: Pipeline, k: int, n: int) -> ShapeError:
        """The step after a split (or a `max` over an axis) gets several tensors."""
        op, prev = node.ops[k], node.ops[k - 1] if k > 0 else None
        source = f"`{prev.text}`" if prev is not None and prev.name in _VALUES_ONLY \
            else "split, chunk or a block returning several tensors"
        err = ShapeError("E110", f"`{op.name}` gets {n} tensors from {source}", span=op.span,
                         help="name the pieces first: `a, b: x -> chunk 2 -1`")
        return self._values_only(err, prev) if prev is not None else err

    def _values_only(self, err: ShapeError, op) -> ShapeError:
        """`max -1` / `min -1` give values and indices, as torch.max(x, dim): `amax` is the values."""
        alone = _VALUES_ONLY.get(op.name)
        if alone is None:
            return err
        what = "maxima" if op.name == "max" else "minima"
        why = f"`{op.name}` over an axis gives the {what} and their int indices, as torch.{op.name}(x, dim)"
        fix = (op.name_span, alone, f"{why}; for the {what} alone use `{alone}`")
        return replace(err, help=f"{why} does: name both (`v, i: x -> {op.text}`), or use `{alone}` for "
                       f"the {what} alone", fixes=(fix,))

    # ------------------------------------------------------------ dtypes (E120)
    def cast(self, err: ShapeError, node) -> ShapeError:
        """`1 - pad`, `-pad`, `ids @ W` refused for their dtypes: the expression with its
        operands cast (`1 - (pad -> to float)`), and for a bool mask its opposite as
        `logical_not` (`(pad -> logical_not)`), where `1 - pad` or `-pad` meant that."""
        if err.code != "E120" or not err.casts or err.span != node.span or node.span.line != node.span.end_line:
            return err
        line = self.lines[node.span.line - 1]
        sides = (node.operand,) if isinstance(node, Neg) else (node.left, node.right)
        spans = [self._paren_span(side.span)[0] for side in sides]
        texts = [self.text(side.span) for side in sides]
        if None in texts or any(sp.line != node.span.line for sp in spans):
            return err
        casts = dict(err.casts)
        cuts = [node.span.column] + [c for sp in spans for c in (sp.column, sp.end_column)] + [node.span.end_column]
        pieces = [line[cuts[j] - 1:cuts[j + 1] - 1] for j in range(0, len(cuts) - 1, 2)]   # between operands
        out = pieces[0]
        for k, text in enumerate(texts):
            out += (f"({text} -> to {casts[k]})" if k in casts else line[spans[k].column - 1:spans[k].end_column - 1])
            out += pieces[k + 1]
        named = " and ".join(dict.fromkeys(f"`{texts[k]}`" for k in casts))
        dtypes = sorted(set(casts.values()))
        fixes = [(node.span, out, f"cast {named} to {' and '.join(dtypes)} first")]
        opposite = isinstance(node, Neg) or (node.op == "-" and isinstance(node.left, Num) and node.left.value == 1)
        if opposite and casts.get(len(sides) - 1) == "float":
            fixes.append((node.span, f"{texts[-1]} -> logical_not" if self._whole(node.span) else
                          f"({texts[-1]} -> logical_not)",
                          "for the opposite of a bool mask (True where it is False) use `logical_not`"))
        return self._with(err, fixes)

    def input_cast(self, err: ShapeError, op) -> list:
        """An operation refused for its input's dtype: the cast before it (`to float -> softmax -1`)."""
        return [(op.span, f"to {dtype} -> {op.text}", f"cast the input to {dtype} first")
                for who, dtype in err.casts if who == "input" and op.span.line == op.span.end_line]

    # ------------------------------------------------------------ `-> view [..]`
    def op(self, err: ShapeError, node: Pipeline, k: int) -> ShapeError:
        op = node.ops[k]
        if err.code == "E120":
            return self._with(err, self.input_cast(err, op))
        if err.code != "E106" or op.name != "view" or not op.args:
            return err
        arg = op.text[len("view"):].strip()
        fixes = [(op.span, f"reshape {arg}")]
        prev = node.ops[k - 1] if k > 0 else None
        target = op.args[0]
        if prev is not None and prev.name == "transpose" and isinstance(target, ShapeLit) \
                and len(prev.args) == 2 and prev.span.line == op.span.line:
            dims = [self.text(d.span) for d in target.dims]
            axes = [int_literal(a) for a in prev.args]
            if None not in dims and None not in axes:
                n = len(dims)
                i, j = (a + n if a < 0 else a for a in axes)
                if 0 <= i < n and 0 <= j < n:
                    dims[i], dims[j] = dims[j], dims[i]
                    span = Span(prev.span.line, prev.span.column, op.span.end_line, op.span.end_column)
                    fixes.insert(0, (span, f"view [{', '.join(dims)}] -> {prev.text}"))
        fixes.append((op.span, f"contiguous -> {op.text}"))
        return self._with(err, fixes, "the axes it merges or splits are not next to each other in memory "
                                      "(after a transpose or permute)")


def int_literal(node) -> int | None:
    """The whole number a node spells (`2`, `-1`), or None."""
    if isinstance(node, Num) and isinstance(node.value, int):
        return node.value
    if isinstance(node, Neg) and isinstance(node.operand, Num):
        return -node.operand.value
    return None
