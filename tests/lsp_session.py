"""A real LSP client session with `python -m shapelang lsp` over stdio, for the tests.

Uses pygls's own client (the server's `lsp` extra): every request and
notification is a JSON-RPC message on the server process's stdin/stdout.
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from lsprotocol import types as t
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parent.parent

# a spec with findings on lines with non-ASCII text (an emoji counts two UTF-16 units), and its fix
BAD = """\
# scores — naïve 😀 version
dim B, S, D
example B=2, S=3, D=4
input Q: [B, S, D]
input K: [B, S, D]
scores: Q @ K
w: "😀é" @ Q -> softmax 7
input 😀: [B]
"""
GOOD = BAD.split("scores: Q @ K")[0] + "scores: Q @ (K -> transpose 1 2)\nw: scores -> softmax -1\n"


class Session:
    """`async with Session() as s:` starts the server and initializes it; leaves it shut down."""

    def __init__(self, init_options: dict | None = None):
        self.client = LanguageClient("shapelang-tests", "1")
        self.published: dict[str, list] = {}
        self.arrived = asyncio.Event()
        self.init_options = init_options

        @self.client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: t.PublishDiagnosticsParams):
            self.published.setdefault(params.uri, []).append(params)
            self.arrived.set()

    async def __aenter__(self):
        await self.client.start_io(sys.executable, "-m", "shapelang", "lsp", cwd=str(ROOT))
        self.capabilities = (await self.client.initialize_async(t.InitializeParams(
            capabilities=t.ClientCapabilities(), process_id=None, root_uri=ROOT.as_uri(),
            initialization_options=self.init_options))).capabilities
        self.client.initialized(t.InitializedParams())
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
        finally:
            await self.client.stop()

    # ---- documents
    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.client.text_document_did_open(t.DidOpenTextDocumentParams(
            t.TextDocumentItem(uri=uri, language_id="shapelang", version=version, text=text)))

    def replace(self, uri: str, text: str, version: int) -> None:
        """didChange with the whole new text."""
        self.client.text_document_did_change(t.DidChangeTextDocumentParams(
            t.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [t.TextDocumentContentChangeWholeDocument(text=text)]))

    def edit(self, uri: str, version: int, edits: list[t.TextEdit]) -> None:
        """didChange with incremental edits (as an editor applying a quick fix sends them)."""
        self.client.text_document_did_change(t.DidChangeTextDocumentParams(
            t.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [t.TextDocumentContentChangePartial(range=e.range, text=e.new_text) for e in edits]))

    async def diagnostics(self, uri: str, version: int, timeout: float = 30) -> list[t.Diagnostic]:
        """The diagnostics published for `version` of the document."""
        async def wait():
            while True:
                for p in self.published.get(uri, []):
                    if p.version == version:
                        return p.diagnostics
                self.arrived.clear()
                await self.arrived.wait()
        return await asyncio.wait_for(wait(), timeout)

    # ---- requests
    def _doc(self, uri):
        return t.TextDocumentIdentifier(uri=uri)

    async def hover(self, uri, line, character):
        return await self.client.text_document_hover_async(
            t.HoverParams(self._doc(uri), t.Position(line, character)))

    async def definition(self, uri, line, character):
        return await self.client.text_document_definition_async(
            t.DefinitionParams(self._doc(uri), t.Position(line, character)))

    async def references(self, uri, line, character, declaration=True):
        return await self.client.text_document_references_async(t.ReferenceParams(
            context=t.ReferenceContext(include_declaration=declaration),
            text_document=self._doc(uri), position=t.Position(line, character)))

    async def completion(self, uri, line, character):
        return await self.client.text_document_completion_async(
            t.CompletionParams(self._doc(uri), t.Position(line, character)))

    async def signature(self, uri, line, character):
        return await self.client.text_document_signature_help_async(
            t.SignatureHelpParams(self._doc(uri), t.Position(line, character)))

    async def code_actions(self, uri, rng: t.Range, diagnostics):
        return await self.client.text_document_code_action_async(t.CodeActionParams(
            self._doc(uri), rng, t.CodeActionContext(diagnostics=diagnostics)))

    async def formatting(self, uri):
        return await self.client.text_document_formatting_async(t.DocumentFormattingParams(
            self._doc(uri), t.FormattingOptions(tab_size=2, insert_spaces=True)))


def run(coro_fn, *args, timeout: float = 60):
    """Run an async scenario to completion, bounded."""
    return asyncio.run(asyncio.wait_for(coro_fn(*args), timeout))


class Wire:
    """`shapelang lsp` spoken to byte for byte: messages framed by hand, every message the
    server writes kept as it came (its JSON body, undecoded), read by a thread."""

    def __init__(self):
        import queue
        import subprocess
        import threading

        self.proc = subprocess.Popen([sys.executable, "-m", "shapelang", "lsp"], cwd=str(ROOT),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.bodies: queue.Queue = queue.Queue()
        self.seen: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.startswith(b"Content-Length: "):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                self.bodies.put(None)
                return
            self.bodies.put(out.read(length))

    @staticmethod
    def frame(message: dict, extra: bytes = b"") -> bytes:
        import json

        body = json.dumps(message).encode()
        return b"Content-Length: %d\r\n%s\r\n" % (len(body), extra) + body

    def send(self, *messages) -> None:
        """Messages (dicts, or bytes already framed) written at once."""
        self.proc.stdin.write(b"".join(m if isinstance(m, bytes) else self.frame(m) for m in messages))
        self.proc.stdin.flush()

    def until(self, wanted, timeout: float = 60) -> bytes:
        """The body of the next message `wanted(decoded)` accepts (all of them stay in `seen`)."""
        import json

        while True:
            body = self.bodies.get(timeout=timeout)
            if body is None:
                raise EOFError("the server closed its output")
            self.seen.append(body)
            if wanted(json.loads(body)):
                return body

    def finish(self) -> tuple[int, bytes]:
        """Shut down and exit, as an editor does: (exit status, stderr)."""
        self.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
        self.until(lambda m: m.get("id") == "bye")
        self.send({"jsonrpc": "2.0", "method": "exit"})
        self.proc.stdin.close()
        status = self.proc.wait(timeout=60)
        while (body := self.bodies.get(timeout=60)) is not None:
            self.seen.append(body)
        return status, self.proc.stderr.read()

    def published(self, uri: str) -> list[bytes]:
        import json

        return [b for b in self.seen if (m := json.loads(b)).get("method") == "textDocument/publishDiagnostics"
                and m["params"]["uri"] == uri]
