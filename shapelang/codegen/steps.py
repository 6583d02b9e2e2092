"""Codegen, one operation: the table from IR operation to its emitter.

Each emitter gets one `Op` (a step of the checked IR with its inputs already
named) and returns the `forward` lines for it (`out = x.view(B, S, H, Dh)`); an
emitter of a step that owns weights also appends the `__init__` line creating
the module (`nn.Linear`, `nn.LayerNorm`, child blocks). Each emitter registers
under its table entry's emitter name with `@emitter` (shapelang.codegen.registry),
and `EMITTERS`, derived from the table, maps every IR operation to its emitter.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import sympy as sp

from ..checker import arith, dtypes
from ..checker.ir import Step
from ..checker.ops.table import TABLE
from . import generic
from .naming import CodegenError, _snake, py_str
from .registry import EMITTERS, emitter
from .units import Unit

FUNCTIONAL = "\x00F\x00"   # placeholder for the torch.nn.functional alias (F unless a spec name is F)
# the unary operations as PyTorch calls (`torch.tanh({})`), from their table entries
UNARY = {d.name: "-{}" if d.function == "-" else d.function + "({})"
         for d in TABLE.values() if d.emitter_key == "unary"}
BINARY = arith.SYMBOLS
# the names of the layers operations own and of their results, from their table entries
MODULE_OPS = {d.ir_name: d.layer for d in TABLE.values() if d.layer}
CHAIN_SUFFIX = {"matmul": "mm", **{d.ir_name: d.short for d in TABLE.values() if d.short}}




# ------------------------------------------------------------------ one emitter per operation

@dataclass(frozen=True)
class Op:
    """One step being written: `out = <x>.op(...)`, in the unit's local names."""
    em: object            # the Emitter writing it (unit_for, names, types, sizes)
    unit: Unit
    s: Step
    d: dict               # the step's resolved arguments
    out: str              # the variable(s) it assigns
    attr: str | None      # the module attribute it owns (`linear`, `layernorm`, blocks)
    args: list            # its inputs, as Python expressions
    x: str                # the first input
    xt: object            # the type of the first input
    rank: int

    def local(self, e, **kw) -> str:
        return self.em.sizes.local(self.unit, e, **kw)

    def cfg(self, e) -> str:
        return self.em.sizes.cfg(self.unit, e)

    def axis(self, dim: int, rank: int | None = None) -> str:
        rank = self.rank if rank is None else rank
        return "-1" if rank >= 2 and dim == rank - 1 else str(dim)

    def sizes(self, sizes, infer=None) -> str:
        unbacked = getattr(self.em.sizes.prover, "unbacked", {})
        if infer is None and unbacked:   # a data-dependent size (`where(M)`) is the one PyTorch infers
            infer = next((k for k, x in enumerate(sizes) if sp.sympify(x).free_symbols & set(unbacked)), None)
        return ", ".join("-1" if (k == infer or (sp.sympify(x) == -1)) else self.local(x)
                         for k, x in enumerate(sizes))

    def shape_comment(self, shape) -> str:
        return self.em.sizes.shape_comment(self.unit, shape)


@emitter("view")
def _view(o: Op) -> list[str]:
    shape = o.sizes(o.d["shape"], o.d.get("infer"))
    if o.s.op == "reshape" and o.d.get("copies"):
        return [f"{o.out} = {o.x}.contiguous().view({shape})"]
    if o.s.inputs[0] in o.em.relaid:     # laid out by a fused attention call, not as proved
        return [f"{o.out} = {o.x}.reshape({shape})"]
    return [f"{o.out} = {o.x}.view({shape})"]


@emitter("transpose")
def _transpose(o: Op) -> list[str]:
    i, j = o.d["dims"]
    if o.rank >= 3 and {i, j} == {o.rank - 2, o.rank - 1}:
        return [f"{o.out} = {o.x}.transpose(-2, -1)"]
    return [f"{o.out} = {o.x}.transpose({i}, {j})"]


@emitter("squeeze")
def _squeeze(o: Op) -> list[str]:
    dims = [o.d["dim"]] if o.d["dim"] is not None else \
        [k for k, size in enumerate(o.xt.shape) if sp.sympify(size) == 1]
    if len(dims) == 1:
        return [f"{o.out} = {o.x}.squeeze({dims[0]})"]
    return [f"{o.out} = {o.x}.squeeze(({', '.join(map(str, dims))}{',' if len(dims) == 1 else ''}))"]


@emitter("repeat_interleave")
def _repeat_interleave(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.repeat_interleave({o.local(o.d['repeats'])}, dim={o.axis(o.d['dim'])})"]


@emitter("scale")
def _scale(o: Op) -> list[str]:
    return [f"{o.out} = {o.x} * {o.local(o.d['factor'], real=True, operand=True)}"]


@emitter("mask")
def _mask(o: Op) -> list[str]:
    if o.d["kind"] == "causal":
        hide = o.em.causal(o.unit, o.d["rows"], o.d["cols"], o.x)
        return [f'{o.out} = {o.x}.masked_fill({hide}, float("-inf"))']
    m = o.args[1]
    mt = o.em.scope.types.get(o.s.inputs[1])
    if mt is not None and mt.dtype != "bool":
        m = f"{m} != 0"
    return [f'{o.out} = {o.x}.masked_fill({m}, float("-inf"))']


@emitter("softmax")
def _softmax(o: Op) -> list[str]:
    """`F.softmax(x, dim=d)`; after `mask M`, a row the masks hide entirely gives zeros, not
    NaN, as F.scaled_dot_product_attention (and nn.MultiheadAttention with need_weights=False)
    do. With one `mask M` right before, the rows are those M hides; when other masks or
    biases come between or before, the rows that are -inf throughout."""
    dtype = _keywords(dtype=_torch_dtype(o.d.get("dtype")) or None)
    line = f"{o.out} = {FUNCTIONAL}.{o.s.op}({o.x}, dim={o.axis(o.d['dim'])}{dtype})"
    if o.d.get("dtype") == dtypes.DEFAULT == o.s.out.dtype and o.xt is not None and o.xt.dtype == dtypes.DEFAULT:
        line += f".to({o.x}.dtype)"      # computed in float32, cast back (a no-op in float32)
    if o.s.op != "softmax":
        return [line]
    chain = _mask_chain(o)
    if not any(p.op == "mask" and p.detail.get("kind") != "causal" for p in chain):
        return [line]
    p = chain[0]
    masks = [c for c in chain if c.op == "mask"]
    mt = o.em.scope.types.get(p.inputs[1]) if p.op == "mask" and len(p.inputs) == 2 else None
    d = o.d["dim"] - o.rank            # the mask lines up with the scores from the right
    if len(masks) == 1 and mt is not None:
        m = o.em.scope.refs.get(p.inputs[1], p.inputs[1])
        if mt.dtype != "bool":
            m = f"({m} != 0)"
        hidden = f"{m}.all(dim={d}, keepdim=True)" if -d <= mt.rank else m
        return [line, f"{o.out} = {o.out}.masked_fill({hidden}, 0.0)"]
    hidden = o.em.scope.names.claim(f"{o.out.split(',')[0].strip()}_hidden")
    return [f"{hidden} = torch.isneginf({o.x}).all(dim={d}, keepdim=True)", line,
            f"{o.out} = {o.out}.masked_fill({hidden}, 0.0)"]


_MASK_CHAIN = ("mask", "add", "sub", "scale", "mul", "div")


def _mask_chain(o: Op) -> list:
    """The masks, biases and scales a softmax's input went through, nearest first."""
    out, todo, seen = [], [o.s.inputs[0]], set()
    while todo:
        ref = todo.pop(0)
        p = o.em.producers.get(ref)
        if ref in seen or p is None or p.op not in _MASK_CHAIN or not p.inputs:
            continue
        seen.add(ref)
        out.append(p)
        todo += p.inputs[:1] if p.op in ("mask", "scale") else p.inputs
    return out


@emitter("unary")
def _unary(o: Op) -> list[str]:
    call = UNARY[o.s.op].replace("F.", FUNCTIONAL + ".")
    if o.d.get("approximate", "none") != "none":     # gelu's tanh approximation
        call = call.replace("({})", f"({{}}, approximate={py_str(o.d['approximate'])})")
    return [f"{o.out} = " + call.format(o.x)]


def _torch_dtype(d: str | None) -> str:
    return "torch." + dtypes.torch_name(d) if d else ""


def _keywords(**kw) -> str:
    """`, eps=1e-06, bias=False`: the keywords that differ from PyTorch's defaults (None: default)."""
    return "".join(f", {k}={v}" for k, v in kw.items() if v is not None)


@emitter("cast")
def _cast(o: Op) -> list[str]:
    if o.s.op == "type_as":
        return [f"{o.out} = {o.x}.type_as({o.args[1]})"]
    if o.s.op == "to" or o.s.op == "bool":     # TorchScript has no Tensor.bool()
        return [f"{o.out} = {o.x}.to({_torch_dtype(o.d.get('dtype', 'bool'))})"]
    return [f"{o.out} = {o.x}.{o.s.op}()"]


def _module(o: Op, init: str) -> list[str]:
    """A step that owns a module: `self.attr = init` in __init__, `out = self.attr(x)` in forward."""
    o.unit.init.append(f"self.{o.attr} = {init}")
    return [f"{o.out} = self.{o.attr}({o.x})"]


@emitter("layernorm")
def _norm(o: Op) -> list[str]:
    affine = o.d.get("affine", True)
    layer = o.s.op == "layernorm"
    eps = o.d.get("eps")
    if eps is None and layer:
        eps = 1e-5                      # nn.LayerNorm's default, kept in the config
    kw = _keywords(eps=f"cfg.{o.em.sizes.hparam('eps', eps)}" if eps is not None else None,
                   elementwise_affine=None if affine else "False",
                   bias="False" if layer and affine and not o.d.get("bias", True) else None)
    cls = "LayerNorm" if layer else "RMSNorm"
    return _module(o, f"nn.{cls}({o.cfg(o.d['features'])}{kw})")


@emitter("dropout")
def _dropout(o: Op) -> list[str]:
    return _module(o, f"nn.Dropout(cfg.{o.em.sizes.hparam('dropout', o.d['p'])})")


@emitter("linear")
def _linear(o: Op) -> list[str]:
    kw = _keywords(bias=None if o.d["bias"] else "False", dtype=_torch_dtype(o.d.get("dtype")) or None)
    return _module(o, f"nn.Linear({o.cfg(o.d['in'])}, {o.cfg(o.d['out'])}{kw})")


@emitter("embed")
def _embed(o: Op) -> list[str]:
    if o.d.get("table") is None:
        kw = _keywords(padding_idx=o.d.get("padding_idx"), dtype=_torch_dtype(o.d.get("dtype")) or None)
        return _module(o, f"nn.Embedding({o.cfg(o.d['vocab'])}, {o.cfg(o.d['dim'])}{kw})")
    return [f"{o.out} = {FUNCTIONAL}.embedding({o.x}, {o.args[1]})"]


@emitter("split")
def _split(o: Op) -> list[str]:
    sizes = o.d["sizes"]
    if len(set(sizes)) == 1:
        what = o.local(sizes[0])
    else:
        what = "[" + ", ".join(o.local(z) for z in sizes) + "]"
    return [f"{o.out} = {o.x}.split({what}, dim={o.axis(o.d['dim'])}){_only(o)}"]


def _only(o: Op) -> str:
    """`[0]` when split or chunk makes a single piece: the step's value is that tensor, not a tuple."""
    return "[0]" if len(o.s.outputs) == 1 else ""


@emitter("reduce")
def _reduce(o: Op) -> list[str]:
    kw = _keywords(keepdim="True" if o.d.get("keepdim") else None,
                   correction=None if o.d.get("correction", 1) == 1 else o.d["correction"])
    return [f"{o.out} = {o.x}.{o.s.op}(dim={o.axis(o.d['dim'])}{kw})"]


@emitter("select")
def _select(o: Op) -> list[str]:
    index = [":"] * o.d["dim"] + [o.local(o.d["index"])]
    return [f"{o.out} = {o.x}[{', '.join(index)}]"]


_PLAIN = re.compile(r"-?[A-Za-z_]\w*|-?\d[\w.]*")


@emitter("slice")
def _slice(o: Op) -> list[str]:
    start = o.local(o.d["start"]) if o.d["start"] != 0 else ""
    end = o.local(o.d["end"])
    step = o.local(o.d["step"]) if o.d.get("step", 1) != 1 else ""
    # ruff format spaces the colon when a bound is more than a name or a number: `H : H + 1`
    plain = all(_PLAIN.fullmatch(b) for b in (start, end, step) if b)
    sep = ":" if plain else " : "
    bounds = (f"{start}{sep}{end}" if plain else f"{start} : {end}".strip()) + (sep + step if step else "")
    index = [":"] * o.d["dim"] + [bounds]
    return [f"{o.out} = {o.x}[{', '.join(index)}]"]


_SIMPLE = re.compile(r"-?[A-Za-z_][\w.]*|-?\d[\w.]*")


def _join(left: str, sign: str, right: str) -> str:
    """`a + b`; `a**b` where both sides are names or numbers, as ruff format writes a power."""
    if sign == "**" and _SIMPLE.fullmatch(left) and _SIMPLE.fullmatch(right):
        return f"{left}**{right}"
    return f"{left} {sign} {right}"


def _binary(o: Op) -> list[str]:
    sign = BINARY[o.s.op]
    if len(o.args) == 2:
        return [f"{o.out} = {_join(o.args[0], sign, o.args[1])}"]
    scalar = o.local(o.d["scalar"], real=True, operand=True)
    if o.d.get("scalar_left"):
        return [f"{o.out} = {_join(scalar, sign, o.x)}"]
    return [f"{o.out} = {_join(o.x, sign, scalar)}"]


@emitter("block")
def _block(o: Op) -> list[str]:
    """A submodule per call; a block without state is a function (the generator decides,
    and fills in the markers: \x00I drops the __init__ line, \x00K names what is called,
    \x00A adds the sizes a function takes)."""
    child = o.em.unit_for(o.s.block)
    o.unit.children.append(child)
    if o.d.get("stack_first"):     # layer 0 of `stack L Moe first=Dense`: the stack builds it
        child.stacked = True
        pre, extra = o.em.hoisted_args(o.unit, child)
        return pre + [f"{o.out} = self.{o.attr}[0]({', '.join(o.args + extra)})"]
    o.unit.init.append(f"\x00I{child.key}\x00self.{o.attr} = \x00C{child.key}\x00(cfg{_sizes_given(o, child)})")
    pre, extra = o.em.hoisted_args(o.unit, child)
    return pre + [f"{o.out} = \x00K{child.key}|self.{o.attr}\x00({', '.join(o.args + extra)}\x00A{child.key}\x00)"]


def _sizes_given(o: Op, child) -> str:
    """The sizes a call gives the block's size parameters, as constructor arguments in the
    caller's terms: `Mlp(cfg, 4 * cfg.D)`, `Mlp(cfg, F)` inside a block that takes F."""
    return "".join(f", {o.cfg(x)}" for x in generic.call_sizes(o.s.block, child))


@emitter("stack")
def _stack(o: Op) -> list[str]:
    child = o.em.unit_for(o.s.block, stacked=True)
    o.unit.children.append(child)
    count = o.cfg(o.d["count"])
    layers = f"[\x00C{child.key}\x00(cfg{_sizes_given(o, child)}) for _ in range({count})]"
    rest = ""
    if o.d.get("first"):          # `stack L Moe first=Dense`: one list, layer 0 the first block
        first = o.em.producers[o.d["first"]]
        head = o.em.unit_for(first.block)
        given = "".join(f", {o.cfg(x)}" for x in generic.call_sizes(first.block, head))
        layers, rest = f"[\x00C{head.key}\x00(cfg{given})] + {layers}", "[1:]"
    shared = o.d.get("shared")
    if shared:      # `shared=true`: one module (after the first one) applied count times
        one = f"\x00C{child.key}\x00(cfg{_sizes_given(o, child)})"
        layers = f"[{layers[1:].split('] + ')[0]}, {one}]" if rest else one
    o.unit.init.append(f"self.{o.attr} = nn.ModuleList({layers})" if not shared or rest
                       else f"self.{o.attr} = {layers}")
    pre, hoisted = o.em.hoisted_args(o.unit, child)   # built once, shared by every layer
    layer = o.em.scope.names.claim("layer")
    sliced = o.d.get("sliced", ())
    # a scan: layer i takes slice i of the per-layer inputs (`past_k[i]`, copy i of a stack of
    # experts `expert_mask[i]`; enumerate, which TorchScript also compiles) and returns its carry
    # and the tensors collected into lists, stacked into [N, ..] after the loop
    carry, *lists = o.out.split(", ")
    lines = pre + ([] if carry == o.x else [f"{carry} = {o.x}"])
    if shared:
        i = o.em.scope.names.claim("i") if any(sliced) else "_"
        head = f"for {i} in range({o.local(o.d['count'])}):"
        layer = f"self.{o.attr}" + ("[1]" if rest else "")
    elif any(sliced):
        i = o.em.scope.names.claim("i")
        head = f"for {i}, {layer} in enumerate(self.{o.attr}):"
    else:
        i, head = None, f"for {layer} in self.{o.attr}{rest}:"
    extra = "".join(f", {a}[{i}]" if cut else f", {a}" for a, cut in zip(o.args[1:], sliced))
    extra += "".join(f", {a}" for a in o.args[1 + len(sliced):] + hoisted)
    if not lists:
        return lines + [head, f"    {carry} = {layer}({carry}{extra})"]
    each = [o.em.scope.names.claim(f"{n.lstrip('_')}_i") for n in lists]
    kept = [o.em.scope.names.claim(f"{n.lstrip('_')}_list") for n in lists]
    lines += [f"{k}: list[torch.Tensor] = []" for k in kept]
    lines += [head, f"    {', '.join([carry] + each)} = {layer}({carry}{extra})"]
    lines += [f"    {k}.append({e})" for k, e in zip(kept, each)]
    stacked = [f"{n} = torch.stack({k})" for n, k in zip(lists, kept)]
    return lines + [f"{line}  # {o.shape_comment(t.shape)}" for line, t in zip(stacked[:-1], o.s.outputs[1:])] \
        + stacked[-1:]


@emitter("rearrange")
def _rearrange(o: Op) -> list[str]:
    d, out, x = o.d, o.out, o.x
    if "flat" not in d:
        raise CodegenError("this checker gives no stages for `rearrange`")
    lines = []
    src = x
    xt = o.xt
    copies = d["copies"]
    if copies[0] is not None:
        how = "reshape" if copies[0] else "view"
        lines.append(f"{out} = {src}.{how}({o.sizes(d['flat'])})"
                     f"  # {o.shape_comment(d['flat'])}")
        src = out
    perm = list(d["perm"])
    if perm != sorted(perm):
        flat = d["flat"] if copies[0] is not None else xt.shape
        lines.append(f"{out} = {src}.permute({', '.join(map(str, perm))})"
                     f"  # {o.shape_comment([flat[p] for p in perm])}")
        src = out
    if d.get("new"):        # einops' repeat: the new axes inserted, then expanded
        for pos, _size in d["new"]:
            lines.append(f"{out} = {src}.unsqueeze({pos})")
            src = out
        expanded = list(o.s.out.shape) if copies[1] is None else None
        sizes = ["-1"] * (len(perm) + len(d["new"]))
        for pos, size in d["new"]:
            sizes[pos] = o.local(size)
        lines.append(f"{out} = {src}.expand({', '.join(sizes)})"
                     + (f"  # {o.shape_comment(expanded)}" if expanded else ""))
    if copies[1] is not None:
        how = "contiguous().view" if copies[1] else "view"
        lines.append(f"{out} = {src}.{how}({o.sizes(d['final'])})")
        src = out
    if src != out:
        lines.append(f"{out} = {src}")
    last = lines.pop()
    lines.append(last.split("  # ")[0])
    return lines


@emitter("opaque")
def _opaque(o: Op) -> list[str]:
    raise CodegenError(f"line {o.s.span.line}: `opaque {py_str(o.d['what'])}` stands for an operation "
                       "shapelang does not model; replace it with shapelang operations first")


@emitter("permute")
def _permute(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.permute({', '.join(map(str, o.d['dims']))})"]


@emitter("movedim")
def _movedim(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.movedim({o.d['source']}, {o.d['destination']})"]


@emitter("unsqueeze")
def _unsqueeze(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.unsqueeze({o.d['dim']})"]


@emitter("flatten")
def _flatten(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.flatten({o.d['start']}, {o.d['end']})"]


@emitter("expand")
def _expand(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.expand({o.sizes(o.d['shape'])})"]


@emitter("contiguous")
def _contiguous(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.contiguous()"]


@emitter("concat")
def _concat(o: Op) -> list[str]:
    return [f"{o.out} = torch.cat([{', '.join(o.args)}], dim={o.axis(o.d['dim'], o.s.out.rank)})"]


@emitter("chunk")
def _chunk(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.chunk({o.d['chunks']}, dim={o.axis(o.d['dim'])}){_only(o)}"]


@emitter("einsum")
def _einsum(o: Op) -> list[str]:
    return [f"{o.out} = torch.einsum({py_str(o.d['equation'])}, {', '.join(o.args)})"]


emitter(*BINARY)(_binary)
STEPS = EMITTERS


def _module_name(s) -> str | None:
    """The attribute name of the submodule a step owns (linear, embed, a block), or None."""
    if s.op == "block" and s.detail.get("stack_first"):
        return None      # layer 0 of a stack: the stack's module list holds it
    if s.op in ("block", "stack"):
        return _snake(s.block.name) + ("s" if s.op == "stack" else "")
    if s.op == "embed" and s.detail.get("table") is None:
        return "embed"
    return MODULE_OPS.get(s.op)
