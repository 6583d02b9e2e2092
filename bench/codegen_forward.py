"""Forward-pass speed of the code shapelang generates, against hand-written PyTorch.

Three models compute the same GPT-2 small function on the CPU (batch 8,
context 256, eval mode, inference_mode), with the same weights:

  generated     the module `shapelang codegen` writes for specs/gpt2_small.shape
                (specs/pytorch/gpt2_bench.shape at GPT-2 small's sizes if that is absent)
  handwritten   a nanoGPT-style model.py (manual attention with a causal mask buffer)
  torch         token/position embeddings + nn.TransformerEncoder (pre-norm, GELU,
                causal mask) + final layernorm + the tied LM head

Each model runs once to warm up, then `repeats` timed runs, interleaved (the
order rotates every round) so that drift on the machine hits all three alike.
The same torch.set_num_threads applies to all three. Reported: median, min and
max per model and the ratios generated / handwritten (target <= 1.05) and
generated / torch. Before timing, the three are checked to give the same logits.

    python bench/codegen_forward.py [--repeats 5] [--batch 8] [--context 256] [--threads N]
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

def _generated(batch: int, context: int):
    """(spec path, sizes, model) for the generated GPT-2 small."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from shapelang import codegen
    from shapelang.checker.checker import check_file
    from shapelang.codegen import runner

    spec, overrides = None, {"B": batch, "S": context}
    if GPT2_SMALL.exists():
        spec = check_file(str(GPT2_SMALL))
    if spec is None or not spec.ok:
        spec = check_file(str(FALLBACK))
        overrides.update(GPT2_SIZES)
    if not spec.ok:
        raise RuntimeError(f"{spec.path} does not check")
    sizes = runner.resolve_sizes(spec, overrides)
    gen = codegen.generate(spec)
    _mod, model = runner.build(gen, sizes, seed=0)
    return Path(spec.path), sizes, model


def _handwritten(sizes: dict):
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional
    n_embd, n_head, ctx = sizes["D"], sizes["H"], sizes["Ctx"]

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.attn_dropout = nn.Dropout(0.1)
            self.resid_dropout = nn.Dropout(0.1)
            self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx),
                                 persistent=False)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)
            self.dropout = nn.Dropout(0.1)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(sizes["V"], n_embd)
            self.wpe = nn.Embedding(ctx, n_embd)
            self.drop = nn.Dropout(0.1)
            self.h = nn.ModuleList([Block() for _ in range(sizes["L"])])
            self.ln_f = nn.LayerNorm(n_embd)

        def forward(self, idx):
            t = idx.size(1)
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.h:
                x = block(x)
            x = self.ln_f(x)
            return x @ self.wte.weight.t()     # tied LM head

    return GPT().eval()


def _torch_encoder(sizes: dict):
    torch = _torch()
    nn = torch.nn
    d = sizes["D"]

    class TorchGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(sizes["V"], d)
            self.wpe = nn.Embedding(sizes["Ctx"], d)
            layer = nn.TransformerEncoderLayer(d, sizes["H"], 4 * d, dropout=0.1, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, sizes["L"], enable_nested_tensor=False)
            self.ln_f = nn.LayerNorm(d)

        def forward(self, idx):
            t = idx.size(1)
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
            x = self.encoder(self.wte(idx) + self.wpe(pos), mask=mask, is_causal=True)
            return self.ln_f(x) @ self.wte.weight.t()

    return TorchGPT().eval()


def _copy_in_order(dst, src) -> None:
    """Copy parameters position by position (both register them in nanoGPT's order)."""
    torch = _torch()
    a, b = list(dst.parameters()), list(src.parameters())
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        raise ValueError("the generated module's parameters do not line up with nanoGPT's")
    with torch.no_grad():
        for x, y in zip(a, b):
            x.copy_(y)


def _copy_to_encoder(enc, ref) -> None:
    torch = _torch()
    with torch.no_grad():
        enc.wte.weight.copy_(ref.wte.weight)
        enc.wpe.weight.copy_(ref.wpe.weight)
        enc.ln_f.load_state_dict(ref.ln_f.state_dict())
        for mine, theirs in zip(enc.encoder.layers, ref.h):
            mine.self_attn.in_proj_weight.copy_(theirs.attn.c_attn.weight)
            mine.self_attn.in_proj_bias.copy_(theirs.attn.c_attn.bias)
            mine.self_attn.out_proj.load_state_dict(theirs.attn.c_proj.state_dict())
            mine.linear1.load_state_dict(theirs.mlp.c_fc.state_dict())
            mine.linear2.load_state_dict(theirs.mlp.c_proj.state_dict())
            mine.norm1.load_state_dict(theirs.ln_1.state_dict())
            mine.norm2.load_state_dict(theirs.ln_2.state_dict())


# ---------------------------------------------------------------- timing

def run(repeats: int = 3, *, batch: int = 8, context: int = 256, threads: int | None = None,
        warmup: int = 1) -> dict:
    """Time the three forward passes; a flat dict of numbers for bench/__main__.py."""
    torch = _torch()
    load_start = _load()
    threads = threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    spec_path, sizes, generated = _generated(batch, context)
    handwritten = _handwritten(sizes)
    _copy_in_order(handwritten, generated)
    encoder = _torch_encoder(sizes)
    _copy_to_encoder(encoder, handwritten)
    models = {"generated": generated, "handwritten": handwritten, "torch": encoder}

    # the same function: compare logits on a small input first
    probe = torch.randint(0, sizes["V"], (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        want = handwritten(probe)
        diffs = {name: (m(probe) - want).abs().max().item() for name, m in models.items()
                 if name != "handwritten"}

    idx = torch.randint(0, sizes["V"], (batch, context), generator=torch.Generator().manual_seed(0))
    samples: dict[str, list] = {name: [] for name in models}
    names = list(models)
    with torch.inference_mode():
        for _ in range(warmup):
            for name in names:
                models[name](idx)
        for r in range(repeats):
            for name in names[r % 3:] + names[:r % 3]:
                t0 = time.perf_counter()
                models[name](idx)
                samples[name].append(time.perf_counter() - t0)

    try:
        spec_name = spec_path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        spec_name = spec_path.name
    out: dict = {"spec": spec_name,
                 "model": (f"{sizes['L']} layers, D={sizes['D']}, H={sizes['H']}, V={sizes['V']}, "
                           f"{sum(p.numel() for p in generated.parameters()):,} parameters"),
                 "batch": batch, "context": context, "threads": threads, "warmup": warmup,
                 "repeats": repeats}
    for name in names:
        s = samples[name]
        out[f"{name}_median_s"] = statistics.median(s)
        out[f"{name}_min_s"] = min(s)
        out[f"{name}_max_s"] = max(s)
    ratio = out["generated_median_s"] / out["handwritten_median_s"]
    out["ratio_generated_vs_handwritten"] = ratio
    out["ratio_generated_vs_handwritten_min"] = out["generated_min_s"] / out["handwritten_min_s"]
    # per round the models run back to back, so a slow phase of the machine hits both
    out["ratio_generated_vs_handwritten_paired"] = statistics.median(
        g / h for g, h in zip(samples["generated"], samples["handwritten"]))
    out["ratio_generated_vs_torch"] = out["generated_median_s"] / out["torch_median_s"]
    out["target"] = f"generated / handwritten <= {TARGET}"
    out["target_met"] = ratio <= TARGET
    out["max_abs_logit_diff_generated"] = diffs["generated"]
    out["max_abs_logit_diff_torch"] = diffs["torch"]
    out["load_average_start"] = load_start   # 1, 5, 15 min: other work on the CPUs skews timings
    out["load_average_end"] = _load()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="timed runs per model (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per model first (default 1)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--threads", type=int, help="torch.set_num_threads for all three (default: torch's)")
    args = p.parse_args(argv)
    res = run(args.repeats, batch=args.batch, context=args.context, threads=args.threads,
              warmup=args.warmup)
    print(f"GPT-2 small forward on the CPU: {res['spec']}, {res['model']}")
    print(f"batch {res['batch']}, context {res['context']}, {res['threads']} threads, "
          f"{res['warmup']} warm-up + {res['repeats']} runs each, interleaved\n")
    print(f"{'model':<12} {'median':>9} {'min':>9} {'max':>9}")
    for name in ("generated", "handwritten", "torch"):
        print(f"{name:<12} {res[name + '_median_s']:>8.3f}s {res[name + '_min_s']:>8.3f}s "
              f"{res[name + '_max_s']:>8.3f}s")
    print(f"\ngenerated / handwritten: {res['ratio_generated_vs_handwritten']:.3f} (median), "
          f"{res['ratio_generated_vs_handwritten_min']:.3f} (min), "
          f"{res['ratio_generated_vs_handwritten_paired']:.3f} (median of per-round ratios); "
          f"target <= {TARGET}: "
          f"{'met' if res['target_met'] else 'NOT met'}")
    print(f"generated / nn.TransformerEncoder: {res['ratio_generated_vs_torch']:.3f}")
    print(f"max |logit difference| against handwritten: generated {res['max_abs_logit_diff_generated']:.2e}, "
          f"torch {res['max_abs_logit_diff_torch']:.2e}")
    print(f"load average at start {res['load_average_start']}, at end {res['load_average_end']} "
          "(anything above 0 is other work sharing the CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
