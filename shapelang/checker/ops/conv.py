"""Shape rules of convolutions: `conv1d` and `conv2d`, as nn.Conv1d / nn.Conv2d.

`x -> conv2d OUT K stride=S padding=P dilation=D groups=G bias=false` on [B, C, H, W]
(or [C, H, W]) gives [B, OUT, H', W'] with, per spatial axis,
H' = floor((H + 2P - D(K - 1) - 1) / S) + 1. K, S, P, D are sizes or pairs `[KH, KW]`;
`padding="same"` keeps the size (stride 1 only) and `padding="valid"` is 0; `dtype=` is
the weights' dtype (float32 by default), which the input must have, as for `linear`. The
division is exact when the checker can prove it; otherwise the size is the floor, with
the assumption that makes it exact suggested (W202).
"""
from __future__ import annotations

from ...syntax.nodes import ShapeLit, Str
from .. import dtypes
from ..layout import fresh
from ..lazysympy import sympy as sp
from .args import Result, prod
from .attention import known_keywords
from .rounding import floor_div

KEYWORDS = ("stride", "padding", "dilation", "groups", "bias", "dtype")


def sizes_arg(c, a, node, n: int, what: str, *, allow_zero: bool = False) -> tuple:
    """A size or a list of n sizes (`3` or `[3, 1]`)."""
    items = node.dims if isinstance(node, ShapeLit) else [node] * n
    if len(items) != n:
        raise a.fail(f"`{a.op.name}` takes {n} {what}s in brackets, got {len(items)}", span=node.span)
    out = []
    for item in items:
        e = c.dim(item)
        c.need_whole(e, span=item.span, what=lambda e=e: f"the {what} {e}")
        if allow_zero:
            c.need_leq(sp.S.Zero, e, span=item.span, message=lambda e=e: f"the {what} {e} may be negative")
        else:
            c.need_positive(e, item.span, what=lambda e=e: f"the {what} {e}")
        out.append(e)
    return tuple(out)


def conv(c, x, a):
    n = 1 if a.op.name == "conv1d" else 2
    usage = f"{a.op.name} OUT K" + (" stride=2 padding=1" if n == 1 else " stride=P")
    known_keywords(a, KEYWORDS)
    a.count(2, usage=usage)
    if x.rank not in (n + 1, n + 2):
        layout = "[B, C, L]" if n == 1 else "[B, C, H, W]"
        raise a.fail(f"`{a.op.name}` takes {layout} (or without the batch axis), got {c.show(x)}")
    batched = x.rank == n + 2
    chan_axis = 1 if batched else 0
    c_in = x.shape[chan_axis]
    c_out = a.dim_at(0)
    c.need_whole(c_out, span=a.pos[0].span, what=lambda: f"the output channels {c_out}")
    c.need_positive(c_out, a.pos[0].span)
    kernel = sizes_arg(c, a, a.pos[1], n, "kernel size")
    kw = a.kw
    stride = sizes_arg(c, a, kw["stride"].value, n, "stride") if "stride" in kw else (sp.S.One,) * n
    dilation = sizes_arg(c, a, kw["dilation"].value, n, "dilation") if "dilation" in kw else (sp.S.One,) * n
    groups = c.dim(kw["groups"].value) if "groups" in kw else sp.S.One
    bias = a.kw_bool("bias", True)
    k = a.kw.get("dtype")
    dtype = dtypes.from_node(k.value, "`dtype=`") if k is not None else None
    same = False
    padding = (sp.S.Zero,) * n
    if "padding" in kw:
        node = kw["padding"].value
        if isinstance(node, Str):
            if node.value not in ("same", "valid"):
                raise a.fail('`padding=` takes a size, a list of sizes, "same" or "valid"', span=node.span)
            same = node.value == "same"
            if same and any(s != 1 for s in stride):
                raise a.fail('`padding="same"` needs stride 1 (PyTorch refuses it with a stride)',
                             span=node.span)
        else:
            padding = sizes_arg(c, a, node, n, "padding", allow_zero=True)
    for e, what in ((c_in, "input channels"), (c_out, "output channels")):
        if groups != 1:
            c.need_whole(e / groups, span=a.op.span,
                         what=lambda e=e, what=what: f"the {what} {e} split into {groups} groups")
    spatial = []
    for k in range(n):
        size = x.shape[-n + k]
        if same:
            spatial.append(size)
            continue
        p, d, kk, s = padding[k], dilation[k], kernel[k], stride[k]
        reach = d * (kk - 1) + 1
        c.need_leq(reach, size + 2 * p, span=a.op.span,
                   message=lambda size=size, reach=reach, p=p: f"the kernel reaches over {reach} positions "
                           f"but the input has {size + 2 * p} with padding")
        axis = "the output length" if n == 1 else f"output axis {-n + k}"
        spatial.append(floor_div(c, size + 2 * p - reach, s, a.op.span, f"{axis} of `{a.op.name}`", 1) + 1)
    shape = ((x.shape[0],) if batched else ()) + (c_out,) + tuple(spatial)
    per_out = c_in / groups * prod(kernel)
    return Result((fresh(shape, x.dtype),), params=c_out * per_out + (c_out if bias else 0),
                  flops=prod(shape) * per_out,
                  detail={"in": c_in, "out": c_out, "kernel": kernel, "stride": stride,
                          "padding": "same" if same else padding, "dilation": dilation,
                          "groups": groups, "bias": bias, "spatial": n, "dtype": dtype})
