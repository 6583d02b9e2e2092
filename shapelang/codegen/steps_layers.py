"""Codegen, the emitters of whole layers: attention (F.scaled_dot_product_attention),
convolutions (nn.Conv1d / nn.Conv2d), pooling and resizing (F.max_pool2d, F.interpolate) and
indexing. Each registers with `@emitter` when this module is imported
(shapelang.codegen.emit imports it)."""
from __future__ import annotations

from ..checker import dtypes
from ..checker.ops import pooling
from .registry import emitter
from .steps import FUNCTIONAL, Op


@emitter("attention")
def _attention(o: Op) -> list[str]:
    q, k, v = o.args[:3]
    grouped = o.em.gqa.get(o.s.id)
    if grouped:                  # the heads before repeat_interleave: sdpa's enable_gqa
        k, v = (o.em.scope.refs.get(r, r) for r in grouped[:2])
    args = [q, k, v]
    d = o.d
    if d.get("mask"):
        mask = o.args[3]
        mt = o.em.scope.types.get(o.s.inputs[3])
        if mt is not None and mt.dtype != "bool" and dtypes.kind(mt.dtype) != "float":
            mask = f"{mask} != 0"
        args.append(f"attn_mask={mask}")
    if d.get("dropout"):
        args.append(f"dropout_p={d['dropout']!r} if self.training else 0.0")
    if d.get("causal"):
        args.append("is_causal=True")
    if d.get("scale") is not None:
        args.append(f"scale={o.local(d['scale'], real=True)}")
    if d.get("gqa") or grouped:
        args.append("enable_gqa=True")
    return [f"{o.out} = {FUNCTIONAL}.scaled_dot_product_attention({', '.join(args)})"]




def _pair(o: Op, sizes, text=None) -> str:
    """A size or, when they differ, a tuple of sizes: config sizes (in __init__), or forward's
    locals with `text=o.local`."""
    text = text or o.cfg
    if len(set(sizes)) == 1:
        return text(sizes[0])
    return "(" + ", ".join(text(x) for x in sizes) + ")"


@emitter("conv")
def _conv(o: Op) -> list[str]:
    d = o.d
    cls = "nn.Conv1d" if d["spatial"] == 1 else "nn.Conv2d"
    args = [o.cfg(d["in"]), o.cfg(d["out"]), _pair(o, d["kernel"])]
    if any(x != 1 for x in d["stride"]):
        args.append(f"stride={_pair(o, d['stride'])}")
    if d["padding"] == "same":
        args.append('padding="same"')
    elif any(x != 0 for x in d["padding"]):
        args.append(f"padding={_pair(o, d['padding'])}")
    if any(x != 1 for x in d["dilation"]):
        args.append(f"dilation={_pair(o, d['dilation'])}")
    if d["groups"] != 1:
        args.append(f"groups={o.cfg(d['groups'])}")
    if not d["bias"]:
        args.append("bias=False")
    if d.get("dtype"):
        args.append(f"dtype=torch.{dtypes.torch_name(d['dtype'])}")
    o.unit.init.append(f"self.{o.attr} = {cls}({', '.join(args)})")
    return [f"{o.out} = self.{o.attr}({o.x})"]




@emitter("index_select")
def _index_select(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.index_select({o.d['dim']}, {o.args[1]})"]


@emitter("gather")
def _gather(o: Op) -> list[str]:
    return [f"{o.out} = torch.gather({o.x}, {o.axis(o.d['dim'])}, {o.args[1]})"]


@emitter("take_along_dim")
def _take_along_dim(o: Op) -> list[str]:
    return [f"{o.out} = torch.take_along_dim({o.x}, {o.args[1]}, dim={o.axis(o.d['dim'])})"]


@emitter("topk")
def _topk(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.topk({o.local(o.d['k'])}, dim={o.axis(o.d['dim'])})"]


@emitter("one_hot")
def _one_hot(o: Op) -> list[str]:
    return [f"{o.out} = {FUNCTIONAL}.one_hot({o.x}, {o.local(o.d['classes'])})"]




@emitter("index_add")
def _index_add(o: Op) -> list[str]:
    alpha = o.d.get("alpha")
    extra = "" if alpha is None else f", alpha={o.local(alpha, real=True)}"
    return [f"{o.out} = {o.x}.index_add({o.d['dim']}, {o.args[1]}, {o.args[2]}{extra})"]


@emitter("scatter")
def _scatter(o: Op) -> list[str]:
    value = o.d.get("value")
    src = o.args[2] if value is None else o.local(value, real=True)
    return [f"{o.out} = {o.x}.{o.s.op}({o.axis(o.d['dim'])}, {o.args[1]}, {src})"]




@emitter("nonzero")
def _nonzero(o: Op) -> list[str]:
    one = "[0]" if len(o.s.outputs) == 1 else ""   # a tuple of one index vector
    if o.d.get("where"):
        return [f"{o.out} = torch.where({o.x}){one}"]
    if o.d.get("as_tuple"):
        return [f"{o.out} = {o.x}.nonzero(as_tuple=True){one}"]
    return [f"{o.out} = {o.x}.nonzero()"]


@emitter("masked_select")
def _masked_select(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.masked_select({o.args[1]})"]




def _sizes(o: Op, sizes) -> str:
    return _pair(o, sizes, o.local)


@emitter("pool")
def _pool(o: Op) -> list[str]:
    """F.max_pool2d(x, 3, stride=2, padding=1), F.adaptive_avg_pool2d(x, 1), .. (no weights)."""
    d = o.d
    if "output_size" in d:
        return [f"{o.out} = {FUNCTIONAL}.{o.s.op}({o.x}, {_sizes(o, d['output_size'])})"]
    args = [o.x, _sizes(o, d["kernel"])]
    if d["stride"] != d["kernel"]:
        args.append(f"stride={_sizes(o, d['stride'])}")
    if any(x != 0 for x in d["padding"]):
        args.append(f"padding={_sizes(o, d['padding'])}")
    if any(x != 1 for x in d.get("dilation", ())):
        args.append(f"dilation={_sizes(o, d['dilation'])}")
    if d["ceil_mode"]:
        args.append("ceil_mode=True")
    if not d.get("count_include_pad", True):
        args.append("count_include_pad=False")
    return [f"{o.out} = {FUNCTIONAL}.{o.s.op}({', '.join(args)})"]


@emitter("interpolate")
def _interpolate(o: Op) -> list[str]:
    d = o.d
    if d["scale"] is not None:
        factors = [str(int(f)) + ".0" if f.q == 1 else repr(float(f)) for f in d["scale"]]
        how = f"scale_factor={factors[0] if len(set(factors)) == 1 else '(' + ', '.join(factors) + ')'}"
    else:
        how = f"size={_sizes(o, d['size'])}"
    mode = f', mode="{d["mode"]}"' if d["mode"] != "nearest" else ""
    align = "" if d["align_corners"] is None else f", align_corners={d['align_corners']}"
    return [f"{o.out} = {FUNCTIONAL}.interpolate({o.x}, {how}{mode}{align})"]


POOLS = [d.name for d in pooling.ENTRIES if d.rule in (pooling.window_pool, pooling.adaptive_pool)]
