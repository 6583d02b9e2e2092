"""Shape rules that combine or create tensors: linear, embed, concat, split, chunk,
einsum, broadcasting and matmul."""
from __future__ import annotations

from dataclasses import replace

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import ShapeLit
from .. import dtypes
from ..layout import (
    Geometry,
    TensorType,
    channels_last,
    contiguous,
    einsum_strides,
    fresh,
    suggests_channels_last,
)
from ..lazysympy import sympy as sp
from . import patterns
from .args import Result, _ax, prod
from .reshaping import MAX_ONES, _maybe_one, one_sets


def linear(c, x, a):
    a.count(1, usage="linear D")
    if x.rank < 1:
        raise a.fail("`linear` needs at least one dim")
    out_f = a.dim_at(0)
    c.need_whole(out_f, span=a.pos[0].span, what=lambda: f"the output width {c.sz(out_f)}")
    c.need_positive(out_f, a.pos[0].span)
    in_f = x.shape[-1]
    bias = a.kw_bool("bias", True)
    k = a.kw.get("dtype")
    dtype = dtypes.from_node(k.value, "`dtype=`") if k is not None else None
    shape = x.shape[:-1] + (out_f,)
    return Result((fresh(shape, x.dtype),), params=in_f * out_f + (out_f if bias else 0),
                  flops=prod(shape) * in_f, detail={"in": in_f, "out": out_f, "bias": bias,
                                                    "dtype": dtype})


def embed(c, x, a):
    a.count(1, 2, usage="embed W_te")
    k = a.kw.get("dtype")
    dtype = dtypes.from_node(k.value, "`dtype=`") if k is not None else None
    pad = a.kw_number("padding_idx", None, whole=True)
    if len(a.pos) == 2:
        vocab, width = a.dim_at(0), a.dim_at(1)
        for k, (e, what) in enumerate(((vocab, "vocabulary size"), (width, "width"))):
            c.need_whole(e, span=a.pos[k].span, what=lambda e=e, what=what: f"the {what} {c.sz(e)}")
            c.need_positive(e, a.pos[k].span, what=lambda e=e, what=what: f"the {what} {c.sz(e)}")
        if pad is not None:
            c.need_leq(pad + 1 if pad >= 0 else -pad, vocab, span=a.kw["padding_idx"].span,
                       message=lambda: f"`padding_idx={pad}` may be outside the vocabulary of {vocab}")
        return Result((fresh(x.shape + (width,)),), params=vocab * width,
                      detail={"vocab": vocab, "dim": width, "table": None, "dtype": dtype,
                              "padding_idx": pad})
    if dtype is not None or pad is not None:
        raise a.fail("`dtype=` and `padding_idx=` belong to an embedding that owns its table "
                     "(`embed V D`)", span=(a.kw.get("dtype") or a.kw.get("padding_idx")).span)
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
    shape[d] = sum((p.shape[d] for p in parts), sp.S.Zero)
    # torch.cat: channels-last when every part suggests it, else contiguous (measured)
    g = Geometry(c.prover.canon, c.same)
    dtype = dtypes.concat(parts)   # torch.cat promotes
    if all(suggests_channels_last(p.shape, p.strides, g) for p in parts):
        return TensorType(tuple(shape), channels_last(shape), dtype)
    return fresh(shape, dtype)


def stack_tensors(c, x, a):
    """`x -> stack_tensors A T1 ..`: torch.stack([x, T1, ..], dim=A)."""
    if not a.pos:
        raise a.fail("`stack_tensors` takes an axis and the other tensors", "e.g. `stack_tensors -1 B`")
    parts = [x] + [a.tensor_at(k) for k in range(1, len(a.pos))]
    t, d = stack_types(c, parts, a.int_at(0), a.op.span, a.pos[0].span)
    return Result((t,), detail={"dim": d})


def stack_types(c, parts, axis: int, span, axis_span):
    """torch.stack: tensors of one shape joined along a new axis (at A of the result)."""
    rank = parts[0].rank
    if not -(rank + 1) <= axis <= rank:
        raise ShapeError("E105", f"axis {axis} is out of range for stacking {_ax(rank)}s: the result "
                         f"has {rank + 1} dims", span=axis_span,
                         help=f"the axes of the result run from {-(rank + 1)} to {rank}")
    d = axis + rank + 1 if axis < 0 else axis
    for p in parts[1:]:
        if p.rank != rank:
            raise ShapeError("E110", f"cannot stack {c.show(parts[0])} with {c.show(p)}: {rank} dims "
                             f"against {p.rank}; torch.stack needs tensors of one shape", span=span)
        for k in range(rank):
            c.need_equal(parts[0].shape[k], p.shape[k], code="E102", span=span,
                         message=lambda k=k, p=p: f"cannot stack {c.show(parts[0])} with {c.show(p)}: "
                                 f"dim {k} differs (torch.stack needs tensors of one shape)")
    shape = list(parts[0].shape)
    shape.insert(d, sp.Integer(len(parts)))
    return fresh(shape, dtypes.concat(parts)), d


def _norm_axis(axis, rank):
    return axis + rank if axis < 0 else axis


def split(c, x, a):
    a.count(2, usage="split D -1")
    d = a.axis_at(1, x.rank)
    size = x.shape[d]
    node = a.pos[0]
    if isinstance(node, ShapeLit):
        sizes = [c.dim(e) for e in node.dims]
        for k, (e, piece) in enumerate(zip(node.dims, sizes)):
            what = lambda k=k, piece=piece: f"piece {k} of `split` ({c.sz(piece)})"
            c.need_whole(piece, span=e.span, what=what)
            c.need_positive(piece, e.span, what=what)
        c.need_equal(sum(sizes, sp.S.Zero), size, code="E103", span=node.span,
                     message=lambda: f"the pieces {c.show_shape(sizes)} add up to {c.sz(sum(sizes, sp.S.Zero))}, "
                             f"but dim {d} of {c.show(x)} is {c.sz(size)}")
    else:
        piece = a.dim_at(0)
        count = sp.cancel(c.prover.canon(size) / c.prover.canon(piece))
        if not (count.is_Integer and count > 0):
            raise ShapeError("E104", f"`split {c.sz(piece)}` cuts dim {d} ({c.sz(size)}) into {c.sz(count)} pieces, "
                             "which is not a fixed whole number",
                             help=f"`split N` cuts pieces of size N; `chunk N` cuts N pieces; "
                                  f"or list the piece sizes, which add up to {c.sz(size)}",
                             span=node.span)
        c.need_whole(piece, span=node.span, what=lambda: f"the piece size {c.sz(piece)}")
        _named_pieces(a, int(count))
        sizes = [piece] * int(count)
    return _pieces(x, d, sizes, {"sizes": tuple(sizes), "dim": d})


def chunk(c, x, a):
    a.count(2, usage="chunk 3 -1")
    n = a.int_at(0)
    if n < 1:
        raise a.fail("`chunk` needs at least one piece", span=a.pos[0].span)
    _named_pieces(a, n)
    d = a.axis_at(1, x.rank)
    piece = x.shape[d] / n
    try:
        c.need_whole(piece, span=a.op.span, what=lambda: f"each of the {n} chunks of dim {d} "
                     f"({c.sz(x.shape[d])}) would have {c.sz(piece)}")
    except ShapeError as err:
        raise _uneven_chunks(err, x.shape[d], n, a) from None
    return _pieces(x, d, [piece] * n, {"chunks": n, "dim": d})


MAX_PIECES = 1024   # each piece is bound to a name: more is never a spec, and bounds the work


def _named_pieces(a, n: int) -> None:
    if n > MAX_PIECES:
        raise a.fail(f"`{a.op.name}` would make {n} pieces, more than a binding can name "
                     f"(at most {MAX_PIECES})", span=a.op.span)


def _uneven_chunks(err, size, n, a):
    """`chunk n` of a fixed size that n does not divide: torch.chunk gives pieces of
    ceil(size/n) and a smaller last one; `split` says so (a candidate, proved by re-checking)."""
    if not size.is_Integer or not 0 < int(size) <= 10_000:
        return err
    size, each = int(size), -(-int(size) // n)
    pieces = [each] * (size // each) + ([size % each] if size % each else [])
    axis = a.op.text.split()[-1] if len(a.pos) == 2 else "-1"
    said = ", ".join(map(str, pieces[:-1])) + f" and {pieces[-1]}"
    return replace(err, notes=tuple(err.notes) + (
        f"torch.chunk gives {len(pieces)} pieces here: {said}",),
        fixes=((a.op.span, f"split [{', '.join(map(str, pieces))}] {axis}",
                "write the pieces torch.chunk gives with `split`"),) + tuple(err.fixes))


def _pieces(x, d, sizes, detail):
    outs = tuple(x.restrided(x.shape[:d] + (s,) + x.shape[d + 1:], lambda st: st)
                 for s in sizes)
    return Result(outs, detail=detail)


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
                             message=lambda ch=ch, size=size: f"index `{ch}` is {c.sz(sizes[ch])} in one operand and {c.sz(size)} in another")
            else:
                sizes[ch] = size
    out = []
    for ch in spec.output:
        out.extend(ellipsis if ch == "." else [sizes[ch]])
    dtype = dtypes.einsum(spec.inputs, spec.output, operands, span)
    return _einsum_layout(c, spec, operands, sizes, tuple(out), dtype), prod(sizes.values()) * prod(ellipsis)


UNKNOWN_LAYOUT = "the layout of this `einsum`'s result is not modelled"


def _einsum_layout(c, spec, operands, sizes, shape, dtype) -> TensorType:
    """torch.einsum's result layout (layout.einsum_strides) for sizes above 1, with the layout
    at every set of sizes that may be 1 as alternatives (a size of 1, summed or kept, changes
    torch's path). Where the port does not apply (three operands, a repeated index) or too
    many sizes may be 1, strides of their own: a later `view` is then accepted only where it
    is legal for every layout."""
    g = Geometry(c.prover.canon, c.same)
    strides = einsum_strides(spec.inputs, spec.output, operands, g)
    sized = TensorType(tuple(sizes.values()), contiguous(tuple(sizes.values())))
    ones = [sym for sym, _sub in _maybe_one(c, sized) if not c.prover.leq(sp.Integer(2), sym).ok]
    if strides is None or len(ones) > MAX_ONES:
        c.rules.unique()   # strides of its own each time: the result is not reused
        unknown = tuple(sp.Dummy("stride", positive=True, integer=True) for _ in shape)
        return TensorType(shape, unknown, dtype, ((unknown, ()),), UNKNOWN_LAYOUT)
    alt = []
    for sub in one_sets(c, sized):   # every set of sizes that may be 1 at once
        at_one = [TensorType(tuple(d.xreplace(sub) for d in t.shape), tuple(v.xreplace(sub) for v in t.strides))
                  for t in operands]
        st = einsum_strides(spec.inputs, spec.output, at_one, g)
        if st is not None and st != tuple(v.xreplace(sub) for v in strides):
            alt.append((tuple(st), tuple(sub.items())))
    return TensorType(shape, strides, dtype, tuple(dict.fromkeys(alt)),
                      "`einsum` lays its result out differently when a size is 1" if alt else "")


def broadcast(c, shapes, names, span, tail: int = 0) -> list:
    """torch broadcasting of several shapes: right-aligned; equal, or one side 1. `tail`:
    how many last dims the shapes had before these (2 for the batch dims of `@`), so
    that messages count the tensors' real dims."""
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
                             message=lambda d=d, j=j, name=name, size=size: f"dim {j - rank - tail} is {c.sz(size)} in {names[0]} and {c.sz(d)} in {name}: "
                                     + ("batch " if tail else "") +
                                     "sizes broadcast only when equal or when one of them is 1",
                             shapes=shapes, broadcast=True)
        out.append(size)
    return out


def matmul(c, x: TensorType, y: TensorType, texts, span) -> Result:
    """torch.matmul, including its 1-D cases and batch broadcasting."""
    if x.rank == 0 or y.rank == 0:
        raise ShapeError("E101", "`@` needs tensors with at least one dim; use `*` for a scalar",
                         span=span)
    xs = list(x.shape) if x.rank > 1 else [sp.S.One] + list(x.shape)
    ys = list(y.shape) if y.rank > 1 else list(y.shape) + [sp.S.One]
    k_left, k_right = xs[-1], ys[-2]
    if not c.same(k_left, k_right):
        hint = None
        if y.rank >= 2 and c.same(k_left, y.shape[-1]):
            hint = f"did you mean `{texts[1]} -> transpose -2 -1`? it makes the right operand " \
                   f"{c.show_shape(y.shape[:-2] + (y.shape[-1], y.shape[-2]))}"
        c.need_equal(k_left, k_right, code="E101", span=span,
                     message=lambda: f"cannot multiply `{texts[0]}` {c.show(x)} by `{texts[1]}` {c.show(y)}: "
                             f"the last dim of the left operand is {c.sz(k_left)}, the "
                             f"{'only' if y.rank == 1 else 'second-to-last'} dim of the right operand "
                             f"is {c.sz(k_right)}",
                     help=hint or "the inner dims of a matrix product must be equal")
    batch = broadcast(c, [xs[:-2], ys[:-2]], [f"`{texts[0]}`", f"`{texts[1]}`"], span, tail=2) \
        if (xs[:-2] or ys[:-2]) else []
    shape = list(batch) + ([xs[-2]] if x.rank > 1 else []) + ([ys[-1]] if y.rank > 1 else [])
    flops = prod(batch) * xs[-2] * k_left * ys[-1]
    return Result((fresh(shape, x.dtype),), flops=flops)
