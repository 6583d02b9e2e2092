"""Instructions one check after the parse costs, counted by valgrind (callgrind), for this tree
and optionally another commit: a measure that a busy machine does not move.

    python -m bench.check_instructions [--against REF] [--models llama,gpt] [--layers 48]

Each count is one process that checks the spec once and one that checks it three times, sympy's
cache cleared before each check as in a new process and the collector off; half the difference
is one check, without the start-up both share. The check is `check_text`'s work after the parse
(the checker's walk, provenance and the passes after it), as `bench.checker_versions
--after-parse` times it. Needs `valgrind` on PATH; each count takes a minute or two.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .checker_versions import ROOT, _export

_CHILD = r"""
import gc, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
from sympy.core.cache import clear_cache
from bench.specgen import MODELS
from shapelang.checker import advice
from shapelang.checker.checker import Checker, check_text
from shapelang.syntax.parser import parse_recovering

text = MODELS[sys.argv[3]](int(sys.argv[4]), "unrolled")
parsed = parse_recovering(text, "<input>")
gc.disable()
for _ in range(int(sys.argv[5])):
    clear_cache()
    out = Checker(parsed[0], parsed[2]).run()
    advice.run(advice.PASSES, advice.Findings(text, out, lambda t: check_text(t, prove_fixes=False)))
"""


def _instructions(code_root: Path, model: str, layers: int, checks: int) -> int:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                        _CHILD, str(code_root), str(ROOT), model, str(layers), str(checks)],
                       capture_output=True, text=True, env=env, cwd=str(code_root), check=True)
    found = re.search(r"Collected\s*:\s*(\d+)", r.stderr)
    if found is None:
        raise RuntimeError("callgrind printed no count:\n" + r.stderr[-2000:])
    return int(found.group(1))


def per_check(code_root: Path, model: str, layers: int) -> int:
    return (_instructions(code_root, model, layers, 3) - _instructions(code_root, model, layers, 1)) // 2


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", metavar="REF", help="also count the checker of this commit")
    ap.add_argument("--models", default="llama,gpt", help="models of bench/specgen.py: gpt, llama")
    ap.add_argument("--layers", type=int, default=48)
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        trees = [("this tree", ROOT)] + ([(args.against, _export(args.against, Path(tmp)))] if args.against else [])
        print(f"| spec | {' | '.join(name + ' (instructions per check)' for name, _ in trees)} |"
              + (" ratio |" if args.against else ""))
        print("| --- " * (len(trees) + 1 + bool(args.against)) + "|")
        for model in args.models.split(","):
            counts = [per_check(root, model, args.layers) for _, root in trees]
            ratio = f" {counts[0] / counts[1]:.3f} |" if args.against else ""
            print(f"| {model} unrolled {args.layers} layers | "
                  + " | ".join(f"{c / 1e6:.1f}M" for c in counts) + f" |{ratio}")


if __name__ == "__main__":
    main()
