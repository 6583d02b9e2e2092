"""Generated modules in bfloat16 and float16, as an LLM is run: `model.to(torch.bfloat16)`.

Every shipped spec's module is built, converted with `.to(dtype)` and run on the CPU with its
float inputs in that dtype. It must run, and every output must have the dtype the checker
states, read in the module's dtype: a float32 output of the checker is in the module's dtype,
unless the spec casts it to float32 at the end (`logits -> float`, HF's `logits.float()`);
int and bool outputs keep theirs. The tables a module builds (rotary cos/sin, sinusoids,
ALiBi slopes, position buckets, the zeros an MoE accumulates into) are built in float32 and
cast where they meet the activations (shapelang.codegen.precision).
"""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import tiers
from torch_shapes import example_or_reduced

from shapelang.checker import dtypes
from shapelang.checker.ops.table import CASTS
from shapelang.codegen import runner
from shapelang.codegen.generator import generate

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

SPECS = sorted((tiers.ROOT / "specs").glob("*.shape")) + sorted((tiers.ROOT / "specs" / "pytorch").glob("*.shape"))


def stated(spec, name: str, ref: str, module_dtype: str) -> str:
    """The dtype the checker states for output `name`, in a module converted to `module_dtype`."""
    binding = next(b for b in spec.bindings if name in b.names or (name == "out" and b.names == ("return",)))
    t = binding.types[binding.names.index(name) if name in binding.names else 0]
    last = binding.steps[-1] if binding.steps else None
    explicit = last is not None and (last.op in CASTS or last.op == "to")
    return module_dtype if t.dtype == dtypes.DEFAULT and not explicit else t.dtype


# T5's bucket formula gives indices up to 31 whatever the number of buckets: fewer than 32
# buckets index past the table (a bound on values that the spec does not state)
KEEP = {"t5_small": {"NB"}, "t5_small_step": {"NB"}}


def small_sizes(spec, stem: str) -> dict:
    """The example (or reduced) sizes with each large size divided by the largest of 16, 8, 4, 2
    that keeps the assumptions, one size at a time: a model's layers at a width of 48, not 768."""
    sizes = example_or_reduced(spec, stem)
    base = {n for n in sizes if n not in spec.definitions or not spec.definitions[n].free_symbols}
    keep = KEEP.get(stem, set())
    for _ in range(2):
        for name in sorted(base - keep, key=lambda n: -sizes[n]):
            for f in (16, 8, 4, 2):
                if sizes[name] < 4 * f:
                    continue
                try:
                    sizes = runner.resolve_sizes(spec, {n: sizes[n] // f if n == name else sizes[n] for n in base})
                    break
                except runner.SizesError:
                    continue
    return sizes


def outputs(out) -> list:
    return list(out.values()) if isinstance(out, dict) else list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("path", tiers.sample(SPECS, every=8))
def test_every_spec_runs_in_bfloat16_and_float16_with_the_stated_dtypes(path: Path):
    spec = tiers.checked(path)
    assert spec.ok
    gen = generate(spec)
    sizes = small_sizes(spec, path.stem)
    try:        # sizes the assumptions allow may still be too small for a table's values (T5's buckets)
        with torch.no_grad():
            runner.build(gen, sizes)[1](*runner.make_inputs(spec, gen, sizes))
    except (RuntimeError, IndexError):
        sizes = example_or_reduced(spec, path.stem)
    inputs = runner.make_inputs(spec, gen, sizes)
    # the default tier runs each sampled spec in one of the two, in turn; the exhaustive one in both
    both = ("bfloat16", "float16")
    for name in both if tiers.exhaustive() else both[SPECS.index(path) % 2:][:1]:
        dt = getattr(torch, name)
        _mod, model = runner.build(gen, sizes)
        model = model.to(dt)
        args = [t.to(dt) if t.is_floating_point() else t for t in inputs]
        with torch.no_grad():
            got = outputs(model(*args))
        want = [stated(spec, n, ref, name) for n, ref in gen.outputs]
        assert [dtypes.canonical(str(t.dtype).removeprefix("torch.")) for t in got] == want, (path.stem, name)


def test_a_rotary_table_meets_bfloat16_activations_in_their_dtype():
    """HF's `cos.to(x.dtype)`: the table is built in float32, cast where it meets the queries;
    in float32 the cast changes nothing, so the module computes what the checker proved."""
    spec = tiers.checked(tiers.ROOT / "specs" / "rotary_embedding.shape")
    source = generate(spec).source
    assert ".dtype)" in source
    rep = runner.run_spec(spec, runner.resolve_sizes(spec))
    assert rep.ok, runner.report_text(rep)


def test_softmax_in_float32_is_cast_back_and_the_moe_accumulates_in_the_output_dtype():
    spec = tiers.checked(tiers.ROOT / "specs" / "mixtral_8x7b.shape")
    source = generate(spec).source
    assert "dtype=torch.float32).to(" in source           # probs: softmax in float32, cast back
    sizes = example_or_reduced(spec, "mixtral_8x7b")
    gen = generate(spec)
    _mod, model = runner.build(gen, sizes)
    model = model.to(torch.bfloat16)
    seen = []
    for m in model.modules():
        if type(m).__name__.startswith("SparseMoe"):
            m.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    with torch.no_grad():
        model(*runner.make_inputs(spec, gen, sizes))
    assert seen and set(seen) == {torch.bfloat16}
