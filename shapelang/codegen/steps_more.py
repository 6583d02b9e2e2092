"""Codegen, the emitters of the reductions and scans (`std`, `argmax`, `cumsum`, `sort`, ..),
the elementwise operations with keywords (`leaky_relu`, `masked_fill`, `normalize`, ..), the
layout operations `flip`, `roll`, `narrow`, `unflatten`, `unbind`, `expand_as`, `tile`,
`pad`, the tensors made like another, `eye`, and the channel norms (nn.GroupNorm,
nn.BatchNorm1d/2d/3d). Each registers with `@emitter` when this module is imported
(shapelang.codegen.emit imports it)."""
from __future__ import annotations

import sympy as sp

from ..checker.ops.table import TABLE
from .registry import emitter
from .steps import FUNCTIONAL, Op, _keywords, _module, _only, _torch_dtype
from .steps_tables import _device, _torch, _value


def _float(o: Op, v) -> str:
    """A number PyTorch takes as a float (`0.0`, `float("-inf")`)."""
    text = _value(o, v)
    return f"{text}.0" if text.lstrip("-").isdigit() else text


def _args(o: Op, *first, dim=True, **kw) -> str:
    d = o.d.get("dim")
    parts = list(first)
    if dim and d is not None:
        parts.append(f"dim={o.axis(d)}")
    parts += [f"{k}={v}" for k, v in kw.items() if v is not None]
    return ", ".join(parts)


@emitter("reduction")
def _reduction(o: Op) -> list[str]:
    """x.std(dim=-1, keepdim=True), x.argmax(), x.median(dim=1)[0], x.cumsum(dim=1, dtype=..)."""
    d = o.d
    correction = d.get("correction", 1)
    args = _args(o, *([o.local(d["k"])] if "k" in d else []),
                 keepdim="True" if d.get("keepdim") else None,
                 correction=None if correction == 1 else correction,
                 dtype=_torch_dtype(d.get("dtype")) or None)
    pick = "[0]" if TABLE[o.s.op].pair and d.get("dim") is not None else ""
    return [f"{o.out} = {o.x}.{o.s.op}({args}){pick}"]


@emitter("norm")
def _norm(o: Op) -> list[str]:
    p = o.d.get("p", 2)
    args = _args(o, o.x, *([] if p == 2 else [f"ord={_float(o, p)}"]),
                 keepdim="True" if o.d.get("keepdim") else None)
    return [f"{o.out} = torch.linalg.vector_norm({args})"]


@emitter("sort")
def _sort(o: Op) -> list[str]:
    d = o.d
    args = _args(o, descending="True" if d.get("descending") else None,
                 stable="True" if d.get("stable") else None)
    return [f"{o.out} = {o.x}.{o.s.op}({args})"]


@emitter("functional")
def _functional(o: Op) -> list[str]:
    """F.<op>(x, .., dim=, keywords): the activations with keywords, softmin, glu, normalize."""
    kws = {k: _float(o, v) for k, v in o.d.items() if v is not None and k not in ("dim", "dtype")}
    args = _args(o, o.x, *o.args[1:], **kws, dtype=_torch_dtype(o.d.get("dtype")) or None)
    return [f"{o.out} = {FUNCTIONAL}.{o.s.op}({args})"]


@emitter("math")
def _math(o: Op) -> list[str]:
    decimals = o.d.get("decimals")
    return [f"{o.out} = torch.{o.s.op}({o.x}{f', decimals={decimals}' if decimals else ''})"]


@emitter("nan_to_num")
def _nan_to_num(o: Op) -> list[str]:
    kws = "".join(f", {k}={_float(o, o.d[k])}" for k in ("nan", "posinf", "neginf") if k in o.d)
    return [f"{o.out} = torch.nan_to_num({o.x}{kws})"]


@emitter("masked_fill")
def _masked_fill(o: Op) -> list[str]:
    v = o.d["value"]
    value = _float(o, v) if o.s.out.dtype not in ("int", "bool") and v is not True and v is not False \
        else _value(o, v)
    return [f"{o.out} = {o.x}.masked_fill({o.args[1]}, {value})"]


def _ints(o: Op, xs) -> str:
    return "[" + ", ".join(o.local(x) for x in xs) + "]"


@emitter("roll")
def _roll(o: Op) -> list[str]:
    shifts, dims = o.d["shifts"], o.d["dims"]
    if len(shifts) == 1:
        where = f", {dims[0]}" if dims else ""
        return [f"{o.out} = {o.x}.roll({o.local(shifts[0])}{where})"]
    return [f"{o.out} = {o.x}.roll({_ints(o, shifts)}, {list(dims)})"]


@emitter("pad")
def _pad(o: Op) -> list[str]:
    value = o.d.get("value")
    kw = "" if value is None or sp.sympify(value) == 0 else f", value={_float(o, value)}"
    return [f"{o.out} = {FUNCTIONAL}.pad({o.x}, {_ints(o, o.d['pads'])}{kw})"]


@emitter("like")
def _like(o: Op) -> list[str]:
    dtype = f", dtype={_torch(o.d['dtype'])}" if o.d.get("dtype") else ""
    if o.s.op == "full_like":
        v = o.d["value"]
        value = _value(o, v) if o.s.out.dtype in ("int", "bool") else _float(o, v)
        return [f"{o.out} = torch.full_like({o.x}, {value}{dtype})"]
    return [f"{o.out} = torch.{o.s.op}({o.x}{dtype})"]


@emitter("eye")
def _eye(o: Op) -> list[str]:
    m = "" if o.d.get("m") is None else f", {o.local(o.d['m'])}"
    dtype = f", dtype={_torch(o.d['dtype'])}" if o.d.get("dtype") not in (None, "float") else ""
    return [f"{o.out} = torch.eye({o.local(o.d['n'])}{m}{dtype}{_device(o)})"]


def _hparams(o: Op, **given) -> str:
    return _keywords(**{k: f"cfg.{o.em.sizes.hparam(k, v)}" for k, v in given.items() if v is not None},
                     affine=None if o.d.get("affine", True) else "False")


@emitter("groupnorm")
def _groupnorm(o: Op) -> list[str]:
    return _module(o, f"nn.GroupNorm({o.cfg(o.d['groups'])}, {o.cfg(o.d['channels'])}"
                      f"{_hparams(o, eps=o.d.get('eps'))})")


@emitter("batchnorm")
def _batchnorm(o: Op) -> list[str]:
    return _module(o, f"nn.BatchNorm{o.d['spatial']}d({o.cfg(o.d['channels'])}"
                      f"{_hparams(o, eps=o.d.get('eps'), momentum=o.d.get('momentum'))})")


@emitter("softcap")
def _softcap(o: Op) -> list[str]:
    """tanh(x / C) * C."""
    cap = o.local(o.d["cap"], real=True, operand=True)
    return [f"{o.out} = torch.tanh({o.x} / {cap}) * {cap}"]


@emitter("logical")
def _logical(o: Op) -> list[str]:
    return [f"{o.out} = torch.{o.s.op}({o.x}, {o.args[1]})"]


@emitter("flip")
def _flip(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.flip({list(o.d['dims'])})"]


@emitter("narrow")
def _narrow(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.narrow({o.d['dim']}, {o.local(o.d['start'])}, {o.local(o.d['length'])})"]


@emitter("unflatten")
def _unflatten(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.unflatten({o.axis(o.d['dim'])}, [{o.sizes(o.d['sizes'], o.d.get('infer'))}])"]


@emitter("unbind")
def _unbind(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.unbind({o.d['dim']}){_only(o)}"]


@emitter("expand_as")
def _expand_as(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.expand_as({o.args[1]})"]


@emitter("tile")
def _tile(o: Op) -> list[str]:
    return [f"{o.out} = {o.x}.tile({_ints(o, o.d['reps'])})"]


