"""Benchmark runner: `python -m bench` (from the repository root).

One run measures, side by side:

  startup   `python -c pass`, the sympy / lark / shapelang imports, `python -m shapelang
            --help`, a check with bytecode caching on, and the lark grammar build
  process   `python -m shapelang check FILE` as a subprocess (whole-process wall time)
  inproc    parse + check in this process, a fresh Checker each run; "cold" clears
            sympy's global cache before every run (as in a new process), "warm" does not
  export    torch.export.export of bench/reference_gpt.py with dynamic batch and
            sequence dims (torch.export.Dim), tiny widths
  width     the same export at GPT-2 widths against tiny widths, at one layer count
  hostile   bench.hostile_inputs.run(): issue 16's slow files through check (seconds, notes)
  grader    bench.grader_throughput.run(), if that module exists
  codegen   bench.codegen_forward.run(), if that module exists

then derives the export/shapelang ratios, checker time per operation at each
layer count, and the targets of issue 6. Specs come from bench/specgen.py in
two forms: `stack` (block + stack L Layer) and `unrolled` (every layer written
out, so operations grow linearly with L). Each figure is the median of several
runs after a warm-up, with min and max.

  python -m bench                        full run (about 8 minutes on 2 idle cores,
                                         3 of them in bench/codegen_forward.py)
  python -m bench --quick                fewer runs, no 96-layer export, codegen repeats=1
  python -m bench --only inproc,export   some sections (comma-separated)
  python -m bench --markdown out.md      also write the tables as markdown
"""
from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from . import specgen

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("startup", "process", "inproc", "hostile", "export", "width", "grader", "codegen")
ALIASES = {"check": ("process", "inproc"), "all": SECTIONS}
FORMS = specgen.FORMS
TARGET_LAYERS = 48


# ---------------------------------------------------------------- measuring

@dataclass
class Stat:
    samples: list = field(default_factory=list)
    error: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    def json(self) -> dict:
        if not self.ok:
            return {"error": self.error, **self.extra}
        return {"median_s": self.median, "min_s": self.min, "max_s": self.max,
                "runs": len(self.samples), "samples_s": self.samples, **self.extra}


def _short_error(err: BaseException) -> str:
    lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    text = f"{type(err).__name__}: {first}"
    return text if len(text) <= 160 else text[:157] + "..."


def timed(fn, runs: int, warmup: int = 1, setup=None, before=None) -> Stat:
    """Median/min/max of `fn(setup())` over `runs` runs after `warmup` untimed runs.

    `setup` builds the argument outside the timing; `before` runs just before each
    timed call (e.g. to clear a cache). The garbage collector is left on (it is part
    of the real cost) but is emptied before each run. Errors end up in Stat.error.
    """
    stat = Stat()
    try:
        for _ in range(warmup):
            fn(setup() if setup else None)
        for _ in range(runs):
            arg = setup() if setup else None
            if before:
                before()
            gc.collect()
            t0 = time.perf_counter()
            fn(arg)
            stat.samples.append(time.perf_counter() - t0)
    except Exception as err:  # noqa: BLE001 - a benchmark reports, it does not crash
        stat.error = _short_error(err)
        stat.samples = []
    return stat


def run_process(argv: list[str], env: dict | None = None) -> None:
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"exit {proc.returncode}: {tail[0][:120]}")


# ---------------------------------------------------------------- formatting

def fmt_s(x: float) -> str:
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if x < 1:
        return f"{x * 1e3:.1f} ms" if x < 0.1 else f"{x * 1e3:.0f} ms"
    return f"{x:.2f} s"


def fmt_stat(s: Stat | None) -> str:
    if s is None:
        return "-"
    if not s.ok:
        return s.error if (s.error or "").startswith("skipped") else f"ERROR {s.error}"
    if len(s.samples) == 1:
        return fmt_s(s.median)
    return f"{fmt_s(s.median)} [{fmt_s(s.min)} .. {fmt_s(s.max)}]"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else (f"{x:.0f}x" if x >= 10 else f"{x:.2f}x")


def table(title: str, header: list[str], rows: list[list[str]], notes=()) -> str:
    """A markdown table, padded so it also reads well in a terminal."""
    cells = [header] + rows
    widths = [max(len(str(r[k])) for r in cells) for k in range(len(header))]

    def line(r):
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"

    out = [f"### {title}", "", line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    out += [""] + [f"- {n}" for n in notes] + ([""] if notes else [])
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- machine

def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for ln in fh:
                if ln.lower().startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_rev() -> str:
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                             capture_output=True, text=True, timeout=10, check=False)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (OSError, AttributeError):
        return "unknown"


def machine() -> dict:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": usable, "cpu_count": os.cpu_count(), "cpu": _cpu_model(),
        "os": platform.platform(), "python": platform.python_version(),
        "torch": _version("torch"), "sympy": _version("sympy"), "lark": _version("lark"),
        "shapelang_rev": _git_rev(), "load_start": _load(),
    }


# ---------------------------------------------------------------- sections

class Bench:
    def __init__(self, args):
        self.args = args
        self.layers: list[int] = args.layers
        self.results: dict = {}
        self.failures: list[str] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="shapelang-bench-"))
        self.paths = specgen.write_specs(self.tmp, self.layers)
        self.steps: dict = {}

    def say(self, msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    # -- validation: every generated spec must pass `shapelang check`
    def validate(self) -> None:
        from shapelang.checker.checker import check_text

        for (form, n), path in self.paths.items():
            spec = check_text(path.read_text(encoding="utf-8"), str(path))
            try:
                assert spec.ok, "; ".join(d.message for d in spec.diagnostics[:3])
                self.steps[(form, n)] = specgen.count_steps(spec)
            except AssertionError as err:
                self.failures.append(f"{form} {n}L spec does not check: {err}")
                self.steps[(form, n)] = None

    def startup(self) -> None:
        a, py = self.args, sys.executable
        for key, argv in (("python -c pass", [py, "-c", "pass"]),
                          ("python -c 'import sympy'", [py, "-c", "import sympy"]),
                          ("python -c 'import lark'", [py, "-c", "import lark"]),
                          ("python -c 'import shapelang.checker.checker, shapelang.render.text'",
                           [py, "-c", "import shapelang.checker.checker, shapelang.render.text"]),
                          ("python -m shapelang --help", [py, "-m", "shapelang", "--help"])):
            self.say(f"startup: {key}")
            self.results[("startup", key)] = timed(lambda _, v=argv: run_process(v), a.proc_runs)
        # The same check with bytecode caching forced on, into a private folder: shows what
        # compiling shapelang's own modules costs when PYTHONDONTWRITEBYTECODE is set.
        n = TARGET_LAYERS if TARGET_LAYERS in self.layers else max(self.layers)
        key = f"python -m shapelang check ({n}L stack), bytecode cached"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(self.tmp / "pycache")
        argv = [py, "-m", "shapelang", "check", str(self.paths[("stack", n)])]
        self.say(f"startup: {key}")
        self.results[("startup", key)] = timed(lambda _: run_process(argv, env), a.proc_runs)
        # the lark grammar build happens once per process (functools.cache in the parser)
        try:
            from shapelang.syntax import parser

            build = getattr(parser, "_lark", None)
            if build is not None and hasattr(build, "cache_clear"):
                self.results[("startup", "lark grammar build (in-process)")] = timed(
                    lambda _: build(), a.check_runs, warmup=0, before=build.cache_clear)
                build()
        except Exception as err:  # noqa: BLE001
            self.results[("startup", "lark grammar build (in-process)")] = Stat(error=_short_error(err))

    def process(self) -> None:
        for form in FORMS:
            for n in self.layers:
                self.say(f"process: {form} {n}L")
                argv = [sys.executable, "-m", "shapelang", "check", str(self.paths[(form, n)])]
                self.results[("process", form, n)] = timed(lambda _, v=argv: run_process(v),
                                                           self.args.proc_runs)

    def inproc(self) -> None:
        from sympy.core.cache import clear_cache

        from shapelang.checker.checker import check_text

        try:
            from shapelang.syntax.parser import parse
        except ImportError:
            parse = None

        def check(text):
            spec = check_text(text)
            assert spec.ok, "spec failed to check"
            return spec

        for form in FORMS:
            for n in self.layers:
                self.say(f"inproc: {form} {n}L")
                text = self.paths[(form, n)].read_text(encoding="utf-8")
                self.results[("inproc", form, n)] = timed(lambda _, t=text: check(t),
                                                          self.args.check_runs, before=clear_cache)
                self.results[("inproc-warm", form, n)] = timed(lambda _, t=text: check(t),
                                                               self.args.check_runs)
                if parse is not None:   # the parse alone: text -> nodes (lark + node building)
                    self.results[("parse", form, n)] = timed(lambda _, t=text: parse(t),
                                                             self.args.check_runs)

    def _torch(self):
        import warnings

        warnings.filterwarnings("ignore", message=".*NumPy.*")
        from . import reference_gpt
        return reference_gpt

    def export(self) -> None:
        try:
            ref = self._torch()
        except Exception as err:  # noqa: BLE001
            for n in self.layers:
                self.results[("export", n)] = Stat(error=f"cannot import torch: {_short_error(err)}")
            return
        self.say("export: warm-up (1 layer, first export in this process)")
        cold = timed(lambda m: ref.export_gpt(m), 1, warmup=0, setup=lambda: ref.make_model(1))
        self.results[("export-cold", 1)] = cold
        for n in self.layers:
            if self.args.quick and n > TARGET_LAYERS:
                self.results[("export", n)] = Stat(error="skipped (--quick)")
                continue
            self.say(f"export: {n}L x {self.args.export_runs}")
            ops: dict = {}

            def run(model, ops=ops):
                ep = ref.export_gpt(model)
                ops["graph_ops"] = ref.graph_ops(ep)

            st = timed(run, self.args.export_runs, warmup=0, setup=lambda n=n: ref.make_model(n))
            st.extra.update(ops)
            self.results[("export", n)] = st

    def width(self) -> None:
        try:
            ref = self._torch()
        except Exception as err:  # noqa: BLE001
            self.results[("width", "tiny")] = Stat(error=f"cannot import torch: {_short_error(err)}")
            return
        n = self.args.width_layers
        runs = 1 if self.args.quick else self.args.export_runs
        for key, cfg in (("tiny", ref.TINY), ("gpt2", ref.GPT2_WIDTHS)):
            self.say(f"width: {key} widths, {n}L x {runs}")
            st = timed(lambda m: ref.export_gpt(m), runs, warmup=1,
                       setup=lambda cfg=cfg: ref.make_model(n, cfg))
            st.extra.update(layers=n, n_embd=cfg.n_embd, n_head=cfg.n_head,
                            vocab=cfg.vocab_size, ctx=cfg.block_size)
            self.results[("width", key)] = st
            gc.collect()

    def _optional(self, section: str, module: str) -> None:
        name = f"bench.{module}"
        try:
            present = name in sys.modules or importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            present = False
        if not present:
            self.results[(section,)] = {"status": f"skipped: {name} is not present"}
            return
        self.say(f"{section}: {name}.run()")
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(name)
            kwargs = {}
            if self.args.quick:   # fewer repeats where run() takes them
                try:
                    if "repeats" in inspect.signature(mod.run).parameters:
                        kwargs["repeats"] = 1
                except (TypeError, ValueError):
                    pass
            out = mod.run(**kwargs)
            if not isinstance(out, dict):
                raise TypeError(f"run() returned {type(out).__name__}, not dict")
            self.results[(section,)] = {"status": "ok", "wall_s": time.perf_counter() - t0, **out}
        except Exception as err:  # noqa: BLE001
            if self.args.verbose:
                traceback.print_exc()
            self.results[(section,)] = {"status": f"ERROR {_short_error(err)}"}

    def hostile(self) -> None:
        self._optional("hostile", "hostile_inputs")

    def grader(self) -> None:
        self._optional("grader", "grader_throughput")

    def codegen(self) -> None:
        self._optional("codegen", "codegen_forward")

    # ---------------------------------------------------------------- report
    def get(self, *key) -> Stat | None:
        return self.results.get(key)

    def _med(self, *key) -> float | None:
        s = self.get(*key)
        return s.median if isinstance(s, Stat) and s.ok else None

    def report(self) -> str:
        R, out = self.results, []
        # startup
        rows = [[k[1], fmt_stat(v)] for k, v in R.items() if k[0] == "startup"]
        if rows:
            bc = os.environ.get("PYTHONDONTWRITEBYTECODE")
            out.append(table("Startup (whole process unless noted)", ["command", "wall time"], rows,
                             [f"PYTHONDONTWRITEBYTECODE is {'set' if bc else 'not set'} in this "
                              "environment" + (": shapelang's own modules (editable install) are "
                                               "compiled from source in every process" if bc else ""),
                              "`bytecode cached` runs with PYTHONPYCACHEPREFIX in a temporary folder"]))
        # shapelang check
        if any(k[0] in ("process", "inproc") for k in R):
            rows = []
            for form in FORMS:
                for n in self.layers:
                    steps = self.steps.get((form, n))
                    cold = self.get("inproc", form, n)
                    per_op = (f"{cold.median / steps * 1e6:.0f} µs"
                              if steps and cold is not None and cold.ok else "-")
                    rows.append([form, str(n), str(steps if steps is not None else "INVALID"),
                                 fmt_stat(self.get("process", form, n)), fmt_stat(cold),
                                 fmt_stat(self.get("inproc-warm", form, n)),
                                 fmt_stat(self.get("parse", form, n)), per_op])
            out.append(table(
                "shapelang check", ["form", "layers", "ops", "whole process", "in-process (cold)",
                                    "in-process (warm)", "of which parse", "cold time/op"], rows,
                ["ops = steps the checker proved (a block used by `stack` is checked once)",
                 "whole process = `python -m shapelang check FILE` in a subprocess",
                 "in-process = parse + check with a fresh Checker; cold clears sympy's cache first",
                 "of which parse = shapelang.syntax.parser.parse alone (lark + building nodes), same process"]))
        # export
        if any(k[0] == "export" for k in R):
            rows = []
            cold = self.get("export-cold", 1)
            for n in self.layers:
                s = self.get("export", n)
                ops = s.extra.get("graph_ops", "-") if s is not None else "-"
                rows.append([str(n), str(ops), fmt_stat(s)])
            out.append(table(
                "torch.export.export (dynamic batch and sequence, tiny widths)",
                ["layers", "graph ops", "export time"], rows,
                [f"first export in the process (1 layer, cold, not in the medians): {fmt_stat(cold)}",
                 "graph ops = call_function nodes of the exported graph",
                 ("model: bench/reference_gpt.py, D=64 H=4 V=512 Ctx=64; "
                  "batch in [1, 1024], seq in [2, Ctx-1]")]))
        # widths
        if any(k[0] == "width" for k in R):
            t, g = self.get("width", "tiny"), self.get("width", "gpt2")
            ratio = g.median / t.median if t and g and t.ok and g.ok else None
            rows = [[k, (f"D={s.extra.get('n_embd')} H={s.extra.get('n_head')} "
                         f"V={s.extra.get('vocab')} Ctx={s.extra.get('ctx')}"), fmt_stat(s)]
                    for k, s in (("tiny", t), ("gpt2", g)) if s is not None]
            out.append(table(f"Export time against width ({self.args.width_layers} layers)",
                             ["widths", "config", "export time"], rows,
                             [f"gpt2 / tiny = {fmt_ratio(ratio)}" + (
                                 "" if ratio is None else
                                 ": export time depends on the operation count, not the widths"
                                 if ratio < 1.5 else ": export time DOES depend on the widths here")]))
        # ratio
        if any(k[0] == "export" for k in R) and any(k[0] in ("inproc", "process") for k in R):
            rows = []
            for n in self.layers:
                e = self._med("export", n)
                cells = [str(n), fmt_s(e) if e else "-"]
                for kind in ("inproc", "process"):
                    for form in FORMS:
                        c = self._med(kind, form, n)
                        cells.append(fmt_ratio(e / c) if e and c else "-")
                rows.append(cells)
            out.append(table("torch.export time / shapelang time (higher is better for shapelang)",
                             ["layers", "export", "/ in-process stack", "/ in-process unrolled",
                              "/ whole-process stack", "/ whole-process unrolled"], rows))
        # per op
        if any(k[0] == "inproc" for k in R):
            out.append(self._per_op())
        if any(k[0] in ("inproc", "process", "export") for k in R):
            out.append(self._targets())
        for section, module in (("hostile", "hostile_inputs"), ("grader", "grader_throughput"),
                                ("codegen", "codegen_forward")):
            res = R.get((section,))
            if res is not None:
                rows = [[k, _fmt_any(v)] for k, v in res.items()]
                out.append(table(f"{section} (bench/{module}.py run())", ["metric", "value"], rows))
        if self.failures:
            out.append("### FAILURES\n\n" + "\n".join(f"- {f}" for f in self.failures) + "\n")
        return "\n".join(out)

    def _per_op(self) -> str:
        form, rows, base, prev = "unrolled", [], None, None
        for n in self.layers:
            s, steps = self.get("inproc", form, n), self.steps.get((form, n))
            if s is None or not s.ok or not steps:
                rows.append([str(n), str(steps), fmt_stat(s), "-", "-", "-"])
                continue
            per = s.median / steps
            base = base or per
            marginal = (f"{(s.median - prev[1]) / (steps - prev[0]) * 1e6:.1f} µs"
                        if prev and steps > prev[0] else "-")
            prev = (steps, s.median)
            rows.append([str(n), str(steps), fmt_s(s.median), f"{per * 1e6:.1f} µs",
                         f"{per / base:.2f}x", marginal])
        notes = [("time/op = cold in-process median (parse + check) / ops; `vs first row` is the "
                  "issue's flatness measure. The smallest spec's fixed costs (dims, assumptions, "
                  "example, embedding and head) inflate its time/op, so the marginal column "
                  "(extra time / extra ops against the previous row) is the one that shows "
                  "superlinear growth")]
        return table("Checker time per operation (unrolled form, in-process, cold)",
                     ["layers", "ops", "check time", "time/op", "vs first row",
                      "marginal time/op"], rows, notes)

    def _targets(self) -> str:
        n, rows = TARGET_LAYERS, []

        def verdict(ok):
            return "-" if ok is None else ("PASS" if ok else "FAIL")

        for form in FORMS:
            c = self._med("inproc", form, n)
            rows.append([f"{n}L {form} in-process < 0.1 s", fmt_s(c) if c else "-",
                         verdict(None if c is None else c < 0.1)])
        for form in FORMS:
            c = self._med("process", form, n)
            rows.append([f"{n}L {form} whole-process < 1 s", fmt_s(c) if c else "-",
                         verdict(None if c is None else c < 1)])
        e = self._med("export", n)
        for kind in ("inproc", "process"):
            for form in FORMS:
                c = self._med(kind, form, n)
                r = e / c if e and c else None
                label = "in-process" if kind == "inproc" else "whole-process"
                rows.append([f"{n}L export / {label} {form} >= 50x", fmt_ratio(r),
                             verdict(None if r is None else r >= 50)])
        lo, hi = min(self.layers), max(self.layers)
        a, b = self._med("inproc", "unrolled", lo), self._med("inproc", "unrolled", hi)
        sa, sb = self.steps.get(("unrolled", lo)), self.steps.get(("unrolled", hi))
        r = (b / sb) / (a / sa) if a and b and sa and sb else None
        rows.append([f"time/op {hi}L / {lo}L (unrolled) <= 1.5", fmt_ratio(r),
                     verdict(None if r is None else r <= 1.5)])
        return table("Issue 6 targets", ["target", "measured", "verdict"], rows)

    def header(self, info: dict, command: str) -> str:
        a = self.args
        return (f"## shapelang benchmark\n\n"
                f"- command: `{command}`\n"
                f"- date: {info['date']}\n"
                f"- machine: {info['nproc']} usable CPUs (os.cpu_count {info['cpu_count']}), "
                f"{info['cpu']}, {info['os']}\n"
                f"- python {info['python']}, torch {info['torch']}, sympy {info['sympy']}, "
                f"lark {info['lark']}; shapelang at {info['shapelang_rev']}\n"
                f"- runs: checker {a.check_runs}, process {a.proc_runs}, export {a.export_runs} "
                f"(each after a warm-up); figures are median [min .. max]\n"
                f"- layers: {', '.join(map(str, self.layers))}\n"
                f"- load average (1 min) at start {info['load_start']}, at end {_load()}: anything "
                f"above 0 is other work sharing the CPUs, so compare minima as well as medians\n")


def _fmt_any(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str)[:200]
    return str(v)


def _sections(text: str | None) -> list[str]:
    if not text:
        return list(SECTIONS)
    out = []
    for name in text.split(","):
        name = name.strip()
        if name in ALIASES:
            out.extend(ALIASES[name])
        elif name in SECTIONS:
            out.append(name)
        else:
            raise SystemExit(f"bench: unknown section {name!r}; choose from "
                             f"{', '.join(SECTIONS + tuple(ALIASES))}")
    return [s for s in SECTIONS if s in out]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short run: fewer runs, no 96-layer export")
    p.add_argument("--only", metavar="NAME[,NAME]",
                   help=f"sections: {', '.join(SECTIONS)}; `check` = process,inproc")
    p.add_argument("--layers", default="1,12,48,96", help="layer counts (default 1,12,48,96)")
    p.add_argument("--check-runs", type=int, help="in-process runs per spec (default 5, quick 3)")
    p.add_argument("--proc-runs", type=int, help="subprocess runs per spec (default 5, quick 2)")
    p.add_argument("--export-runs", type=int, help="torch.export runs per model (default 3, quick 1)")
    p.add_argument("--width-layers", type=int, help="layer count of the width check (default 12, quick 1)")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as markdown here")
    p.add_argument("--json", metavar="FILE", help="also write every sample as JSON here")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    q = args.quick
    args.layers = sorted({int(x) for x in args.layers.split(",") if x.strip()})
    args.check_runs = args.check_runs or (3 if q else 5)
    args.proc_runs = args.proc_runs or (2 if q else 5)
    args.export_runs = args.export_runs or (1 if q else 3)
    args.width_layers = args.width_layers or (1 if q else 12)
    sections = _sections(args.only)
    command = "python -m bench" + ("" if argv is None and len(sys.argv) <= 1 else
                                   " " + " ".join(argv if argv is not None else sys.argv[1:]))

    info = machine()
    bench = Bench(args)
    bench.say(f"bench: sections {', '.join(sections)}; specs in {bench.tmp}")
    bench.validate()
    # shapelang sections run before anything imports torch, so torch cannot
    # change the state sympy is in while the checker is timed
    for name in sections:
        getattr(bench, name)()

    text = bench.header(info, command) + "\n" + bench.report()
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")
    if args.json:
        payload = {"machine": info, "command": command,
                   "steps": {f"{f}/{n}": s for (f, n), s in bench.steps.items()},
                   "results": {"/".join(map(str, k)): (v.json() if isinstance(v, Stat) else v)
                               for k, v in bench.results.items()}}
        Path(args.json).write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    shutil.rmtree(bench.tmp, ignore_errors=True)
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
