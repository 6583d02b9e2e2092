"""cProfile the checker on the big unrolled GPT specs and show where the time goes.

  python -m bench.profile_checker                 48 and 96 layers, unrolled
  python -m bench.profile_checker --layers 96 --form stack --top 40
  python -m bench.profile_checker --warm          keep sympy's cache warm (a second check in-process)
  python -m bench.profile_checker --dump out.prof also save the raw profile (for snakeviz etc.)

For each spec it prints the wall time with and without the profiler, the top
functions by own time and by cumulative time, and the boundary table: every
call from shapelang code into another library (sympy, lark, ...), with the
calling shapelang function and line, summed. That table is the answer to
"which sympy calls dominate, and from where".
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections import defaultdict
from pathlib import Path

from . import specgen

_PKG = f"{Path('shapelang')}/"   # frames whose file is inside the shapelang package


def _where(func) -> str:
    filename, line, name = func
    if filename == "~":
        return name            # a builtin such as <method 'xreplace' ...>
    parts = Path(filename).parts
    for anchor in ("shapelang", "sympy", "lark", "torch"):
        if anchor in parts:
            i = len(parts) - 1 - parts[::-1].index(anchor)
            return f"{'/'.join(parts[i:])}:{line}({name})"
    return f"{Path(filename).name}:{line}({name})"


def _is_ours(func) -> bool:
    filename = func[0].replace("\\", "/")
    return _PKG in filename and "/bench/" not in filename


def boundary(stats: pstats.Stats, top: int) -> list[tuple[float, int, str, str]]:
    """(cumulative seconds, calls, shapelang caller, foreign callee), largest first."""
    rows = []
    for callee, (_cc, _nc, _tt, _ct, callers) in stats.stats.items():
        if _is_ours(callee):
            continue
        for caller, (_c, ncalls, _t, cum) in callers.items():
            if _is_ours(caller):
                rows.append((cum, ncalls, _where(caller), _where(callee)))
    rows.sort(reverse=True)
    return rows[:top]


def by_callee(stats: pstats.Stats, top: int) -> list[tuple[float, int, str]]:
    """Foreign entry points called from shapelang, summed over all shapelang callers."""
    acc: dict = defaultdict(lambda: [0.0, 0])
    for callee, (_cc, _nc, _tt, _ct, callers) in stats.stats.items():
        if _is_ours(callee):
            continue
        for caller, (_c, ncalls, _t, cum) in callers.items():
            if _is_ours(caller):
                acc[_where(callee)][0] += cum
                acc[_where(callee)][1] += ncalls
    rows = sorted(((v[0], v[1], k) for k, v in acc.items()), reverse=True)
    return rows[:top]


def profile_one(layers: int, form: str, top: int, warm: bool, dump: str | None) -> str:
    from sympy.core.cache import clear_cache

    from shapelang.checker.checker import check_text

    text = specgen.gpt_spec(layers, form)
    spec = check_text(text)                        # warm-up: imports, lark grammar
    assert spec.ok, [d.message for d in spec.diagnostics[:3]]
    n_ops = specgen.count_steps(spec)
    if not warm:
        clear_cache()
    t0 = time.perf_counter()
    check_text(text)
    plain = time.perf_counter() - t0
    if not warm:
        clear_cache()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    check_text(text)
    prof.disable()
    profiled = time.perf_counter() - t0
    if dump:
        stem = dump.removesuffix(".prof")
        prof.dump_stats(f"{stem}_{form}_{layers}L.prof")
    stats = pstats.Stats(prof)
    total = stats.total_tt

    out = io.StringIO()
    w = out.write
    w(f"== {form} {layers} layers: {n_ops} ops, sympy cache {'warm' if warm else 'cold'}\n")
    w(f"   wall {plain * 1e3:.0f} ms without profiler ({plain / n_ops * 1e6:.0f} µs/op), "
      f"{profiled * 1e3:.0f} ms profiled; profile total {total * 1e3:.0f} ms\n\n")

    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    w(f"-- top {top} by own time\n   {'own ms':>8} {'cum ms':>8} {'calls':>8}  function\n")
    for func, (_cc, nc, tt, ct, _callers) in rows:
        w(f"   {tt * 1e3:8.1f} {ct * 1e3:8.1f} {nc:8d}  {_where(func)}\n")

    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)[:top]
    w(f"\n-- top {top} by cumulative time\n   {'cum ms':>8} {'%':>5} {'calls':>8}  function\n")
    for func, (_cc, nc, _tt, ct, _callers) in rows:
        w(f"   {ct * 1e3:8.1f} {100 * ct / total:5.1f} {nc:8d}  {_where(func)}\n")

    w(f"\n-- foreign calls made by shapelang code, by callee (cumulative, summed)\n"
      f"   {'cum ms':>8} {'%':>5} {'calls':>8}  callee\n")
    for cum, n, callee in by_callee(stats, top):
        w(f"   {cum * 1e3:8.1f} {100 * cum / total:5.1f} {n:8d}  {callee}\n")

    w(f"\n-- foreign calls made by shapelang code, by call site\n"
      f"   {'cum ms':>8} {'%':>5} {'calls':>8}  shapelang caller -> callee\n")
    for cum, n, caller, callee in boundary(stats, top):
        w(f"   {cum * 1e3:8.1f} {100 * cum / total:5.1f} {n:8d}  {caller} -> {callee}\n")
    return out.getvalue()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_checker", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, nargs="+", default=[48, 96])
    p.add_argument("--form", choices=specgen.FORMS, default="unrolled")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--warm", action="store_true", help="do not clear sympy's cache before the run")
    p.add_argument("--dump", metavar="FILE.prof",
                   help="save each raw profile (suffixed with form and layers)")
    args = p.parse_args(argv)
    for n in args.layers:
        print(profile_one(n, args.form, args.top, args.warm, args.dump))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
