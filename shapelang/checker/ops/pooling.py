"""Shape rules of pooling and resizing, with their table entries: `max_pool1d/2d`,
`avg_pool1d/2d`, `adaptive_avg_pool1d/2d`, `adaptive_max_pool1d/2d` (as F.max_pool2d and
its kin) and `interpolate` (F.interpolate, nearest or bilinear).

A window pool follows PyTorch's pooling_output_shape per spatial axis:
L' = floor((L + 2p - d(k - 1) - 1) / s) + 1, the stride defaulting to the kernel; with
`ceil_mode=true` the division rounds up, and PyTorch drops a last window that would start
in the right padding. PyTorch refuses a padding over half the kernel and a window larger
than the padded input; so does the checker, for every allowed size. An adaptive pool gives
the output size asked for. `interpolate` by `scale_factor=` gives floor(L * factor), as
F.interpolate computes it in floating point: factors whose float product is exact (whole
numbers and halves, quarters, ..) give the exact floor for all sizes; another (0.3) is taken
only at a size written as a number, where the float product is computed as PyTorch computes
it: at some sizes it falls just under a whole number, so no exact formula holds for all.
"""
from __future__ import annotations

import math
from fractions import Fraction

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import Neg, Num, ShapeLit
from .. import dtypes
from ..layout import fresh
from ..lazysympy import sympy as sp
from .args import Result
from .attention import known_keywords
from .conv import sizes_arg
from .opdef import OpDef
from .rounding import floor_div

FLOATS = ("float16", "bfloat16", "float", "float64")
INTS = ("uint8", "int8", "int16", "int32", "int")


def _spatial(name: str) -> int:
    return 1 if name.endswith("1d") else 2


def _check_rank(c, x, a, n: int) -> bool:
    """The input is [B, C, L] or [C, L] (1d), [B, C, H, W] or [C, H, W] (2d); True if batched."""
    if x.rank not in (n + 1, n + 2):
        layout = "[B, C, L]" if n == 1 else "[B, C, H, W]"
        raise a.fail(f"`{a.op.name}` takes {layout} (or without the batch axis), got {c.show(x)}")
    return x.rank == n + 2


def _out_size(c, a, size, k, s, p, d, ceil_mode: bool, axis: str):
    """One spatial size of a window pool, as PyTorch's pooling_output_shape."""
    reach = d * (k - 1) + 1
    # at least one window: rounding up, one that starts inside the input may run past its end
    c.need_leq(reach, size + 2 * p + (s - 1 if ceil_mode else 0), span=a.op.span,
               message=lambda: f"the window reaches over {c.sz(reach)} positions but the input has "
                               f"{c.sz(size + 2 * p)} with padding (PyTorch: invalid computed output size)")
    rest = size + 2 * p - reach
    what = f"{axis} of `{a.op.name}`"
    if not ceil_mode or c.prover.whole(sp.cancel(rest / s)).ok:
        return floor_div(c, rest, s, a.op.span, what, 1) + 1
    # rounding up, the last window starts at q * s <= rest + s - 1; PyTorch drops it when it
    # starts in the right padding, which p + s <= reach rules out at every size
    q = floor_div(c, rest + s - 1, s, a.op.span, what, 1)
    if c.prover.leq(p + s, reach).ok or c.prover.leq(q * s + 1, size + p).ok:
        return q + 1
    if c.prover.leq(size + p, q * s).ok:
        return q
    raise a.fail(f"`ceil_mode=true` with stride {c.sz(s)} and padding {c.sz(p)}: the last window "
                 "starts in the padding at some sizes, where PyTorch drops it, and shapelang cannot "
                 "write that size for all of them",
                 help="use a stride plus padding no larger than the window, or `ceil_mode=false`")


def window_pool(c, x, a):
    """max_pool1d/2d K [stride=S] [padding=P] [dilation=D] [ceil_mode=true], avg_pool1d/2d K
    [stride=S] [padding=P] [ceil_mode=true] [count_include_pad=false]."""
    name = a.op.name
    n = _spatial(name)
    is_max = name.startswith("max")
    known_keywords(a, ("kernel_size",) + _WINDOW_KW[is_max])
    a.count(1, usage=f"{name} 3 stride=2 padding=1")
    batched = _check_rank(c, x, a, n)
    kw = a.kw
    kernel = sizes_arg(c, a, a.pos[0], n, "kernel size")
    stride = sizes_arg(c, a, kw["stride"].value, n, "stride") if "stride" in kw else kernel
    padding = sizes_arg(c, a, kw["padding"].value, n, "padding", allow_zero=True) if "padding" in kw \
        else (sp.S.Zero,) * n
    dilation = sizes_arg(c, a, kw["dilation"].value, n, "dilation") if "dilation" in kw else (sp.S.One,) * n
    ceil_mode = a.kw_bool("ceil_mode", False)
    include_pad = a.kw_bool("count_include_pad", True)
    span = kw["padding"].span if "padding" in kw else a.op.span
    for p, k in zip(padding, kernel):
        c.need_leq(2 * p, k, span=span,
                   message=lambda p=p, k=k: f"the padding {c.sz(p)} is more than half the kernel size "
                                            f"{c.sz(k)}, which PyTorch refuses")
    spatial = []
    for j in range(n):
        axis = "the output length" if n == 1 else f"output axis {-n + j}"
        spatial.append(_out_size(c, a, x.shape[-n + j], kernel[j], stride[j], padding[j], dilation[j],
                                 ceil_mode, axis))
    shape = x.shape[:-n] + tuple(spatial)
    detail = {"kernel": kernel, "stride": stride, "padding": padding, "ceil_mode": ceil_mode,
              "spatial": n, "batched": batched}
    if is_max:
        detail["dilation"] = dilation
    else:
        detail["count_include_pad"] = include_pad
    return Result((fresh(shape, x.dtype),), detail=detail)


def adaptive_pool(c, x, a):
    """adaptive_avg_pool1d/2d OUT, adaptive_max_pool1d/2d OUT: OUT a size or a list [OH, OW]."""
    name = a.op.name
    n = _spatial(name)
    known_keywords(a, ("output_size",))
    a.count(1, usage=f"{name} " + ("1" if n == 1 else "[7, 7]"))
    _check_rank(c, x, a, n)
    out = sizes_arg(c, a, a.pos[0], n, "output size")
    return Result((fresh(x.shape[:-n] + out, x.dtype),), detail={"output_size": out, "spatial": n})


def _scaled(c, a, node, x, n: int) -> tuple:
    """`scale_factor=2`, `0.5` or `[2, 1.5]`: the factors (Rationals) and each axis's size,
    floor(L * factor) as F.interpolate computes it in floating point. For a factor that floating
    point holds exactly that is the exact floor, proved for all sizes; for another (0.3) it is
    computed at a size written as a number, and refused at a size that varies."""
    items = node.dims if isinstance(node, ShapeLit) else [node] * n
    if len(items) != n:
        raise a.fail(f"`scale_factor=` of `interpolate` on this input takes {n} numbers, got {len(items)}",
                     span=node.span)
    factors, sizes = [], []
    for j, item in enumerate(items):
        if isinstance(item, Neg) or not isinstance(item, Num) or not item.value > 0:
            raise a.fail("`scale_factor=` takes numbers above 0 (or a list of them)", span=item.span)
        f = Fraction(item.text)
        length = x.shape[-n + j]
        exact = not f.denominator & (f.denominator - 1) and f.denominator <= 2 ** 16 and f.numerator <= 2 ** 16
        factor = sp.Rational(f.numerator, f.denominator)
        if exact:
            size = length * factor if f.denominator == 1 else floor_div(
                c, length * f.numerator, sp.Integer(f.denominator), a.op.span, f"axis {-n + j} of `interpolate`")
        elif length.is_Integer:
            size = sp.Integer(math.floor(float(length) * float(item.value)))
        else:
            raise a.fail(f"`scale_factor={item.text}` is not exact in floating point, where PyTorch "
                         f"multiplies and rounds down: its size can be one less than floor(L * {item.text}) "
                         "(0.29 at 100 gives 28, not 29)",
                         span=item.span,
                         help="give the output size instead (`size=[H2, W2]`), or a factor such as 2, "
                              "0.5 or 1.25 that floating point holds exactly")
        empty = f"`interpolate` by {item.text} makes an axis of {c.sz(length)} empty (PyTorch refuses that)"
        if size.is_Integer and size < 1:
            raise ShapeError("E105", empty, span=a.op.span, help="give a larger factor, or `size=`")
        if factor < 1:   # floor(L * f) is at least 1 where L * f is
            c.need_leq(sp.Integer(1), length * factor, span=a.op.span, message=lambda empty=empty: empty)
        factors.append(factor)
        sizes.append(size)
    return tuple(factors), tuple(sizes)


def interpolate(c, x, a):
    """interpolate size=S | scale_factor=F [mode="nearest" | "bilinear"] [align_corners=true]."""
    known_keywords(a, ("size", "scale_factor", "mode", "align_corners"))
    a.count(0, usage='interpolate scale_factor=2 mode="bilinear"')
    mode = a.kw_choice("mode", ("nearest", "bilinear"), "nearest")
    if x.rank not in (3, 4) or (mode == "bilinear" and x.rank != 4):
        want = "[B, C, H, W]" if mode == "bilinear" else "[B, C, L] or [B, C, H, W]"
        raise a.fail(f'`interpolate` with mode="{mode}" takes {want}, got {c.show(x)}')
    n = x.rank - 2
    kw = a.kw
    if ("size" in kw) == ("scale_factor" in kw):
        raise a.fail("`interpolate` takes either `size=` or `scale_factor=`, not both, and one of them",
                     help='e.g. `interpolate size=[H2, W2]` or `interpolate scale_factor=2`')
    align = None
    if "align_corners" in kw:
        if mode == "nearest":
            raise a.fail('`align_corners=` goes with mode="bilinear" only (PyTorch refuses it with '
                         '"nearest")', span=kw["align_corners"].span)
        align = a.kw_bool("align_corners", False)
    if "size" in kw:
        size = sizes_arg(c, a, kw["size"].value, n, "output size")
        scale = None
    else:
        scale, size = _scaled(c, a, kw["scale_factor"].value, x, n)
    return Result((fresh(x.shape[:-n] + size, x.dtype),),
                  detail={"size": size if scale is None else None, "scale": scale, "mode": mode,
                          "align_corners": align, "spatial": n})


def takes(table: dict):
    """A dtype rule from what PyTorch's CPU kernels take: op name -> the dtypes it keeps."""
    def rule(c, x, a, res):
        if x.dtype not in table[a.op.name]:
            raise dtypes.refuse(f"`{a.op.name}` of {dtypes.show(x.dtype)} values: PyTorch has no kernel "
                                "for that dtype", a.op.span,
                                f"cast it first: `-> to {dtypes.DEFAULT}`", (("input", dtypes.DEFAULT),))
        return [x.dtype]
    return rule


_WINDOW_KW = {True: ("stride", "padding", "dilation", "ceil_mode"),
              False: ("stride", "padding", "ceil_mode", "count_include_pad")}
# PyTorch 2.x on the CPU: max_pool2d and nearest resizing also take integers, the 1d max pool
# does not; avg_pool takes int64 alone among the integers
_DTYPES = {"max_pool1d": FLOATS, "max_pool2d": FLOATS + INTS, "avg_pool1d": FLOATS + ("int",),
           "avg_pool2d": FLOATS + ("int",), "adaptive_avg_pool1d": FLOATS, "adaptive_avg_pool2d": FLOATS,
           "adaptive_max_pool1d": FLOATS, "adaptive_max_pool2d": FLOATS,
           "interpolate": FLOATS + ("uint8",)}
_DTYPE_RULE = takes(_DTYPES)

_POOL_DOC = ("window {what} over {layout}: per axis floor((L + 2p - {reach} - 1) / s) + 1, as PyTorch; "
             "K, `stride=` (default K), `padding=` (at most K/2){dil} are sizes or pairs; `ceil_mode=true` "
             "rounds up")

ENTRIES = [
    *[OpDef(f"{kind}_pool{n}d", f"{kind}_pool{n}d K", _POOL_DOC.format(
        what="maximum" if kind == "max" else "mean", layout="[B, C, L]" if n == 1 else "[B, C, H, W]",
        reach="d(K - 1)" if kind == "max" else "K",
        dil=", `dilation=`" if kind == "max" else ""), window_pool, emitter="pool", family="pooling", provenance="pool", positional=("kernel_size",), kwargs=_WINDOW_KW[kind == "max"], dtype=_DTYPE_RULE,
        values=("kernel", "stride", "padding", "dilation", "ceil_mode", "count_include_pad"),
        example=f"x -> {'unsqueeze 1 -> ' * (n - 1)}{kind}_pool{n}d 1", short="pooled")
      for kind in ("max", "avg") for n in (1, 2)],
    *[OpDef(f"adaptive_{kind}_pool{n}d", f"adaptive_{kind}_pool{n}d OUT",
            f"adaptive {'mean' if kind == 'avg' else 'maximum'} pool to the output size OUT "
            f"({'a size' if n == 1 else 'a size or a pair `[OH, OW]`'}): "
            f"{'[B, C, OUT]' if n == 1 else '[B, C, OH, OW]'}, whatever the input size",
            adaptive_pool, emitter="pool", family="pooling", provenance="pool", positional=("output_size",), dtype=_DTYPE_RULE,
            values=("output_size",), example=f"x -> {'unsqueeze 1 -> ' * (n - 1)}adaptive_{kind}_pool{n}d 1",
            short="pooled")
      for kind in ("avg", "max") for n in (1, 2)],
    OpDef("interpolate", 'interpolate size=[H2, W2] | interpolate scale_factor=2 mode="bilinear"',
          "F.interpolate of [B, C, L] or [B, C, H, W] (bilinear: 4-d only) to `size=`, or by "
          "`scale_factor=` (each size becomes floor(L * factor) as PyTorch computes it in floating point; "
          "a factor such as 0.3, which floating point does not hold, at sizes written as numbers only); "
          '`mode="nearest"` (default) or `"bilinear"`, `align_corners=` with bilinear', interpolate, family="pooling", provenance="pool",
          kwargs=("size", "scale_factor", "mode", "align_corners"), dtype=_DTYPE_RULE,
          values=("size", "scale", "mode", "align_corners"),
          example="x -> interpolate scale_factor=2", short='resized'),
]
