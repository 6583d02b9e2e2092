"""dtypes as PyTorch has them: names, type promotion (`torch.result_type`) and, per
operation, which dtypes it takes and which it gives.

A tensor's dtype is a name: `float` (float32, PyTorch's default), `int` (int64, what
token ids are), `bool`, and the other widths by their torch names (`float16`,
`bfloat16`, `float64`, `int32`, `int16`, `int8`, `uint8`). Spellings such as `long`,
`half` or `float32` are read as the same dtypes.

The shape rule of an operation builds its outputs; the dtype rule looked up here
(by the OpDef's `dtype` field, else by the operation's name) then checks the inputs'
dtypes and sets the outputs'. An operation without a dtype rule keeps what its shape
rule gave. Every refusal is one PyTorch makes at every size; tests run each rule
against torch itself. Nothing here imports torch.
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Name, Num, Str

DEFAULT = "float"      # torch.get_default_dtype(): float32
# every dtype, lowest to highest in promotion order
ORDER = ("bool", "uint8", "int8", "int16", "int32", "int", "float16", "bfloat16", "float", "float64")
TORCH = {"float": "float32", "int": "int64"}          # shapelang name -> torch name, where they differ
ALIASES = {"float32": "float", "int64": "int", "long": "int", "half": "float16", "double": "float64",
           "short": "int16", **{d: d for d in ORDER}}
KINDS = {"bool": "bool", **{d: "int" for d in ORDER[1:6]}, **{d: "float" for d in ORDER[6:]}}


def spellings() -> tuple[str, ...]:
    """Every way a dtype may be written (`float32`, `float`, `long`, ...)."""
    return tuple(ALIASES)


def canonical(name: str) -> str | None:
    """The dtype a spelling names (`long` -> `int`, `float32` -> `float`), or None."""
    return ALIASES.get(name)


def kind(dtype: str) -> str:
    """bool, int or float."""
    return KINDS.get(dtype, "float")


def torch_name(dtype: str) -> str:
    """`torch.<this>`: float32 for float, int64 for int."""
    return TORCH.get(dtype, dtype)


def show(dtype: str) -> str:
    """A dtype for messages: `int (int64)`, `bfloat16`."""
    t = torch_name(dtype)
    return dtype if t == dtype else f"{dtype} ({t})"


def suffix(dtype: str) -> str:
    """What the trace writes after a shape: nothing for the default float32."""
    return "" if dtype == DEFAULT else f" {dtype}"


def unknown(name: str, span) -> ShapeError:
    return ShapeError("E110", f"unknown dtype `{name}`", span=span,
                      help="dtypes are float (float32), int (int64) and bool, and "
                           "float16, bfloat16, float64, int32, int16, int8, uint8")


def declared(decl) -> str:
    """The dtype of an `input`, `param` or `buffer` declaration (float unless it names one)."""
    d = canonical(decl.dtype or DEFAULT)
    if d is None:
        raise unknown(decl.dtype, decl.dtype_span or decl.span)
    if decl.kind == "param" and kind(d) != "float":
        raise refuse(f"a learned `param` of {show(d)} values: PyTorch learns floating-point "
                     "parameters only", decl.dtype_span or decl.span,
                     f"declare it as a `buffer` (not learned): `buffer {decl.name}: ... {decl.dtype}`")
    return d


def promote(a: str, b: str) -> str:
    """torch.promote_types."""
    if a == b:
        return a
    pair = {a, b}
    if pair == {"uint8", "int8"}:
        return "int16"
    if pair == {"float16", "bfloat16"}:
        return "float"
    return max(a, b, key=ORDER.index)


def _combine(higher: str | None, lower: str | None) -> str | None:
    if higher is None:
        return lower
    if lower is None or kind(higher) == "float":
        return higher
    if higher == "bool" or kind(lower) == "float":
        return promote(higher, lower)
    return higher


def result_type(operands) -> str:
    """torch.result_type of (dtype, level) pairs; level 0: a tensor with dims, 1: a 0-d
    tensor, 2: a Python number (its dtype: int, float or bool). A lower level decides
    only when it is of a higher category (bool < int < float)."""
    state: list = [None, None, None]
    for dtype, level in operands:
        state[level] = dtype if state[level] is None else promote(state[level], dtype)
    return _combine(state[0], _combine(state[1], state[2]))


def scalar_dtype(value) -> str:
    """The dtype of a number in the spec: a whole number is int, anything else float."""
    if getattr(value, "is_Pow", False) and value.exp.is_Rational and not value.exp.is_Integer \
            and not value.base.is_Number:
        return "float"   # a root of a size (`1/sqrt(Dh)`): sympy answers "not known to be whole"
    return "int" if getattr(value, "is_integer", False) or isinstance(value, int) else "float"


def _level(t) -> int:
    return 0 if t.rank else 1


# ------------------------------------------------------------------ refusals

def refuse(message: str, span, help: str | None = None, casts: tuple = ()) -> ShapeError:
    """`casts`: ((operand, dtype), ...) that make the step valid; shapelang.checker.advice.suggest
    turns them into rewrites, which are proved before they are shown."""
    return ShapeError("E120", message, help=help, span=span, casts=tuple(casts))


def _input_cast(dtype: str) -> tuple:
    return (("input", dtype),)


_CAST_HELP = "cast it first, e.g. `(x -> to float)`"


FLOATS = "floating-point values (a dtype such as float32, bfloat16, float16 or float64)"


def need_float(what: str, t, span, show_t=None, cast: str = "float", role: str = "the input") -> None:
    """Refuse a tensor `t` that does not hold floats; `show_t`: its shape for the message,
    or a function that gives it (called only when refusing)."""
    if kind(t.dtype) != "float":
        show_t = show_t() if callable(show_t) else show_t
        shown = f" {show_t}" if show_t else ""
        raise refuse(f"{what} needs {FLOATS}, but {role}{shown} {'hold' if role.endswith('s') else 'holds'} "
                     f"{show(t.dtype)} values", span,
                     f"PyTorch refuses {show(t.dtype)} here at every size; cast it first: `-> to {cast}`",
                     _input_cast(cast))


# ------------------------------------------------------------------ elementwise, from the checker

BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}


def binary(op: str, left, right, span, texts=("", "")) -> str:
    """The dtype of `left <op> right` (add sub mul div pow floordiv mod); either side may be
    a tensor type or a number's dtype (a str)."""
    dts = [x if isinstance(x, str) else x.dtype for x in (left, right)]
    bools = tuple(k for k, x in enumerate((left, right)) if not isinstance(x, str) and x.dtype == "bool")
    if op in BITWISE:
        floats = [k for k, d in enumerate(dts) if kind(d) == "float"]
        if floats:
            which = texts[floats[0]] or "a float tensor"
            raise refuse(f"`{BITWISE[op]}` of `{which}`, which holds {show(dts[floats[0]])} values: "
                         f"PyTorch's `&`, `|` and `^` are bitwise, for bool masks and int tensors",
                         span, f"compare it first to make a bool mask, e.g. `({which} > 0)`")
    if op == "sub" and "bool" in dts:
        which = texts[dts.index("bool")] or "a bool tensor"
        raise refuse(f"`-` with a bool tensor: `{which}` holds bool values, which PyTorch does not "
                     "subtract", span, f"cast it first: `({which} -> to float)`; `1 - (mask -> to float)` "
                     "is 1 where the mask is False", [(k, "float") for k in bools])
    operands = [(d, 2 if isinstance(x, str) else _level(x)) for x, d in zip((left, right), dts)]
    out = result_type(operands)
    if op == "div" and kind(out) != "float":
        return DEFAULT
    if op in ("floordiv", "mod") and out == "bool":
        raise refuse(f"`{'//' if op == 'floordiv' else '%'}` of two bool values: PyTorch has no "
                     "bool division", span, _CAST_HELP, [(k, "int") for k in bools])
    if op == "pow" and dts == ["bool", "bool"]:
        raise refuse("`**` of two bool tensors: PyTorch has no bool power", span, _CAST_HELP,
                     [(k, "int") for k in bools])
    return out


def with_scalar(op: str, t, scalar, scalar_left: bool, span, texts=("", "")) -> str:
    """The dtype of `tensor <op> number` or `number <op> tensor`."""
    s = scalar_dtype(scalar)
    return binary(op, s, t, span, texts) if scalar_left else binary(op, t, s, span, texts)


def negate(t, span, text: str = "") -> str:
    if t.dtype == "bool":
        raise refuse(f"`-{text}` negates a bool tensor, which PyTorch refuses", span,
                     f"cast it first: `-({text or 'mask'} -> to float)`; `1 - (mask -> to float)` "
                     "is 1 where the mask is False", [(0, "float")])
    return t.dtype


def matmul(a, b, span, texts=("", "")) -> str:
    if a.dtype != b.dtype:
        casts = [(0, b.dtype)] if kind(b.dtype) == "float" else [(1, a.dtype)] \
            if kind(a.dtype) == "float" else [(0, DEFAULT), (1, DEFAULT)]
        raise refuse(f"`@` of `{texts[0]}` ({show(a.dtype)}) and `{texts[1]}` ({show(b.dtype)}): "
                     "a matrix product needs both operands of the same dtype", span,
                     f"cast one of them, e.g. `({texts[0]} -> to {b.dtype})`"
                     if kind(b.dtype) == "float" else _CAST_HELP, casts)
    if a.dtype == "bool":
        raise refuse("`@` of bool tensors: PyTorch has no bool matrix product", span, _CAST_HELP,
                     [(0, DEFAULT), (1, DEFAULT)])
    return a.dtype


def einsum(inputs, output: str, types, span) -> str:
    """torch.einsum: without summed indices it multiplies (promoting the dtypes); a sum over
    one operand gives int64 for ints and bools; a contraction of several is a batched matrix
    product, which needs one dtype and no bool."""
    summed = set("".join(inputs)) - set(output) - {"."}
    if len(types) == 1:
        return "int" if summed and kind(types[0].dtype) != "float" else types[0].dtype
    if not summed:
        return concat(types)
    for t in types[1:]:
        if t.dtype != types[0].dtype:
            raise refuse(f"`einsum` contracting {show(types[0].dtype)} with {show(t.dtype)} values: "
                         "PyTorch needs one dtype", span, _CAST_HELP)
    if types[0].dtype == "bool":
        raise refuse("`einsum` contracting bool values: PyTorch has no bool matrix product", span,
                     _CAST_HELP)
    return types[0].dtype


def concat(types) -> str:
    out = types[0].dtype
    for t in types[1:]:
        out = promote(out, t.dtype)
    return out


# ------------------------------------------------------------------ per-operation rules
# (checker context, input type, Args, Result) -> list of output dtypes; may raise.

def _same(c, x, a, res):
    return [t.dtype for t in res.outputs]


def _float_only(c, x, a, res):
    need_float(f"`{a.op.name}`", x, a.op.span, lambda: c.show(x))
    return [x.dtype] * len(res.outputs)


def _to_float(c, x, a, res):
    """tanh, exp, sqrt, ...: int and bool compute in the default float dtype."""
    return [x.dtype if kind(x.dtype) == "float" else DEFAULT]


def _no_bool(c, x, a, res):
    if x.dtype == "bool":
        raise refuse(f"`{a.op.name}` of a bool tensor {c.show(x)}: PyTorch refuses it", a.op.span,
                     f"cast it first: `-> to {DEFAULT}`", _input_cast(DEFAULT))
    return [x.dtype]


def _square(c, x, a, res):
    return ["int" if x.dtype == "bool" else x.dtype]


def _softmax(c, x, a, res):
    want = res.detail.get("dtype")
    if want is not None:
        if kind(want) != "float":
            raise refuse(f"`{a.op.name} dtype={want}`: softmax computes in a floating-point dtype",
                         a.op.span, "use dtype=float32")
        return [want]
    need_float(f"`{a.op.name}`", x, a.op.span, lambda: c.show(x))
    return [x.dtype]


def _sum(c, x, a, res):
    return ["int" if kind(x.dtype) != "float" else x.dtype]


def _scale(c, x, a, res):
    return [result_type([(x.dtype, _level(x)), (scalar_dtype(res.detail["factor"]), 2)])]


def _mask(c, x, a, res):
    if kind(x.dtype) == "int":
        raise refuse(f"`mask` fills with -inf, which {show(x.dtype)} values cannot hold", a.op.span,
                     f"cast it first, to a dtype that holds -inf: `-> to {DEFAULT}`", _input_cast(DEFAULT))
    return [x.dtype]


def _learned(c, x, a, res):
    """linear: the input must have the weight's dtype (no mixed dtypes in a matrix product)."""
    want = res.detail.get("dtype") or DEFAULT
    if x.dtype != want:
        raise refuse(f"`{a.op.name}` of {show(x.dtype)} values with {show(want)} weights: PyTorch "
                     "needs one dtype", a.op.span,
                     f"cast the input: `-> to {want}`, or give the weights its dtype: "
                     f"`{a.op.name} ... dtype={x.dtype}`" if kind(x.dtype) == "float" else
                     f"cast the input: `-> to {want}`", _input_cast(want))
    return [want]


def _norm(c, x, a, res):
    """layer_norm and rms_norm take a float16/bfloat16 input with float32 weights; layer_norm
    refuses a float64 input with them (rms_norm computes in the wider dtype)."""
    need_float(f"`{a.op.name}`", x, a.op.span, lambda: c.show(x))
    if a.op.name == "layernorm" and x.dtype == "float64" and res.detail.get("affine", True):
        raise refuse("`layernorm` of float64 values with float32 weights: PyTorch refuses mixed "
                     "dtypes wider than the weights", a.op.span, f"cast the input: `-> to {DEFAULT}`",
                     _input_cast(DEFAULT))
    return [x.dtype]


def _attention(c, q, a, res):
    """scaled_dot_product_attention: queries, keys and values of one floating-point dtype (any
    of them); a mask is bool, float32 or the queries' dtype."""
    k, v, *mask = a.tensors
    for t, role in ((q, "the queries"), (k, "the keys"), (v, "the values")):
        need_float("`attention`", t, a.op.span, c.show(t), role=role)
    if not q.dtype == k.dtype == v.dtype:
        odd, want = ("values", q.dtype) if q.dtype == k.dtype else ("keys", q.dtype) \
            if q.dtype == v.dtype else ("queries", k.dtype)
        raise refuse(f"`attention`: query, key and value must have the same dtype, but the queries "
                     f"hold {show(q.dtype)}, the keys {show(k.dtype)} and the values {show(v.dtype)} "
                     "values", a.op.span, f"cast the {odd} to {show(want)} where they are made: "
                     f"`-> to {want}` (or the others to theirs)")
    if mask and mask[0].dtype not in ("bool", DEFAULT, q.dtype):
        raise refuse(f"the attention mask {c.show(mask[0])} holds {show(mask[0].dtype)} values; PyTorch "
                     f"takes a bool mask (True: take part) or a float mask (added to the scores) of "
                     f"float32 or the queries' dtype ({show(q.dtype)})", getattr(a, "mask_span", a.op.span),
                     f"compare it to make a bool mask, or cast it: `-> to {q.dtype}`")
    return [q.dtype]


def _power(c, x, a, res):
    """`pow E`: as `x ** E` (a float power of an int or bool tensor is float32)."""
    return [binary("pow", x, scalar_dtype(res.detail["scalar"]), a.op.span)]


def _embed(c, x, a, res):
    if x.dtype not in ("int", "int32"):
        raise refuse(f"`embed` looks up token ids, but {c.show(x)} holds {show(x.dtype)} values; "
                     "PyTorch takes int64 or int32 indices", a.op.span,
                     "declare the ids as `input ids: [B, S] int`, or cast: `-> to int`", _input_cast("int"))
    tables = getattr(a, "tensors", [])
    return [tables[0].dtype if tables else res.detail.get("dtype") or DEFAULT]


def _accumulate(c, x, a, res):
    """prod, cumsum, cumprod: in `dtype=` when given, else int and bool give int64."""
    want = res.detail.get("dtype")
    return [want] if want else _sum(c, x, a, res)


def _channel_norm(c, x, a, res):
    """groupnorm, batchnorm: float32 weights (and running statistics) take float16 and bfloat16
    inputs; PyTorch refuses float64 ones with them on the CPU."""
    need_float(f"`{a.op.name}`", x, a.op.span, lambda: c.show(x))
    if x.dtype == "float64" and (a.op.name == "batchnorm" or res.detail.get("affine", True)):
        raise refuse(f"`{a.op.name}` of float64 values with float32 weights: PyTorch refuses mixed dtypes "
                     "here", a.op.span, f"cast the input: `-> to {DEFAULT}`", _input_cast(DEFAULT))
    return [x.dtype]


def _softmin(c, x, a, res):
    """softmin is softmax of -x, and PyTorch does not negate bools (with `dtype=` or not)."""
    if x.dtype == "bool":
        negate(x, a.op.span, c.show(x))
    return _softmax(c, x, a, res)


def _values_and_indices(c, x, a, res):
    """topk: its values keep the input's dtype, its indices are int64; PyTorch refuses bool
    values."""
    if x.dtype == "bool":
        raise refuse(f"`{a.op.name}` of a bool tensor {c.show(x)}: PyTorch's topk does not take bool "
                     "values", a.op.span, "cast it first: `-> to int`", _input_cast("int"))
    return [t.dtype for t in res.outputs]


def _index(c, x, a, res):
    """argmax, argmin: int64 positions; PyTorch refuses bool values."""
    _no_bool(c, x, a, res)
    return ["int"]


def _rounding(c, x, a, res):
    """round: bool refused; with `decimals=` only floating-point values."""
    if res.detail.get("decimals"):
        need_float(f"`{a.op.name} decimals=`", x, a.op.span, lambda: c.show(x))
    return _no_bool(c, x, a, res)


def _fill(c, x, a, res):
    """masked_fill, pad, full_like: the input's dtype (or `dtype=`), which must hold the value."""
    want = res.detail.get("dtype") or x.dtype
    v = res.detail.get("value")
    if kind(want) == "int" and v is not None and v is not True and v is not False \
            and getattr(v, "is_infinite", False):
        raise refuse(f"`{a.op.name}` with an infinite value, which {show(want)} values cannot hold",
                     a.op.span, f"cast it first, to a dtype that holds it: `-> to {DEFAULT}`",
                     _input_cast(DEFAULT))
    return [want]


# rules named in the table's entries (`dtype="float_only"`)
# the dtype rules by name: an operation's table entry names its own (OpDef.dtype; none: `same`)
RULES = {"same": _same, "float_only": _float_only, "to_float": _to_float, "no_bool": _no_bool,
         "bool": lambda c, x, a, r: ["bool"] * len(r.outputs), "index": _index, "sum": _sum,
         "accumulate": _accumulate, "softmin": _softmin, "rounding": _rounding, "fill": _fill,
         "like": _fill, "channel_norm": _channel_norm, "attention": _attention,
         "values_and_indices": _values_and_indices, "learned": _learned, "power": _power,
         "softmax": _softmax, "negate": lambda c, x, a, r: [negate(x, a.op.span)], "square": _square,
         "scale": _scale, "mask": _mask, "norm": _norm, "embed": _embed}


def set_outputs(res, dts):
    res.outputs = tuple(t if t.dtype == d else replace(t, dtype=d) for t, d in zip(res.outputs, dts))
    return res


def apply(c, opdef, x, a, res):
    """Check the input dtypes of one operation and set its outputs' dtypes."""
    rule = getattr(opdef, "dtype", None) or _same
    if isinstance(rule, str):
        rule = RULES[rule]
    return set_outputs(res, rule(c, x, a, res))


# ------------------------------------------------------------------ dtype arguments

def from_node(node, what: str) -> str:
    """A dtype written as an argument: `float32`, `torch.bfloat16` is not needed, `long`."""
    name = node.name if isinstance(node, Name) else node.value if isinstance(node, Str) else None
    name = name.removeprefix("torch.") if name else None
    d = canonical(name) if name else None
    if d is None:
        if isinstance(node, Num) or name is None:
            raise ShapeError("E110", f"{what} takes a dtype, e.g. float32", span=node.span)
        raise unknown(name, node.span)
    return d
