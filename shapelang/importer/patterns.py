"""Import, sizes named from what the graph does with them: a step whose role derives a size.

Sizes are named by value (`48` is `D` when `n_embd` is 48), but a size that no attribute
names is named only where the graph derives it: a reshape that cuts the width D into H
heads makes the other factor `Dh = D / H` (and a reshape that merges H heads of that
size back into D reads it so); repeating Hkv key heads up to H heads (`repeat_interleave`,
or GQA's `x[:, :, None].expand(..).reshape(..)`) makes the count `G = H / Hkv`; a slice
to the first or second half of an axis (rotary embedding's `rotate_half`) is `Dh/2`. A
size that merely equals D/H somewhere else stays a number, or gets a name of its own.
"""
from __future__ import annotations

import itertools

import torch

from .graph import target_name, val


def fixed(size) -> int | None:
    """A size as an int when export fixed it (an int, or a SymInt of a constant)."""
    if isinstance(size, int):
        return size
    expr = getattr(getattr(size, "node", None), "expr", None)
    if expr is not None and getattr(expr, "is_number", False):
        return int(expr)
    return None


def regroup(t, before, after) -> None:
    """A reshape from `before` to `after` (shapes): a factor of a split or merged axis whose
    other factor and whole have names is named as their quotient; an axis that takes k
    copies of an input axis's named size (`x.reshape(B, S // 2, 2 * D)`) is `2*D`."""
    named_in = [(v, t.sizes.name_int(v)) for v in (fixed(s) for s in before) if v and v > 1]
    merged = _runs([fixed(s) for s in before])
    for a in (fixed(s) for s in after):
        if a is None or a <= 1 or a in [v for v, _ in named_in] or not t.sizes.name_int(a).isdigit():
            continue
        if a in merged:      # a flatten of whole axes (torchvision's n_h * n_w patches): a number
            continue
        for v, name in named_in:
            if name.isidentifier() and a % v == 0 and 2 <= a // v <= 16:
                t.sizes._remember(a, f"{a // v}*{name}", set())
                break
    for whole_side, parts_side in ((before, after), (after, before)):
        wholes = [fixed(s) for s in whole_side]
        parts = [fixed(s) for s in parts_side]
        for k in range(len(parts) - 1):
            a, b = parts[k], parts[k + 1]
            if a is None or b is None or a <= 1 or b <= 1:
                continue
            # the pair makes a whole axis, or a named part of one (`3*D` cut into 3, H, Dh)
            if a * b not in wholes and not (any(w and w % (a * b) == 0 for w in wholes)
                                            and not t.sizes.name_int(a * b).isdigit()):
                continue
            if t.sizes.ratio(a * b, a) is None and t.sizes.ratio(a * b, b) is None:
                _per_head(t, a, b)


def _per_head(t, heads: int, piece: int) -> None:
    """GPT-NeoX's `qkv.view(B, S, -1, 3 * head_size)` on a `3*D` width: the heads axis is H, so
    the other is `3*Dh` (the 3 of q, k, v per head), read from the whole's `k*D`."""
    whole = t.sizes.memo.get(heads * piece, "")
    k, star, width = whole.partition("*")
    if not (star and k.isdigit() and width.isidentifier()) or piece % int(k):
        return
    value = t.sizes.values.get(width)
    part = t.sizes.ratio(value, heads) if value else None
    if part and part.isidentifier() and t.sizes.name_int(piece).isdigit():
        t.sizes._remember(piece, f"{k}*{part}", {part})


def _runs(values: list) -> set[int]:
    """The products of two or more consecutive known sizes: what a flatten of them makes."""
    out = set()
    for i in range(len(values)):
        p = values[i]
        for j in range(i + 1, len(values)):
            if p is None or values[j] is None:
                break
            p *= values[j]
            out.add(p)
    return out


def counts(t, before, after) -> set[int]:
    """The axes of a reshape's result that count the pieces of a `k*X` axis (the 3 of
    `reshape(B, N, 3, H, Dh)` on qkv's `3*D`): written as numbers, whatever size they equal
    (timm's vit_tiny has 3 heads, so a value alone would read the 3 as H)."""
    wholes = {v for v in (fixed(s) for s in before) if v}
    parts = [fixed(s) for s in after]
    out = set()
    for i, k in enumerate(parts):
        if k is None or k <= 1 or k > 16:
            continue
        rest = 1
        for j in range(i + 1, len(parts)):
            if parts[j] is None:
                break
            rest *= parts[j]
            if k * rest in wholes and t.sizes.memo.get(k * rest, "").startswith(f"{k}*"):
                out.add(i)
                break
    return out


def copies(t, parts: list, whole) -> None:
    """`torch.cat((freqs, freqs), dim=-1)` (rotary's table): k copies of an axis of a named
    size N make `k*N`, however the number reads otherwise."""
    sizes = [fixed(p) for p in parts]
    total = fixed(whole)
    if total is None or None in sizes or len(set(sizes)) != 1 or sizes[0] <= 1 or total in t.sizes.memo:
        return
    name = t.sizes.name_int(sizes[0])
    if name.isidentifier() and not t.sizes.named(total):
        t.sizes._remember(total, f"{len(sizes)}*{name}", {name})


def repeat_count(t, node, count: int) -> str:
    """`repeat_interleave n 1` of a head axis of Hkv up to H: `G`; else the count's text."""
    d = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim")
    before, after = val(node.args[0]).shape, val(node).shape
    if d is not None:
        whole, part = fixed(after[d]), fixed(before[d])
        if whole is not None and part is not None:
            named = t.sizes.ratio(whole, part)
            if named:
                return named
    return t.size(count)


def expand_counts(t, node) -> None:
    """GQA's `k[:, :, None].expand(B, Hkv, G, S, Dh).reshape(B, H, S, Dh)`: the new axis of
    the expand is `H / Hkv`, read from the reshape that merges it into the heads."""
    users = [u for u in node.users if target_name(u) in ("aten.reshape.default", "aten.view.default",
                                                         "aten._unsafe_view.default", "aten.clone.default")]
    if len(users) != 1:
        return
    user = users[0]
    if target_name(user) == "aten.clone.default":
        nexts = [u for u in user.users if target_name(u) in ("aten.reshape.default", "aten.view.default",
                                                            "aten._unsafe_view.default")]
        if len(nexts) != 1:
            return
        user = nexts[0]
    if isinstance(val(user), torch.Tensor):
        regroup(t, val(user).shape, val(node).shape)


def half(t, bound, size) -> str | None:
    """`X/2` for a slice bound that halves an axis of size X (rotate_half), with X even."""
    b, n = fixed(bound), fixed(size)
    if b is None or n is None or n != 2 * b or b <= 1:
        return None
    whole = t.sizes.name_int(n)
    if whole.isdigit():
        return None
    k, star, rest = whole.partition("*")
    if star and k.isdigit() and int(k) % 2 == 0 and rest.isidentifier():     # rotary's 2*N halves to N
        return t.sizes._remember(b, rest if k == "2" else f"{int(k) // 2}*{rest}", {rest})
    t.sizes.assumes.append(f"{whole} % 2 == 0")
    return t.sizes._remember(b, f"{whole}/2" if whole.isidentifier() else f"({whole})/2", set())


RESHAPES = ("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.unflatten.int")


def product_width(t, node) -> None:
    """A linear layer's width that the next reshape cuts into two named sizes (GQA's keys:
    `wk(x).view(B, S, n_kv_heads, head_dim)`) is their product, `Hkv*Dh`."""
    width = fixed(val(node).shape[-1])
    if width is None or width in t.sizes.memo or [k for k, v in t.sizes._fixed() if v == width]:
        return
    for user in node.users:
        if target_name(user) not in RESHAPES or not isinstance(val(user), torch.Tensor):
            continue
        after = [fixed(s) for s in val(user).shape]
        for a, b in itertools.pairwise(after):
            if a is None or b is None or a * b != width or a <= 1 or b <= 1:
                continue
            ta, tb = t.sizes.name_int(a), t.sizes.name_int(b)
            if ta.isdigit() or tb.isdigit():
                continue
            t.sizes._remember(width, f"{ta}*{tb}", set())
            return
