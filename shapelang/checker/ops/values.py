"""Shape rules that keep the layout of elements but change their values: softmax, scale,
dropout, elementwise functions, masks, norms, reductions and indexing."""
from __future__ import annotations

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import Name, Num
from .. import dtypes
from ..advice import causes
from ..layout import Geometry, TensorType, channels_last, dense_like, fresh, suggests_channels_last
from ..lazysympy import sympy as sp
from .args import Result
from .combine import broadcast
from .rounding import floor_div

CASTS = {"float": "float", "half": "float16", "bfloat16": "bfloat16", "double": "float64",
         "long": "int", "bool": "bool"}


def _same_shape(c, x, a, usage=None, **detail):
    return Result((fresh(x.shape, x.dtype),), detail=detail)


def softmax(c, x, a):
    a.count(1, usage=f"{a.op.name} -1")
    k = a.kw.get("dtype")
    dtype = dtypes.from_node(k.value, "`dtype=`") if k is not None else None
    return _same_shape(c, x, a, dim=a.axis_at(0, x.rank), dtype=dtype)


def cast(c, x, a):
    """`to bfloat16`, `float`, `type_as x` (x's dtype): a new tensor of that dtype (the same one
    when it already is)."""
    if a.op.name == "to":
        a.count(1, usage="to float")
        dtype = dtypes.from_node(a.pos[0], "`to`")
    elif a.op.name == "type_as":
        a.count(1, usage="type_as x")
        dtype = a.tensor_at(0).dtype
    else:
        a.count(0, usage=a.op.name)
        dtype = dtypes.canonical(CASTS[a.op.name])
    if dtype == x.dtype:      # Tensor.to returns the tensor itself
        return Result((x,), detail={"dtype": dtype})
    out = dense_like(x, c.prover.canon, c.same)
    return Result((TensorType(out.shape, out.strides, dtype, out.alt, out.why),), detail={"dtype": dtype})


def _geometry(c) -> Geometry:
    return Geometry(c.prover.canon, c.same)


def _pointwise(c, x, **detail):
    """Elementwise ops keep the input's memory order, as PyTorch's TensorIterator does."""
    return Result((dense_like(x, c.prover.canon, c.same),), detail=detail)


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
    # nn.Dropout returns its input itself with p=0 and in eval mode (gaps, expanded and
    # permuted strides included), and a new tensor laid out as an elementwise op's while
    # training: the result may have either layout, and a later `view` must suit both
    if p == 0:
        return Result((x,), detail={"p": p})
    out = dense_like(x, c.prover.canon, c.same)
    if out.strides != x.strides or out.alt != x.alt:
        extra = tuple(a for a in ((x.strides, ()),) + x.alt if a not in out.alt)
        out = TensorType(out.shape, out.strides, out.dtype, out.alt + extra,
                         out.why or "`dropout` returns its input unchanged, strides included, "
                         "with p=0 and in eval mode, and a new dense tensor while training")
    return Result((out,), detail={"p": p})


def elementwise(c, x, a):
    a.count(0, usage=a.op.name)
    if a.op.name == "gelu":
        return _pointwise(c, x, approximate=a.kw_choice("approximate", ("none", "tanh"), "none"))
    return _pointwise(c, x)


def contiguous(c, x, a):
    a.count(0, usage="contiguous")
    return _same_shape(c, x, a)


def mask(c, x, a):
    a.count(1, usage="mask causal")
    node = a.pos[0]
    if isinstance(node, Name) and node.name == "causal" and not c.is_tensor_name("causal"):
        if x.rank < 2:
            raise a.fail(f"`mask causal` needs at least 2 dims (query and key), got {c.show(x)}")
        return _same_shape(c, x, a, kind="causal", rows=x.shape[-2], cols=x.shape[-1])
    m = a.tensor_at(0)
    # out-of-place masked_fill broadcasts the input and the mask together
    try:
        out = broadcast(c, [x.shape, m.shape], ["the input", "the mask"], node.span)
    except ShapeError as err:
        raise causes.mask(c, err, x, m, node) from None
    if len(out) == x.rank and all(c.same(p, q) for p, q in zip(out, x.shape)):
        return _same_shape(c, x, a, kind="tensor")
    return Result((fresh(out, x.dtype),), detail={"kind": "tensor"})


def norm(c, x, a):
    a.count(0, usage=a.op.name)
    if x.rank < 1:
        raise a.fail(f"`{a.op.name}` needs at least one dim")
    d = x.shape[-1]
    bias = a.op.name == "layernorm" and a.kw_bool("bias", True)
    affine = a.kw_bool("elementwise_affine", True)
    learned = (2 * d if bias else d) if affine else 0
    eps = a.kw_number("eps", None, positive=True)
    # layer_norm returns a contiguous tensor; rms_norm keeps a channels-last memory format
    # (Tensor.suggest_memory_format) and is contiguous otherwise: measured with torch
    out = fresh(x.shape, x.dtype)
    if a.op.name == "rmsnorm" and suggests_channels_last(x.shape, x.strides, _geometry(c)):
        out = TensorType(x.shape, channels_last(x.shape), x.dtype)
    return Result((out,), params=learned,
                  detail={"features": d, "bias": bias and affine, "affine": affine, "eps": eps})


def reduce(c, x, a):
    keep = any(isinstance(p, Name) and p.name == "keepdim" for p in a.pos)
    a.without_flags("keepdim")
    a.count(1, usage=f"{a.op.name} -1 keepdim")
    keep = keep or a.kw_bool("keepdim", False)
    d = a.axis_at(0, x.rank)
    shape = x.shape[:d] + ((sp.S.One,) if keep else ()) + x.shape[d + 1:]
    detail = {"dim": d, "keepdim": keep}
    if a.op.name == "var":
        detail["correction"] = a.kw_number("correction", 1, whole=True)
    if a.op.name in ("min", "max"):   # torch.max(x, dim): the values and their int indices
        return Result((fresh(shape, x.dtype), fresh(shape, "int")), detail=detail)
    return Result((fresh(shape, x.dtype),), detail=detail)


def from_end(c, i, size, span, before, unsigned):
    """A position as PyTorch reads it: a negative one (a number, or a size the assumptions make
    negative: `-K`) counts from the end of an axis of `size`, and must not be before its start.
    One whose sign the assumptions leave open is refused with `unsigned` (torch would read it
    one way or the other depending on the sizes); with `unsigned` None it is left as written
    (an end, which the length that follows must keep after the start)."""
    if i.is_Integer and i >= 0:
        return i
    if not i.is_Integer and c.prover.leq(sp.S.Zero, i).ok:
        return i
    if i.is_Integer or c.prover.leq(i, -sp.S.One).ok:
        c.need_leq(-i, size, span=span, message=before)
        return size + i
    if unsigned is not None:
        c.need_leq(sp.S.Zero, i, span=span, message=unsigned)
    return i


def select(c, x, a):
    a.count(2, usage="select 1 0")
    d = a.axis_at(0, x.rank)
    i = a.dim_at(1)
    i = from_end(c, i, x.shape[d], a.pos[1].span,
                 lambda: f"index {c.sz(i)} is before the start of dim {d} ({c.sz(x.shape[d])}) of {c.show(x)}",
                 lambda: f"the index {c.sz(i)} may be negative (torch then counts from the end)")
    c.need_leq(i + 1, x.shape[d], span=a.pos[1].span,
               message=lambda: f"index {c.sz(i)} may be past the end of dim {d} ({c.sz(x.shape[d])}) of {c.show(x)}")
    keep = [k for k in range(x.rank) if k != d]
    return Result((x.restrided(tuple(x.shape[k] for k in keep),
                               lambda st: tuple(st[k] for k in keep)),), detail={"dim": d, "index": i})


def slice_(c, x, a):
    a.count(3, usage="slice 0 0 S")
    d = a.axis_at(0, x.rank)
    start, end = a.dim_at(1), a.dim_at(2)
    written = start, end
    start = from_end(c, start, x.shape[d], a.pos[1].span,
                     lambda: f"the slice start {c.sz(written[0])} is before the start of dim {d}",
                     lambda: f"the slice start {c.sz(written[0])} may be negative (torch then counts "
                             "from the end)")
    end = from_end(c, end, x.shape[d], a.pos[2].span,
                   lambda: f"the slice end {c.sz(written[1])} is before the start of dim {d}", None)
    c.need_leq(end, x.shape[d], span=a.pos[2].span,
               message=lambda: f"the slice end {c.sz(end)} may be past the end of dim {d} ({c.sz(x.shape[d])}) of "
                       f"{c.show(x)}")
    length = end - start
    c.need_positive(length, a.op.span)
    k = a.kw.get("step")
    step = c.dim(k.value) if k is not None else sp.S.One
    if step != 1:    # every step-th position: ceil((end - start) / step) of them
        c.need_whole(step, span=k.span, what=lambda: f"the step {c.sz(step)}")
        c.need_positive(step, k.span, what=lambda: f"the step {c.sz(step)}")
        length = floor_div(c, length + step - 1, step, a.op.span, "the length of the slice")
    shape = x.shape[:d] + (length,) + x.shape[d + 1:]
    return Result((x.restrided(shape, lambda st: st[:d] + (st[d] * step,) + st[d + 1:]),),
                  detail={"dim": d, "start": start, "end": end, "step": step})


def opaque(c, x, a):
    """An operation shapelang does not model (a spec imported from PyTorch keeps it): the result
    has the shape written, computed from the piped tensor. Nothing about its values is known."""
    dtype = "int" if a.flag("int") else "bool" if a.flag("bool") else "float"
    a.without_flags("int", "bool")
    a.count(2, usage='opaque "aten.cumsum" [B, S, D]')
    what = a.str_at(0)
    dims, _ = a.shape_at(1, allow_infer=False)
    return Result((fresh(tuple(dims), dtype),), detail={"what": what, "shape": tuple(dims)})
