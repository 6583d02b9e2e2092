"""CPU time of `parse` and of a cold in-process `check_text`, for a shared machine.

  python -m bench.cpu_check                 48 layers, unrolled, 9 runs
  python -m bench.cpu_check --layers 96 --form stack --runs 15

Wall time on the project's 2-CPU machine moves 2-5x with other people's work
(see RESULTS.md, "Noise on this machine"); this process's CPU seconds
(time.process_time) move far less, so before/after comparisons of the parser
and checker can be made while the machine is busy. Prints median and minimum
of both clocks.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time

from . import specgen


def measure(fn, runs: int, before=None) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    for _ in range(runs):
        if before:
            before()
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return cpu, wall


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=48)
    p.add_argument("--form", choices=specgen.FORMS, default="unrolled")
    p.add_argument("--runs", type=int, default=9)
    args = p.parse_args(argv)

    from sympy.core.cache import clear_cache

    from shapelang.checker.checker import check_text
    from shapelang.syntax.parser import parse

    text = specgen.gpt_spec(args.layers, args.form)
    assert check_text(text).ok                    # warm-up: imports, grammar
    rows = (("parse", measure(lambda: parse(text), args.runs)),
            ("check, cold (parse + check)", measure(lambda: check_text(text), args.runs, clear_cache)))
    print(f"{args.form} {args.layers} layers, {args.runs} runs; ms, median [min]")
    for name, (cpu, wall) in rows:
        print(f"  {name:28} cpu {statistics.median(cpu) * 1e3:6.1f} [{min(cpu) * 1e3:6.1f}]"
              f"   wall {statistics.median(wall) * 1e3:6.1f} [{min(wall) * 1e3:6.1f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
