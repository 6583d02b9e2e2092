"""Time the parse stage on the big unrolled GPT spec, against an earlier revision of it.

  python -m bench.profile_parse                      this tree: fresh processes, then warm parses
  python -m bench.profile_parse --against HEAD~8     and the tree at a git revision, in
                                                     alternating processes (old, new, old, ...)
  python -m bench.profile_parse --profile --top 25   cProfile of warm parses of this tree

Each process imports the parser, parses once (the first parse builds the grammar and
whatever the parser prepares once per process), then parses `--runs` more times; CPU time
(time.process_time) of `parse_recovering`, the parse `check` runs. The report gives the
median over processes of each process's median warm parse, and the first parse.
The revision is exported with `git archive` into a temporary folder; nothing is written
into the tree.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from . import specgen

ROOT = Path(__file__).resolve().parent.parent

# Runs in a child process: argv = [tree to import shapelang from, or "", spec file, runs]
_CHILD = r"""
import json, statistics, sys, time
if sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
t = time.process_time()
from shapelang.syntax import parser
imported = time.process_time() - t
text = open(sys.argv[2], encoding="utf-8").read()
t = time.process_time()
spec, diagnostics, _ = parser.parse_recovering(text)
first = time.process_time() - t
assert spec is not None and not diagnostics, diagnostics[:1]
warm = []
for _ in range(int(sys.argv[3])):
    t = time.process_time()
    parser.parse_recovering(text)
    warm.append(time.process_time() - t)
print(json.dumps({"import": imported, "first": first, "warm": statistics.median(warm),
                  "statements": len(spec.statements)}))
"""


def export(revision: str, into: Path) -> Path:
    """The shapelang package and grammar at `revision`, importable from `into`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "shapelang", "grammars"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    package = into / "shapelang" / "grammars"     # as an installed copy has it
    package.mkdir(exist_ok=True)
    (package / "__init__.py").touch()
    (package / "shapelang.lark").write_bytes((into / "grammars" / "shapelang.lark").read_bytes())
    return into


def child(tree: str, spec: Path, runs: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, tree, str(spec), str(runs)],
                         check=True, capture_output=True, text=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout)


def compare(layers: int, form: str, runs: int, processes: int, against: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / f"gpt_{form}_{layers}.shape"
        spec.write_text(specgen.gpt_spec(layers, form), encoding="utf-8")
        trees = {"this tree": ""}
        if against:
            trees[against] = str(export(against, Path(tmp)))
        results: dict = {name: [] for name in trees}
        for _ in range(processes):
            for name, tree in trees.items():          # alternating, so load hits both alike
                results[name].append(child(tree, spec, runs))
        print(f"parse_recovering, GPT {layers} layers ({form}), {processes} processes x "
              f"{runs} warm parses, CPU ms (median over processes)")
        print(f"{'tree':<16}{'warm parse':>12}{'first parse':>13}{'import':>9}")
        medians = {}
        for name, rows in results.items():
            med = {k: statistics.median(r[k] for r in rows) * 1000 for k in ("warm", "first", "import")}
            medians[name] = med
            print(f"{name:<16}{med['warm']:>12.1f}{med['first']:>13.1f}{med['import']:>9.1f}")
        if against:
            new, old = medians["this tree"], medians[against]
            print(f"speed-up: warm {old['warm'] / new['warm']:.2f}x, "
                  f"first {old['first'] / new['first']:.2f}x")


def profile(layers: int, form: str, runs: int, top: int) -> None:
    import cProfile
    import pstats

    from shapelang.syntax import parser

    text = specgen.gpt_spec(layers, form)
    parser.parse_recovering(text)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(runs):
        parser.parse_recovering(text)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--form", default="unrolled")
    ap.add_argument("--runs", type=int, default=9, help="warm parses per process")
    ap.add_argument("--processes", type=int, default=5, help="processes per tree")
    ap.add_argument("--against", help="a git revision to compare with")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args(argv)
    if a.profile:
        profile(a.layers, a.form, a.runs, a.top)
    else:
        compare(a.layers, a.form, a.runs, a.processes, a.against)


if __name__ == "__main__":
    main()
