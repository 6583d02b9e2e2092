"""Shape rules of tensors computed in the spec: tables and masks.

`arange`, `linspace`, `zeros`, `ones` and `full` make new tensors (written as calls:
`arange(S)`, `full([S, S], true)`); `meshgrid` spreads vectors over a grid; comparisons (`i < j`) give bool
tensors; `where`, `outer`, `triu`/`tril`, `sin`/`cos`, `pow`, `floor`/`ceil` and `clamp` compute with them.
dtypes follow PyTorch:
`arange` of whole numbers is int, of a decimal float; `full` takes the dtype of its value;
comparisons are bool; a result of two operands has the wider of their dtypes.
"""
from __future__ import annotations

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import Name, Neg, Num, ShapeLit
from .. import dtypes
from ..layout import TensorType, dense_like, fresh
from ..lazysympy import sympy as sp
from .args import Result, prod
from .combine import broadcast
from .rounding import floor_div

COMPARISONS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
def scalar_dtype(value) -> str:
    """A fill value's dtype: `true` is bool; a whole number or a size (`S - 2`, a Python int
    in PyTorch code) is int; anything else float."""
    if value is True or value is False:
        return "bool"
    return dtypes.scalar_dtype(value)


def fill_value(c, node):
    """A number a tensor is filled with: a scalar expression, `inf`/`-inf`, `true`/`false`."""
    sign, inner = (-1, node.operand) if isinstance(node, Neg) else (1, node)
    if isinstance(inner, Name) and inner.name in ("inf", "true", "false", "True", "False") \
            and inner.name not in c.prover.user and not c.is_tensor_name(inner.name):
        if inner.name == "inf":
            return sign * sp.oo
        if sign < 0:
            raise ShapeError("E110", "`-true` is not a value", span=node.span)
        return inner.name.lower() == "true"
    return c.scalar(node)


# ------------------------------------------------------------------ comparisons

def compare(c, a, b, texts, span, op: str):
    """`a < b` on tensors or a tensor and a number: a bool tensor of the broadcast shape."""
    ta, tb = isinstance(a, tuple), isinstance(b, tuple)
    if not (ta or tb):
        raise ShapeError("E112", f"`{texts[0]} {op} {texts[1]}` compares two sizes; a comparison "
                         "in a pipeline compares tensors", span=span,
                         help=f"to state a fact about sizes, write `assume {texts[0]} {op} {texts[1]}`")
    if ta and tb:
        shape = broadcast(c, [a[0].shape, b[0].shape], [f"`{texts[0]}`", f"`{texts[1]}`"], span)
        return Result((fresh(shape, "bool"),)), [a[1], b[1]]
    t, s = (a, b) if ta else (b, a)
    return Result((fresh(t[0].shape, "bool"),), detail={"scalar": s, "scalar_left": not ta}), [t[1]]


# ------------------------------------------------------------------ new tensors (calls)

def _size_arg(c, node, what):
    """A whole-number argument of arange (a decimal with no fraction counts, and makes
    the result float)."""
    if isinstance(node, Num) and isinstance(node.value, float) or \
            isinstance(node, Neg) and isinstance(node.operand, Num) and isinstance(node.operand.value, float):
        v = node.value if isinstance(node, Num) else -node.operand.value
        if not float(v).is_integer():
            raise ShapeError("E110", f"the {what} of `arange` must be a whole number here",
                             span=node.span, help="for evenly spaced fractions use `linspace(START, END, N)`")
        return sp.Integer(int(v)), True
    return c.dim(node), False


def arange(c, node):
    args = node.args
    if not 1 <= len(args) <= 3:
        raise ShapeError("E110", f"`arange` takes 1 to 3 arguments (end; start, end; start, end, step), "
                         f"got {len(args)}", span=node.span, help="write it as `arange(S)`")
    parts = [_size_arg(c, a, w) for a, w in zip(args, ("start", "end", "step") if len(args) > 1 else ("end",))]
    vals = [p[0] for p in parts]
    start, end = (sp.Integer(0), vals[0]) if len(vals) == 1 else (vals[0], vals[1])
    step = vals[2] if len(vals) == 3 else sp.S.One
    if step.is_Integer and step == 0:
        raise ShapeError("E110", "the step of `arange` cannot be 0", span=args[2].span)
    if not step.is_Integer or step < 0:
        c.need_positive(step, args[2].span, what=lambda: f"the step {step}")
    c.need_positive(end - start, node.span, what=lambda: f"the length of `arange` ({c.sz(end - start)})")
    # PyTorch: ceil((end - start) / step) elements
    n = end - start if step == 1 else \
        floor_div(c, end - start + step - 1, step, node.span, "the length of `arange`")
    dtype = "float" if any(p[1] for p in parts) else "int"
    return "arange", [], Result((fresh((n,), dtype),), detail={"start": start, "end": end, "step": step,
                                                               "length": n})


def linspace(c, node):
    if len(node.args) != 3:
        raise ShapeError("E110", "`linspace` takes 3 arguments: start, end and the number of points",
                         span=node.span, help="write it as `linspace(0, 1, S)`")
    start, end = c.scalar(node.args[0]), c.scalar(node.args[1])
    n = c.dim(node.args[2])
    c.need_positive(n, node.args[2].span)
    return "linspace", [], Result((fresh((n,), "float"),), detail={"start": start, "end": end, "length": n})


def _shape_arg(c, node, name):
    if not node.args or not isinstance(node.args[0], ShapeLit):
        raise ShapeError("E110", f"`{name}` takes a shape in brackets first, e.g. `{name}([S, S])`",
                         span=node.span)
    shape = []
    for d in node.args[0].dims:
        e = c.dim(d)
        c.need_whole(e, span=d.span, what=lambda e=e: f"this size is {e}")
        c.need_positive(e, d.span)
        shape.append(e)
    return shape


def filled(c, node):
    """zeros(SHAPE), ones(SHAPE), full(SHAPE, VALUE)."""
    name = node.func
    want = 2 if name == "full" else 1
    if len(node.args) != want:
        usage = "full([S, S], 0.5)" if name == "full" else f"{name}([S, D])"
        raise ShapeError("E110", f"`{name}` takes {want} argument{'s' if want > 1 else ''}, got "
                         f"{len(node.args)}", span=node.span, help=f"write it as `{usage}`")
    shape = _shape_arg(c, node, name)
    if name == "full":
        value = fill_value(c, node.args[1])
        dtype = scalar_dtype(value)
    else:
        value, dtype = sp.Integer(0 if name == "zeros" else 1), "float"
    return name, [], Result((fresh(shape, dtype),), detail={"shape": tuple(shape), "value": value,
                                                              "dtype": dtype})


def where_call(c, node):
    if len(node.args) == 1:   # torch.where(M): nonzero(M, as_tuple=True)
        from .indexing import data_dependent
        t, ref = c.tensor_value(node.args[0])
        if t.rank == 0:
            raise ShapeError("E110", "`where(M)` of a 0-d tensor: give it at least one axis", span=node.span)
        n = data_dependent(c, prod(t.shape), node.span)
        return "nonzero", [ref], Result(tuple(fresh((n,), "int") for _ in range(t.rank)),
                                        detail={"as_tuple": True, "where": True, "n": n})
    if len(node.args) != 3:
        raise ShapeError("E110", f"`where` takes 3 arguments (condition, a, b), or 1 (the condition: "
                         f"its indices), got {len(node.args)}", span=node.span,
                         help="write it as `where(M, x, 0.0)`, or `rows, cols: where(M)`")
    cond = c.tensor_value(node.args[0])
    return _where(c, cond, [_operand(c, a) for a in node.args[1:]], node.args, node.span)


def outer_call(c, node):
    if len(node.args) != 2:
        raise ShapeError("E110", "`outer` takes 2 vectors", span=node.span, help="write it as `outer(t, f)`")
    a, b = (c.tensor_value(x) for x in node.args)
    return "outer", [a[1], b[1]], _outer(c, a[0], b[0], node.span)


def _operand(c, node):
    """A tensor (type, ref) or a number."""
    inner = node.operand if isinstance(node, Neg) else node
    if isinstance(inner, Name) and inner.name in ("inf", "true", "false", "True", "False") \
            and inner.name not in c.prover.user and not c.is_tensor_name(inner.name):
        return fill_value(c, node)
    v = c.value(node)
    return v if isinstance(v, tuple) else fill_value(c, node)


def _where(c, cond, values, nodes, span):
    t, ref = cond
    if t.dtype != "bool":
        raise ShapeError("E112", f"the condition of `where` {c.show(t)} holds {t.dtype} values; "
                         "PyTorch needs a bool tensor", span=nodes[0].span,
                         help="compare it to make one, e.g. `m != 0`")
    tensors = [v for v in values if isinstance(v, tuple)]
    shape = broadcast(c, [t.shape] + [v[0].shape for v in tensors],
                      ["the condition"] + [f"value {k + 1}" for k, v in enumerate(values) if isinstance(v, tuple)],
                      span)
    dtype = dtypes.result_type([(v[0].dtype, _level(v[0])) if isinstance(v, tuple) else (scalar_dtype(v), 2)
                                for v in values])        # torch.result_type of the two values
    detail = {"values": tuple(None if isinstance(v, tuple) else v for v in values)}
    return "where", [ref] + [v[1] for v in tensors], Result((fresh(shape, dtype),), detail=detail)


def _outer(c, a, b, span):
    if a.rank != 1 or b.rank != 1:
        raise ShapeError("E110", f"`outer` takes two vectors (1-d), got {c.show(a)} and {c.show(b)}",
                         span=span, help="make them 1-d first, or use `a -> unsqueeze -1` times b")
    return Result((fresh((a.shape[0], b.shape[0]), dtypes.promote(a.dtype, b.dtype)),),
                  flops=a.shape[0] * b.shape[0])


# ------------------------------------------------------------------ minimum, maximum, clamp

_BOUND = {"minimum": "max", "maximum": "min"}   # the clamp keyword that does the same with a number


def _level(t) -> int:
    return 0 if t.rank else 1


def extremum_call(c, node):
    """minimum(A, B) / maximum(A, B); min(A, B) / max(A, B) of two tensors are the same."""
    name = {"min": "minimum", "max": "maximum"}.get(node.func, node.func)
    if len(node.args) != 2:
        raise ShapeError("E110", f"`{name}` takes 2 tensors, got {len(node.args)}", span=node.span,
                         help=f"write it as `{name}(a, b)`")
    values = [_operand(c, n) for n in node.args]
    res = _extremum(c, name, values, node.args, node.span, node.span)
    return name, [v[1] for v in values], res


def _extremum(c, name, values, nodes, span, whole=None):
    """`whole`: the span of the call, which a proved fix rewrites as a clamp."""
    for v, n in zip(values, nodes):
        if not isinstance(v, tuple):
            other = next((c.source_of(m) for w, m in zip(values, nodes) if isinstance(w, tuple)), "x")
            clamp_ = f"clamp {_BOUND[name]}={c.source_of(n)}"
            why = "bound it by the number with `clamp`"
            fix = (whole, f"({other} -> {clamp_})", why) if whole else (span, clamp_, why)
            raise ShapeError("E112", f"`{name}` compares two tensors element by element, and "
                             f"`{c.source_of(n)}` is a number: torch.{name} takes tensors only",
                             span=n.span, help=f"to bound a tensor by a number write "
                             f"`{other} -> {clamp_}`", fixes=(fix,))
    (a, _), (b, _) = values
    shape = broadcast(c, [a.shape, b.shape], [f"`{c.source_of(n)}`" for n in nodes], span)
    return Result((fresh(shape, dtypes.result_type([(a.dtype, _level(a)), (b.dtype, _level(b))])),))


def extremum(c, x, a):
    """`x -> minimum y`: the pipeline form."""
    a.count(1, usage=f"{a.op.name} y")
    other = _operand(c, a.pos[0])
    if isinstance(other, tuple):
        a.tensors.append(other[0])
    return _extremum(c, a.op.name, [(x, ""), other], (a.op, a.pos[0]), a.op.span)


def clamp(c, x, a):
    """`clamp MIN MAX`, `clamp min=0`, `clamp max=15`: numbers or tensors that broadcast."""
    a.count(0, 2, usage="clamp min=0 max=15")
    given = list(zip(("min", "max"), a.pos))
    for name in ("min", "max"):
        k = a.kw.get(name)
        if k is not None:
            if any(g[0] == name for g in given):
                raise a.fail(f"`clamp` gets `{name}` twice", span=k.span)
            given.append((name, k.value))
    if not given:
        raise a.fail("`clamp` needs a lower or an upper bound (or both)",
                     help="write it as `clamp min=0`, `clamp max=15` or `clamp 0 15`")
    bounds, shapes, operands = [], [x.shape], [(x.dtype, _level(x))]
    for name, node in given:
        v = _operand(c, node)
        if isinstance(v, tuple):
            shapes.append(v[0].shape)
            operands.append((v[0].dtype, _level(v[0])))
            a.tensors.append(v[0])
            bounds.append((name, None))
        else:
            operands.append((scalar_dtype(v), 2))
            bounds.append((name, v))
    shape = broadcast(c, shapes, ["the input"] + [f"`{n}=`" for n, _ in given], a.op.span) \
        if len(shapes) > 1 else x.shape
    dtype = dtypes.result_type(operands)
    if dtype == "bool":
        raise dtypes.refuse("`clamp` of bool values: PyTorch does not clamp bools", a.op.span,
                            "cast it first: `-> to int`", (("input", "int"),))
    for (name, v), (_, node) in zip(bounds, given):
        if v is True or v is False:
            raise a.fail(f"the {name} of `clamp` is a number, not `{str(v).lower()}`", span=node.span)
    return Result((fresh(shape, dtype),), detail={"bounds": tuple(bounds)})


def meshgrid_types(c, parts, span) -> Result:
    """torch.meshgrid(.., indexing="ij"): vectors [N1], [N2], .. give as many tensors of
    [N1, N2, ..], the k-th varying along axis k (expanded views: stride 0 on the other axes)."""
    for t in parts:
        if t.rank > 1:
            raise ShapeError("E110", f"`meshgrid` takes vectors (1-d), got {c.show(t)}", span=span,
                             help="flatten it first: `x -> flatten 0`")
    for t in parts[1:]:
        if t.dtype != parts[0].dtype:
            raise dtypes.refuse(f"`meshgrid` of {dtypes.show(parts[0].dtype)} and {dtypes.show(t.dtype)} "
                                "vectors: PyTorch needs one dtype", span, "cast one first, e.g. `-> to float`")
    shape = tuple(t.shape[0] if t.rank else sp.S.One for t in parts)
    outs = tuple(TensorType(shape, tuple(t.strides[0] if j == k and t.rank else sp.S.Zero
                                         for j in range(len(parts))), t.dtype)
                 for k, t in enumerate(parts))
    return Result(outs, detail={"count": len(parts)})


def meshgrid_call(c, node):
    if not node.args:
        raise ShapeError("E110", "`meshgrid` takes one or more vectors", span=node.span,
                         help="write it as `gy, gx: meshgrid(ys, xs)`")
    vals = [c.tensor_value(a) for a in node.args]
    return "meshgrid", [v[1] for v in vals], meshgrid_types(c, [v[0] for v in vals], node.span)


CALLS = {"arange": arange, "linspace": linspace, "zeros": filled, "ones": filled, "full": filled,
         "where": where_call, "outer": outer_call, "minimum": extremum_call, "maximum": extremum_call,
         "meshgrid": meshgrid_call}


# ------------------------------------------------------------------ pipeline forms

def call_only(c, x, a):
    usage = {"arange": "arange(S)", "linspace": "linspace(0, 1, S)", "zeros": "zeros([S, D])",
             "ones": "ones([S, D])", "full": "full([S, S], true)", "eye": "eye(S)"}[a.op.name]
    raise a.fail(f"`{a.op.name}` makes a new tensor and takes none: write it as a call, `{usage}`")


def where(c, x, a):
    a.count(2, usage="where A B")
    values = [_operand(c, n) for n in a.pos]
    _op, _refs, res = _where(c, (x, ""), values, (a.op,) + tuple(a.pos), a.op.span)
    return res


def outer(c, x, a):
    a.count(1, usage="outer B")
    return _outer(c, x, a.tensor_at(0), a.op.span)


def meshgrid(c, x, a):
    return meshgrid_types(c, [x] + [a.tensor_at(k) for k in range(len(a.pos))], a.op.span)


def triangle(c, x, a):
    """triu / tril: keeps the upper (lower) triangle of the last two axes from diagonal K."""
    a.count(0, 1, usage=f"{a.op.name} 1")
    if x.rank < 2:
        raise a.fail(f"`{a.op.name}` needs at least 2 dims, got {c.show(x)}")
    k = c.dim(a.pos[0]) if a.pos else sp.Integer(0)
    return Result((fresh(x.shape, x.dtype),), detail={"diagonal": k})


def trig(c, x, a):
    a.count(0, usage=a.op.name)
    return Result((fresh(x.shape, x.dtype),))     # its dtype: the entry's rule (to_float)


def power(c, x, a):
    a.count(1, usage="pow 2")
    e = c.scalar(a.pos[0])
    return Result((fresh(x.shape, x.dtype),), detail={"scalar": e, "scalar_left": False})


# ------------------------------------------------------------------ rounding

def rounding(c, x, a):
    """floor / ceil: float values rounded (whole numbers stay as they are, int stays int)."""
    a.count(0, usage=a.op.name)
    if x.dtype == "bool":
        raise dtypes.refuse(f"`{a.op.name}` of a bool tensor {c.show(x)}: PyTorch refuses it",
                            a.op.span, "cast it first, e.g. `(x -> to float)`")
    return Result((dense_like(x, c.prover.canon, c.same),))

