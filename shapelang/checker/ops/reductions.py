"""Shape rules of reductions and scans beyond sum/mean/var/amax: statistics over an axis
(`std`, `prod`, `logsumexp`, `norm`, `nansum`, ..), the position of the extreme (`argmax`),
order statistics (`median`, `kthvalue`), sorting, and the running scans (`cumsum`, ..),
with their table entries. dtypes follow PyTorch (shapelang.checker.dtypes, keys named in
the entries)."""
from __future__ import annotations

from .. import dtypes
from ..layout import fresh
from ..lazysympy import sympy as sp
from .args import Result
from .opdef import OpDef

_KEEP = "A [keepdim]"


def _axis(c, x, a, *, optional: bool, usage: str, default: int | None = None, count=(0, 1)):
    """The axis of a reduction (None: every axis, when the operation allows it) and keepdim
    (the `keepdim` flag or `keepdim=true`)."""
    keep = a.flag("keepdim")
    a.without_flags("keepdim")
    lo, hi = count
    a.count(lo + (0 if optional else 1), hi, usage=usage)
    keep = keep or a.kw_bool("keepdim", False)
    idx = len(a.pos) - 1 if len(a.pos) > lo else None
    if idx is None:
        if default is not None:
            return default % x.rank if x.rank else 0, keep
        if keep:
            raise a.fail(f"`{a.op.name} keepdim` needs the axis it keeps", help=f"write it as `{usage}`")
        return None, keep
    if x.rank == 0:
        raise a.fail(f"`{a.op.name}` of a 0-d tensor has no axis {a.int_at(idx)}")
    return a.axis_at(idx, x.rank), keep


def _reduced(x, d, keep):
    if d is None:
        return ()
    return x.shape[:d] + ((sp.S.One,) if keep else ()) + x.shape[d + 1:]


def reduce(c, x, a):
    """std, prod, argmax, argmin, logsumexp, any, all, nansum, nanmean, median: over axis A
    (or, for those PyTorch allows it, over every axis to a 0-d tensor)."""
    name = a.op.name
    d, keep = _axis(c, x, a, optional=name in _WHOLE, usage=f"{name} -1 keepdim")
    detail = {"dim": d, "keepdim": keep}
    if name == "std":
        detail["correction"] = a.kw_number("correction", 1, whole=True)
    if name == "prod":
        detail["dtype"] = _dtype_kw(a)
    out = "int" if name in ("argmax", "argmin") else x.dtype
    return Result((fresh(_reduced(x, d, keep), out),), detail=detail)


def norm(c, x, a):
    """torch.linalg.vector_norm: the p-norm over axis A (every axis without one)."""
    d, keep = _axis(c, x, a, optional=True, usage="norm -1 p=2 keepdim")
    p = _order(c, a)
    return Result((fresh(_reduced(x, d, keep), x.dtype),), detail={"dim": d, "keepdim": keep, "p": p})


def _order(c, a):
    """`p=2`, `p=1`, `p=inf`, `p=-inf`: a number or an infinity."""
    from .tables import fill_value
    k = a.kw.get("p")
    if k is None:
        return 2
    v = fill_value(c, k.value)
    if v is True or v is False or getattr(v, "free_symbols", None):
        raise a.fail("`p=` takes a number or `inf`", span=k.span)
    return v


def kthvalue(c, x, a):
    """The K-th smallest entry along axis A (values; K a size proved 1 <= K <= the axis)."""
    d, keep = _axis(c, x, a, optional=True, default=-1, usage="kthvalue K -1 keepdim", count=(1, 2))
    k = a.dim_at(0)
    c.need_whole(k, span=a.pos[0].span, what=lambda: f"k = {c.sz(k)}")
    c.need_positive(k, a.pos[0].span)
    c.need_leq(k, x.shape[d], span=a.pos[0].span,
               message=lambda: f"k = {c.sz(k)} may be more than the {c.sz(x.shape[d])} entries of dim {d} "
                               f"of {c.show(x)}")
    return Result((fresh(_reduced(x, d, keep), x.dtype),), detail={"k": k, "dim": d, "keepdim": keep})


def scan(c, x, a):
    """cumsum, cumprod, cummax, cummin, logcumsumexp, softmin: the input's shape, along axis A."""
    a.count(1, usage=f"{a.op.name} -1")
    if x.rank == 0:
        raise a.fail(f"`{a.op.name}` needs a tensor with an axis, got {c.show(x)}")
    d = a.axis_at(0, x.rank)
    return Result((fresh(x.shape, x.dtype),), detail={"dim": d, "dtype": _dtype_kw(a)})


def sort(c, x, a):
    """sort: the values and their int indices along axis A (-1 by default); argsort: the indices."""
    a.count(0, 1, usage=f"{a.op.name} -1 descending=true")
    d = a.axis_at(0, x.rank) if a.pos else (x.rank - 1 if x.rank else 0)
    desc = a.kw_bool("descending", False)
    stable = a.kw_bool("stable", False)
    detail = {"dim": d, "descending": desc, "stable": stable}
    if a.op.name == "argsort":
        return Result((fresh(x.shape, "int"),), detail=detail)
    return Result((fresh(x.shape, x.dtype), fresh(x.shape, "int")), detail=detail)


def _dtype_kw(a):
    k = a.kw.get("dtype")
    return dtypes.from_node(k.value, "`dtype=`") if k is not None else None


# the reductions PyTorch also takes without an axis (over every element, to a 0-d tensor)
_WHOLE = {"std", "prod", "argmax", "argmin", "any", "all", "nansum", "nanmean", "median"}


def _reduction(name, doc, dtype, kwargs=("keepdim",), whole=True, **more):
    usage = f"{name} [A] [keepdim]" if whole else f"{name} {_KEEP}"
    return OpDef(name, usage + "".join(f" [{k}=..]" for k in kwargs if k != "keepdim"), doc, reduce,
                 provenance="reduce", positional=("dim",), kwargs=kwargs, dtype=dtype, reduces=True,
                 axes=True, values=("dim", "keepdim") + tuple(k for k in kwargs if k != "keepdim"),
                 pytorch=("dim?", "keepdim?"), emitter="reduction", **more)


ENTRIES = [
    _reduction("std", "standard deviation over axis A (`correction=0`: the biased one); float only",
               "float_only", ("keepdim", "correction"),
          example="x -> std -1", statistic="var"),
    _reduction("prod", "product over axis A; int and bool give int64 (`dtype=` to choose)", "accumulate",
               ("keepdim", "dtype"),
          example="x -> prod -1", composes=True),
    _reduction("argmax", "the int64 position of the maximum along axis A (of the flattened tensor "
               "without A); bool refused", "index",
          example="x -> argmax -1", ranks=True),
    _reduction("argmin", "the int64 position of the minimum along axis A", "index", ranks=True),
    _reduction("logsumexp", "log of the sum of exps over axis A, computed stably; int gives float",
               "to_float", whole=False,
          example="x -> logsumexp -1", composes=True),
    OpDef("norm", "norm [A] [p=2] [keepdim]", "torch.linalg.vector_norm over axis A (every axis "
          "without A); `p=` a number, `inf` or `-inf`; float only", norm, provenance="reduce",
          positional=("dim",), kwargs=("p", "keepdim"), dtype="float_only", reduces=True, axes=True,
          values=("dim", "keepdim", "p"),
          example="x -> norm -1 p=1", composes=True),
    _reduction("any", "True where any element along axis A is nonzero (bool)", "bool",
          example="x -> any -1", composes=True),
    _reduction("all", "True where every element along axis A is nonzero (bool)", "bool", composes=True),
    _reduction("nansum", "sum over axis A counting NaN as 0; int and bool give int64", "sum",
          example="x -> nansum 1", composes=True, statistic="sum"),
    _reduction("nanmean", "mean over axis A of the elements that are not NaN; float only", "float_only",
          example="x -> nanmean 1", statistic="mean"),
    _reduction("median", "the median along axis A (the values; `median` alone: of every element); "
               "bool refused", "no_bool",
          example="x -> median -1", ranks=True, pair=True),
    OpDef("kthvalue", "kthvalue K [A] [keepdim]", "the K-th smallest value along axis A (-1 by "
          "default); K proved between 1 and the axis size", kthvalue, emitter="reduction", provenance="reduce",
          positional=("k", "dim"), kwargs=("keepdim",), dtype="no_bool", reduces=True,
          values=("k", "dim", "keepdim"), pytorch=("k", "dim?", "keepdim?"),
          example="x -> kthvalue 1 -1", ranks=True, pair=True),
    *[OpDef(name, f"{name} A" + (" [dtype=float64]" if name in ("cumsum", "cumprod") else ""), doc, scan,
            emitter="functional" if name == "softmin" else "reduction", normalises=name == "softmin",
            ranks=name in ("cummax", "cummin"),
            provenance="same", positional=("dim",), kwargs=("dtype",) if name in ("cumsum", "cumprod") else (),
            dtype=dtype, axes=True, values=("dim", "dtype"),
            pytorch=("dim", "dtype?") if name in ("cumsum", "cumprod") else ("dim",), example=f"x -> {name} 1",
            short="cum" if name == "cumsum" else "", pair=name in ("cummax", "cummin"))
      for name, doc, dtype in (
          ("cumsum", "running sum along axis A; int and bool give int64 (`dtype=` to choose)", "accumulate"),
          ("cumprod", "running product along axis A; int and bool give int64", "accumulate"),
          ("cummax", "running maximum along axis A (the values)", "same"),
          ("cummin", "running minimum along axis A (the values)", "same"),
          ("logcumsumexp", "log of the running sum of exps along axis A; float only", "float_only"),
          ("softmin", "softmax of the negated values along axis A", "softmin"))],
    OpDef("sort", "sort [A] [descending=true]", "the values sorted along axis A (-1 by default) and "
          "their int indices (two tensors: `vals, idx: x -> sort -1`)", sort, provenance="each",
          positional=("dim",), kwargs=("descending", "stable"), axes=True,
          values=("dim", "descending", "stable"),
          example="v, y: x -> sort -1", ranks=True, short='sorted'),
    OpDef("argsort", "argsort [A] [descending=true]", "the int indices that sort axis A",
          sort, emitter="sort", provenance="each", positional=("dim",), kwargs=("descending", "stable"), axes=True,
          values=("dim", "descending", "stable"),
          example="x -> argsort 1", ranks=True),
]
