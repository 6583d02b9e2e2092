"""Shape rules of elementwise operations beyond the basic activations: activations with
parameters (`leaky_relu`, `elu`, ..), math functions (`erf`, `log1p`, ..), tests
(`isnan`), `masked_fill` with any value, logical operations of two tensors, `glu` (which
halves an axis), and the normalising pair `normalize` / `cosine_similarity`; with their
table entries. dtypes follow PyTorch (shapelang.checker.dtypes, keys named in the entries)."""
from __future__ import annotations

from .. import dtypes
from ..layout import dense_like, fresh
from .args import Result
from .combine import broadcast
from .opdef import OpDef
from .tables import _operand, clamp, fill_value

# keyword -> PyTorch's default, per activation (a keyword left out is not written in code)
ACTIVATIONS = {"leaky_relu": {"negative_slope": 0.01}, "elu": {"alpha": 1.0}, "celu": {"alpha": 1.0},
               "selu": {}, "mish": {}, "hardswish": {}, "hardsigmoid": {}, "relu6": {}, "logsigmoid": {}}
MATH = ("erf", "sign", "reciprocal", "log1p", "expm1", "log2", "trunc", "round")
TESTS = ("isnan", "isinf", "isfinite")
LOGICAL = ("logical_and", "logical_or", "logical_xor")


def _pointwise(c, x, **detail):
    return Result((dense_like(x, c.prover.canon, c.same),), detail=detail)


def activation(c, x, a):
    """An activation with PyTorch's keywords (`leaky_relu negative_slope=0.2`, `elu alpha=1.0`)."""
    a.count(0, usage=a.op.name)
    given = {k: a.kw_number(k, None) for k in ACTIVATIONS[a.op.name]}
    return _pointwise(c, x, **{k: v for k, v in given.items() if v is not None})


def math(c, x, a):
    """erf, sign, .., round (`round decimals=2`): one value per element."""
    a.count(0, usage=a.op.name)
    if a.op.name == "round":
        return _pointwise(c, x, decimals=a.kw_number("decimals", 0, whole=True))
    return _pointwise(c, x)


def test(c, x, a):
    a.count(0, usage=a.op.name)
    return Result((fresh(x.shape, "bool"),))


def nan_to_num(c, x, a):
    """NaN and the infinities replaced by numbers (`nan=0.0`, `posinf=`, `neginf=`)."""
    a.count(0, usage="nan_to_num nan=0.0")
    given = {}
    for k in ("nan", "posinf", "neginf"):
        node = a.kw.get(k)
        if node is not None:
            v = fill_value(c, node.value)
            if v is True or v is False or getattr(v, "free_symbols", None):
                raise a.fail(f"`{k}=` takes a number", span=node.span)
            given[k] = v
    return _pointwise(c, x, **given)


def masked_fill(c, x, a):
    """x.masked_fill(M, V): V where the bool M is True; out of place, the input and M broadcast."""
    a.count(2, usage="masked_fill m -inf")
    m = a.tensor_at(0)
    if m.dtype != "bool":
        raise dtypes.refuse(f"the mask of `masked_fill` {c.show(m)} holds {dtypes.show(m.dtype)} values; "
                            "PyTorch takes only a bool mask", a.pos[0].span,
                            "compare it to make one, e.g. `masked_fill (m != 0) -inf`")
    value = _operand(c, a.pos[1])
    if isinstance(value, tuple):
        raise a.fail("the value of `masked_fill` is a number here (`-inf`, `0.0`, `true`)",
                     span=a.pos[1].span, help="to pick from a tensor, write `where(m, values, x)`")
    shape = broadcast(c, [x.shape, m.shape], ["the input", "the mask"], a.pos[0].span)
    return Result((fresh(shape, x.dtype),), detail={"value": value})


def logical(c, x, a):
    """logical_and / or / xor of the piped tensor and another (the shapes broadcast): bool."""
    a.count(1, usage=f"{a.op.name} m")
    other = a.tensor_at(0)
    shape = broadcast(c, [x.shape, other.shape], ["the input", f"`{c.source_of(a.pos[0])}`"], a.op.span)
    return Result((fresh(shape, "bool"),))


def clamp_bound(c, x, a):
    """clamp_min LO / clamp_max HI: clamp with one bound."""
    a.count(1, usage=f"{a.op.name} 0")
    bound = a.op.name.removeprefix("clamp_")
    return clamp(c, x, _OneBound(a, bound))


class _OneBound:
    """The Args of `clamp_min LO` seen by clamp's rule as `clamp min=LO`."""

    def __init__(self, a, bound):
        self._a, self.pos, self.op, self.tensors = a, (), a.op, a.tensors
        self._given = {bound: _Kw(a.pos[0])}

    @property
    def kw(self):
        return self._given

    def count(self, *args, **kw):
        pass

    def fail(self, *args, **kw):
        return self._a.fail(*args, **kw)


class _Kw:
    def __init__(self, value):
        self.value, self.span = value, value.span


def softcap(c, x, a):
    """`softcap C`: tanh(x / C) * C, Gemma-2's logit soft-capping (every value kept inside
    (-C, C)); C a number or size expression, proved positive."""
    a.count(1, usage="softcap 30.0")
    cap = a.scalar_at(0)
    if cap.is_number and not cap > 0:
        raise a.fail(f"`softcap` divides by its cap, which must be above 0, not {c.sz(cap)}",
                     "Gemma-2 caps attention logits at 50.0 and final logits at 30.0", span=a.pos[0].span)
    c.need_positive(cap, a.pos[0].span, what=lambda: f"the cap {c.sz(cap)}")
    return _pointwise(c, x, cap=cap)


def glu(c, x, a):
    """F.glu: halves axis A (-1 by default), which must be even: the first half times the
    sigmoid of the second."""
    a.count(0, 1, usage="glu -1")
    if x.rank == 0:
        raise a.fail(f"`glu` needs an axis to halve, got {c.show(x)}")
    d = a.axis_at(0, x.rank) if a.pos else x.rank - 1
    half = x.shape[d] / 2
    c.need_whole(half, span=a.op.span,
                 what=lambda: f"`glu` halves dim {d} ({c.sz(x.shape[d])}) of {c.show(x)}: each half {c.sz(half)}")
    shape = x.shape[:d] + (half,) + x.shape[d + 1:]
    return Result((fresh(shape, x.dtype),), detail={"dim": d})


def normalize(c, x, a):
    """F.normalize: x divided by its p-norm along axis A (PyTorch's default axis is 1)."""
    a.count(0, 1, usage="normalize -1")
    if x.rank == 0:
        raise a.fail(f"`normalize` needs an axis, got {c.show(x)}")
    if a.pos:
        d = a.axis_at(0, x.rank)
    else:
        if x.rank < 2:
            raise a.fail(f"`normalize` without an axis normalises dim 1, which {c.show(x)} does not have",
                         help="give the axis: `normalize -1`")
        d = 1
    p = a.kw.get("p")
    p = 2 if p is None else fill_value(c, p.value)
    eps = a.kw_number("eps", None, positive=True)
    return _pointwise(c, x, dim=d, p=p, eps=eps)


def cosine_similarity(c, x, a):
    """F.cosine_similarity(x, y, dim): x and y broadcast, then axis A goes (PyTorch's default 1)."""
    a.count(1, 2, usage="cosine_similarity y -1")
    y = a.tensor_at(0)
    shape = broadcast(c, [x.shape, y.shape], ["the input", f"`{c.source_of(a.pos[0])}`"], a.op.span)
    rank = len(shape)
    if rank == 0:
        raise a.fail("`cosine_similarity` needs an axis to reduce")
    d = a.axis_at(1, rank) if len(a.pos) > 1 else 1
    if d >= rank:
        raise a.fail(f"`cosine_similarity` without an axis reduces dim 1, which a {rank}-d result lacks",
                     help="give the axis: `cosine_similarity y -1`")
    eps = a.kw_number("eps", None, positive=True)
    out = tuple(shape[:d]) + tuple(shape[d + 1:])
    dt = dtypes.result_type([(x.dtype, 0 if x.rank else 1), (y.dtype, 0 if y.rank else 1)])
    if dtypes.kind(dt) != "float":
        raise dtypes.refuse(f"`cosine_similarity` of {dtypes.show(x.dtype)} and {dtypes.show(y.dtype)} "
                            "values: PyTorch needs floating-point values", a.op.span,
                            f"cast them first: `-> to {dtypes.DEFAULT}`", (("input", dtypes.DEFAULT),))
    return Result((fresh(out, dt),), detail={"dim": d, "eps": eps})


_SAME = {"provenance": "same"}

ENTRIES = [
    OpDef("masked_fill", "masked_fill M V", "V (a number: `-inf`, `0.0`, `true`) where the bool M is "
          "True; out of place, the input and M broadcast", masked_fill, provenance="expand",
          positional=("mask", "value"), dtype="fill", values=("value",), pytorch=("mask", "value"),
          example="x -> transpose 1 2 -> masked_fill m -inf", short='filled'),
    *[OpDef(name, name + "".join(f" [{k}={v}]" for k, v in kws.items()), f"F.{name}, elementwise"
            + ("" if name == "relu6" else "; float only"), activation, emitter="functional", kwargs=tuple(kws),
            dtype="no_bool" if name == "relu6" else "float_only", values=tuple(kws),
            function="" if kws else f"F.{name}", **_SAME)
      for name, kws in ACTIVATIONS.items()],
    OpDef("softcap", "softcap C", "tanh(x / C) * C: Gemma-2's soft-capping of logits into (-C, C); "
          "C a positive number or size expression; int and bool give float", softcap,
          positional=("cap",), dtype="to_float", values=("cap",), example="x -> softcap 30.0", **_SAME),
    OpDef("glu", "glu [A]", "F.glu: halves axis A (-1 by default; proved even): the first half times "
          "the sigmoid of the second; float only", glu, emitter="functional", provenance="slice", positional=("dim",),
          dtype="float_only", axes=True, values=("dim",),
          example="x -> concat -1 x -> glu"),
    *[OpDef(name, name + (" [decimals=N]" if name == "round" else ""), f"torch.{name}, elementwise"
            + {"sign": "", "trunc": " (bool refused)", "round": " (bool refused; `decimals=` float only)"}
            .get(name, " (int and bool give float)"), math, emitter="math", kwargs=("decimals",) if name == "round" else (),
            dtype={"sign": "same", "trunc": "no_bool", "round": "rounding"}.get(name, "to_float"),
            values=("decimals",) if name == "round" else (), function=f"torch.{name}", **_SAME)
      for name in MATH],
    OpDef("clamp_min", "clamp_min LO", "the same as `clamp min=LO`", clamp_bound, emitter="clamp", family="tables",
          provenance="where", positional=("min",), pytorch=("min",),
          example="x -> clamp_min 0"),
    OpDef("clamp_max", "clamp_max HI", "the same as `clamp max=HI`", clamp_bound, emitter="clamp", family="tables",
          provenance="where", positional=("max",), pytorch=("max",),
          example="x -> clamp_max 1"),
    *[OpDef(name, name, f"True where an element is {name[2:]} (bool)", test, emitter="math", family="tables", dtype="bool", function=f"torch.{name}",
            **_SAME) for name in TESTS],
    OpDef("nan_to_num", "nan_to_num [nan=0.0] [posinf=V] [neginf=V]", "NaN and the infinities "
          "replaced by numbers (by default 0 and the dtype's largest and smallest)", nan_to_num,
          kwargs=("nan", "posinf", "neginf"), values=("nan", "posinf", "neginf"), **_SAME),
    *[OpDef(name, f"{name} M", f"torch.{name} of the piped tensor and M (the shapes broadcast): bool",
            logical, emitter="logical", family="tables", provenance="where", dtype="bool", pytorch=("other",),
            example=f"m -> {name} m")
      for name in LOGICAL],
    OpDef("normalize", "normalize [A] [p=2] [eps=1e-12]", "F.normalize: divides by the p-norm along "
          "axis A (PyTorch's default axis is 1); float only", normalize, emitter="functional", positional=("dim",),
          kwargs=("p", "eps"), dtype="float_only", axes=True, values=("dim", "p", "eps"), **_SAME,
          example="x -> normalize -1"),
    OpDef("cosine_similarity", "cosine_similarity Y [A] [eps=1e-8]", "F.cosine_similarity of the piped "
          "tensor and Y (broadcast) along axis A (default 1), which goes; float only",
          cosine_similarity, emitter="functional", positional=("x2", "dim"), kwargs=("eps",),
          values=("dim", "eps"),
          example="x -> cosine_similarity x -1"),
]
