"""Grader throughput: grade 1,000 submissions of a typical exercise.

`run()` grades a seeded mix of right and wrong submissions of
exercises/02_split_heads.shape (four blanks: a view, a transpose, two shapes),
written the many ways learners write them (spacing, comments, equivalent
answers, typical mistakes, a few that do not parse), and returns the rate for
the whole run on one core, the grader built once per exercise as `shapelang
grade` does. It also reports the rate with the grader's memo tables cleared
before every submission (the cost when no two learners answer alike), and the
whole run on the largest exercise of the course (11_cross_attention).

    python bench/grader_throughput.py
"""
from __future__ import annotations

import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"
TARGET = 200.0   # submissions per second

POOLS = {
    "02_split_heads": {
        "split": (["view [B, S, H, Dh]", "view [B, S, H, D/H]", "reshape [B, S, H, Dh]",
                   "view [B, S, H, -1]", "view [B, -1, H, Dh]", "view [B,S,H,D//H]"],
                  ["view [B, H, S, Dh]", "view [B, S, Dh, H]", "view [B, S, H, 64]",
                   "view [B, S, D]", "transpose 1 2", "view [B, S, 8, 64]"]),
        "swap": (["transpose 1 2", "transpose 2 1", "transpose -3 -2", "permute 0 2 1 3",
                  "transpose 1 2 -> contiguous"],
                 ["transpose 0 1", "transpose 2 3", "contiguous", "transpose -2 -1"]),
        "qh": (["[B, H, S, Dh]", "[B, H, S, D/H]", "[B,H,S,D//H]", "[B, H, S, Dh*1]"],
               ["[B, S, H, Dh]", "[B, H, S, D]", "[1, 8, 4, 64]", "[B, S, D]", "[H, B, S, Dh]"]),
        "one": (["[B, S, Dh]", "[B, S, D/H]", "[B, S, D//H]"],
                ["[B, H, S, Dh]", "[B, S, D]", "[B, Dh]", "[S, Dh]"]),
    },
    "11_cross_attention": {
        "src": (["memory"], ["target", "q"]),
        "ksplit": (["view [B, Sc, H, Dh]", "view [B, Sc, H, D/H]", "reshape [B, -1, H, Dh]"],
                   ["view [B, St, H, Dh]", "view [B, Sc, Dh, H]", "view [B, H, Sc, Dh]"]),
        "vsrc": (["memory"], ["target"]),
        "vsplit": (["view [B, Sc, H, Dh]", "view [B, Sc, H, -1]"],
                   ["view [B, St, H, Dh]", "view [B, H, Sc, Dh]"]),
        "scores": (["[B, H, St, Sc]", "[B,H,St,Sc]"],
                   ["[B, H, Sc, St]", "[B, H, St, St]", "[B, H, S, S]", "[1, 8, 6, 4]"]),
        "heads": (["[B, H, St, Dh]", "[B, H, St, D/H]"],
                  ["[B, H, Sc, Dh]", "[B, St, H, Dh]", "[B, H, St, Sc]"]),
        "out": (["[B, St, D]", "[B, St, H*Dh]"], ["[B, Sc, D]", "[B, St, H, Dh]", "[B, D]"]),
    },
}


def _noise(rng: random.Random, text: str) -> str:
    """How learners' files differ: spacing, comments, blank lines."""
    lines = text.split("\n")
    out = []
    for line in lines:
        r = rng.random()
        if r < 0.05:
            out.append("")
        if r < 0.10 and line.strip() and not line.lstrip().startswith("#"):
            line = line + "   # my answer"
        elif r < 0.15:
            line = re.sub(r", ", ",", line)
        out.append(line)
    return "\n".join(out)


def submissions(name: str, n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    text = (EXERCISES / f"{name}.shape").read_text()
    pools = POOLS[name]
    out = []
    for i in range(n):
        if i % 50 == 49:                       # a few that do not parse at all
            out.append(rng.choice(["", "Qh: Q -> ]]] [[[", "{\"score\": 100}", text[: len(text) // 3]]))
            continue
        good = rng.random() < 0.5              # about half the class gets everything right
        answers = {}
        for blank, (right, wrong) in pools.items():
            pick_wrong = not good and rng.random() < 0.4
            answers[blank] = rng.choice(wrong if pick_wrong else right)
        sub = re.sub(r"\?([A-Za-z0-9_]+)",
                     lambda m, a=answers: a.get(m.group(1), m.group(0)), text)
        out.append(_noise(rng, sub))
    return out


def _grader(name: str):
    from shapelang.teaching.grader import Grader
    return Grader((EXERCISES / f"{name}.shape").read_text(),
                  (EXERCISES / "solutions" / f"{name}.shape").read_text(), f"{name}.shape")


def _rate(name: str, subs: list[str], cold: bool = False) -> dict:
    start = time.perf_counter()
    grader = _grader(name)
    built = time.perf_counter()
    full = 0
    for k, text in enumerate(subs):
        if cold:
            grader.engine.memo.clear()
            grader.engine.vmemo.clear()
            grader.engine.parsed.clear()
            grader._judged.clear()
            grader._findings.clear()
            grader._respelled.clear()
        res = grader.grade_text(text, f"s{k}.shape")
        full += res.full_marks
    end = time.perf_counter()
    return {"submissions": len(subs), "seconds": round(end - start, 3),
            "setup_seconds": round(built - start, 3),
            "rate": round(len(subs) / (end - start), 1), "full_marks": full}


def run() -> dict:
    """Grade 1,000 submissions of a typical exercise; rates in submissions per second."""
    import shapelang.teaching.grader  # noqa: F401  (imports are not part of the rate)

    n = 1000
    main = _rate("02_split_heads", submissions("02_split_heads", n))
    cold = _rate("02_split_heads", submissions("02_split_heads", 100, seed=1), cold=True)
    big = _rate("11_cross_attention", submissions("11_cross_attention", n, seed=2))
    return {
        "exercise": "02_split_heads",
        "submissions": main["submissions"],
        "seconds": main["seconds"],
        "rate_per_s": main["rate"],
        "target_per_s": TARGET,
        "meets_target": main["rate"] >= TARGET,
        "full_marks": main["full_marks"],
        "setup_seconds": main["setup_seconds"],
        "cold_rate_per_s": cold["rate"],
        "largest_exercise": "11_cross_attention",
        "largest_rate_per_s": big["rate"],
        "largest_full_marks": big["full_marks"],
    }


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    result = run()
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    sys.exit(0 if result["meets_target"] else 1)
