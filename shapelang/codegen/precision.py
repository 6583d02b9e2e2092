"""Codegen, mixed precision: which float tensors follow the module's dtype, and where a
table built in float32 meets them.

Input: the steps of one unit (checked IR) and the types of its inputs, params and buffers.
Output: the set of refs that follow the module's dtype, and per step the inputs to cast.

The checker types every float tensor as float32. After `model.to(torch.bfloat16)` the
params and buffers are bfloat16, and so are the activations computed from them and from
float inputs: these refs *follow* the module's dtype. A table the module builds itself
(`arange -> outer -> cos`, `zeros(..)`, ALiBi slopes, position buckets) stays float32, as
does an explicit `-> to float`: these are *fixed*. HF builds such tables in float32 and
casts them where they meet the activations (`cos.to(x.dtype)`), and so does the generated
code: where a step combines a fixed float32 tensor with one that follows, the fixed one
is cast to the other's dtype; a layer with weights cast its fixed input to its weights'
dtype. In float32 every such cast is a no-op, so the module computes what the checker
proved; in bfloat16 it computes in bfloat16 as HF's modules do.
"""
from __future__ import annotations

from ..checker import dtypes
from ..checker.ops.values import CASTS

# steps whose output dtype is the one they name, whatever their input's
_CASTS = {"to", *CASTS}


def _refs(s) -> list:
    return [s.ref] if len(s.outputs) == 1 else [s.ref] + [f"{s.ref}.{k}" for k in range(len(s.outputs))]


def following(seeds: dict, bindings) -> set:
    """The refs whose float values follow the module's dtype. `seeds`: ref -> TensorType of
    the unit's inputs, params and buffers (a float one follows: `.to()` converts params and
    buffers, and the caller passes activations or tables already cast)."""
    follow = {r for r, t in seeds.items() if t.dtype == dtypes.DEFAULT}
    for b in bindings:
        for s in b.steps:
            if s.op == "input":
                yes = True
            elif s.op in _CASTS:
                yes = False       # `-> to float`: float32 on purpose (HF's `.float()`)
            elif s.op == "type_as":
                yes = s.inputs[1] in follow
            else:
                yes = bool(s.params) or any(r in follow for r in s.inputs)
            if yes:
                follow.update(r for r, t in zip(_refs(s), (s.out,) + tuple(s.outputs))
                              if t.dtype == dtypes.DEFAULT)
    return follow


def meeting_casts(s, follow: set, types: dict) -> dict:
    """{input index: index of the input whose dtype it takes} for the fixed float32 inputs of
    step `s` that meet an input following the module's dtype."""
    if s.op in _CASTS or s.op == "type_as" or s.op == "input":
        return {}
    floats = [(k, r) for k, r in enumerate(s.inputs)
              if getattr(types.get(r), "dtype", None) == dtypes.DEFAULT]
    leads = [k for k, r in floats if r in follow]
    if not leads:
        return {}
    return {k: leads[0] for k, r in floats if r not in follow}


def fixed_input_of_layer(s, follow: set, types: dict) -> bool:
    """A layer with weights (linear, conv, norm) whose float input is a fixed table: it is
    cast to the weights' dtype, as HF casts a timestep table before its MLP."""
    if not s.params or s.block is not None or not s.inputs:
        return False
    r = s.inputs[0]
    return getattr(types.get(r), "dtype", None) == dtypes.DEFAULT and r not in follow
