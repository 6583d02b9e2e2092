"""Shape rules of indexing with tensors: `index_select`, `gather`, `take_along_dim`,
`topk` (with a symbolic k) and `one_hot`, with PyTorch's semantics. Indices are int
tensors; what they hold is not known, only their shapes."""
from __future__ import annotations

from ...syntax.diagnostics import ShapeError
from ..layout import fresh
from ..lazysympy import sympy as sp
from .args import Result, prod
from .combine import broadcast


def _indices(c, a, i, what="indices"):
    t = a.tensor_at(i)
    if t.dtype != "int":
        raise ShapeError("E112", f"`{a.op.name}` takes int {what}, but {c.show(t)} holds {t.dtype} values",
                         span=a.pos[i].span, help="declare them as `input idx: [N] int`")
    return t


def index_select(c, x, a):
    a.count(2, usage="index_select 0 idx")
    d = a.axis_at(0, x.rank)
    idx = _indices(c, a, 1)
    if idx.rank > 1:
        raise a.fail(f"`index_select` takes a vector of indices (1-d), got {c.show(idx)}", span=a.pos[1].span)
    n = idx.shape[0] if idx.rank else 1
    shape = x.shape[:d] + (n,) + x.shape[d + 1:]
    return Result((fresh(shape, x.dtype),), detail={"dim": d})


def gather(c, x, a):
    a.count(2, usage="gather -1 idx")
    d = a.axis_at(0, x.rank)
    idx = _indices(c, a, 1)
    if idx.rank != x.rank:
        raise a.fail(f"`gather` takes indices with as many dims as the input: {c.show(idx)} for "
                     f"{c.show(x)}", span=a.pos[1].span)
    for k in range(x.rank):
        if k != d:
            c.need_leq(idx.shape[k], x.shape[k], span=a.pos[1].span,
                       message=lambda k=k: f"dim {k} of the indices {c.show(idx)} may be larger than "
                                           f"dim {k} of the input {c.show(x)}, which `gather` refuses")
    return Result((fresh(idx.shape, x.dtype),), detail={"dim": d})


def take_along_dim(c, x, a):
    a.count(2, usage="take_along_dim idx -1")
    idx = _indices(c, a, 0)
    d = a.axis_at(1, x.rank)
    if idx.rank != x.rank:
        raise a.fail(f"`take_along_dim` takes indices with as many dims as the input: {c.show(idx)} for "
                     f"{c.show(x)}", span=a.pos[0].span)
    rest = broadcast(c, [x.shape[:d] + x.shape[d + 1:], idx.shape[:d] + idx.shape[d + 1:]],
                     ["the input", "the indices"], a.op.span)
    shape = tuple(rest[:d]) + (idx.shape[d],) + tuple(rest[d:])
    return Result((fresh(shape, x.dtype),), detail={"dim": d})


def topk(c, x, a):
    a.count(2, usage="topk K -1")
    k = a.dim_at(0)
    d = a.axis_at(1, x.rank)
    c.need_whole(k, span=a.pos[0].span, what=lambda: f"k = {k}")
    c.need_positive(k, a.pos[0].span)
    c.need_leq(k, x.shape[d], span=a.pos[0].span,
               message=lambda: f"k = {k} may be more than the {x.shape[d]} entries of dim {d} of {c.show(x)}")
    shape = x.shape[:d] + (k,) + x.shape[d + 1:]
    return Result((fresh(shape, x.dtype), fresh(shape, "int")), detail={"k": k, "dim": d})


def one_hot(c, x, a):
    a.count(1, usage="one_hot V")
    if x.dtype != "int":
        raise ShapeError("E112", f"`one_hot` takes int class indices, but {c.show(x)} holds {x.dtype} values",
                         span=a.op.span)
    v = a.dim_at(0)
    c.need_whole(v, span=a.pos[0].span, what=lambda: f"the number of classes {v}")
    c.need_positive(v, a.pos[0].span)
    return Result((fresh(x.shape + (v,), "int"),), detail={"classes": v})


def _same_dtype(c, x, src, a, span):
    if src.dtype != x.dtype:
        raise ShapeError("E112", f"`{a.op.name}` adds {src.dtype} values into {c.show(x)} of "
                         f"{x.dtype} values; PyTorch needs one dtype", span=span,
                         help=f"cast the source: `-> to {x.dtype}`")


def index_add(c, x, a):
    """torch.index_add: source rows added at the int indices [N] along axis A; the source is
    the input's shape with axis A of size N; the result has the input's shape."""
    a.count(3, usage="index_add 0 idx src")
    d = a.axis_at(0, x.rank)
    idx = _indices(c, a, 1)
    src = a.tensor_at(2)
    if idx.rank > 1:
        raise a.fail(f"`{a.op.name}` takes a vector of indices (1-d), got {c.show(idx)}", span=a.pos[1].span)
    if src.rank != x.rank:
        raise a.fail(f"`{a.op.name}` takes a source with as many dims as the input: {c.show(src)} for "
                     f"{c.show(x)}", span=a.pos[2].span)
    n = idx.shape[0] if idx.rank else sp.Integer(1)
    want = x.shape[:d] + (n,) + x.shape[d + 1:]
    c.need_shape_equal(src.shape, want, span=a.pos[2].span, code="E105",
                       message=lambda: f"`{a.op.name} {d}` with {n} indices needs a source of "
                                       f"{c.show_shape(want)}, got {c.show(src)}")
    _same_dtype(c, x, src, a, a.pos[2].span)
    alpha = a.kw.get("alpha")
    detail = {"dim": d, "alpha": c.scalar(alpha.value) if alpha is not None else None}
    return Result((fresh(x.shape, x.dtype),), detail=detail)


def scatter_add(c, x, a):
    """torch.scatter_add / scatter: indices and source of the input's rank; every dim of the
    indices at most the source's, and the input's except along A (`scatter` also takes a
    number as its source)."""
    a.count(3, usage=f"{a.op.name} 0 idx src")
    d = a.axis_at(0, x.rank)
    idx = _indices(c, a, 1)
    node = a.pos[2]
    src = a.tensor_at(2) if a.op.name != "scatter" or c._is_tensor_arg(node) else None
    value = c.scalar(node) if src is None else None
    if idx.rank != x.rank:
        raise a.fail(f"`{a.op.name}` takes indices with as many dims as the input: {c.show(idx)} for "
                     f"{c.show(x)}", span=a.pos[1].span)
    if src is not None:
        if src.rank != x.rank:
            raise a.fail(f"`{a.op.name}` takes a source with as many dims as the input: {c.show(src)} "
                         f"for {c.show(x)}", span=node.span)
        _same_dtype(c, x, src, a, node.span)
    for k in range(x.rank):
        if src is not None:
            c.need_leq(idx.shape[k], src.shape[k], span=a.pos[1].span,
                       message=lambda k=k: f"dim {k} of the indices {c.show(idx)} may be larger than "
                                           f"dim {k} of the source {c.show(src)}, which `{a.op.name}` refuses")
        if k != d:
            c.need_leq(idx.shape[k], x.shape[k], span=a.pos[1].span,
                       message=lambda k=k: f"dim {k} of the indices {c.show(idx)} may be larger than "
                                           f"dim {k} of the input {c.show(x)}, which `{a.op.name}` refuses")
    return Result((fresh(x.shape, x.dtype),), detail={"dim": d, "value": value})


# ------------------------------------------------------------------ data-dependent sizes

def data_dependent(c, numel, span) -> sp.Expr:
    """A fresh size for a result whose length depends on the values (0 <= N <= numel), one per
    occurrence, named after the binding it makes (`N_tok` for `slot, tok: where(hit)`)."""
    names = getattr(c, "binding_names", None) or ("",)
    name = f"N_{names[-1]}" if names[-1] and names[-1] != "return" else "N"
    return c.prover.data_dependent(name, numel)


def nonzero(c, x, a):
    """torch.nonzero: the indices of the nonzero entries, [N, rank] int (with `as_tuple=true`,
    one [N] int tensor per axis, as torch.where(M)); N is data-dependent."""
    a.count(0, usage="nonzero")
    if x.rank == 0:
        raise a.fail("`nonzero` of a 0-d tensor: give it at least one axis")
    n = data_dependent(c, prod(x.shape), a.op.span)
    if a.kw_bool("as_tuple", False):
        return Result(tuple(fresh((n,), "int") for _ in range(x.rank)), detail={"as_tuple": True, "n": n})
    return Result((fresh((n, sp.Integer(x.rank)), "int"),), detail={"as_tuple": False, "n": n})


def masked_select(c, x, a):
    """torch.masked_select: the entries where the bool mask (broadcast with the input) is True,
    as one vector [N]; N is data-dependent."""
    a.count(1, usage="masked_select M")
    m = a.tensor_at(0)
    if m.dtype != "bool":
        raise ShapeError("E112", f"`masked_select` takes a bool mask, but {c.show(m)} holds {m.dtype} "
                         "values", span=a.pos[0].span, help="compare it to make one, e.g. `m != 0`")
    shape = broadcast(c, [x.shape, m.shape], ["the input", "the mask"], a.op.span)
    n = data_dependent(c, prod(shape), a.op.span)
    return Result((fresh((n,), x.dtype),), detail={"n": n})
