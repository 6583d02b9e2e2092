"""Shape rules of layout operations beyond view/transpose: reversing and rotating axes
(`flip`, `roll`), a window of an axis (`narrow`), an axis cut in several (`unflatten`) or
into tensors (`unbind`), `expand_as`, `tile` and `pad`; with their table entries
(`swapaxes` and `swapdims` are other names of `transpose`)."""
from __future__ import annotations

from ...syntax.nodes import Neg, ShapeLit
from ..layout import Geometry, TensorType, channels_last, dense_like, fresh, suggests_channels_last
from ..lazysympy import sympy as sp
from .args import Result, prod
from .combine import _named_pieces
from .opdef import OpDef
from .reshaping import transpose
from .tables import fill_value
from .values import from_end


def _axes_list(c, x, a, first: int = 0):
    """Axes given one by one (`flip 1 2`) or as a list (`flip [1, 2]`)."""
    nodes = a.pos[first:]
    if len(nodes) == 1 and isinstance(nodes[0], ShapeLit):
        nodes = nodes[0].dims
    out = []
    for node in nodes:
        saved, a.pos = a.pos, (node,)
        try:
            out.append(a.axis_at(0, x.rank))
        finally:
            a.pos = saved
    if len(set(out)) != len(out):
        raise a.fail(f"`{a.op.name}` names an axis twice")
    return out


def flip(c, x, a):
    if not a.pos:
        raise a.fail("`flip` needs the axes it reverses", help="write it as `flip -1`")
    dims = _axes_list(c, x, a)
    return Result((dense_like(x, c.prover.canon, c.same),), detail={"dims": tuple(dims)})


def _sizes(c, nodes):
    return [c.dim(n.operand) * -1 if isinstance(n, Neg) else c.dim(n) for n in nodes]


def roll(c, x, a):
    """torch.roll: shifts (sizes, may be negative: `roll -Sh 1`) along the axes given; without
    axes, of the flattened tensor."""
    a.count(1, 2, usage="roll 1 -1")
    shift_nodes = a.pos[0].dims if isinstance(a.pos[0], ShapeLit) else (a.pos[0],)
    shifts = _sizes(c, shift_nodes)
    dims = _axes_list(c, x, a, 1) if len(a.pos) > 1 else []
    if dims and len(dims) != len(shifts):
        raise a.fail(f"`roll` has {len(shifts)} shifts and {len(dims)} axes: give one shift per axis",
                     help="write it as `roll [1, 2] [0, 1]`")
    if not dims and len(shifts) != 1:
        raise a.fail("`roll` of the flattened tensor takes one shift", help="give the axes: `roll [1, 2] [0, 1]`")
    turns = len(dims) > 0 and any(s != 0 for s in shifts)
    return Result((_rolled(c, x, turns),), detail={"shifts": tuple(shifts), "dims": tuple(dims)})


def _rolled(c, x, turns: bool) -> TensorType:
    """torch.roll's result is a new contiguous tensor (CUDA's kernel; the CPU's flattens
    without axes). Along axes the CPU concatenates two pieces of its input, so a channels-last
    input may give a channels-last result, unless every shift is a whole turn (0 is): both
    layouts are kept, and a later `view` must suit each."""
    out = fresh(x.shape, x.dtype)
    if turns and suggests_channels_last(x.shape, x.strides, Geometry(c.prover.canon, c.same)):
        out = TensorType(x.shape, out.strides, x.dtype, ((channels_last(x.shape), ()),),
                         "`roll` keeps a channels-last layout on the CPU, not on CUDA")
    return out


def narrow(c, x, a):
    """x.narrow(A, START, LENGTH): LENGTH positions of axis A from START (a view)."""
    a.count(3, usage="narrow 1 0 S")
    d = a.axis_at(0, x.rank)
    start, length = a.dim_at(1), a.dim_at(2)
    written = start
    start = from_end(c, start, x.shape[d], a.pos[1].span,
                     lambda: f"the start {c.sz(written)} of `narrow` is before the start of dim {d}",
                     lambda: f"the start {c.sz(written)} of `narrow` may be negative (torch then "
                             "counts from the end)")
    c.need_positive(length, a.pos[2].span)
    c.need_leq(start + length, x.shape[d], span=a.op.span,
               message=lambda: f"`narrow` to {c.sz(start)} + {c.sz(length)} may run past the end of dim {d} "
                               f"({c.sz(x.shape[d])}) of {c.show(x)}")
    shape = x.shape[:d] + (length,) + x.shape[d + 1:]
    return Result((x.restrided(shape, lambda st: st),), detail={"dim": d, "start": start, "length": length})


def unflatten(c, x, a):
    """x.unflatten(A, (S1, S2, ..)): axis A cut into several (one size may be -1), a view."""
    a.count(2, usage="unflatten -1 [H, Dh]")
    d = a.axis_at(0, x.rank)
    sizes, infer = a.shape_at(1)
    size = x.shape[d]
    if infer is not None:
        rest = prod(s for k, s in enumerate(sizes) if k != infer)
        sizes[infer] = sp.cancel(size / rest)
        c.need_whole(sizes[infer], span=a.pos[1].span,
                     what=lambda: f"the -1 of `unflatten` on dim {d} ({c.sz(size)}) would be {c.sz(sizes[infer])}")
    else:
        c.need_equal(prod(sizes), size, code="E103", span=a.pos[1].span,
                     message=lambda: f"`unflatten` cuts dim {d} ({c.sz(size)}) of {c.show(x)} into "
                                     f"{c.show_shape(sizes)}, which holds {c.sz(prod(sizes))} elements")
    shape = x.shape[:d] + tuple(sizes) + x.shape[d + 1:]

    def strides(st):
        inner, out = st[d], []
        for s in reversed(sizes):
            out.insert(0, inner)
            inner = inner * s
        return st[:d] + tuple(out) + st[d + 1:]
    return Result((x.restrided(shape, strides),), detail={"dim": d, "sizes": tuple(sizes), "infer": infer})


def unbind(c, x, a):
    """x.unbind(A): one tensor per position of axis A, bound to as many names."""
    a.count(0, 1, usage="a, b, c: x -> unbind 0")
    if x.rank == 0:
        raise a.fail(f"`unbind` needs an axis, got {c.show(x)}")
    d = a.axis_at(0, x.rank) if a.pos else 0
    n = c.prover.canon(x.shape[d])
    if not n.is_Integer:
        raise a.fail(f"`unbind` makes one tensor per position of dim {d} of {c.show(x)}, and its size "
                     f"{c.sz(x.shape[d])} is not a fixed number", help="give the axis a fixed size, "
                     "or use `select` for one position")
    _named_pieces(a, int(n))
    keep = [k for k in range(x.rank) if k != d]
    one = x.restrided(tuple(x.shape[k] for k in keep), lambda st: tuple(st[k] for k in keep))
    return Result((one,) * int(n), detail={"dim": d, "count": int(n)})


def expand_as(c, x, a):
    """x.expand_as(T): broadcast size-1 axes to T's shape (a view, no copy)."""
    a.count(1, usage="expand_as t")
    t = a.tensor_at(0)
    if t.rank < x.rank:
        raise a.fail(f"`expand_as` cannot take {c.show(x)} to the fewer dims of {c.show(t)}")
    lead = t.rank - x.rank
    strides = [sp.S.Zero] * lead
    for k, size in enumerate(x.shape):
        target = t.shape[lead + k]
        if c.same(size, target):
            strides.append(x.strides[k])
        elif c.prover.is_one(size):
            strides.append(sp.S.Zero)
        else:
            c.need_equal(size, target, code="E102", span=a.op.span, broadcast=True,
                         message=lambda k=k, size=size, target=target: f"`expand_as` cannot stretch dim {k} of "
                         f"{c.show(x)} from {c.sz(size)} to {c.sz(target)}: only size-1 dims expand")
            strides.append(x.strides[k])
    return Result((TensorType(tuple(t.shape), tuple(strides), x.dtype),))


def tile(c, x, a):
    """torch.tile: each axis repeated (the counts line up from the right; missing ones are 1)."""
    if len(a.pos) == 1 and isinstance(a.pos[0], ShapeLit):
        nodes = a.pos[0].dims
    else:
        nodes = a.pos
    if not nodes:
        raise a.fail("`tile` needs the repetitions of each axis", help="write it as `tile [1, 2]`")
    reps = []
    for n in nodes:
        r = c.dim(n)
        c.need_whole(r, span=n.span, what=lambda r=r: f"the repetition count {c.sz(r)}")
        c.need_positive(r, n.span)
        reps.append(r)
    rank = max(len(reps), x.rank)
    reps = [sp.S.One] * (rank - len(reps)) + reps
    shape = [sp.S.One] * (rank - x.rank) + list(x.shape)
    return Result((fresh(tuple(s * r for s, r in zip(shape, reps)), x.dtype),), detail={"reps": tuple(reps)})


def pad(c, x, a):
    """F.pad(x, [left, right, top, bottom, ..], value=V): pairs from the last axis; sizes may be
    symbolic (negative ones crop)."""
    a.count(1, usage="pad [1, 1]")
    if not isinstance(a.pos[0], ShapeLit):
        raise a.fail("`pad` takes its pads in brackets, pairs from the last axis: `pad [1, 1]`",
                     span=a.pos[0].span)
    nodes = a.pos[0].dims
    if not nodes or len(nodes) % 2:
        raise a.fail(f"`pad` takes pairs (before, after) from the last axis, got {len(nodes)} sizes",
                     span=a.pos[0].span)
    pads = _sizes(c, nodes)
    if len(pads) // 2 > x.rank:
        raise a.fail(f"`pad` pads {len(pads) // 2} axes of {c.show(x)}, which has {x.rank}", span=a.pos[0].span)
    mode = a.kw_choice("mode", ("constant",), "constant")
    value = a.kw.get("value")
    value = fill_value(c, value.value) if value is not None else None
    if value is not None and getattr(value, "free_symbols", None):
        raise a.fail("`value=` of `pad` is a number", span=a.kw["value"].span)
    shape = list(x.shape)
    for k in range(len(pads) // 2):
        d = x.rank - 1 - k
        shape[d] = shape[d] + pads[2 * k] + pads[2 * k + 1]
        c.need_positive(shape[d], a.pos[0].span,
                        what=lambda d=d, s=shape[d]: f"dim {d} after `pad` ({c.sz(s)})")
    return Result((_padded(c, x, tuple(shape), pads),), detail={"pads": tuple(pads), "mode": mode, "value": value})


def _padded(c, x, shape, pads) -> TensorType:
    """The layout of F.pad's result, as constant_pad_nd makes it: with a width above 0, a new
    tensor in its input's suggested memory format (channels-last or contiguous); with every
    width 0 or below, a copy of the cropped input that keeps its order of strides (all-zero
    widths included: a transposed input stays transposed). Widths of either sign give both."""
    g = Geometry(c.prover.canon, c.same)
    grown = TensorType(shape, channels_last(shape) if suggests_channels_last(x.shape, x.strides, g)
                       else fresh(shape).strides, x.dtype)
    cropped = dense_like(x.restrided(shape, lambda st: st), c.prover.canon, c.same)
    if any(c.prover.leq(sp.S.One, p).ok for p in pads):
        return grown
    if all(p.is_Integer and p <= 0 or c.prover.leq(p, sp.S.Zero).ok for p in pads):
        return cropped
    alt = tuple(dict.fromkeys((st, ()) for st in (cropped.strides,) + tuple(s for s, _ in cropped.alt)
                              if st != grown.strides))
    return TensorType(shape, grown.strides, x.dtype, alt,
                      "`pad` copies its input's layout when no width is above 0" if alt else "")


ENTRIES = [
    OpDef("swapaxes", "swapaxes A B", "the same as `transpose A B` (numpy's name)", transpose,
          family="layout", provenance="permute", positional=("axis0", "axis1"), axes=True, alias_of="transpose",
          example="x -> swapaxes 1 2", pytorch=("axis0", "axis1")),
    OpDef("swapdims", "swapdims A B", "the same as `transpose A B`", transpose, family="layout",
          provenance="permute", positional=("dim0", "dim1"), axes=True, alias_of="transpose",
          example="x -> swapdims 0 1", pytorch=("dim0", "dim1")),
    OpDef("flip", "flip A B .. | flip [A, B]", "reverses the order along the axes given", flip,
          family="layout", provenance="same", axes=True, values=("dims",),
          example="x -> flip 1 2", short='flipped'),
    OpDef("roll", "roll SHIFT A | roll [S1, S2] [A, B]", "torch.roll: rotates along axes by shifts "
          "(sizes, negative ones too: `roll -Sh 1`); without axes, the flattened tensor", roll,
          family="layout", provenance="same", values=("shifts", "dims"),
          example="x -> roll -2 1", short='rolled'),
    OpDef("narrow", "narrow A START LENGTH", "LENGTH positions of axis A from START (a view); START "
          "+ LENGTH proved within the axis", narrow, family="layout", provenance="slice",
          positional=("dim", "start", "length"), values=("dim", "start", "length"),
          pytorch=("dim", "start", "length"),
          example="x -> narrow 1 0 S"),
    OpDef("unflatten", "unflatten A [S1, S2, ..]", "cuts axis A into several (one size may be -1), a "
          "view", unflatten, family="layout", provenance="regroup", positional=("dim", "sizes"), moves="regroup",
          example="x -> concat -1 x -> unflatten -1 [2, -1]"),
    OpDef("unbind", "unbind [A]", "one tensor per position of axis A (0 by default; a fixed size), "
          "bound to several names: `q, k, v: qkv -> unbind 0`", unbind, family="layout",
          provenance="unbind", positional=("dim",), axes=True, values=("dim",),
          example="v, y: x -> concat -1 x -> unflatten -1 [2, -1] -> unbind -2"),
    OpDef("expand_as", "expand_as T", "broadcasts size-1 axes to T's shape (a view)", expand_as,
          family="layout", provenance="expand", positional=("other",),
          example="x -> amax -1 keepdim -> expand_as x"),
    OpDef("tile", "tile [R1, R2, ..]", "torch.tile: repeats the whole tensor R times along each axis "
          "(counts line up from the right)", tile, family="layout", provenance="new", values=("reps",),
          example="x -> tile [2, 1]"),
    OpDef("pad", "pad [L, R, ..] [value=V]", "F.pad: pairs (before, after) of sizes from the last "
          "axis (negative ones crop), filled with V (0 by default; `-inf` allowed); mode \"constant\"",
          pad, family="layout", kwargs=("mode", "value"), dtype="fill", values=("pads", "value"),
          example="x -> pad [1, 1]", short='padded'),
]
