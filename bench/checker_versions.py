"""The checker of this tree against the checker of another commit, side by side in one run.

    python -m bench.checker_versions REF [--runs 7] [--layers 12,48] [--forms unrolled,stack]

REF's `shapelang` package is exported (git archive) into a temporary folder. Each round
starts one fresh process per version, alternating which goes first; each process checks
every spec of the bench (bench/specgen.py) in-process several times, cold (sympy's cache
cleared before each check, as in a new process) and reports its medians. The table gives
the medians over rounds of both versions and their ratio (this tree / REF).
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
from bench.specgen import gpt_spec
from shapelang.checker.checker import check_text
out = {}
for form in sys.argv[3].split(","):
    for n in map(int, sys.argv[4].split(",")):
        text = gpt_spec(n, form)
        check_text(text)
        times = []
        for _ in range(int(sys.argv[5])):
            clear_cache()
            t0 = time.perf_counter()
            spec = check_text(text)
            times.append(time.perf_counter() - t0)
            assert spec.ok
        out[f"{form} {n}"] = statistics.median(times)
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


def _child(code_root: Path, forms: str, layers: str, repeats: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", _CHILD, str(code_root), str(ROOT), forms, layers, str(repeats)],
                       check=True, capture_output=True, text=True, env=env, cwd=str(code_root))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref")
    ap.add_argument("--runs", type=int, default=7, help="rounds (one process per version each)")
    ap.add_argument("--repeats", type=int, default=3, help="checks per spec in each process")
    ap.add_argument("--layers", default="12,48")
    ap.add_argument("--forms", default="unrolled,stack")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = _export(args.ref, Path(tmp))
        rounds = {"here": [], "ref": []}
        for k in range(args.runs):
            order = [("here", ROOT), ("ref", old)] if k % 2 == 0 else [("ref", old), ("here", ROOT)]
            for name, root in order:
                rounds[name].append(_child(root, args.forms, args.layers, args.repeats))
    print(f"| spec | {args.ref} (ms, median of {args.runs}) | this tree (ms) | ratio |")
    print("| --- | --- | --- | --- |")
    for key in rounds["here"][0]:
        a = statistics.median(r[key] for r in rounds["ref"]) * 1000
        b = statistics.median(r[key] for r in rounds["here"]) * 1000
        print(f"| {key} layers | {a:.1f} | {b:.1f} | {b / a:.3f} |")


if __name__ == "__main__":
    main()
