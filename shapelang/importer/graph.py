"""Import, reading the traced graph: a node's value, its operation's name, its arguments.

Shared by the stages that translate nodes (translate.py and the modules that register
steps beside it) and the ones that name sizes from what the graph does (patterns.py).
"""
from __future__ import annotations

import operator

import torch

# a dtype -> the spec's word for a cast to it (`-> half`), also a softmax's `dtype=`
DTYPES = {torch.float32: "float", torch.float16: "half", torch.bfloat16: "bfloat16", torch.float64: "double",
          torch.int64: "long", torch.bool: "bool"}


def tok(key: str) -> str:
    return f"\x00{key}\x00"


def val(node):
    return node.meta.get("val") if hasattr(node, "meta") else None


def is_tensor(node) -> bool:
    return isinstance(val(node), torch.Tensor)


def dtype_word(t: torch.Tensor) -> str:
    if t.dtype == torch.bool:
        return "bool"
    if not t.dtype.is_floating_point and not t.dtype.is_complex:
        return "int"
    return "float"


def target_name(node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    name = getattr(t, "__name__", str(t))
    overload = getattr(t, "_overloadname", None)
    schema = getattr(t, "_schema", None)
    if schema is not None:
        base = schema.name.split("::")[-1]
        return f"aten.{base}.{overload or 'default'}"
    return getattr(t, "__module__", "") + "." + name if name in dir(operator) else name


def num_text(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


def arg(node, i: int, name: str, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)
