"""Mutated specs through codegen and run (a seeded fuzzer, bounded for CI).

Each mutant is a shipped spec with one to three random edits: a token replaced
by another of the spec's tokens or a hostile one, a line duplicated or
deleted, an operation appended. A mutant that checks must either be refused by
codegen with a CodegenError or give a module that compiles, and `run` must
either refuse its sizes (SizesError) or build and run it with every shape as
the checker proved: never another exception.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from tiers import sweep

from shapelang import codegen
from shapelang.checker.checker import check_text
from shapelang.codegen import runner

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.shape")) + sorted((ROOT / "specs" / "pytorch").glob("*.shape")) \
    + sorted((ROOT / "exercises" / "solutions").glob("*.shape"))
EXTRA_TOKENS = ["0", "1", "2", "-1", "1e300*1e300", "F", "nnf", "class", "__x", "_version", "return", '"""']
APPENDED = ["relu", "chunk 1 -1", "split [D] -1", "transpose 0 1", "contiguous", "softmax 0", "scale 2",
            "mean -1", "sum 0 keepdim", "unsqueeze 0", "squeeze", "flatten 0", "dropout 0.0"]
MUTANTS = 200


def mutate(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    tokens = re.findall(r"\w+|[^\w\s]", text) + EXTRA_TOKENS
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(lines))
        r = rng.random()
        words = re.findall(r"\w+|[^\w\s]", lines[k])
        if r < 0.5 and words:
            words[rng.randrange(len(words))] = rng.choice(tokens)
            lines[k] = ("  " if lines[k].startswith("  ") else "") + " ".join(words)
        elif r < 0.7:
            lines.insert(k, lines[rng.randrange(len(lines))])
        elif r < 0.85:
            del lines[k]
        else:
            lines[k] += " -> " + rng.choice(APPENDED)
    return "\n".join(lines)


@pytest.mark.parametrize("mutants", sweep(MUTANTS, MUTANTS // 5))
def test_mutated_specs_through_codegen_and_run(mutants):
    pytest.importorskip("torch")
    rng = random.Random(20260516)
    texts = [p.read_text() for p in SPECS]
    counts = {"refused by check": 0, "refused by codegen": 0, "sizes refused": 0, "ran": 0}
    for _ in range(mutants):
        text = mutate(rng.choice(texts), rng)
        spec = check_text(text, "mutant.shape")
        if not spec.ok:
            counts["refused by check"] += 1
            continue
        try:
            sources = [codegen.generate(spec, instrument=i).source for i in (False, True)]
        except codegen.CodegenError:
            counts["refused by codegen"] += 1
            continue
        for source in sources:
            compile(source, "<mutant>", "exec")
        try:
            rep = runner.run_spec(spec, runner.resolve_sizes(spec))
        except runner.SizesError:
            counts["sizes refused"] += 1
            continue
        assert rep.ok, text + "\n" + runner.report_text(rep)
        counts["ran"] += 1
    # the fuzzer reaches codegen and run (47 of 200 with today's specs; which mutants run
    # shifts with every spec added, so the floor leaves room)
    assert counts["ran"] >= mutants // 8, counts
