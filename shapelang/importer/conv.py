"""Import, convolutions: `aten.conv1d` / `aten.conv2d` (nn.Conv1d, nn.Conv2d, F.conv1d with
the module's own weights) -> `conv1d OUT K` / `conv2d OUT K` with `stride=`, `padding=`,
`dilation=`, `groups=` and `bias=false` when they are not the defaults.

The output channels are named like a linear layer's width (the model width `D` when
nothing names them); kernel sizes, strides and paddings are numbers unless the module's
configuration names them (`patch_size` -> `P`). The length PyTorch computes,
floor((L + 2p - d(K - 1) - 1) / s) + 1, is the checker's too; where it rounds down for
some lengths (Whisper's stride 2 over an odd number of frames) the module rounds the same
way, and the import acknowledges the checker's warning on that line (see `allow_rounding`).
"""
from __future__ import annotations

from .graph import arg, target_name, val
from .patterns import fixed
from .translate import TABLE, Piece


def _sizes(t, values, n: int, named: bool = True) -> str:
    """`3` for one size (or the same size on every axis), else `[3, 2]`; named (`P`) only
    over dynamic lengths: over fixed ones the checker computes the lengths from numbers."""
    values = list(values) if isinstance(values, (list, tuple)) else [values] * n
    texts = [t.sizes.name_int(int(v), "conv") if named else str(int(v)) for v in values]
    return texts[0] if len(set(texts)) == 1 else "[" + ", ".join(texts) + "]"


def _conv(t, node, leaf):
    n = 1 if "conv1d" in target_name(node) else 2
    x, w, b = node.args[0], node.args[1], arg(node, 2, "bias", None)
    if not (t.owned(w) and t.owned(b) and t.source(w) and (b is None or t.source(b))):
        return t.opaque(node, "a convolution whose weights other steps read too")
    if fixed(val(x).shape[1 if val(x).dim() == n + 2 else 0]) is None:
        return t.opaque(node, "a convolution over a dynamic number of channels")
    weight = val(w)
    named = any(fixed(size) is None for size in val(x).shape[-n:])
    words = [f"conv{n}d", t.size(weight.shape[0], "model"), _sizes(t, weight.shape[2:], n, named)]
    defaults = {"stride": 1, "padding": 0, "dilation": 1}
    for i, key in enumerate(("stride", "padding", "dilation")):
        value = arg(node, 3 + i, key, defaults[key])
        if isinstance(value, str):                    # conv1d.padding: "same" or "valid"
            if value != "valid":
                words.append(f'padding="{value}"')
            continue
        values = list(value) if isinstance(value, (list, tuple)) else [value] * n
        if key == "stride":
            for size, step in zip(val(x).shape[-n:], values):
                if fixed(size) is None and step > 1:
                    t.sizes.divisible(size.node.expr, step, t.sizes.name_int(step, "conv"))
        if any(v != defaults[key] for v in values):
            words.append(f"{key}={_sizes(t, values, n, named)}")
    groups = arg(node, 6, "groups", 1)
    if groups != 1:
        words.append(f"groups={t.sizes.name_int(int(groups), 'conv')}")
    if b is None:
        words.append("bias=false")
    tensors = {"weight": t.source(w)} | ({"bias": t.source(b)} if b is not None else {})
    return Piece(node.name, " ".join(words), x.name, weight=(f"conv{n}d", tensors), hint=leaf or "conv",
                 strong=True)


def allow_rounding(text: str, path: str) -> str:
    """The lines where the checker warns that a convolution's length is rounded down (W202):
    the module computes that length the same way, and its later shapes are written with the
    same rounding, so the warning is acknowledged on its line (`# allow W202: ...`)."""
    from ..checker.checker import check_text

    spec = check_text(text, path)
    lines = text.split("\n")
    marked = set()
    for d in spec.diagnostics:
        k = d.span.line - 1
        if d.code == "W202" and 0 <= k < len(lines) and k not in marked and "conv" in lines[k] \
                and "#" not in lines[k]:
            lines[k] += "  # allow W202: the module rounds this length down too"
            marked.add(k)
    return "\n".join(lines)


TABLE.update({
    "aten.conv1d.default": _conv, "aten.conv2d.default": _conv,
    "aten.conv1d.padding": _conv, "aten.conv2d.padding": _conv,
})
