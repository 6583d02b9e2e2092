"""The checker of this tree against the checker of another commit, side by side in one run.

    python -m bench.checker_versions REF [--runs 7] [--layers 12,48] [--forms unrolled,stack]
                                         [--models gpt,llama] [--after-parse]

REF's `shapelang` package is exported (git archive) into a temporary folder. Each round
starts one fresh process per version, alternating which goes first; each process checks
every spec of the bench (bench/specgen.py) in-process several times, cold (sympy's cache
cleared before each check, as in a new process) and reports its medians. The table gives
the medians over rounds of both versions and their ratio (this tree / REF).

`--models`: the models of bench/specgen.py to check (gpt, llama; the specs come from this
tree's bench/specgen.py for both versions). `--after-parse`: the CPU time of the check after
the parse alone (the text parsed once, then the checker's walk, provenance and the passes after
it, garbage collected before each), what a faster parser does not change.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
from sympy.core.cache import clear_cache
import gc
from bench.specgen import MODELS
from shapelang.checker import advice
from shapelang.checker.checker import Checker, check_text
from shapelang.syntax.parser import parse_recovering
after = sys.argv[7] == "1"


def after_parse(text, parsed):   # check_text's work once the text is parsed (in every version)
    out = Checker(parsed[0], parsed[2]).run()
    return advice.run(advice.PASSES, advice.Findings(text, out, lambda t: check_text(t, prove_fixes=False)))


out = {}
for model in sys.argv[6].split(","):
    for form in sys.argv[3].split(","):
        for n in map(int, sys.argv[4].split(",")):
            text = MODELS[model](n, form)
            check_text(text)
            parsed = parse_recovering(text, "<input>")
            times = []
            for _ in range(int(sys.argv[5])):
                clear_cache()
                if after:
                    gc.collect()
                    t0 = time.process_time()
                    spec = after_parse(text, parsed)
                    times.append(time.process_time() - t0)
                else:
                    t0 = time.perf_counter()
                    spec = check_text(text)
                    times.append(time.perf_counter() - t0)
                assert spec.ok
            out[f"{model} {form} {n}"] = statistics.median(times)
print(json.dumps(out))
"""


def _export(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", "--format=tar", ref, "shapelang", "grammars"], cwd=ROOT,
                             check=True, capture_output=True).stdout
    tar = into / "ref.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    grammars = into / "shapelang" / "grammars"
    if not grammars.exists() and (into / "grammars").exists():
        (into / "grammars").rename(grammars)
    return into


def _child(code_root: Path, forms: str, layers: str, repeats: int, models: str = "gpt",
           after: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", _CHILD, str(code_root), str(ROOT), forms, layers, str(repeats),
                        models, "1" if after else "0"],
                       check=True, capture_output=True, text=True, env=env, cwd=str(code_root))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref")
    ap.add_argument("--runs", type=int, default=7, help="rounds (one process per version each)")
    ap.add_argument("--repeats", type=int, default=3, help="checks per spec in each process")
    ap.add_argument("--layers", default="12,48")
    ap.add_argument("--forms", default="unrolled,stack")
    ap.add_argument("--models", default="gpt", help="models of bench/specgen.py: gpt, llama")
    ap.add_argument("--after-parse", action="store_true", help="CPU time of the check after the parse")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = _export(args.ref, Path(tmp))
        rounds = {"here": [], "ref": []}
        for k in range(args.runs):
            order = [("here", ROOT), ("ref", old)] if k % 2 == 0 else [("ref", old), ("here", ROOT)]
            for name, root in order:
                rounds[name].append(_child(root, args.forms, args.layers, args.repeats, args.models,
                                           args.after_parse))
    print(f"| spec | {args.ref} (ms, median of {args.runs}) | this tree (ms) | ratio |")
    print("| --- | --- | --- | --- |")
    for key in rounds["here"][0]:
        a = statistics.median(r[key] for r in rounds["ref"]) * 1000
        b = statistics.median(r[key] for r in rounds["here"]) * 1000
        print(f"| {key} layers{' (after the parse, CPU)' if args.after_parse else ''} | {a:.1f} | {b:.1f} "
              f"| {b / a:.3f} |")


if __name__ == "__main__":
    main()
