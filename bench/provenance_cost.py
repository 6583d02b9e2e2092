"""What the axis-provenance pass costs `check`: the same specs checked with the pass
on and off, interleaved in one process, several runs, medians side by side.

    python -m bench.provenance_cost [--runs 9] [--layers 1,12,48]

Cold runs clear sympy's cache before each check (as `python -m bench` does), so the
prover's work is counted in both columns; the ratio is what the pass adds.
"""
from __future__ import annotations

import argparse
import statistics
import time

from sympy.core.cache import clear_cache

from bench.specgen import gpt_spec
from shapelang.checker import checker as checker_mod
from shapelang.checker.checker import Checker, check_text


def _timed(text: str, with_pass: bool) -> float:
    original = Checker.provenance
    if not with_pass:
        Checker.provenance = lambda self: None
    try:
        clear_cache()
        t0 = time.perf_counter()
        spec = check_text(text)
        elapsed = time.perf_counter() - t0
    finally:
        Checker.provenance = original
    assert spec.ok, "the benchmark spec failed to check"
    return elapsed


def run(runs: int = 9, layers=(1, 12, 48), forms=("unrolled", "stack")) -> list[dict]:
    rows = []
    for form in forms:
        for n in layers:
            text = gpt_spec(n, form)
            _timed(text, True), _timed(text, False)          # warm-up: imports, lark tables
            on, off = [], []
            for _ in range(runs):
                off.append(_timed(text, False))
                on.append(_timed(text, True))
            rows.append({"form": form, "layers": n, "off": statistics.median(off),
                         "on": statistics.median(on), "off_min": min(off), "on_min": min(on)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--layers", default="1,12,48")
    args = ap.parse_args()
    rows = run(args.runs, tuple(int(x) for x in args.layers.split(",")))
    print("| form | layers | check without the pass | check with it | ratio (median) | ratio (min) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['form']} | {r['layers']} | {r['off'] * 1e3:.1f} ms | {r['on'] * 1e3:.1f} ms | "
              f"{r['on'] / r['off']:.3f} | {r['on_min'] / r['off_min']:.3f} |")
    print(f"\n{args.runs} interleaved runs each, cold sympy cache; shapelang module: {checker_mod.__name__}")


if __name__ == "__main__":
    main()
