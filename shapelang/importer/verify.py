"""Import, the proof that the spec is faithful: check it, generate its module, copy the
original's weights across, and compare the outputs and the parameter totals.

`verify` runs the comparison at the example sizes and at a second set of dynamic sizes
(one more batch row, a sequence one shorter or longer, within every `assume`), in eval mode.
A spec that does not check, a module that cannot be generated, different outputs or a
different parameter count is an `ImportFailure`: the importer then writes nothing.

A comparison proves something only where the values can differ: a copy of the module
has every parameter that holds one value throughout (torchvision's zero-initialised ViT
head, a LayerNorm's ones and zeros) set to random values first, and an output that is
still constant is reported (`Verified.constant`) rather than claimed faithful.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from ..checker.checker import check_text
from ..codegen import runner
from ..codegen.generator import generate
from ..codegen.naming import CodegenError
from .load import ImportFailure, example_inputs
from .weights import WeightsError, copy_weights

TOLERANCE = 1e-5


@dataclass
class Verified:
    max_diff: float
    params_spec: int
    params_module: int
    sizes: list          # the size sets compared
    randomised: int = 0  # constant parameters given random values before comparing
    constant: bool = False   # every output held one value: the comparison proved nothing


def randomise_constants(module, seed: int = 0):
    """A copy of `module` whose floating parameters that hold one value throughout are drawn
    from normal(value, 0.02 + |value| / 10) instead, and how many were; the original is untouched."""
    twin = copy.deepcopy(module)
    g = torch.Generator().manual_seed(seed)
    count = 0
    with torch.no_grad():
        for p in twin.parameters():
            if not p.dtype.is_floating_point or p.numel() < 1:
                continue
            first = p.reshape(-1)[0]
            if bool((p == first).all()):
                spread = 0.02 + abs(float(first)) / 10
                p.copy_(first + spread * torch.randn(p.shape, generator=g, dtype=torch.float32).to(p.dtype))
                count += 1
    return twin, count


def is_constant(values: list) -> bool:
    """Every output holds one value (or none): nothing a comparison could tell apart."""
    return all(w.numel() == 0 or bool((w == w.reshape(-1)[0]).all()) for w in values)


def checked(text: str, path: str):
    spec = check_text(text, path)
    errors = [d for d in spec.diagnostics if d.severity == "error"]
    if errors:
        first = errors[0]
        raise ImportFailure(f"internal: the written spec does not check: line {first.span.line}: "
                            f"[{first.code}] {first.message}")
    return spec


def outputs(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out += outputs(v)
        return out
    return []


def second_sizes(spec, inputs, dynamic: list[str]) -> dict | None:
    """Other sizes for the dynamic dims that satisfy every assumption, if there are any."""
    base = {n: v for n, v in spec.example.items()}
    for delta in ((1, -1), (1, 1), (2, -2), (1, 0)):
        sizes = dict(base)
        for k, name in enumerate(dynamic):
            sizes[name] = max(2, base[name] + delta[min(k, 1)])
        try:
            runner.resolve_sizes(spec, {n: sizes[n] for n in dynamic})
            return sizes
        except runner.SizesError:
            continue
    return None


def verify(text: str, path: str, module, inputs, call_kwargs: dict, mapping: dict, dynamic: list[str],
           vocab: int) -> Verified:
    spec = checked(text, path)
    try:
        gen = generate(spec)
    except CodegenError as e:
        raise ImportFailure(f"the spec checks but its module cannot be generated: {e}") from e
    example = {n: v for n, v in spec.example.items()}
    _mod, model = runner.build(gen, example)
    module, randomised = randomise_constants(module)
    try:
        copy_weights(model, module, mapping)
    except WeightsError as e:
        raise ImportFailure(f"the weights do not fit the generated module: {e}") from e
    params_module = sum(p.numel() for p in module.parameters())
    params_spec = runner.value_at(spec.total_params, spec, example)
    if params_spec != params_module:
        raise ImportFailure(f"the spec counts {params_spec} parameters, the module has {params_module}")
    size_sets = [None]
    other = second_sizes(spec, inputs, dynamic) if dynamic else None
    if other is not None:
        size_sets.append({n: other[n] for n in dynamic})
    worst, constant = 0.0, True
    for k, sizes in enumerate(size_sets):
        tensors = example_inputs(inputs, vocab, seed=k + 1, sizes=sizes)
        with torch.no_grad():
            want = outputs(module(*tensors, **call_kwargs))
            got = outputs(model(*tensors))
        if isinstance(got, list) and len(got) != len(want):
            raise ImportFailure(f"the module returns {len(want)} tensors, the spec {len(got)}")
        constant = constant and is_constant(want)
        for w, g in zip(want, _ordered(got, model, tensors, mapping)):
            if tuple(w.shape) != tuple(g.shape):
                raise ImportFailure(f"an output is {tuple(g.shape)} from the spec but {tuple(w.shape)} "
                                    "from the module")
            diff = (w.float() - g.float()).abs().max().item() if w.numel() else 0.0
            scale = max(1.0, w.float().abs().max().item() if w.numel() else 0.0)
            if not diff <= TOLERANCE * scale:
                raise ImportFailure(f"the spec's module differs from the original by {diff:.3g} "
                                    f"(at sizes {sizes or example})")
            worst = max(worst, diff)
    return Verified(worst, params_spec, params_module, [s or example for s in size_sets], randomised, constant)


def _ordered(got: list, model, tensors, mapping) -> list:
    """The generated outputs in the original's order (a dict comes back in spec order)."""
    with torch.no_grad():
        value = model(*tensors)
    if isinstance(value, dict):
        return [value[n] for n in mapping["outputs"]]
    return got
