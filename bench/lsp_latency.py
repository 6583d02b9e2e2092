"""Latency of `shapelang lsp` on the 48-layer spec, measured as an editor sees it.

    python -m bench.lsp_latency [--runs 9] [--layers 48] [--form unrolled]

Starts `python -m shapelang lsp` and speaks LSP to it over stdio (pygls's client).
Every run sends a didChange with a new text (one binding added at the end, so no
cache can answer) and times until the publishDiagnostics for that version
arrives: the server's debounce (150 ms) plus a full check. Then a hover on the
new binding (index built after publishing) and an undo to a text already
checked (answered from the per-document cache). Medians with min and max.
Needs the `lsp` extra.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types as t
from pygls.lsp.client import LanguageClient

from bench.specgen import gpt_spec

ROOT = Path(__file__).resolve().parent.parent
URI = "file:///bench/gpt.shape"


class _Client:
    def __init__(self):
        self.client = LanguageClient("bench", "1")
        self.got: dict[int, float] = {}
        self.event = asyncio.Event()

        @self.client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: t.PublishDiagnosticsParams):
            if params.version is not None:
                self.got[params.version] = time.perf_counter()
                if params.diagnostics:
                    print(f"unexpected findings in version {params.version}", file=sys.stderr)
            self.event.set()

    async def wait(self, version: int) -> float:
        while version not in self.got:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), 120)
        return self.got[version]

    def change(self, text: str, version: int) -> float:
        start = time.perf_counter()
        self.client.text_document_did_change(t.DidChangeTextDocumentParams(
            t.VersionedTextDocumentIdentifier(uri=URI, version=version),
            [t.TextDocumentContentChangeWholeDocument(text=text)]))
        return start


async def measure(runs: int, layers: int, form: str) -> dict[str, list[float]]:
    base = gpt_spec(layers, form)
    c = _Client()
    await c.client.start_io(sys.executable, "-m", "shapelang", "lsp", cwd=str(ROOT))
    await c.client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities()))
    c.client.initialized(t.InitializedParams())
    out: dict[str, list[float]] = {"open": [], "change": [], "hover": [], "undo": []}
    start = time.perf_counter()
    c.client.text_document_did_open(t.DidOpenTextDocumentParams(
        t.TextDocumentItem(uri=URI, language_id="shapelang", version=1, text=base)))
    out["open"].append(await c.wait(1) - start)
    version = 1
    for k in range(runs):
        text = base + f"probe_{k}: x_0 -> transpose 1 2\n"
        version += 1
        start = c.change(text, version)
        out["change"].append(await c.wait(version) - start)
        line = text.count("\n") - 1
        start = time.perf_counter()
        await c.client.text_document_hover_async(t.HoverParams(t.TextDocumentIdentifier(URI),
                                                               t.Position(line, 1)))
        out["hover"].append(time.perf_counter() - start)
        version += 1
        start = c.change(base, version)
        out["undo"].append(await c.wait(version) - start)
    await c.client.shutdown_async(None)
    c.client.exit(None)
    await c.client.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--form", choices=["unrolled", "stack"], default="unrolled")
    args = ap.parse_args()
    out = asyncio.run(measure(args.runs, args.layers, args.form))
    print(f"shapelang lsp, {args.layers}-layer {args.form} spec, {args.runs} runs (seconds):")
    for name, label in (("open", "didOpen -> publishDiagnostics (first check)"),
                        ("change", "didChange (new text) -> publishDiagnostics"),
                        ("hover", "hover on the new binding"),
                        ("undo", "didChange back to a checked text -> publishDiagnostics")):
        xs = out[name]
        print(f"  {label:58s} median {statistics.median(xs):.3f}  min {min(xs):.3f}  max {max(xs):.3f}")


if __name__ == "__main__":
    main()
