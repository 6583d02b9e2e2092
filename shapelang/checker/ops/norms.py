"""Shape rules of tensors made like another (`zeros_like`, `ones_like`, `full_like`), the
identity `eye(N)`, and the normalisation layers over channels (`groupnorm`, `batchnorm`),
with their table entries."""
from __future__ import annotations

from ...syntax.diagnostics import ShapeError
from .. import dtypes
from ..layout import fresh
from .args import Result
from .opdef import OpDef
from .tables import call_only, fill_value


def like(c, x, a):
    """zeros_like / ones_like / full_like V: a new tensor of the input's shape (and dtype,
    unless `dtype=` gives one)."""
    if a.op.name == "full_like":
        a.count(1, usage="full_like -inf")
        value = fill_value(c, a.pos[0])
        if value is not True and value is not False and getattr(value, "free_symbols", None) \
                and not value.free_symbols <= set(c.prover.user.values()):
            raise a.fail("`full_like` fills with a number", span=a.pos[0].span)
    else:
        a.count(0, usage=a.op.name)
        value = 0 if a.op.name == "zeros_like" else 1
    k = a.kw.get("dtype")
    dtype = dtypes.from_node(k.value, "`dtype=`") if k is not None else None
    return Result((fresh(x.shape, dtype or x.dtype),), detail={"value": value, "dtype": dtype})


def eye_call(c, node):
    """eye(N) / eye(N, M): the identity matrix [N, M] (float)."""
    if not 1 <= len(node.args) <= 2:
        raise ShapeError("E110", f"`eye` takes 1 or 2 sizes, got {len(node.args)}", span=node.span,
                         help="write it as `eye(S)` or `eye(S, T)`")
    sizes = []
    for n in node.args:
        e = c.dim(n)
        c.need_whole(e, span=n.span, what=lambda e=e: f"this size is {c.sz(e)}")
        c.need_positive(e, n.span)
        sizes.append(e)
    n, m = sizes[0], sizes[-1]
    return "eye", [], Result((fresh((n, m), "float"),), detail={"n": n, "m": m if len(sizes) == 2 else None})


def _channels(c, x, a, lo: int, hi: int):
    if not lo <= x.rank <= hi:
        raise a.fail(f"`{a.op.name}` takes [B, C, ..] with {lo} to {hi} dims, got {c.show(x)}")
    return x.shape[1]


def groupnorm(c, x, a):
    """nn.GroupNorm(G, C) on [B, C, ..]: G groups of the channels (C % G == 0, proved)."""
    a.count(1, usage="groupnorm 8")
    ch = _channels(c, x, a, 2, 8)
    g = a.dim_at(0)
    c.need_positive(g, a.pos[0].span)
    c.need_whole(ch / g, span=a.op.span,
                 what=lambda: f"`groupnorm {c.sz(g)}` of {c.show(x)}: each of the {c.sz(g)} groups would hold "
                                 f"{c.sz(ch / g)} channels")
    affine = a.kw_bool("affine", True)
    eps = a.kw_number("eps", None, positive=True)
    return Result((fresh(x.shape, x.dtype),), params=2 * ch if affine else 0,
                  detail={"groups": g, "channels": ch, "affine": affine, "eps": eps})


def batchnorm(c, x, a):
    """nn.BatchNorm1d/2d/3d on [B, C], [B, C, L], [B, C, H, W], [B, C, D, H, W]: in eval mode
    it normalises with running statistics, kept as buffers (not parameters)."""
    a.count(0, usage="batchnorm")
    ch = _channels(c, x, a, 2, 5)
    affine = a.kw_bool("affine", True)
    eps = a.kw_number("eps", None, positive=True)
    momentum = a.kw_number("momentum", None)
    if momentum is not None and not 0 <= momentum <= 1:
        raise a.fail("`momentum=` takes a number from 0 to 1", span=a.kw["momentum"].span)
    return Result((fresh(x.shape, x.dtype),), params=2 * ch if affine else 0,
                  detail={"channels": ch, "affine": affine, "eps": eps, "momentum": momentum,
                          "spatial": max(x.rank - 2, 1)})


ENTRIES = [
    *[OpDef(name, f"{name} [dtype=int]", f"a new tensor of {what} of the input's shape and dtype (or "
            "`dtype=`)", like, emitter="like", family="tables", provenance="same", kwargs=("dtype",), values=("dtype",))
      for name, what in (("zeros_like", "zeros"), ("ones_like", "ones"))],
    OpDef("full_like", "full_like V [dtype=int]", "a new tensor of the input's shape and dtype filled "
          "with V (`-inf` allowed where the dtype holds it)", like, emitter="like", family="tables", provenance="same",
          positional=("fill_value",), kwargs=("dtype",), dtype="like", values=("value", "dtype"),
          example="x -> full_like 0.5"),
    OpDef("eye", "eye(N) | eye(N, M)", "the identity matrix [N, N] (or [N, M]), float", call_only,
          family="tables", provenance="new", kwargs=("dtype",),
          example="eye(S)"),
    OpDef("groupnorm", "groupnorm G [eps=1e-05] [affine=false]", "nn.GroupNorm(G, C) on [B, C, ..]: "
          "C proved divisible by G; 2*C parameters (none with `affine=false`)", groupnorm, learned=True,
          provenance="same", positional=("num_groups",), kwargs=("eps", "affine"), dtype="channel_norm",
          values=("groups", "eps", "affine"),
          example="x -> groupnorm 1", layer='gn', short='gn'),
    OpDef("batchnorm", "batchnorm [eps=1e-05] [momentum=0.1]", "nn.BatchNorm1d/2d/3d on [B, C, ..] "
          "(eval mode: running mean and variance, buffers of C each); 2*C parameters",
          batchnorm, learned=True, provenance="same", kwargs=("eps", "momentum", "affine"), dtype="channel_norm",
          values=("eps", "affine"), layer='bn', short='bn'),
]
