"""Shape rules: one function per operation, PyTorch's semantics.

Input: the tensor entering the operation and the operation's arguments.
Output: a `Result` (output tensors, learned parameters, multiply-add FLOPs and
the resolved arguments that codegen needs). Side conditions go through the
context `c` (checker.RuleContext), which proves them or raises a ShapeError
with a counterexample. The table `RULES` at the bottom is the whole language
of operations.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Name, Neg, Num, Op, ShapeLit, Str
from . import patterns
from .layout import TensorType, dense_like, fresh, view_strides

ZERO = sp.Integer(0)
ONE = sp.Integer(1)


@dataclass
class Result:
    outputs: tuple
    params: sp.Expr = ZERO
    flops: sp.Expr = ZERO
    detail: dict = field(default_factory=dict)


def prod(xs) -> sp.Expr:
    out = ONE
    for x in xs:
        out = out * x
    return out


def _ax(n: int) -> str:
    return f"{n}-d tensor"


class Args:
    """Typed access to an operation's arguments, with learner-facing errors."""

    def __init__(self, c, op: Op, x: TensorType | None = None):
        self.c, self.op, self.pos, self.x = c, op, op.args, x
        self.kw = {k.name: k for k in op.kwargs}

    def fail(self, message: str, help: str | None = None, span=None) -> ShapeError:
        return ShapeError("E110", message, help=help, span=span or self.op.span)

    def count(self, lo: int, hi: int | None = None, usage: str = "") -> None:
        hi = lo if hi is None else hi
        n = len(self.pos)
        if not lo <= n <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.fail(f"`{self.op.name}` takes {want} argument{'s' if hi != 1 else ''}, got {n}",
                            f"write it as `{usage}`" if usage else None)

    def int_at(self, i: int) -> int:
        node = self.pos[i]
        if isinstance(node, Neg) and isinstance(node.operand, Num):
            node = Num(node.span, -node.operand.value, "-" + node.operand.text)
        if not (isinstance(node, Num) and isinstance(node.value, int)):
            raise self.fail(f"`{self.op.name}` needs a whole number here", span=node.span)
        return node.value

    def axis_at(self, i: int, rank: int, *, extra: int = 0) -> int:
        """A dim index normalised to 0..rank-1 (rank+extra for unsqueeze)."""
        a = self.int_at(i)
        n = rank + extra
        if not -n <= a < n:
            what = f"`{self.op.name}` on {self.c.show(self.x)}, a {_ax(rank)}" \
                if self.x is not None and self.x.rank == rank else f"a {_ax(rank)}"
            raise ShapeError("E105", f"axis {a} is out of range for {what}",
                             help=f"the axes of a {_ax(rank)} run from {-n} to {n - 1}"
                             if n else "a 0-d tensor has no axes", span=self.pos[i].span)
        return a + n if a < 0 else a

    def dim_at(self, i: int) -> sp.Expr:
        return self.c.dim(self.pos[i])

    def scalar_at(self, i: int) -> sp.Expr:
        return self.c.scalar(self.pos[i])

    def shape_at(self, i: int, *, allow_infer: bool = True) -> tuple[list, int | None]:
        node = self.pos[i]
        if not isinstance(node, ShapeLit):
            raise self.fail(f"`{self.op.name}` needs a shape in brackets, e.g. [B, S, D]",
                            span=node.span)
        dims, infer = [], None
        for j, d in enumerate(node.dims):
            if allow_infer and _is_minus_one(d):
                if infer is not None:
                    raise ShapeError("E110", "only one size may be -1", span=d.span,
                                     help="-1 asks PyTorch to work out one size; give the others")
                infer = j
                dims.append(sp.Integer(-1))
            else:
                e = self.c.dim(d)
                self.c.need_whole(e, span=d.span, what=lambda e=e: f"this size is {e}")
                self.c.need_positive(e, d.span)
                dims.append(e)
        return dims, infer

    def tensor_at(self, i: int) -> TensorType:
        return self.c.tensor(self.pos[i])

    def str_at(self, i: int) -> str:
        node = self.pos[i]
        if not isinstance(node, Str):
            raise self.fail(f"`{self.op.name}` needs a quoted pattern here", span=node.span)
        return node.value

    def flag(self, name: str) -> bool:
        return any(isinstance(p, Name) and p.name == name for p in self.pos)

    def without_flags(self, *names) -> Args:
        self.pos = tuple(p for p in self.pos if not (isinstance(p, Name) and p.name in names))
        return self

    def kw_bool(self, name: str, default: bool) -> bool:
        k = self.kw.get(name)
        if k is None:
            return default
        if isinstance(k.value, Name) and k.value.name in ("true", "false", "True", "False"):
            return k.value.name.lower() == "true"
        raise self.fail(f"`{name}=` takes true or false", span=k.span)


def _is_minus_one(node) -> bool:
    return (isinstance(node, Num) and node.value == -1) or \
        (isinstance(node, Neg) and isinstance(node.operand, Num) and node.operand.value == 1)


# ----------------------------------------------------------------- reshaping

def _reshape(c, x: TensorType, a: Args, *, view: bool) -> Result:
    a.count(1, usage=f"{a.op.name} [B, S, D]")
    target, infer = a.shape_at(0)
    numel = prod(x.shape)
    if infer is not None:
        known = prod(d for j, d in enumerate(target) if j != infer)
        inferred = c.prover.name_of(sp.cancel(numel / known))
        c.need_whole(inferred, span=a.pos[0].dims[infer].span,
                     what=lambda: f"the -1 in `{a.op.text}` stands for {inferred}")
        c.need_positive(inferred, a.pos[0].dims[infer].span)
        target[infer] = inferred
    else:
        c.need_equal(numel, prod(target), code="E103", span=a.pos[0].span,
                     message=lambda: f"`{a.op.name}` cannot turn {c.show(x)} into {c.show_shape(target)}: "
                     f"{_count(numel)} elements cannot become {_count(prod(target))}",
                     help="the product of the new sizes must equal the product of the old ones")
    strides = view_strides(x, target, c.same)
    if view and strides is None:
        raise ShapeError(
            "E106", f"`view` cannot give {c.show(x)} the shape {c.show_shape(target)} without copying",
            help=f"the dims it merges or splits are not adjacent in memory (after a transpose or "
                 f"permute); use `reshape {_shape_src(target, infer)}`, or add `-> contiguous` first",
            notes=("PyTorch raises: view size is not compatible with input tensor's size and stride",),
            span=a.op.span)
    out = TensorType(tuple(target), strides, x.dtype) if strides else fresh(target, x.dtype)
    return Result((out,), detail={"shape": tuple(target), "infer": infer, "copies": strides is None})


def _shape_src(target, infer) -> str:
    return "[" + ", ".join("-1" if j == infer else str(d) for j, d in enumerate(target)) + "]"


def _count(e) -> str:
    return str(e)


def view(c, x, a):
    return _reshape(c, x, a, view=True)


def reshape(c, x, a):
    return _reshape(c, x, a, view=False)


def transpose(c, x, a):
    a.count(2, usage="transpose -2 -1")
    i, j = a.axis_at(0, x.rank), a.axis_at(1, x.rank)
    order = list(range(x.rank))
    order[i], order[j] = order[j], order[i]
    return _permuted(x, order, {"dims": (i, j)})


def permute(c, x, a):
    a.count(x.rank, usage="permute " + " ".join(str(k) for k in range(x.rank)))
    order = [a.axis_at(k, x.rank) for k in range(x.rank)]
    if sorted(order) != list(range(x.rank)):
        raise a.fail(f"`permute` needs each axis of the {_ax(x.rank)} exactly once",
                     f"e.g. `permute {' '.join(str(k) for k in reversed(range(x.rank)))}`")
    return _permuted(x, order, {"dims": tuple(order)})


def _permuted(x, order, detail):
    return Result((TensorType(tuple(x.shape[k] for k in order), tuple(x.strides[k] for k in order),
                              x.dtype),), detail=detail)


def unsqueeze(c, x, a):
    a.count(1, usage="unsqueeze 1")
    d = a.axis_at(0, x.rank, extra=1)
    stride = x.shape[d] * x.strides[d] if d < x.rank else ONE
    shape = x.shape[:d] + (ONE,) + x.shape[d:]
    return Result((TensorType(shape, x.strides[:d] + (stride,) + x.strides[d:], x.dtype),),
                  detail={"dim": d})


def squeeze(c, x, a):
    a.count(0, 1, usage="squeeze 1")
    if not a.pos:
        maybe_one = [k for k in range(x.rank) if not c.prover.is_one(x.shape[k])
                     and not c.prover.leq(sp.Integer(2), x.shape[k]).ok]
        if maybe_one:
            raise ShapeError("E110", f"`squeeze` without an axis removes every dim that is 1, so its "
                             f"result depends on the sizes: dim {maybe_one[0]} of {c.show(x)} is "
                             f"{x.shape[maybe_one[0]]}, which may or may not be 1",
                             help="name the axis: `squeeze 1`", span=a.op.span)
        keep = [k for k in range(x.rank) if not c.prover.is_one(x.shape[k])]
        dims = None
    else:
        d = a.axis_at(0, x.rank)
        if not c.prover.is_one(x.shape[d]):
            raise ShapeError("E110", f"dim {d} of {c.show(x)} is {x.shape[d]}, which is not always 1",
                             help="`squeeze` removes a dim of size 1; use `select` to pick one "
                                  "position, or `sum`/`mean` to reduce it", span=a.op.span)
        keep, dims = [k for k in range(x.rank) if k != d], d
    return Result((TensorType(tuple(x.shape[k] for k in keep), tuple(x.strides[k] for k in keep),
                              x.dtype),), detail={"dim": dims})


def flatten(c, x, a):
    a.count(0, 2, usage="flatten 1 2")
    start = a.axis_at(0, x.rank) if len(a.pos) > 0 else 0
    end = a.axis_at(1, x.rank) if len(a.pos) > 1 else x.rank - 1
    if end < start:
        raise a.fail("`flatten` needs the start axis before the end axis")
    shape = x.shape[:start] + (prod(x.shape[start:end + 1]),) + x.shape[end + 1:]
    strides = view_strides(x, shape, c.same)
    out = TensorType(shape, strides, x.dtype) if strides else fresh(shape, x.dtype)
    return Result((out,), detail={"start": start, "end": end})


def expand(c, x, a):
    a.count(1, usage="expand [B, H, S, D]")
    target, _ = _shape_allow_minus_ones(c, a)
    if len(target) < x.rank:
        raise a.fail(f"`expand` needs at least {x.rank} sizes for {c.show(x)}")
    lead = len(target) - x.rank
    shape, strides = [], []
    for j, t in enumerate(target):
        if j < lead:
            if t == -1:
                raise a.fail("-1 can only keep an existing dim", span=a.pos[0].dims[j].span)
            shape.append(t)
            strides.append(ZERO)
            continue
        size, stride = x.shape[j - lead], x.strides[j - lead]
        if t == -1 or c.same(t, size):
            shape.append(size)
            strides.append(stride)
        elif c.prover.is_one(size):
            shape.append(t)
            strides.append(ZERO)
        else:
            c.need_equal(size, t, code="E102", span=a.pos[0].dims[j].span,
                         message=lambda j=j, size=size, t=t: f"`expand` cannot stretch dim {j - lead} of {c.show(x)} from "
                                 f"{size} to {t}: only size-1 dims expand",
                         help="use `repeat_interleave` to copy along a dim that is not 1", broadcast=True)
            shape.append(size)
            strides.append(stride)
    return Result((TensorType(tuple(shape), tuple(strides), x.dtype),),
                  detail={"shape": tuple(target)})


def _shape_allow_minus_ones(c, a):
    node = a.pos[0]
    if not isinstance(node, ShapeLit):
        raise a.fail("`expand` needs a shape in brackets")
    return [sp.Integer(-1) if _is_minus_one(d) else c.dim(d) for d in node.dims], None


def repeat_interleave(c, x, a):
    a.count(2, usage="repeat_interleave H/G 1")
    n = a.dim_at(0)
    c.need_whole(n, span=a.pos[0].span, what=lambda: f"the repeat count {n}")
    c.need_positive(n, a.pos[0].span)
    d = a.axis_at(1, x.rank)
    shape = x.shape[:d] + (x.shape[d] * n,) + x.shape[d + 1:]
    return Result((fresh(shape, x.dtype),), detail={"repeats": n, "dim": d})


# ----------------------------------------------------------------- same-shape ops

def _same_shape(c, x, a, usage=None, **detail):
    return Result((fresh(x.shape, x.dtype),), detail=detail)


def softmax(c, x, a):
    a.count(1, usage="softmax -1")
    return _same_shape(c, x, a, dim=a.axis_at(0, x.rank))


def _pointwise(c, x, **detail):
    """Elementwise ops keep the input's memory order, as PyTorch's TensorIterator does."""
    return Result((dense_like(x, c.prover.canon),), detail=detail)


def scale(c, x, a):
    a.count(1, usage="scale 1/sqrt(Dk)")
    return _pointwise(c, x, factor=a.scalar_at(0))


def dropout(c, x, a):
    a.count(1, usage="dropout 0.1")
    node = a.pos[0]
    p = node.value if isinstance(node, Num) else None
    if p is None or not 0 <= p < 1:
        raise a.fail("`dropout` takes a probability from 0 up to (not including) 1",
                     span=node.span)
    return _pointwise(c, x, p=p)


def elementwise(c, x, a):
    a.count(0, usage=a.op.name)
    return _pointwise(c, x)


def contiguous(c, x, a):
    a.count(0, usage="contiguous")
    return _same_shape(c, x, a)


def mask(c, x, a):
    a.count(1, usage="mask causal")
    node = a.pos[0]
    if x.rank < 2:
        raise a.fail(f"`mask` needs at least 2 dims, got {c.show(x)}")
    if isinstance(node, Name) and node.name == "causal" and not c.is_tensor_name("causal"):
        return _same_shape(c, x, a, kind="causal", rows=x.shape[-2], cols=x.shape[-1])
    m = a.tensor_at(0)
    if m.rank > x.rank:
        raise ShapeError("E102", f"the mask {c.show(m)} has more dims than the scores {c.show(x)}",
                         span=node.span)
    out = broadcast(c, [x.shape, m.shape], ["the input", "the mask"], node.span)
    c.need_shape_equal(out, x.shape, span=node.span, code="E102",
                       message=lambda: f"the mask {c.show(m)} would grow the input {c.show(x)} to "
                               f"{c.show_shape(out)}; a mask must broadcast to the input's shape")
    return _same_shape(c, x, a, kind="tensor")


def norm(c, x, a):
    a.count(0, usage=a.op.name)
    if x.rank < 1:
        raise a.fail(f"`{a.op.name}` needs at least one dim")
    d = x.shape[-1]
    learned = 2 * d if a.op.name == "layernorm" and a.kw_bool("bias", True) else d
    return Result((fresh(x.shape, x.dtype),), params=learned,
                  detail={"features": d, "bias": a.op.name == "layernorm" and a.kw_bool("bias", True)})


def linear(c, x, a):
    a.count(1, usage="linear D")
    if x.rank < 1:
        raise a.fail("`linear` needs at least one dim")
    out_f = a.dim_at(0)
    c.need_whole(out_f, span=a.pos[0].span, what=lambda: f"the output width {out_f}")
    c.need_positive(out_f, a.pos[0].span)
    in_f = x.shape[-1]
    bias = a.kw_bool("bias", True)
    shape = x.shape[:-1] + (out_f,)
    return Result((fresh(shape, x.dtype),), params=in_f * out_f + (out_f if bias else 0),
                  flops=prod(shape) * in_f, detail={"in": in_f, "out": out_f, "bias": bias})


def embed(c, x, a):
    a.count(1, 2, usage="embed W_te")
    if x.dtype != "int":
        raise ShapeError("E112", f"`embed` looks up token ids, but {c.show(x)} holds {x.dtype} values",
                         help="declare the ids as `input ids: [B, S] int`", span=a.op.span)
    if len(a.pos) == 2:
        vocab, width = a.dim_at(0), a.dim_at(1)
        return Result((fresh(x.shape + (width,)),), params=vocab * width,
                      detail={"vocab": vocab, "dim": width, "table": None})
    table = a.tensor_at(0)
    if table.rank != 2:
        raise a.fail(f"the embedding table must be [V, D], got {c.show(table)}", span=a.pos[0].span)
    return Result((fresh(x.shape + (table.shape[1],)),),
                  detail={"vocab": table.shape[0], "dim": table.shape[1], "table": a.pos[0]})


def concat(c, x, a):
    if len(a.pos) < 2:
        raise a.fail("`concat` takes an axis and at least one more tensor", "e.g. `concat -1 B`")
    parts = [x] + [a.tensor_at(k) for k in range(1, len(a.pos))]
    return Result((concat_types(c, parts, a.int_at(0), a.op.span, a.pos[0].span),),
                  detail={"dim": _norm_axis(a.int_at(0), x.rank)})


def concat_types(c, parts, axis: int, span, axis_span):
    rank = parts[0].rank
    if not -rank <= axis < rank:
        raise ShapeError("E105", f"axis {axis} is out of range for a {_ax(rank)}", span=axis_span)
    d = _norm_axis(axis, rank)
    for p in parts[1:]:
        if p.rank != rank:
            raise ShapeError("E110", f"cannot concatenate {c.show(parts[0])} with {c.show(p)}: "
                             f"{rank} dims against {p.rank}", span=span)
        for k in range(rank):
            if k != d:
                c.need_equal(parts[0].shape[k], p.shape[k], code="E102", span=span,
                             message=lambda k=k, p=p: f"cannot concatenate {c.show(parts[0])} with {c.show(p)} "
                                     f"along dim {d}: dim {k} differs")
    shape = list(parts[0].shape)
    shape[d] = sum((p.shape[d] for p in parts), ZERO)
    return fresh(shape, parts[0].dtype)


def _norm_axis(axis, rank):
    return axis + rank if axis < 0 else axis


def split(c, x, a):
    a.count(2, usage="split D -1")
    d = a.axis_at(1, x.rank)
    size = x.shape[d]
    node = a.pos[0]
    if isinstance(node, ShapeLit):
        sizes = [c.dim(e) for e in node.dims]
        c.need_equal(sum(sizes, ZERO), size, code="E103", span=node.span,
                     message=lambda: f"the pieces {c.show_shape(sizes)} add up to {sum(sizes, ZERO)}, "
                             f"but dim {d} of {c.show(x)} is {size}")
    else:
        piece = a.dim_at(0)
        count = sp.cancel(c.prover.canon(size) / c.prover.canon(piece))
        if not (count.is_Integer and count > 0):
            raise ShapeError("E104", f"`split {piece}` cuts dim {d} ({size}) into {count} pieces, "
                             "which is not a fixed whole number",
                             help="give the sizes explicitly, e.g. `split [D, D, D] -1`, or use `chunk`",
                             span=node.span)
        sizes = [piece] * int(count)
    return _pieces(x, d, sizes, {"sizes": tuple(sizes), "dim": d})


def chunk(c, x, a):
    a.count(2, usage="chunk 3 -1")
    n = a.int_at(0)
    if n < 1:
        raise a.fail("`chunk` needs at least one piece", span=a.pos[0].span)
    d = a.axis_at(1, x.rank)
    piece = x.shape[d] / n
    c.need_whole(piece, span=a.op.span, what=lambda: f"each of the {n} chunks of dim {d} ({x.shape[d]}) "
                 f"would have {piece}")
    return _pieces(x, d, [piece] * n, {"chunks": n, "dim": d})


def _pieces(x, d, sizes, detail):
    outs = tuple(TensorType(x.shape[:d] + (s,) + x.shape[d + 1:], x.strides, x.dtype)
                 for s in sizes)
    return Result(outs, detail=detail)


def _reduce_with_flag(c, x, a):
    keep = any(isinstance(p, Name) and p.name == "keepdim" for p in a.pos)
    a.without_flags("keepdim")
    a.count(1, usage=f"{a.op.name} -1 keepdim")
    keep = keep or a.kw_bool("keepdim", False)
    d = a.axis_at(0, x.rank)
    shape = x.shape[:d] + ((ONE,) if keep else ()) + x.shape[d + 1:]
    return Result((fresh(shape, x.dtype),), detail={"dim": d, "keepdim": keep})


def select(c, x, a):
    a.count(2, usage="select 1 0")
    d = a.axis_at(0, x.rank)
    i = a.dim_at(1)
    if i.is_Integer and i < 0:   # counts from the end, as in torch
        c.need_leq(-i, x.shape[d], span=a.pos[1].span,
                   message=lambda: f"index {i} is before the start of dim {d} ({x.shape[d]}) "
                                   f"of {c.show(x)}")
        i = x.shape[d] + i
    c.need_leq(i + 1, x.shape[d], span=a.pos[1].span,
               message=lambda: f"index {i} may be past the end of dim {d} ({x.shape[d]}) of {c.show(x)}")
    keep = [k for k in range(x.rank) if k != d]
    return Result((TensorType(tuple(x.shape[k] for k in keep), tuple(x.strides[k] for k in keep),
                              x.dtype),), detail={"dim": d, "index": i})


def slice_(c, x, a):
    a.count(3, usage="slice 0 0 S")
    d = a.axis_at(0, x.rank)
    start, end = a.dim_at(1), a.dim_at(2)
    if start.is_Integer and start < 0:   # counts from the end, as in torch
        c.need_leq(-start, x.shape[d], span=a.pos[1].span,
                   message=lambda: f"the slice start {start} is before the start of dim {d}")
        start = x.shape[d] + start
    c.need_leq(end, x.shape[d], span=a.pos[2].span,
               message=lambda: f"the slice end {end} may be past the end of dim {d} ({x.shape[d]}) of "
                       f"{c.show(x)}")
    length = end - start
    c.need_positive(length, a.op.span)
    shape = x.shape[:d] + (length,) + x.shape[d + 1:]
    return Result((TensorType(shape, x.strides, x.dtype),),
                  detail={"dim": d, "start": start, "end": end})


def einsum(c, x, a):
    if len(a.pos) < 1:
        raise a.fail('`einsum` takes an equation, e.g. einsum "bhqd,bhkd->bhqk" K')
    eq = a.str_at(0)
    operands = [x] + [a.tensor_at(k) for k in range(1, len(a.pos))]
    out, flops = einsum_types(c, eq, operands, a.pos[0].span)
    return Result((out,), flops=flops, detail={"equation": eq})


def einsum_types(c, eq, operands, span):
    try:
        spec = patterns.parse_einsum(eq)
    except ValueError as err:
        raise ShapeError("E110", f"bad einsum equation: {err}", span=span) from None
    if len(spec.inputs) != len(operands):
        raise ShapeError("E110", f"the equation names {len(spec.inputs)} operands but "
                         f"{len(operands)} are given", span=span)
    sizes: dict[str, sp.Expr] = {}
    ellipsis: list = []
    for letters, t in zip(spec.inputs, operands):
        named = letters.replace(".", "")
        if "." in letters:
            if t.rank < len(named):
                raise ShapeError("E110", f"`{letters}` needs at least {len(named)} dims, got {c.show(t)}",
                                 span=span)
            k = letters.index(".")
            n_ell = t.rank - len(named)
            dims = list(t.shape[:k]) + list(t.shape[k + n_ell:])
            ell = list(t.shape[k:k + n_ell])
            ellipsis = broadcast(c, [ellipsis, ell], ["...", "..."], span) if ellipsis else ell
        else:
            if t.rank != len(named):
                raise ShapeError("E110", f"`{letters}` names {len(named)} dims but the operand is "
                                 f"{c.show(t)}", span=span)
            dims = list(t.shape)
        for ch, size in zip(named, dims):
            if ch in sizes and c.prover.is_one(size):
                continue
            if ch in sizes and c.prover.is_one(sizes[ch]):
                sizes[ch] = size
            elif ch in sizes:
                c.need_equal(sizes[ch], size, code="E101", span=span, broadcast=True,
                             message=lambda ch=ch, size=size: f"index `{ch}` is {sizes[ch]} in one operand and {size} in another")
            else:
                sizes[ch] = size
    out = []
    for ch in spec.output:
        out.extend(ellipsis if ch == "." else [sizes[ch]])
    return fresh(out, operands[0].dtype), prod(sizes.values()) * prod(ellipsis)


def rearrange(c, x, a):
    a.count(1, usage='rearrange "b s (h d) -> b h s d" h=H')
    text = a.str_at(0)
    try:
        pat = patterns.parse_rearrange(text)
    except ValueError as err:
        raise ShapeError("E110", f"bad rearrange pattern: {err}", span=a.pos[0].span) from None
    given = {k: c.dim(v.value) for k, v in a.kw.items()}
    left = pat.left
    n_ell = x.rank - (len(left) - (1 if "..." in left else 0))
    if n_ell < 0 or ("..." not in left and n_ell != 0):
        raise ShapeError("E110", f"the pattern's left side has {len(left)} dims but the input is "
                         f"{c.show(x)}", span=a.pos[0].span)
    sizes = dict(given)
    k = 0
    ell = []
    for group in left:
        if group == "...":
            ell = list(x.shape[k:k + n_ell])
            k += n_ell
            continue
        size = x.shape[k]
        k += 1
        unknown = [ax for ax in group if ax not in sizes]
        if len(unknown) > 1:
            raise ShapeError("E110", f"cannot tell the sizes of {', '.join(unknown)} in ({' '.join(group)}); "
                             f"give all but one, e.g. {unknown[0]}=...", span=a.pos[0].span)
        known = prod(sizes[ax] for ax in group if ax in sizes)
        if unknown:
            val = sp.cancel(size / known)
            c.need_whole(val, span=a.pos[0].span,
                         what=lambda known=known, size=size, unknown=unknown, val=val: f"`{unknown[0]}` would be {size}/{known} = {val}")
            sizes[unknown[0]] = c.prover.name_of(val)
        else:
            c.need_equal(known, size, code="E103", span=a.pos[0].span,
                         message=lambda group=group, k=k, known=known, size=size: f"({' '.join(group)}) is {known} but dim {k - 1} of {c.show(x)} is {size}")
    for name in given:
        if not any(name in g for g in left if g != "..."):
            raise ShapeError("E110", f"`{name}=` names an axis that is not in the pattern",
                             span=a.kw[name].span)
    # einops: reshape to the elementary axes, permute, reshape to the output groups
    elementary, flat = [], []
    for group in left:
        if group == "...":
            elementary.append(("...",))
            flat.extend(ell)
        else:
            for ax in group:
                elementary.append(ax)
                flat.append(sizes[ax])
    t = x
    copies = [None, None]  # per reshape stage: None (no stage), False (a view), True (a copy)
    if list(flat) != list(x.shape):
        st = view_strides(x, flat, c.same)
        copies[0] = st is None
        t = TensorType(tuple(flat), st, x.dtype) if st else fresh(flat, x.dtype)
    order_names = [g for g in elementary]
    out_names = []
    for group in pat.right:
        if group == "...":
            out_names.append(("...",))
        else:
            out_names.extend(group)
    ell_pos = order_names.index(("...",)) if ("...",) in order_names else None

    def positions(name):
        if name == ("...",):
            return list(range(ell_pos, ell_pos + n_ell))
        idx = order_names.index(name)
        return [idx + (n_ell - 1 if ell_pos is not None and idx > ell_pos else 0)]

    perm = [p for nm in out_names for p in positions(nm)]
    t = TensorType(tuple(t.shape[p] for p in perm), tuple(t.strides[p] for p in perm), t.dtype)
    final = []
    for group in pat.right:
        final.extend(ell if group == "..." else [prod(sizes[ax] for ax in group)])
    if list(final) != list(t.shape):
        st = view_strides(t, final, c.same)
        copies[1] = st is None
        t = TensorType(tuple(final), st, x.dtype) if st else fresh(final, x.dtype)
    # flat/perm/final/copies: the three stages (reshape, permute, reshape) for codegen
    return Result((t,), detail={"pattern": text, "sizes": {k: v for k, v in given.items()},
                                "flat": tuple(flat), "perm": tuple(perm), "final": tuple(final),
                                "copies": tuple(copies)})


# ----------------------------------------------------------------- binary ops

def broadcast(c, shapes, names, span) -> list:
    """torch broadcasting of several shapes: right-aligned; equal, or one side 1."""
    rank = max(len(s) for s in shapes)
    out = []
    for j in range(rank):
        size = None
        for s, name in zip(shapes, names):
            k = j - (rank - len(s))
            if k < 0:
                continue
            d = s[k]
            if size is None or c.prover.is_one(size):
                size = d
            elif c.prover.is_one(d) or c.same(size, d):
                continue
            else:
                c.need_equal(size, d, code="E102", span=span,
                             message=lambda d=d, j=j, name=name, size=size: f"dim {j - rank} is {size} in {names[0]} and {d} in {name}: "
                                     "sizes broadcast only when equal or when one of them is 1",
                             shapes=shapes, broadcast=True)
        out.append(size)
    return out


def matmul(c, x: TensorType, y: TensorType, texts, span) -> Result:
    """torch.matmul, including its 1-D cases and batch broadcasting."""
    if x.rank == 0 or y.rank == 0:
        raise ShapeError("E101", "`@` needs tensors with at least one dim; use `*` for a scalar",
                         span=span)
    xs = list(x.shape) if x.rank > 1 else [ONE] + list(x.shape)
    ys = list(y.shape) if y.rank > 1 else list(y.shape) + [ONE]
    k_left, k_right = xs[-1], ys[-2]
    if not c.same(k_left, k_right):
        hint = None
        if y.rank >= 2 and c.same(k_left, y.shape[-1]):
            hint = f"did you mean `{texts[1]} -> transpose -2 -1`? it makes the right operand " \
                   f"{c.show_shape(y.shape[:-2] + (y.shape[-1], y.shape[-2]))}"
        c.need_equal(k_left, k_right, code="E101", span=span,
                     message=lambda: f"cannot multiply `{texts[0]}` {c.show(x)} by `{texts[1]}` {c.show(y)}: "
                             f"the last dim of the left operand is {k_left}, the "
                             f"{'only' if y.rank == 1 else 'second-to-last'} dim of the right operand "
                             f"is {k_right}",
                     help=hint or "the inner dims of a matrix product must be equal")
    batch = broadcast(c, [xs[:-2], ys[:-2]], [f"`{texts[0]}`", f"`{texts[1]}`"], span) \
        if (xs[:-2] or ys[:-2]) else []
    shape = list(batch) + ([xs[-2]] if x.rank > 1 else []) + ([ys[-1]] if y.rank > 1 else [])
    flops = prod(batch) * xs[-2] * k_left * ys[-1]
    return Result((fresh(shape, x.dtype),), flops=flops)


UNARY = ("relu", "gelu", "silu", "tanh", "sigmoid", "exp", "sqrt", "rsqrt", "log", "abs",
         "softplus", "neg", "square")

RULES = {
    "view": view,
    "reshape": reshape,
    "transpose": transpose,
    "permute": permute,
    "unsqueeze": unsqueeze,
    "squeeze": squeeze,
    "flatten": flatten,
    "expand": expand,
    "repeat_interleave": repeat_interleave,
    "softmax": softmax,
    "log_softmax": softmax,
    "scale": scale,
    "mask": mask,
    "contiguous": contiguous,
    "dropout": dropout,
    "layernorm": norm,
    "rmsnorm": norm,
    "linear": linear,
    "embed": embed,
    "concat": concat,
    "split": split,
    "chunk": chunk,
    "sum": _reduce_with_flag,
    "mean": _reduce_with_flag,
    "var": _reduce_with_flag,
    "amax": _reduce_with_flag,
    "select": select,
    "slice": slice_,
    "einsum": einsum,
    "rearrange": rearrange,
    **{name: elementwise for name in UNARY},
}
