"""Where people wait (issue 23): start-up, a check in-process, an edit, the language server's
first diagnostic, and torch.export's proof of the same model, in CPU seconds, one run,
interleaved.

  python -m bench.editing                    everything (about 2 minutes on 2 idle cores)
  python -m bench.editing --rounds 3 --no-export
  python -m bench.editing --markdown out.md  also write the tables as markdown

CPU seconds, not wall: the project's machine is shared, and a process's CPU time moves far
less with other people's load than its wall time (RESULTS.md, "Noise on this machine").

- whole process: `python -m shapelang check FILE`, the child's user + system time
  (getrusage), for an empty spec, the unrolled 48-layer GPT, the same model written
  as `block` + `stack`, and an unrolled 48-layer Llama-like decoder written in another
  style (bench/specgen.py: grouped-query attention, rotary, RMSNorm, SwiGLU). In-process,
  also the same unrolled GPT in another layout (`layout="spelled"`: 17 statements a layer
  instead of 10, other operations for the same computation, other names).
- torch.export: bench/reference_gpt.py's 48-layer model exported with dynamic batch and
  sequence (as `python -m bench`'s export section), in a child process that imports torch
  and warms up with a 1-layer export first; only the 48-layer export is counted. One
  export per round, between the rounds of the checker's processes.
- in-process: `check_text` in this process, sympy's cache cleared first (as a new process);
  for the unrolled specs also the check after the parse alone (`after parse`: the parse's
  result given to the checker, what a faster parser does not change).
- edit: a `CheckSession` (what the language server, `serve` and the notebook keep per
  document) after a one-line edit in the middle of the 48-layer spec, beside a fresh check of
  the same text; and the language server's whole work for that edit (its document store and
  the conversion to LSP diagnostics), when the `lsp` extra is installed.
- first diagnostic: `shapelang lsp` started, initialised and given a spec; the server
  process's CPU until the first publishDiagnostics (and the wall time).

Medians over the rounds, with min and max.

Every child process runs as an installed copy does: shapelang's modules compiled to bytecode
once (a warm-up process, not counted) and loaded from it afterwards. Where
PYTHONDONTWRITEBYTECODE is set, a source tree is otherwise compiled anew in every process,
which adds about 0.2 s of CPU to each start-up here and is not what a user's `pip install`
gives; the bytecode goes to a private folder, never into the tree.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .specgen import gpt_spec, llama_spec

ROOT = Path(__file__).resolve().parent.parent
LAYERS = 48

_EXPORT = """
import time, warnings
warnings.filterwarnings("ignore")
from bench import reference_gpt as ref
ref.export_gpt(ref.make_model(1))
model = ref.make_model({layers})
t = time.process_time()
ref.export_gpt(model)
print(time.process_time() - t)
"""


CHILD_ENV: dict = dict(os.environ)   # set by main: bytecode kept in a private folder


def installed_env(cache: str) -> dict:
    """The environment for children that load shapelang as an installed copy does: from
    bytecode, compiled once into `cache`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def child_cpu(argv: list[str]) -> float:
    """User + system seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=CHILD_ENV)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def export_cpu(layers: int) -> float:
    out = subprocess.run([sys.executable, "-c", _EXPORT.format(layers=layers)], cwd=ROOT, env=CHILD_ENV,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cpu(fn) -> float:
    gc.collect()
    t = time.process_time()
    fn()
    return time.process_time() - t


def after_parse(text: str) -> float:
    """CPU seconds of everything `check_text` does after the parse (sympy's cache cleared
    first): the checker's walk, provenance and the passes after it, on the parsed spec."""
    from sympy.core.cache import clear_cache

    from shapelang.checker.checker import check_parsed
    from shapelang.syntax.parser import parse_recovering

    parsed = parse_recovering(text, "<input>")
    clear_cache()
    return cpu(lambda: check_parsed(text, "<input>", parsed))


def _edited(text: str, k: int) -> str:
    """The text with one line in its middle changed (a different activation each time)."""
    lines = text.split("\n")
    i = next(j for j in range(len(lines) // 2, len(lines)) if "-> gelu" in lines[j])
    acts = ("relu", "silu", "tanh", "sigmoid", "gelu")
    lines[i] = lines[i].replace("-> gelu", f"-> {acts[k % len(acts)]}")
    return "\n".join(lines)


def _lsp_edit(text: str, rounds: int) -> list[float] | None:
    try:
        from shapelang.lsp import findings
        from shapelang.lsp.documents import DocumentStore
    except ImportError:
        return None
    uri, docs, store = "file:///bench/gpt.shape", findings.CodeDocs(), DocumentStore()
    store.update(uri, 1, text)
    findings.diagnostics(store.analysis(uri), docs)
    out = []
    for k in range(rounds):
        edited = _edited(text, k)

        def work(edited=edited, k=k):
            store.update(uri, k + 2, edited)
            findings.diagnostics(store.analysis(uri), docs)
        out.append(cpu(work))
    return out


async def _first_diagnostic(text: str) -> tuple[float, float]:
    """(server CPU seconds, wall seconds) from starting `shapelang lsp` to its first diagnostics."""
    from lsprotocol import types as t
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("bench", "1")
    got = asyncio.Event()

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params):
        got.set()

    start = time.perf_counter()
    await client.start_io(sys.executable, "-m", "shapelang", "lsp", cwd=str(ROOT), env=CHILD_ENV)
    await client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities()))
    client.initialized(t.InitializedParams())
    client.text_document_did_open(t.DidOpenTextDocumentParams(
        t.TextDocumentItem(uri="file:///bench/gpt.shape", language_id="shapelang", version=1, text=text)))
    await asyncio.wait_for(got.wait(), 120)
    wall = time.perf_counter() - start
    stat = Path(f"/proc/{client._server.pid}/stat").read_text()   # the server's CPU so far, at once
    fields = stat.rsplit(")", 1)[1].split()
    server_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return server_cpu, wall


def _stat(xs: list[float] | None) -> str:
    if not xs:
        return "-"
    scale, unit = (1000, "ms") if statistics.median(xs) < 1 else (1, "s")
    return (f"{statistics.median(xs) * scale:.{0 if scale == 1000 else 2}f} {unit} "
            f"[{min(xs) * scale:.{0 if scale == 1000 else 2}f} .. {max(xs) * scale:.{0 if scale == 1000 else 2}f}]")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-export", action="store_true", help="leave torch.export out")
    ap.add_argument("--no-lsp", action="store_true", help="leave the language server out")
    ap.add_argument("--markdown", metavar="FILE")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(10000)
    from sympy.core.cache import clear_cache

    from shapelang.checker.checker import check_text
    from shapelang.checker.session import CheckSession

    specs = {"empty": "", "unrolled": gpt_spec(LAYERS, "unrolled"), "stack": gpt_spec(LAYERS, "stack"),
             "llama": llama_spec(LAYERS, "unrolled"),
             "spelled": gpt_spec(LAYERS, "unrolled", "spelled")}
    r: dict[str, list[float]] = {}
    pyc = tempfile.TemporaryDirectory()
    CHILD_ENV.clear()
    CHILD_ENV.update(installed_env(pyc.name))
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, text in specs.items():
            files[name] = Path(tmp) / f"{name}.shape"
            files[name].write_text(text)
            if name != "empty":
                assert check_text(text).ok, f"the {name} spec does not check"
        for name in specs:   # warm-up, not counted: compiles the modules once, as pip install does
            child_cpu([sys.executable, "-m", "shapelang", "check", str(files[name])])
        for k in range(args.rounds):
            print(f"round {k + 1}/{args.rounds}", file=sys.stderr)
            for name in ("empty", "unrolled", "stack", "llama"):
                r.setdefault(f"process {name}", []).append(
                    child_cpu([sys.executable, "-m", "shapelang", "check", str(files[name])]))
            if not args.no_export:
                r.setdefault("export", []).append(export_cpu(LAYERS))
            for name in ("unrolled", "stack", "spelled", "llama"):
                def cold(name=name):
                    clear_cache()
                    check_text(specs[name])
                r.setdefault(f"inproc {name}", []).append(cpu(cold))
            for name in ("unrolled", "llama"):
                r.setdefault(f"after parse {name}", []).append(after_parse(specs[name]))
            session = CheckSession("gpt.shape")
            session.check(specs["unrolled"])
            edited = _edited(specs["unrolled"], k)
            r.setdefault("edit session", []).append(cpu(lambda s=session, e=edited: s.check(e)))
            r.setdefault("edit fresh", []).append(cpu(lambda e=edited: check_text(e, "gpt.shape")))
    if not args.no_lsp:
        edits = _lsp_edit(specs["unrolled"], args.rounds)
        if edits is not None:
            r["edit lsp"] = edits
            asyncio.run(_first_diagnostic(""))   # warm-up, not counted: compiles the server's modules
            for k in range(args.rounds):
                for name in ("unrolled", "mha"):
                    text = specs["unrolled"] if name == "unrolled" else \
                        (ROOT / "specs" / "mha_self_attention.shape").read_text()
                    c, w = asyncio.run(_first_diagnostic(text))
                    r.setdefault(f"first {name} cpu", []).append(c)
                    r.setdefault(f"first {name} wall", []).append(w)
    pyc.cleanup()
    med = {k: statistics.median(v) for k, v in r.items()}
    rows = [("whole process, empty spec", "process empty", "< 0.35 s"),
            (f"whole process, {LAYERS} layers unrolled", "process unrolled", ""),
            (f"whole process, {LAYERS} layers block + stack", "process stack", ""),
            (f"whole process, {LAYERS} layers Llama-like unrolled", "process llama", ""),
            (f"torch.export, {LAYERS} layers (the export call alone)", "export", ""),
            (f"in-process cold, {LAYERS} layers unrolled", "inproc unrolled", "< 100 ms"),
            (f"in-process cold, {LAYERS} layers block + stack", "inproc stack", "< 100 ms"),
            (f"in-process cold, {LAYERS} layers unrolled, another layout", "inproc spelled", "< 100 ms"),
            (f"in-process cold, {LAYERS} layers Llama-like unrolled", "inproc llama", "< 100 ms"),
            (f"in-process cold, after the parse, {LAYERS} layers unrolled", "after parse unrolled", ""),
            (f"in-process cold, after the parse, {LAYERS} layers Llama-like", "after parse llama", ""),
            ("one-line edit, fresh check", "edit fresh", ""),
            ("one-line edit, check session", "edit session", "< 100 ms"),
            ("one-line edit, language server's work", "edit lsp", "< 100 ms"),
            (f"lsp start -> first diagnostic, {LAYERS} layers, server CPU", "first unrolled cpu", "< 1 s"),
            (f"lsp start -> first diagnostic, {LAYERS} layers, wall", "first unrolled wall", ""),
            ("lsp start -> first diagnostic, mha_self_attention, server CPU", "first mha cpu", "< 1 s"),
            ("lsp start -> first diagnostic, mha_self_attention, wall", "first mha wall", "")]
    lines = [(f"CPU seconds (wall where it says so), median [min .. max] of {args.rounds} rounds; "
              f"load average {os.getloadavg()[0]:.1f} at the end"), "",
             "| measurement | result | target |", "| --- | --- | --- |"]
    lines += [f"| {label} | {_stat(r.get(key))} | {target} |" for label, key, target in rows]
    if "export" in med:
        lines += ["", (f"torch.export / whole-process check, {LAYERS} layers: unrolled "
                       f"{med['export'] / med['process unrolled']:.1f}x, block + stack "
                       f"{med['export'] / med['process stack']:.1f}x (target >= 20x)")]
    lines += ["", (f"check session / fresh check after a one-line edit: "
                   f"{med['edit session'] / med['edit fresh']:.2f}")]
    report = "\n".join(lines)
    print(report)
    if args.markdown:
        Path(args.markdown).write_text(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
