"""Import, the weights: copy the original module's weights into the module generated from the
imported spec.

The importer writes a mapping (`spec.weights.json`) that names the weights of every learned
step in the order the steps run, with the original module's state_dict names:

    {"steps": [{"kind": "linear", "tensors": {"weight": "transformer.h.0.attn.c_attn.weight",
                                               "bias": "transformer.h.0.attn.c_attn.bias"}}, ...],
     "declared": [{"name": "wte", "kind": "parameter", "source": "transformer.wte.weight"}, ...],
     "inputs": [...], "outputs": [...]}

A source may also be `[name, k, n]`: the k-th of n equal row blocks (the q, k and v rows of
nn.MultiheadAttention's in_proj_weight). `resolve` runs the generated module once on meta
tensors (no memory, no arithmetic), records which of its submodules holding weights run in
which order, and pairs them with the steps: the result is `{generated name: source}`, what
`copy_weights` applies. So the mapping does not depend on how the code generator names
its submodules.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call

from ..codegen.torch_compat import copy_parameters

DTYPES = {"float": torch.float32, "int": torch.long, "bool": torch.bool}


class WeightsError(Exception):
    """The mapping does not fit the module."""


def _meta_inputs(mapping: dict) -> tuple:
    return tuple(torch.empty(tuple(i["shape"]), dtype=DTYPES[i["dtype"]], device="meta")
                 for i in mapping["inputs"])


def resolve(generated: nn.Module, mapping: dict) -> dict:
    """{generated parameter or buffer name: source} for every tensor the mapping covers."""
    order: list[str] = []
    handles = []
    for name, m in generated.named_modules():
        if name and (any(True for _ in m.parameters(recurse=False)) or any(True for _ in m.buffers(recurse=False))):
            handles.append(m.register_forward_pre_hook(lambda mod, args, name=name: order.append(name)))
    state = {k: torch.empty_like(v, device="meta") for k, v in generated.state_dict(keep_vars=True).items()}
    try:
        with torch.no_grad():
            functional_call(generated, state, _meta_inputs(mapping), strict=False)
    finally:
        for h in handles:
            h.remove()
    steps = mapping["steps"]
    if len(order) != len(steps):
        raise WeightsError(f"the generated module runs {len(order)} submodules with weights, the "
                           f"mapping names {len(steps)} learned steps")
    out: dict = {}
    modules = dict(generated.named_modules())
    for name, step in zip(order, steps):
        own = dict(modules[name].named_parameters(recurse=False)) | dict(modules[name].named_buffers(recurse=False))
        wanted = step["tensors"]
        if set(own) != set(wanted):
            if len(own) != len(wanted):
                raise WeightsError(f"`{name}` has {sorted(own)}, the {step['kind']} step has {sorted(wanted)}")
            wanted = dict(zip(own, wanted.values()))     # same count, other names: in order
        for local, src in wanted.items():
            out[f"{name}.{local}"] = src if isinstance(src, str) else tuple(src)
    names = dict(generated.named_parameters()) | dict(generated.named_buffers())
    for d in mapping.get("declared", []):
        hits = [k for k in names if k == d["name"]] or [k for k in names if k.endswith("." + d["name"])]
        if len(hits) != 1:
            raise WeightsError(f"the generated module has no single tensor `{d['name']}` (found {hits})")
        out[hits[0]] = d["source"]
    return out


def copy_weights(generated: nn.Module, original: nn.Module | dict, mapping: dict) -> dict:
    """Copy the original's weights into `generated`; every parameter of it must be covered.
    Returns the resolved `{generated name: source}`."""
    pairs = resolve(generated, mapping)
    if isinstance(original, nn.Module):      # buffers kept out of the state_dict (rotary tables) too
        original = dict(original.named_buffers(remove_duplicate=False)) | original.state_dict()
    try:
        copy_parameters(generated, original, pairs, strict=True)
    except (KeyError, ValueError) as err:
        raise WeightsError(str(err.args[0]).replace("source module", "original module")) from None
    return pairs
