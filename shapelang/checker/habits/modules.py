"""PyTorch modules written where an operation goes: `X -> nn.Linear(D, 4*D)` and
`nn.LayerNorm(D)(x)` read as the shapelang operation (`linear 4*D`, `layernorm`).

A module's constructor names the sizes of its weights; shapelang names the operation and
reads the input sizes off the tensor, so the in-features (`in_features`, `normalized_shape`,
`in_channels`) are dropped. Only what the operation takes is kept: its out size, and the
keywords the operation honours (`bias=False` is `bias=false`). Anything else: unknown.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Module:
    op: str                     # the shapelang operation
    params: tuple[str, ...]     # the constructor's positional parameters, in order
    kept: tuple[str, ...]       # those written after the operation's name, in this order
    keywords: tuple[str, ...] = ()               # keywords the operation takes as `name=value`
    defaults: tuple[tuple[str, object], ...] = ()  # PyTorch's defaults, left out when given


_CONV = Module("", ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
                    "groups", "bias"), ("out_channels", "kernel_size"),
               ("stride", "padding", "dilation", "groups", "bias"),
               (("stride", 1), ("padding", 0), ("dilation", 1), ("groups", 1), ("bias", True)))

NN: dict[str, Module] = {
    "Linear": Module("linear", ("in_features", "out_features", "bias"), ("out_features",), ("bias",),
                     (("bias", True),)),
    "LayerNorm": Module("layernorm", ("normalized_shape", "eps", "elementwise_affine", "bias"), (),
                        ("eps", "elementwise_affine", "bias"), (("elementwise_affine", True), ("bias", True))),
    "RMSNorm": Module("rmsnorm", ("normalized_shape", "eps", "elementwise_affine"), (),
                      ("eps", "elementwise_affine"), (("elementwise_affine", True), ("eps", None))),
    "Embedding": Module("embed", ("num_embeddings", "embedding_dim", "padding_idx"),
                        ("num_embeddings", "embedding_dim"), ("padding_idx",), (("padding_idx", None),)),
    "Dropout": Module("dropout", ("p",), ("p",), (), ()),
    "Softmax": Module("softmax", ("dim",), ("dim",)),
    "LogSoftmax": Module("log_softmax", ("dim",), ("dim",)),
    "GELU": Module("gelu", ("approximate",), (), ("approximate",), (("approximate", "none"),)),
    "Conv1d": Module("conv1d", _CONV.params, _CONV.kept, _CONV.keywords, _CONV.defaults),
    "Conv2d": Module("conv2d", _CONV.params, _CONV.kept, _CONV.keywords, _CONV.defaults),
    **{name: Module(name.lower(), (), ()) for name in ("ReLU", "SiLU", "Tanh", "Sigmoid", "Softplus")},
}
DEFAULT_P = 0.5   # nn.Dropout()
PREFIXES = ("nn.", "torch.nn.")


class Unknown(Exception):
    """Not a module this module translates."""


def module_name(func) -> str | None:
    """`Linear` for `nn.Linear` or `torch.nn.Linear`; None otherwise."""
    text = ast.unparse(func) if isinstance(func, ast.Attribute) else ""
    for prefix in PREFIXES:
        if text.startswith(prefix) and text[len(prefix):] in NN:
            return text[len(prefix):]
    return None


def module_op(call: ast.Call, arg, plain) -> str:
    """The shapelang operation of the module that `call` constructs. `arg(node)` writes an
    operation argument, `plain(node)` a constant (a quoted string, `true`)."""
    name = module_name(call.func)
    if name is None:
        raise Unknown("module")
    m = NN[name]
    if len(call.args) > len(m.params):
        raise Unknown(name)
    given = dict(zip(m.params, call.args))
    for k in call.keywords:
        if k.arg not in m.params or k.arg in given:
            raise Unknown(f"{name}({k.arg}=)")
        given[k.arg] = k.value
    if name == "LayerNorm" and isinstance(given.get("normalized_shape"), (ast.List, ast.Tuple)) \
            and len(given["normalized_shape"].elts) != 1:
        raise Unknown("LayerNorm over several axes")
    out = [m.op]
    for p in m.kept:
        if p in given:
            out.append(arg(given[p]))
        elif name == "Dropout":
            out.append(str(DEFAULT_P))
        else:
            raise Unknown(f"{name} needs {p}")
    defaults = dict(m.defaults)
    for p, node in given.items():
        if p in m.kept or p == m.params[0] and p not in m.keywords:
            continue
        if p not in m.keywords:
            raise Unknown(f"{name}({p}=)")
        if isinstance(node, ast.Constant) and p in defaults and node.value == defaults[p]:
            continue
        if isinstance(node, ast.Constant) and (isinstance(node.value, (bool, str)) or node.value is None):
            out.append(f"{p}={plain(node)}")
        else:
            out.append(f"{p}={arg(node)}")
    return " ".join(out)
