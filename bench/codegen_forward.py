"""Forward-pass speed of the code shapelang generates, against nanoGPT with flash attention.

Two models compute the same GPT-2 small function on the CPU (eval mode,
inference_mode), with the same weights:

  generated   the module `shapelang codegen` writes for specs/gpt2_small.shape
              (specs/pytorch/gpt2_bench.shape at GPT-2 small's sizes if that is absent);
              its attention is one F.scaled_dot_product_attention call
  nanogpt     nanoGPT's model.py with F.scaled_dot_product_attention(is_causal=True)

The weights go from nanoGPT into the generated module with
shapelang.codegen.torch_compat.load_matching (by shape and role), and the two are
checked to give the same logits before anything is timed. For each input shape
(default: batch 1 x 1024 tokens and batch 8 x 256) each model runs `warmup`
times, then `repeats` timed runs, interleaved (the order alternates every round)
so that drift on the machine hits both alike. Reported per shape: median, min and
max of each model, and the ratio generated / nanogpt of the medians and the
median of the per-round ratios (target <= 1.05).

    python bench/codegen_forward.py [--repeats 5] [--layers 12] [--shapes 1x1024,8x256] [--threads N]
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPT2_SMALL = ROOT / "specs" / "gpt2_small.shape"
FALLBACK = ROOT / "specs" / "pytorch" / "gpt2_bench.shape"
GPT2_SIZES = {"V": 50257, "Ctx": 1024, "D": 768, "H": 12, "L": 12}
SHAPES = ((1, 1024), (8, 256))
TARGET = 1.05


def _load() -> str:
    try:
        import os

        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except (OSError, AttributeError):
        return "unknown"


def _torch():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*NumPy.*")
        import torch
    return torch


# ---------------------------------------------------------------- the models

def _generated(layers: int):
    """(spec path, sizes, model) for the generated GPT-2 small with `layers` blocks."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from shapelang import codegen
    from shapelang.checker.checker import check_file
    from shapelang.codegen import runner

    spec, overrides = None, {"B": 1, "S": 16, "L": layers}
    if GPT2_SMALL.exists():
        spec = check_file(str(GPT2_SMALL))
    if spec is None or not spec.ok:
        spec = check_file(str(FALLBACK))
        overrides.update({**GPT2_SIZES, "L": layers})
    if not spec.ok:
        raise RuntimeError(f"{spec.path} does not check")
    sizes = runner.resolve_sizes(spec, overrides)
    gen = codegen.generate(spec)
    if "scaled_dot_product_attention" not in gen.source:
        raise RuntimeError("the generated module does not use F.scaled_dot_product_attention")
    _mod, model = runner.build(gen, sizes, seed=0)
    return Path(spec.path), sizes, model


def _nanogpt(sizes: dict):
    """nanoGPT's model.py (bench/nanogpt.py: flash attention, tied LM head, dropout 0.1), in eval mode."""
    _torch().manual_seed(1)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench.nanogpt import GPT, GPTConfig

    config = GPTConfig(block_size=sizes["Ctx"], vocab_size=sizes["V"], n_layer=sizes["L"],
                       n_head=sizes["H"], n_embd=sizes["D"], dropout=0.1)
    return GPT(config).eval()


# ---------------------------------------------------------------- timing

def _time(models: dict, idx, repeats: int, warmup: int) -> dict:
    samples: dict = {name: [] for name in models}
    names = list(models)
    for _ in range(warmup):
        for name in names:
            models[name](idx)
    for r in range(repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            models[name](idx)
            samples[name].append(time.perf_counter() - t0)
    return samples


def run(repeats: int = 5, *, layers: int = 12, shapes=SHAPES, threads: int | None = None,
        warmup: int = 1) -> dict:
    """Time both forward passes at each shape; a flat dict of numbers for bench/__main__.py."""
    torch = _torch()
    from shapelang.codegen import torch_compat

    load_start = _load()
    threads = threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    spec_path, sizes, generated = _generated(layers)
    nanogpt = _nanogpt(sizes)
    torch_compat.load_matching(generated, nanogpt)
    models = {"generated": generated, "nanogpt": nanogpt}
    probe = torch.randint(0, sizes["V"], (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        diff = (generated(probe) - nanogpt(probe)).abs().max().item()
    if not math.isfinite(diff) or diff > 1e-3:
        raise RuntimeError(f"the two models disagree by {diff}")
    try:
        spec_name = spec_path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        spec_name = spec_path.name
    out: dict = {"spec": spec_name,
                 "model": (f"{sizes['L']} layers, D={sizes['D']}, H={sizes['H']}, V={sizes['V']}, "
                           f"{sum(p.numel() for p in generated.parameters()):,} parameters"),
                 "threads": threads, "warmup": warmup, "repeats": repeats,
                 "max_abs_logit_diff": diff}
    met = True
    for batch, context in shapes:
        idx = torch.randint(0, sizes["V"], (batch, context), generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            samples = _time(models, idx, repeats, warmup)
        key = f"{batch}x{context}"
        for name, s in samples.items():
            out[f"{key}_{name}_median_s"] = statistics.median(s)
            out[f"{key}_{name}_min_s"] = min(s)
            out[f"{key}_{name}_max_s"] = max(s)
        ratio = out[f"{key}_generated_median_s"] / out[f"{key}_nanogpt_median_s"]
        out[f"{key}_ratio"] = ratio
        out[f"{key}_ratio_paired"] = statistics.median(
            g / n for g, n in zip(samples["generated"], samples["nanogpt"]))
        met = met and ratio <= TARGET
    out["target"] = f"generated / nanogpt <= {TARGET} at every shape"
    out["target_met"] = met
    out["load_average_start"] = load_start
    out["load_average_end"] = _load()
    return out


def _shapes(text: str):
    return tuple(tuple(int(x) for x in item.split("x")) for item in text.split(",") if item)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="timed runs per model and shape (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per model first (default 1)")
    p.add_argument("--layers", type=int, default=12, help="blocks (default 12, GPT-2 small)")
    p.add_argument("--shapes", default="1x1024,8x256", help="BATCHxCONTEXT,... (default 1x1024,8x256)")
    p.add_argument("--threads", type=int, help="torch.set_num_threads for both (default: torch's)")
    args = p.parse_args(argv)
    shapes = _shapes(args.shapes)
    res = run(args.repeats, layers=args.layers, shapes=shapes, threads=args.threads, warmup=args.warmup)
    print(f"GPT-2 forward on the CPU: {res['spec']}, {res['model']}")
    print(f"{res['threads']} threads, {res['warmup']} warm-up + {res['repeats']} runs each, interleaved; "
          f"max |logit difference| {res['max_abs_logit_diff']:.2e}\n")
    print(f"{'input':<9} {'generated':>10} {'nanogpt':>10} {'ratio':>7} {'paired':>7}   (medians; min..max)")
    for batch, context in shapes:
        k = f"{batch}x{context}"
        print(f"{k:<9} {res[k + '_generated_median_s']:>9.3f}s {res[k + '_nanogpt_median_s']:>9.3f}s "
              f"{res[k + '_ratio']:>7.3f} {res[k + '_ratio_paired']:>7.3f}   "
              f"generated {res[k + '_generated_min_s']:.3f}..{res[k + '_generated_max_s']:.3f}s, "
              f"nanogpt {res[k + '_nanogpt_min_s']:.3f}..{res[k + '_nanogpt_max_s']:.3f}s")
    print(f"\ntarget generated / nanogpt <= {TARGET}: {'met' if res['target_met'] else 'NOT met'}")
    print(f"load average at start {res['load_average_start']}, at end {res['load_average_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
