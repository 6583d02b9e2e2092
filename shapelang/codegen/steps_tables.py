"""Codegen, the emitters of tensors computed in the module: tables and masks
(`torch.arange`, `torch.full`, comparisons, `torch.where`, `torch.outer`, `triu`/`tril`,
`sin`/`cos`, `floor`/`ceil`, `clamp`, `torch.meshgrid`, `torch.stack`). A new tensor is made on the
device of the module's first input, so the module computes its tables wherever it runs. Each
registers with `@emitter` when this module is imported (shapelang.codegen.emit imports it)."""
from __future__ import annotations

import sympy as sp

from ..checker import dtypes
from .registry import emitter
from .steps import Op, _only

COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
TORCH_DTYPES = {"float": "torch.float32", "int": "torch.long", "bool": "torch.bool"}


def _device(o: Op) -> str:
    """On the device of the first input; in `__init__` (a buffer, tables.py) on the default
    one: the buffer moves with the module."""
    if o.em.sizes.in_init or not o.unit.arg_names:
        return ""
    return f", device={o.unit.arg_names[0]}.device"


def _torch(dtype: str) -> str:
    """`torch.long` for int, as PyTorch code writes it; `torch.bfloat16` for the others."""
    return TORCH_DTYPES.get(dtype) or "torch." + dtypes.torch_name(dtype)


def _value(o: Op, v) -> str:
    """A fill value or scalar operand as Python."""
    if v is True or v is False:
        return repr(v)
    v = sp.sympify(v)
    if v in (sp.oo, -sp.oo):
        return 'float("inf")' if v == sp.oo else 'float("-inf")'
    return o.local(v, real=True)


@emitter("arange")
def _arange(o: Op) -> list[str]:
    d = o.d
    float_ = o.s.out.dtype == "float"
    given = d.get("dtype")
    args = [o.local(d["start"]), o.local(d["end"])] if d["start"] != 0 or d["step"] != 1 \
        else [o.local(d["end"])]
    if d["step"] != 1:
        args.append(o.local(d["step"]))
    dtype = ", dtype=torch.float32" if float_ else ""
    if given is not None and given != "float":
        dtype = f", dtype={_torch(given)}"
    return [f"{o.out} = torch.arange({', '.join(args)}{dtype}{_device(o)})"]


@emitter("linspace")
def _linspace(o: Op) -> list[str]:
    d = o.d
    ends = f"{_value(o, d['start'])}, {_value(o, d['end'])}"
    dtype = f", dtype={_torch(d['dtype'])}" if d.get("dtype") not in (None, "float") else ""
    return [f"{o.out} = torch.linspace({ends}, {o.local(d['length'])}{dtype}{_device(o)})"]


@emitter("full")
def _full(o: Op) -> list[str]:
    d = o.d
    shape = ", ".join(o.local(x) for x in d["shape"])
    if len(d["shape"]) == 1:
        shape += ","
    value = _value(o, d["value"])
    if d["dtype"] == "float" and sp.sympify(d["value"]).is_Integer:
        value = f"{value}.0"
    return [f"{o.out} = torch.full(({shape}), {value}, dtype={_torch(d['dtype'])}{_device(o)})"]


@emitter(*COMPARE)
def _compare(o: Op) -> list[str]:
    sign = COMPARE[o.s.op]
    if len(o.args) == 2:
        return [f"{o.out} = {o.args[0]} {sign} {o.args[1]}"]
    scalar = _value(o, o.d["scalar"])
    if o.d.get("scalar_left"):
        return [f"{o.out} = {scalar} {sign} {o.x}"]
    return [f"{o.out} = {o.x} {sign} {scalar}"]


@emitter("where")
def _where(o: Op) -> list[str]:
    tensors = iter(o.args[1:])
    values = [next(tensors) if v is None else _value(o, v) for v in o.d["values"]]
    if all(v is not None for v in o.d["values"]) and o.s.out.dtype == "float":
        values = [f"{x}.0" if x.lstrip("-").isdigit() else x for x in values]
    return [f"{o.out} = torch.where({o.x}, {', '.join(values)})"]


@emitter("triangle")
def _triangle(o: Op) -> list[str]:
    k = o.d["diagonal"]
    arg = "" if k == 0 else (f"diagonal={o.local(k)}")
    return [f"{o.out} = {o.x}.{o.s.op}({arg})"]


@emitter("clamp")
def _clamp(o: Op) -> list[str]:
    tensors = iter(o.args[1:])
    bounds = ", ".join(f"{name}={next(tensors) if v is None else _value(o, v)}" for name, v in o.d["bounds"])
    return [f"{o.out} = torch.clamp({o.x}, {bounds})"]


@emitter("minimum")
def _minimum(o: Op) -> list[str]:
    return [f"{o.out} = torch.minimum({o.args[0]}, {o.args[1]})"]


@emitter("maximum")
def _maximum(o: Op) -> list[str]:
    return [f"{o.out} = torch.maximum({o.args[0]}, {o.args[1]})"]


@emitter("outer")
def _outer(o: Op) -> list[str]:
    return [f"{o.out} = torch.outer({o.args[0]}, {o.args[1]})"]


@emitter("meshgrid")
def _meshgrid(o: Op) -> list[str]:
    return [f'{o.out} = torch.meshgrid({", ".join(o.args)}, indexing="ij"){_only(o)}']


@emitter("stack_tensors")
def _stack_tensors(o: Op) -> list[str]:
    return [f"{o.out} = torch.stack([{', '.join(o.args)}], dim={o.axis(o.d['dim'], o.s.out.rank)})"]


