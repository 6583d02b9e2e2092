"""Import, one graph node: an ATen operation of the traced graph -> one spec step (a `Piece`).

A piece is either an operation on a piped tensor (`linear 3*D`, `transpose 1 2`) or an
expression that starts a binding (`a + b`, `q @ (k -> transpose -2 -1) -> softmax -1`).
Other tensors appear in its text as `\\x00node\\x00` tokens, replaced by binding names when
the spec is written. Sizes come from the shapes export recorded (`node.meta["val"]`), read
through `Sizes`; what has no faithful spec form becomes an `opaque` step with a comment.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import torch

from .graph import DTYPES, arg, dtype_word, is_tensor, target_name, tok, val
from .load import ImportFailure
from .sizes import Sizes

LN_EPS = 1e-5   # nn.LayerNorm's default (and GroupNorm's, BatchNorm's): written only when other


@dataclass
class Piece:
    key: str                      # the graph node (or pseudo node) whose value it gives
    text: str
    pipe: str | None = None       # the piped tensor's key; None: `text` is an expression
    refs: list = field(default_factory=list)
    outs: list | None = None      # several results (split): their keys
    weight: tuple | None = None   # ("linear", {"weight": source, "bias": source})
    hint: str = ""
    strong: bool = False          # a learned step: starts a binding of its own
    comment: str | None = None
    opaque: bool = False
    role: str | None = None
    block: tuple | None = None    # a block call: (block name, module path)


class Translator:
    """Turns nodes into pieces; knows the sizes and which parameters the graph uses how."""

    def __init__(self, sizes: Sizes, params: dict, shared: set):
        self.sizes = sizes
        self.params = params          # placeholder name -> (kind, fqn)
        self.shared = shared          # placeholder names used other than by one module step
        self.buffers: set | None = None   # the module's state_dict names (a batch norm's count)
        self.n = 0

    # -------------------------------------------------------------- helpers
    def shape(self, node_or_val, role=None) -> str:
        v = val(node_or_val) if hasattr(node_or_val, "meta") else node_or_val
        return "[" + ", ".join(self.sizes.text(s if not isinstance(s, int) else int(s), role)
                               for s in v.shape) + "]"

    def size(self, s, role=None) -> str:
        text = self.sizes.text(s.node.expr if isinstance(s, torch.SymInt) else s, role)
        simple = text.lstrip("-").isdigit() or not ("+" in text or "-" in text or " " in text)
        return text if simple else f"({text})"

    def source(self, node):
        """The parameter a weight argument reads: its fqn, or (fqn, k, n) for a row chunk."""
        if node is None:
            return None
        if node.op == "placeholder" and node.name in self.params:
            return self.params[node.name][1]
        if node.op == "call_function" and node.target is operator.getitem:
            parent, k = node.args
            if parent.op == "call_function" and target_name(parent) in ("aten.chunk.default",
                                                                       "aten.split.Tensor") \
                    and parent.args[0].op == "placeholder" and parent.args[0].name in self.params:
                total = val(parent.args[0]).shape[0]
                if target_name(parent) == "aten.chunk.default":
                    pieces = parent.args[1]
                else:
                    pieces = total // parent.args[1] if total % parent.args[1] == 0 else None
                if pieces and arg(parent, 2, "dim", 0) == 0 and total % pieces == 0:
                    return (self.params[parent.args[0].name][1], k, pieces)
        return False

    def owned(self, node) -> bool:
        """A weight argument this step alone uses (so a `linear`/`layernorm` step can own it)."""
        if node is None:
            return True
        if node.op == "placeholder":
            return node.name in self.params and node.name not in self.shared
        src = self.source(node)
        return bool(src) and isinstance(src, tuple)

    def opaque(self, node, why: str) -> Piece:
        """An operation the spec cannot express: kept with its shape, marked with a comment."""
        v = val(node)
        if not isinstance(v, torch.Tensor):
            raise ImportFailure(f"`{target_name(node)}` gives {type(v).__name__}, which the spec cannot hold")
        tensors = [a for a in _flat(node.args) + _flat(list(node.kwargs.values()))
                   if hasattr(a, "meta") and is_tensor(a)]
        if not tensors:
            raise ImportFailure(f"`{target_name(node)}` makes a tensor from no tensor; the spec cannot "
                                "express it")
        flag = {"int": " int", "bool": " bool"}.get(dtype_word(v), "")
        others = ", ".join(self.params[x.name][1] if x.name in self.params else x.name for x in tensors[1:])
        note = f"opaque: {target_name(node)} ({why})" + (f"; it also reads {others}" if others else "")
        hint = target_name(node).split(".")[1] if "." in target_name(node) else "opaque"
        return Piece(node.name, f'opaque "{target_name(node)}" {self.shape(node)}{flag}', tensors[0].name,
                     hint=hint, comment=note, opaque=True)

    # -------------------------------------------------------------- the table
    def piece(self, node, module_path: str) -> Piece | None:
        name = target_name(node)
        leaf = _leaf(module_path)
        fn = TABLE.get(name)
        if fn is None:
            return self.opaque(node, "no shapelang operation does this")
        return fn(self, node, leaf)


def _leaf(path: str) -> str:
    parts = [p for p in path.split(".") if p]
    if not parts:
        return ""
    if parts[-1].isdigit():
        return "_".join(parts[-2:]) if len(parts) > 1 else "m" + parts[-1]
    return parts[-1]


def _flat(xs) -> list:
    out = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out += _flat(x)
        else:
            out.append(x)
    return out


# ------------------------------------------------------------------ operations

def _same(t: Translator, node, leaf, text, hint=None):
    return Piece(node.name, text, node.args[0].name, hint=hint or text.split()[0])


def _view(t, node, leaf):
    # always `reshape`: PyTorch's own kernels leave tensors in layouts (sdpa's output, say)
    # where its `view` works but the spec's step-by-step layout would need a copy; the values
    # are the same, and codegen writes `.view` wherever the spec's layout allows it.
    # The sizes are the ones the code asked for (`S // 2` as S/2, with S even), else the result's.
    from .patterns import counts, regroup
    shape = None
    sizes = node.args[1] if target_name(node) in ("aten.view.default", "aten.reshape.default",
                                                  "aten._unsafe_view.default") else None
    asked = [val(s) if hasattr(s, "meta") else s for s in sizes] if isinstance(sizes, (list, tuple)) else []
    regroup(t, val(node.args[0]).shape, asked if asked and -1 not in asked else val(node).shape)
    if not isinstance(sizes, (list, tuple)) or -1 in sizes:
        shape = t.shape(node)
    else:
        t.sizes.exact = True
        try:
            numbers = counts(t, val(node.args[0]).shape, asked)
            shape = "[" + ", ".join(str(int(s)) if k in numbers else t.sizes.text(_size_value(s))
                                    for k, s in enumerate(sizes)) + "]"
        finally:
            t.sizes.exact = False
    return Piece(node.name, f"reshape {shape}", node.args[0].name, hint="r")


def _size_value(s):
    v = val(s) if hasattr(s, "meta") else s
    return v.node.expr if isinstance(v, torch.SymInt) else int(v)


def _transpose(t, node, leaf):
    rank = val(node).dim()
    a, b = (d + rank if d < 0 else d for d in node.args[1:3])
    if a == b:
        return None
    if {a, b} == {rank - 2, rank - 1} and rank > 2:
        return Piece(node.name, "transpose -2 -1", node.args[0].name, hint="t")
    return Piece(node.name, f"transpose {min(a, b)} {max(a, b)}", node.args[0].name, hint="t")


def _permute(t, node, leaf):
    rank = val(node).dim()
    dims = [d + rank if d < 0 else d for d in node.args[1]]
    return Piece(node.name, "permute " + " ".join(map(str, dims)), node.args[0].name, hint="p")


def _unsqueeze(t, node, leaf):
    rank = val(node).dim()
    d = node.args[1]
    return Piece(node.name, f"unsqueeze {d + rank if d < 0 else d}", node.args[0].name, hint="u")


def _squeeze(t, node, leaf):
    x = val(node.args[0])
    dims = node.args[1] if len(node.args) > 1 else [k for k, s in enumerate(x.shape) if s == 1]
    dims = [dims] if isinstance(dims, int) else list(dims)
    dims = [d + x.dim() if d < 0 else d for d in dims if x.shape[d] == 1]
    if not dims:
        return None
    if len(dims) > 1:
        return t.opaque(node, "squeezes several axes at once")
    return Piece(node.name, f"squeeze {dims[0]}", node.args[0].name, hint="sq")


def _expand(t, node, leaf):
    from .patterns import expand_counts
    expand_counts(t, node)
    return Piece(node.name, f"expand {t.shape(node)}", node.args[0].name, hint="e")


def _slice(t, node, leaf):
    x = val(node.args[0])
    d = arg(node, 1, "dim", 0)
    d = d + x.dim() if d < 0 else d
    start, end, step = arg(node, 2, "start", None), arg(node, 3, "end", None), arg(node, 4, "step", 1)
    size = x.shape[d]
    if not isinstance(step, int) or step < 1:
        return t.opaque(node, f"a slice with step {step}")
    start = 0 if start is None else _sym(start)
    end = size if end is None else _sym(end)
    if isinstance(end, int) and (isinstance(size, int) and end >= size or end >= 2**62):
        end = size
    if isinstance(start, int) and start < 0 or isinstance(end, int) and end < 0:
        return t.opaque(node, "a slice counted from the end")
    if start == 0 and _same_size(end, size) and step == 1:
        return None
    from .patterns import half
    first = half(t, start, size) or t.size(start)
    last = half(t, end, size) or t.size(end)
    every = f" step={step}" if step != 1 else ""
    return Piece(node.name, f"slice {d} {first} {last}{every}", node.args[0].name, hint="s")


def _number(t, x) -> str:
    """A shift, a padding or a count as written: a number stays a number (a shift of 2 is no
    size `Hkv` that happens to be 2); a size the module computed is written in named sizes."""
    x = _sym(x)
    return str(int(x)) if isinstance(x, int) else t.size(x)


def _flip(t, node, leaf):
    rank = val(node).dim()
    dims = [d + rank if d < 0 else d for d in node.args[1]]
    if not dims:
        return None
    return Piece(node.name, "flip " + " ".join(map(str, dims)), node.args[0].name, hint="flip")


def _roll(t, node, leaf):
    """torch.roll: shifts (numbers, or sizes) along axes; without axes, the flattened tensor."""
    rank = val(node).dim()
    shifts, dims = list(node.args[1]), list(arg(node, 2, "dims", []) or [])
    texts = [_number(t, s) for s in shifts]
    if not dims:
        if len(texts) != 1:
            return t.opaque(node, "a roll of the flattened tensor by several shifts")
        return Piece(node.name, f"roll {texts[0]}", node.args[0].name, hint="roll")
    dims = [d + rank if d < 0 else d for d in dims]
    if len(dims) == 1:
        return Piece(node.name, f"roll {texts[0]} {dims[0]}", node.args[0].name, hint="roll")
    return Piece(node.name, f"roll [{', '.join(texts)}] [{', '.join(map(str, dims))}]", node.args[0].name,
                 hint="roll")


def _narrow(t, node, leaf):
    x = val(node.args[0])
    d = node.args[1] + x.dim() if node.args[1] < 0 else node.args[1]
    start, length = _sym(node.args[2]), _sym(node.args[3])
    if isinstance(start, int) and start < 0:
        if not isinstance(x.shape[d], int):
            return t.opaque(node, "a narrow counted from the end of a dynamic axis")
        start += x.shape[d]
    first, count = _number(t, start), _number(t, length)
    whole = t.size(x.shape[d])
    if isinstance(start, int) and isinstance(length, int) and isinstance(x.shape[d], int) \
            and not whole.lstrip("-").isdigit():
        t.sizes.assumes.append(f"{whole} >= {start + length}")    # a named width, wide enough
    return Piece(node.name, f"narrow {d} {first} {count}", node.args[0].name, hint="nar")


def _pad(t, node, leaf):
    """F.pad with mode "constant" (aten.pad, aten.constant_pad_nd): `pad [L, R, ..] value=V`."""
    name = target_name(node)
    mode = "constant" if name == "aten.constant_pad_nd.default" else arg(node, 2, "mode", "constant")
    value = arg(node, 2 if name == "aten.constant_pad_nd.default" else 3, "value", None)
    if mode != "constant":
        return t.opaque(node, f'a pad with mode "{mode}"')
    if value is not None and (hasattr(value, "meta") or isinstance(value, bool) or math.isnan(value)):
        return t.opaque(node, "a pad by a tensor, a boolean or NaN")
    sizes = ", ".join(_number(t, p) for p in node.args[1])
    text = f"pad [{sizes}]"
    if value:
        fill = {float("inf"): "inf", float("-inf"): "-inf"}.get(value) or repr(float(value)) \
            if isinstance(value, float) else str(int(value))
        text += f" value={fill if not fill.startswith('-') else f'({fill})'}"
    return Piece(node.name, text, node.args[0].name, hint="pad")


def _tile(t, node, leaf):
    """torch.tile, and Tensor.repeat (the same where it names every axis)."""
    counts = [_number(t, c) for c in node.args[1]]
    if target_name(node) == "aten.repeat.default" and len(counts) < val(node.args[0]).dim():
        return t.opaque(node, "a repeat with fewer counts than axes")
    return Piece(node.name, f"tile [{', '.join(counts)}]", node.args[0].name, hint="tile")


def _flatten(t, node, leaf):
    rank = val(node.args[0]).dim()
    a, b = (arg(node, 1, "start_dim", 0), arg(node, 2, "end_dim", -1))
    a, b = (a + rank if a < 0 else a), (b + rank if b < 0 else b)
    if a >= b:
        return None
    text = f"flatten {a}" + ("" if b == rank - 1 else f" {b}")
    return Piece(node.name, text, node.args[0].name, hint="flat")


def _same_size(a, b) -> bool:
    """Whether two sizes (ints or SymInts of the traced graph) are the same."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return str(a) == str(b)


def _sym(x):
    if hasattr(x, "meta"):
        v = val(x)
        return v
    return x


def _select(t, node, leaf):
    x = val(node.args[0])
    d, i = node.args[1], _sym(node.args[2])
    d = d + x.dim() if d < 0 else d
    if isinstance(i, int) and i < 0:
        return Piece(node.name, f"select {d} {i}", node.args[0].name, hint="sel")
    return Piece(node.name, f"select {d} {t.size(i)}", node.args[0].name, hint="sel")


def _split(t, node, leaf):
    x = val(node.args[0])
    d = arg(node, 2, "dim", 0)
    d = d - x.dim() if d >= 0 and d == x.dim() - 1 else d
    users = {u.args[1]: u.name for u in node.users if u.target is operator.getitem}
    pieces = val(node)
    outs = [users.get(k, f"\x01{node.name}_{k}") for k in range(len(pieces))]
    name = target_name(node)
    if name == "aten.chunk.default":
        text = f"chunk {node.args[1]} {d}"
    elif name == "aten.split.Tensor":
        text = f"split {t.size(_sym(node.args[1]))} {d}"
    else:
        text = "split [" + ", ".join(t.sizes.text(_sym(s) if not isinstance(s, int) else s)
                                     for s in node.args[1]) + f"] {d}"
    return Piece(node.name, text, node.args[0].name, outs=outs, hint="part")


def _unbind(t, node, leaf):
    """`q, k, v = qkv.unbind(0)`: one `select` per piece used."""
    x = val(node.args[0])
    d = arg(node, 1, "dim", 0)
    d = d + x.dim() if d < 0 else d
    return [Piece(u.name, f"select {d} {u.args[1]}", node.args[0].name, hint="part", strong=True)
            for u in sorted(node.users, key=lambda u: u.args[1]) if u.target is operator.getitem]


def _softmax(t, node, leaf):
    rank = val(node).dim()
    d = node.args[1]
    d = d - rank if d >= 0 and d == rank - 1 else d
    op = "log_softmax" if "log" in target_name(node) else "softmax"
    # HF's `softmax(x, dim=-1, dtype=torch.float32).to(x.dtype)`: at the dtype the module was
    # traced in, a softmax in its own dtype, as a same-dtype cast vanishes; else `dtype=`
    dtype = node.kwargs.get("dtype") or (node.args[2] if len(node.args) > 2 and target_name(node) in (
        "aten.softmax.int", "aten.log_softmax.int") else None)
    if target_name(node).startswith("aten._") and len(node.args) > 2 and node.args[2]:
        dtype = torch.float32                       # _softmax's half_to_float
    text = f"{op} {d}"
    if isinstance(dtype, torch.dtype) and dtype != val(node.args[0]).dtype:
        if dtype not in DTYPES:
            return t.opaque(node, f"a softmax in {dtype}")
        text += f" dtype={DTYPES[dtype]}"
    return Piece(node.name, text, node.args[0].name, hint=op)


def _matmul(t, node, leaf):
    a, b = node.args[0], node.args[1]
    return Piece(node.name, f"{tok(a.name)} @ {tok(b.name)}", refs=[a.name, b.name], hint="mm")


def _cat(t, node, leaf):
    tensors, d = node.args[0], arg(node, 1, "dim", 0)
    if len(tensors) < 2:
        return None
    from .patterns import copies
    copies(t, [val(x).shape[d] for x in tensors], val(node).shape[d])
    return Piece(node.name, f"concat({d}, " + ", ".join(tok(x.name) for x in tensors) + ")",
                 refs=[x.name for x in tensors], hint="cat")


def _repeat_interleave(t, node, leaf):
    n, d = node.args[1], arg(node, 2, "dim", None)
    if not isinstance(n, int) or d is None:
        return t.opaque(node, "repeat_interleave with a tensor of counts or no axis")
    from .patterns import repeat_count
    return Piece(node.name, f"repeat_interleave {repeat_count(t, node, n)} {d}", node.args[0].name, hint="rep")


def _einsum(t, node, leaf):
    eq, ops = node.args[0], node.args[1]
    if len(ops) != 2:
        return t.opaque(node, "an einsum of other than two tensors")
    return Piece(node.name, f'einsum "{eq}" {tok(ops[1].name)}', ops[0].name, refs=[ops[1].name], hint="es")


TABLE = {
    "aten.view.default": _view, "aten.reshape.default": _view, "aten._unsafe_view.default": _view,
    "aten.unflatten.int": _view, "aten.flatten.using_ints": _flatten,
    "aten.transpose.int": _transpose, "aten.permute.default": _permute, "aten.t.default": _transpose,
    "aten.unsqueeze.default": _unsqueeze, "aten.squeeze.dim": _squeeze, "aten.squeeze.dims": _squeeze,
    "aten.squeeze.default": _squeeze, "aten.expand.default": _expand,
    "aten.contiguous.default": lambda t, n, leaf: Piece(n.name, "contiguous", n.args[0].name, hint="c"),
    "aten.slice.Tensor": _slice, "aten.select.int": _select,
    "aten.flip.default": _flip, "aten.roll.default": _roll, "aten.narrow.default": _narrow,
    "aten.pad.default": _pad, "aten.constant_pad_nd.default": _pad, "aten.tile.default": _tile,
    "aten.repeat.default": _tile,
    "aten.unbind.int": _unbind, "aten.split.Tensor": _split, "aten.split_with_sizes.default": _split, "aten.chunk.default": _split,
    "aten.softmax.int": _softmax, "aten._softmax.default": _softmax, "aten.log_softmax.int": _softmax,
    "aten._log_softmax.default": _softmax,
    "aten.matmul.default": _matmul, "aten.bmm.default": _matmul, "aten.mm.default": _matmul,
    "aten.cat.default": _cat, "aten.concat.default": _cat,
    "aten.einsum.default": _einsum,
    "aten.repeat_interleave.self_int": _repeat_interleave,
}
