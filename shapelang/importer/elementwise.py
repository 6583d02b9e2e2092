"""Import, elementwise steps: an ATen operation that keeps (or broadcasts) its operands'
shapes -> the spec's operator or operation.

Arithmetic of tensors and numbers is written with the operators (`x * weight`,
`x ** 3`, `1 / x`), a product by one over the square root of the last axis as
`scale 1/sqrt(Dh)`, the functions of one tensor by their names (`rsqrt`, `silu`,
`cos`), comparisons as bool tensors, `masked_fill` with -inf as `mask M` and with
another value as `where(M, value, x)`. Casts to the dtype a tensor has already, clones
and dropout with p=0 vanish. Tables the module computes in forward (`arange(S)`,
`outer`) are written as the spec's own tables. Registered in the operation table
beside the layout steps of translate.py.
"""
from __future__ import annotations

import math

import torch

from ..checker.ops.table import TABLE as OPS
from .graph import DTYPES, arg, dtype_word, is_tensor, num_text, target_name, tok, val
from .translate import TABLE, Piece

# functions of one tensor under another ATen name
RENAMED = {"log_sigmoid": "logsigmoid"}
# functions of one tensor with the same name in the language: the table's entries with a
# PyTorch `function` (docs/language.md)
UNARY = tuple(name for name, d in OPS.items() if d.function and name not in RENAMED.values())
# torch.full, torch.ones, torch.zeros: the table's filled tensors (written as `full` writes them)
FILLED = tuple(name for name, d in OPS.items() if d.emitter_key == "full")
# bitwise operators: logical on bool masks, bitwise on ints (`(a <= b) & (c < d)`)
BITWISE = {"&": ("__and__", "bitwise_and"), "|": ("__or__", "bitwise_or"), "^": ("__xor__", "bitwise_xor")}
# comparisons (`bias == 0`, nanoGPT's causal buffer): bool tensors, as in the language
COMPARE_HINTS = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def _unary(op):
    def f(t, node, leaf):
        if op == "gelu" and node.kwargs.get("approximate", "none") != "none":
            return Piece(node.name, f'gelu approximate="{node.kwargs["approximate"]}"', node.args[0].name,
                         hint=leaf or op)
        if op == "softplus" and tuple(node.args[1:]) not in ((), (1,), (1, 20)):
            return t.opaque(node, "softplus with other beta or threshold")
        return Piece(node.name, op, node.args[0].name, hint=leaf or op)
    return f


def _pow(t, node, leaf):
    if node.args[1] == 2:
        return Piece(node.name, "square", node.args[0].name, hint="sq")
    return _binary("**")(t, node, leaf)


def _real(v) -> str:
    """A number as a keyword's value: `0.2`, `(-0.5)`, `inf`."""
    text = {float("inf"): "inf", float("-inf"): "-inf"}.get(float(v)) or repr(float(v))
    return f"({text})" if text.startswith("-") else text


def _keywords(op, *names_defaults, hint=None):
    """An operation whose ATen arguments after the tensor are the language's keywords, in
    order (`leaky_relu negative_slope=0.2`, `elu alpha=0.5`); a default is left out."""
    def f(t, node, leaf):
        words = [op]
        for i, (name, default) in enumerate(names_defaults):
            v = arg(node, i + 1, name, default)
            if hasattr(v, "meta") or isinstance(v, bool):
                return t.opaque(node, f"a {op} with a tensor or boolean {name}")
            if name in ("scale", "input_scale"):          # aten.elu's, which F.elu leaves at 1
                if v != 1:
                    return t.opaque(node, f"an elu with {name}={v}")
                continue
            if v is not None and float(v) != float(default):
                words.append(f"{name}={_real(v)}")
        return Piece(node.name, " ".join(words), node.args[0].name, hint=hint or leaf or op)
    return f


def _glu(t, node, leaf):
    """F.glu halves an axis: `glu A`, with the assumption that a named axis is even."""
    x = val(node.args[0])
    d = arg(node, 1, "dim", -1)
    whole = t.size(x.shape[d])
    if not whole.isdigit():
        t.sizes.assumes.append(f"{whole if whole.isidentifier() else f'({whole})'} % 2 == 0")
    return Piece(node.name, f"glu {d - x.dim() if d == x.dim() - 1 else d}", node.args[0].name, hint="glu")


def _round(t, node, leaf):
    decimals = node.kwargs.get("decimals", 0)
    text = "round" + (f" decimals={int(decimals)}" if decimals else "")
    return Piece(node.name, text, node.args[0].name, hint="round")


def _hardtanh(t, node, leaf):
    """F.hardtanh (nn.ReLU6 is hardtanh(0, 6)): `relu6`, else `clamp min=.. max=..`."""
    lo, hi = arg(node, 1, "min_val", -1.0), arg(node, 2, "max_val", 1.0)
    if float(lo) == 0 and float(hi) == 6:
        return Piece(node.name, "relu6", node.args[0].name, hint=leaf or "relu6")
    return Piece(node.name, f"clamp min={_real(lo)} max={_real(hi)}", node.args[0].name, hint=leaf or "clamped")


def _nan_to_num(t, node, leaf):
    words = ["nan_to_num"]
    for i, name in enumerate(("nan", "posinf", "neginf")):
        v = arg(node, i + 1, name, None)
        if v is not None and (name != "nan" or float(v) != 0):
            words.append(f"{name}={_real(v)}")
    return Piece(node.name, " ".join(words), node.args[0].name, hint="finite")


def _logical(t, node, leaf):
    """torch.logical_and / or / xor: the piped tensor and another, a bool tensor."""
    a, b = node.args[0], node.args[1]
    op = target_name(node).split(".")[1]
    if not (hasattr(b, "meta") and is_tensor(b)):
        return t.opaque(node, f"a {op} with a number")
    return Piece(node.name, f"{op} {tok(b.name)}", a.name, refs=[b.name],
                 hint={"and": "both", "or": "either", "xor": "one_of"}[op[8:]])


def _bitwise_not(t, node, leaf):
    if dtype_word(val(node.args[0])) != "bool":
        return t.opaque(node, "a bitwise not of whole numbers")
    return Piece(node.name, "logical_not", node.args[0].name, hint=leaf or "logical_not")


def _dropout(t, node, leaf):
    p = float(node.args[1])
    if p == 0:
        return None
    return Piece(node.name, f"dropout {num_text(p)}", node.args[0].name, hint=leaf or "drop")


def _identity(t, node, leaf):
    return None


def _to(t, node, leaf):
    x, v = val(node.args[0]), val(node)
    if x.dtype == v.dtype:
        return None
    if v.dtype in DTYPES:
        return Piece(node.name, DTYPES[v.dtype], node.args[0].name, hint="cast")
    return t.opaque(node, f"a cast to {v.dtype}")


def _operand(t, x):
    """A tensor's token, a size's text or a number's; None for a boolean."""
    if hasattr(x, "meta"):
        if not is_tensor(x):
            return f"({t.sizes.text(val(x).node.expr)})"
        return tok(x.name)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    text = num_text(x)
    return f"({text})" if text.startswith("-") else text


def _binary(sign):
    def f(t, node, leaf):
        a, b = node.args[0], node.args[1]
        if node.kwargs.get("alpha", 1) != 1 or len(node.args) > 2:
            return t.opaque(node, "an add with alpha")
        if target_name(node).startswith("aten.rsub"):
            a, b = b, a
        ta, tb = _operand(t, a), _operand(t, b)
        if ta is None or tb is None:
            return t.opaque(node, "a boolean operand")
        if sign in COMPARE_HINTS and not (hasattr(a, "meta") and is_tensor(a)):
            return t.opaque(node, "a comparison with a number on the left")
        if sign == "*" and hasattr(a, "meta") and not hasattr(b, "meta"):
            if float(b) == 1 and val(node).dtype == val(a).dtype:
                return None                                 # eager attention's `scaling=1.0`
            scale = _scale_text(t, val(a), float(b))
            if not scale and target_name(a) in ("aten.matmul.default", "aten.bmm.default"):
                scale = _scale_text(t, val(a.args[0]), float(b))     # (q @ k^T) * (1/sqrt(Dh))
            if not scale:
                scale = _scale_before_product(t, node, float(b))     # q_proj(x) * head_dim**-0.5
            if scale:
                return Piece(node.name, f"scale {scale}", a.name, hint="scaled")
        hint = {"+": "res", "-": "diff", "*": "prod", "/": "quot", "**": "pw", "&": "both", "|": "either",
            "^": "one_of", **COMPARE_HINTS}[sign]
        return Piece(node.name, f"{ta} {sign} {tb}", refs=[x.name for x in (a, b) if hasattr(x, "meta")],
                     hint=hint)
    return f


LAYOUT = ("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.transpose.int",
          "aten.permute.default", "aten.contiguous.default", "aten.clone.default", "aten.unsqueeze.default")


def _scale_before_product(t, node, factor: float) -> str | None:
    """OPT's and BART's `q_proj(x) * self.scaling` before the heads are split: `1/sqrt(Dh)` when
    the scaled tensor reaches a product, through views alone, whose inner size is Dh (the
    head split on the way names Dh first, as it will when its own step is written)."""
    from .patterns import regroup
    x = node
    for _ in range(8):
        users = [u for u in x.users if u.op == "call_function"]
        if len(users) != 1:
            return None
        u = users[0]
        if target_name(u) in ("aten.matmul.default", "aten.bmm.default"):
            return _scale_text(t, val(u.args[0]), factor)
        if target_name(u) not in LAYOUT or u.args[0] is not x:
            return None
        if target_name(u) in LAYOUT[:3] and isinstance(val(u), torch.Tensor):
            regroup(t, val(x).shape, val(u).shape)
        x = u
    return None


def _scale_text(t, x, factor: float) -> str | None:
    """`1/sqrt(Dh)` when the factor is one over the square root of the last axis."""
    last = x.shape[-1] if x.dim() else None
    if isinstance(last, int) and last > 1 and math.isclose(factor, 1 / math.sqrt(last), rel_tol=1e-12):
        return f"1/sqrt({t.size(last)})"
    return None


def _masked_fill(t, node, leaf):
    """`mask M` for -inf (attention's masks), else `masked_fill M V`."""
    x, m, value = node.args[0], node.args[1], node.args[2]
    if dtype_word(val(m)) != "bool" or hasattr(value, "meta"):
        return t.opaque(node, "a masked_fill by a tensor value or with a mask that is not bool")
    if isinstance(value, float) and value == float("-inf"):
        return Piece(node.name, f"mask {tok(m.name)}", x.name, refs=[m.name], hint="masked")
    kind = dtype_word(val(x))
    if kind == "bool":
        if not isinstance(value, bool) and value not in (0, 1):
            return t.opaque(node, "a masked_fill of a bool tensor with a number")
        fill = "true" if value else "false"
    elif isinstance(value, bool):
        return t.opaque(node, "a masked_fill of numbers with a boolean")
    elif kind == "float":
        if math.isnan(value):
            return t.opaque(node, "a masked_fill with NaN")
        fill = _real(value)
    elif float(value).is_integer():
        fill = str(int(value))
        fill = f"({fill})" if fill.startswith("-") else fill
    else:
        return t.opaque(node, "a masked_fill of whole numbers with a fraction")
    return Piece(node.name, f"masked_fill {tok(m.name)} {fill}", x.name, refs=[m.name], hint="filled")


def _where(t, node, leaf):
    cond, a, b = node.args[0], node.args[1], node.args[2]
    if any(hasattr(x, "meta") and not is_tensor(x) for x in (a, b)):
        return t.opaque(node, "a where with a size operand")
    ta, tb = _operand(t, a), _operand(t, b)
    if ta is None or tb is None:
        return t.opaque(node, "a where with a boolean operand")
    refs = [cond.name] + [x.name for x in (a, b) if hasattr(x, "meta")]
    return Piece(node.name, f"where({tok(cond.name)}, {ta}, {tb})", refs=refs, hint="sel")


def _extremum(t, node, leaf):
    """torch.minimum / torch.maximum of two tensors."""
    a, b = node.args[0], node.args[1]
    if not (hasattr(a, "meta") and hasattr(b, "meta") and is_tensor(a) and is_tensor(b)):
        return t.opaque(node, "a minimum or maximum with a number")
    op = target_name(node).split(".")[1]
    return Piece(node.name, f"{op}({tok(a.name)}, {tok(b.name)})", refs=[a.name, b.name], hint=op[:3])


def _clamp(t, node, leaf):
    name = target_name(node)
    if name == "aten.clamp_min.default":
        bounds = [("min", node.args[1])]
    elif name == "aten.clamp_max.default":
        bounds = [("max", node.args[1])]
    else:
        bounds = [(n, arg(node, i, n)) for i, n in ((1, "min"), (2, "max"))]
    if any(v is not None and (hasattr(v, "meta") or isinstance(v, bool)) for _, v in bounds):
        return t.opaque(node, "a clamp by tensors")
    def bound(v) -> str:   # a float stays a float (it decides the dtype of an int input)
        text = repr(float(v)) if isinstance(v, float) else str(int(v))
        return f"({text})" if isinstance(v, float) and v < 0 else text
    text = " ".join(f"{n}={bound(v)}" for n, v in bounds if v is not None)
    return Piece(node.name, f"clamp {text}", node.args[0].name, hint="clamped")


def _arange(t, node, leaf):
    """`torch.arange(n)` (and start, end, step) computed in forward: the spec's `arange`."""
    name = target_name(node)
    if name == "aten.arange.default":
        bounds = [node.args[0]]
    else:
        bounds = list(node.args[:3] if name == "aten.arange.start_step" else node.args[:2])
    if any(isinstance(b, float) or isinstance(val(b) if hasattr(b, "meta") else b, torch.SymFloat) for b in bounds):
        return None, "an arange with fractional bounds"
    texts = [t.size(val(b) if hasattr(b, "meta") else b) for b in bounds]
    if len(texts) == 3 and texts[2] == "1":
        texts = texts[:2]
    if len(texts) == 2 and texts[0] == "0":
        texts = texts[1:]
    text = f"arange({', '.join(texts)})"
    dtype = val(node).dtype
    if dtype != torch.int64:
        if dtype not in DTYPES:
            return None, f"an arange of {dtype}"
        text += f" -> {DTYPES[dtype]}"
    return Piece(node.name, text, hint="pos"), None


def _filled(t, node, leaf):
    """`torch.full((T, T), torch.finfo(dtype).min)`, `torch.ones(T, T)`, `torch.zeros(..)` made in
    forward (the masks HF code builds): the spec's `full`, `ones`, `zeros`."""
    name = target_name(node).split(".")[1]
    sizes = node.args[0]
    if not isinstance(sizes, (list, tuple)):
        return None, f"a {name} of sizes it computes"
    dims = ", ".join(t.size(val(s) if hasattr(s, "meta") else s) for s in sizes)
    dtype = val(node).dtype
    if name == "full":
        value = node.args[1]
        if hasattr(value, "meta") or not isinstance(value, (bool, int, float)):
            return None, "a fill value computed in forward"
        if isinstance(value, bool):
            text, made = f"full([{dims}], {str(value).lower()})", torch.bool
        elif isinstance(value, float):
            text, made = f"full([{dims}], {'-inf' if value == float('-inf') else repr(value)})", torch.float32
        else:
            text, made = f"full([{dims}], {int(value)})", torch.int64
    else:
        text, made = f"{name}([{dims}])", torch.float32
    if dtype != made:
        if dtype not in DTYPES:
            return None, f"a {name} of {dtype}"
        text += f" -> {DTYPES[dtype]}"
    return Piece(node.name, text, hint="mask" if name == "full" else name), None


def _triangle(t, node, leaf):
    """tril / triu with the diagonal as a number or a size (`triu 1`)."""
    op = target_name(node).split(".")[1]
    k = arg(node, 1, "diagonal", 0)
    if hasattr(k, "meta"):
        k = val(k)
    text = op if k == 0 else f"{op} {t.size(k) if not isinstance(k, int) or k > 0 else k}"
    return Piece(node.name, text, node.args[0].name, hint=op)


def _made(fn):
    """A step that makes a tensor from sizes alone: it has no piped tensor, and what cannot
    be written stops the import (an opaque step needs a tensor to start from)."""
    def f(t, node, leaf):
        piece, why = fn(t, node, leaf)
        if piece is None:
            from .load import ImportFailure
            raise ImportFailure(f"`{target_name(node)}` makes a tensor from no tensor ({why}); the spec "
                                "cannot express it")
        return piece
    return f


def _outer(t, node, leaf):
    a, b = node.args[0], node.args[1]
    return Piece(node.name, f"outer({tok(a.name)}, {tok(b.name)})", refs=[a.name, b.name], hint="outer")


def _expand_as(t, node, leaf):
    return Piece(node.name, f"expand {t.shape(node)}", node.args[0].name, hint="e")


TABLE.update({
    **{f"aten.{op}.default": _unary(op) for op in UNARY},
    **{f"aten.{op}.default": _unary(name) for op, name in RENAMED.items()},
    "aten.round.decimals": _round,
    "aten.leaky_relu.default": _keywords("leaky_relu", ("negative_slope", 0.01)),
    "aten.elu.default": _keywords("elu", ("alpha", 1.0), ("scale", 1), ("input_scale", 1)),
    "aten.celu.default": _keywords("celu", ("alpha", 1.0)),
    "aten.glu.default": _glu,
    "aten.hardtanh.default": _hardtanh, "aten.nan_to_num.default": _nan_to_num,
    **{f"aten.logical_{op}.default": _logical for op in ("and", "or", "xor")},
    **{f"aten.{op}.{kind}": _binary(sign) for sign, ops in BITWISE.items() for op in ops
       for kind in ("Tensor", "Scalar")},
    "aten.bitwise_not.default": _bitwise_not,
    "aten.pow.Tensor_Scalar": _pow,
    "aten.dropout.default": _dropout, "aten.clone.default": _identity, "aten.alias.default": _identity,
    "aten.detach.default": _identity, "aten.lift_fresh_copy.default": _identity,
    "aten._to_copy.default": _to, "aten.to.dtype": _to, "aten.to.dtype_layout": _to, "aten.type_as.default": _to,
    "aten.add.Tensor": _binary("+"), "aten.sub.Tensor": _binary("-"), "aten.mul.Tensor": _binary("*"),
    "aten.div.Tensor": _binary("/"), "aten.rsub.Scalar": _binary("-"), "aten.add.Scalar": _binary("+"),
    "aten.mul.Scalar": _binary("*"), "aten.sub.Scalar": _binary("-"), "aten.div.Scalar": _binary("/"),
    "aten.pow.Tensor_Tensor": _binary("**"),
    **{f"aten.{op}.{kind}": _binary(sign) for sign, op in COMPARE_HINTS.items() for kind in ("Scalar", "Tensor")},
    "aten.masked_fill.Scalar": _masked_fill,
    "aten.where.self": _where, "aten.where.ScalarOther": _where, "aten.where.ScalarSelf": _where,
    "aten.where.Scalar": _where,
    "aten.minimum.default": _extremum, "aten.maximum.default": _extremum,
    "aten.clamp.default": _clamp, "aten.clamp_min.default": _clamp, "aten.clamp_max.default": _clamp,
    "aten.arange.default": _made(_arange), "aten.arange.start": _made(_arange),
    "aten.arange.start_step": _made(_arange),
    **{f"aten.{op}.default": _made(_filled) for op in FILLED},
    "aten.tril.default": _triangle, "aten.triu.default": _triangle,
    "aten.outer.default": _outer, "aten.expand_as.default": _expand_as,
})
