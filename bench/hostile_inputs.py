"""Hostile and careless inputs through `check_text`: the reproductions of issue 16 (items 17, 18).

  python -m bench.hostile_inputs        print the table
  (also run by `python -m bench` as the `hostile` section)

Each case is built here (nothing is read from outside the repository), checked
in this process, and timed as the median of a few runs after a warm-up. The
target is "well under 1 s" per file on the project's 2-CPU machine.
"""
from __future__ import annotations

import gc
import random
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "exercises" / "solutions" / "02_split_heads.shape"


def cases() -> dict[str, str]:
    sol = SOLUTION.read_text(encoding="utf-8")
    rng = random.Random(16)
    good = [f"y{i}: Q -> view [B, S, H, Dh] -> transpose 1 2 -> relu" for i in range(400)]
    bad = [f"z{i}: Q -> ) ( {i}" for i in range(60)]
    mixed = good + bad
    rng.shuffle(mixed)
    qh = "Qh: Q -> " + " ".join(["a"] * 60) + "\n"
    return {
        "solution + 400 statements + 60 broken lines (16 KB)": sol + "\n".join(mixed) + "\n",
        "160 KB of `Qh: Q -> a a ...` lines": sol + qh * (160 * 1024 // len(qh)),
        "one 200 KB line": sol + "Qh: Q -> " + " ".join(["a"] * 100_000) + "\n",
        "4,900 junk lines": sol + "".join(f"junk {i} !!\n" for i in range(4900)),
        "solution + 5,001 trailing blank lines": sol + "\n" * 5001,
        "unrolled 48-layer GPT, 60 broken lines": _broken_gpt(rng),
    }


def _broken_gpt(rng: random.Random) -> str:
    from . import specgen

    lines = specgen.gpt_spec(48, "unrolled").split("\n")
    for i in rng.sample(range(20, len(lines) - 2), 60):
        lines[i] = lines[i].replace(":", " :: ", 1)
    return "\n".join(lines)


def run(repeats: int = 3) -> dict:
    from shapelang.checker.checker import check_text

    out = {}
    for name, text in cases().items():
        check_text(text)                       # warm-up: imports, grammar
        samples, n_diag = [], 0
        for _ in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            spec = check_text(text, "upload.shape")
            samples.append(time.perf_counter() - t0)
            n_diag = len(spec.diagnostics)
        out[f"{name}: seconds"] = round(statistics.median(samples), 4)
        out[f"{name}: diagnostics"] = n_diag
    return out


if __name__ == "__main__":
    for key, value in run().items():
        print(f"{key:70} {value}")
