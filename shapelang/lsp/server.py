"""The server: pygls (2.x) wiring, a worker thread for checking, debouncing.

Every piece of shapelang work (checking, indexing, features) runs on one worker
thread, in the order the messages arrived; the event loop only reads and
writes messages, so it stays responsive while a large spec is checked.
Changes are debounced: diagnostics are published `DEBOUNCE` seconds after the
last change of a document, for the version then current, and a result for a
version the editor has already replaced is not published. A check that a newer
change makes stale stops at its next statement (the event loop records each
document's latest version; the worker's check asks it between statements), so a
burst of typing does not queue whole checks of texts nobody will see.

A session starts in fast_start.py, without pygls; `serve` gives pygls what it read.
"""
from __future__ import annotations

import asyncio
import json
import sys
from concurrent.futures import ThreadPoolExecutor

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..api import Stale
from . import completion, findings, hover, navigation, wire
from .fast_start import DEBOUNCE, HandOver, Replay
from .findings import lsp_range


class _Unsent:
    """A writer that sends nothing: pygls's second answer to an `initialize` already answered."""

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


class ShapeServer:
    def __init__(self, start: HandOver | None = None):
        start = start or HandOver()
        self.ls = LanguageServer("shapelang", __version__,
                                 text_document_sync_kind=t.TextDocumentSyncKind.Incremental)
        self.store = start.store
        self.published = dict(start.published)   # uri -> the version the fast start published
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shapelang-check")
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.latest: dict[str, int | None] = {}   # uri -> the version the editor has now
        self.docs = start.docs or wire.CodeDocs()
        self.debounce = DEBOUNCE
        self._register()

    def take_over(self, start: HandOver, stdout) -> None:
        """Read the `initialize` request the fast start answered, as pygls reads a message,
        with pygls's own answer left unsent."""
        if start.initialize is None:
            return
        proto = self.ls.protocol
        proto.set_writer(_Unsent())
        try:
            proto.handle_message(json.loads(start.initialize, object_hook=proto.structure_message))
        except Exception as exc:   # noqa: BLE001 - as pygls's reading loop: reported, the session goes on
            proto.set_writer(StdoutWriter(stdout))
            self.ls.report_server_error(exc, JsonRpcException)

    # ---- the worker
    def _run(self, fn, *args) -> asyncio.Future:
        return asyncio.get_running_loop().run_in_executor(self.worker, fn, *args)

    def _sync(self, uri: str) -> None:
        """Queue the workspace's current text of `uri` for the worker."""
        doc = self.ls.workspace.get_text_document(uri)
        self.latest[uri] = doc.version
        self._run(self.store.update, uri, doc.version, doc.source)

    async def _on(self, uri: str, feature, *args):
        """`feature(analysis, *args)` on the worker, for the document's current text."""
        def job():
            an = self.store.analysis(uri)
            return None if an is None else feature(an, *args)
        return await self._run(job)

    async def publish(self, uri: str) -> None:
        self.pending.pop(uri, None)

        def job():
            version = self.store.texts.get(uri, (None,))[0]
            try:
                an = self.store.analysis(uri, stale=lambda: self.latest.get(uri, version) != version)
            except Stale:
                return None   # a newer version is on its way; it publishes its own
            if an is None:
                return None
            if self.published.pop(uri, None) == an.version:
                return an.version, None   # the fast start has published these
            return an.version, findings.diagnostics(an, self.docs)
        result = await self._run(job)
        if result is None:
            return
        version, diags = result
        if diags is None:
            self._run(self._index, uri)
            return
        current = self.ls.workspace.text_documents.get(uri)
        if current is None:
            return   # closed meanwhile
        if version is not None and current.version is not None and version < current.version:
            return   # the editor has moved on; the newer version publishes its own
        self.ls.text_document_publish_diagnostics(
            t.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version))
        self._run(self._index, uri)   # ready for the hover or jump that usually follows

    def _index(self, uri: str) -> None:
        an = self.store.analysis(uri)
        if an is not None:
            an.index  # noqa: B018 - built and cached on first use

    def _schedule(self, uri: str, delay: float) -> None:
        old = self.pending.pop(uri, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self.pending[uri] = loop.call_later(delay, lambda: asyncio.ensure_future(self.publish(uri)))

    def _position(self, an, pos: t.Position) -> tuple[int, int]:
        return an.lines.from_lsp(pos.line, pos.character)

    # ---- features
    def _register(self) -> None:
        ls = self.ls

        @ls.feature(t.INITIALIZE)
        def initialize(params: t.InitializeParams):
            chosen = ls.workspace.position_encoding   # pygls's choice, the units of every position
            self.store.encoding = getattr(chosen, "value", chosen) or "utf-16"
            opts = wire.Options(params.initialization_options, DEBOUNCE)
            self.docs = opts.docs or self.docs
            self.debounce = opts.debounce

        @ls.feature(t.TEXT_DOCUMENT_DID_OPEN)
        async def did_open(params: t.DidOpenTextDocumentParams):
            self._sync(params.text_document.uri)
            self._schedule(params.text_document.uri, 0)

        @ls.feature(t.TEXT_DOCUMENT_DID_CHANGE)
        async def did_change(params: t.DidChangeTextDocumentParams):
            self._sync(params.text_document.uri)
            self._schedule(params.text_document.uri, self.debounce)

        @ls.feature(t.TEXT_DOCUMENT_DID_SAVE)
        async def did_save(params: t.DidSaveTextDocumentParams):
            self._sync(params.text_document.uri)
            self._schedule(params.text_document.uri, 0)

        @ls.feature(t.TEXT_DOCUMENT_DID_CLOSE)
        async def did_close(params: t.DidCloseTextDocumentParams):
            uri = params.text_document.uri
            self.latest.pop(uri, None)
            handle = self.pending.pop(uri, None)
            if handle is not None:
                handle.cancel()
            self._run(self.store.close, uri)
            ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

        @ls.feature(t.TEXT_DOCUMENT_HOVER)
        async def on_hover(params: t.HoverParams):
            def feature(an):
                found = hover.hover(an, *self._position(an, params.position))
                if found is None:
                    return None
                text, span = found
                return t.Hover(contents=t.MarkupContent(t.MarkupKind.Markdown, text),
                               range=lsp_range(an, span) if span is not None else None)
            return await self._on(params.text_document.uri, feature)

        @ls.feature(t.TEXT_DOCUMENT_DEFINITION)
        async def on_definition(params: t.DefinitionParams):
            def feature(an):
                span = navigation.definition(an, *self._position(an, params.position))
                return None if span is None else t.Location(an.uri, lsp_range(an, span))
            return await self._on(params.text_document.uri, feature)

        @ls.feature(t.TEXT_DOCUMENT_REFERENCES)
        async def on_references(params: t.ReferenceParams):
            def feature(an):
                spans = navigation.references(an, *self._position(an, params.position),
                                              params.context.include_declaration)
                return [t.Location(an.uri, lsp_range(an, s)) for s in spans]
            return await self._on(params.text_document.uri, feature)

        @ls.feature(t.TEXT_DOCUMENT_COMPLETION, t.CompletionOptions(trigger_characters=[">"]))
        async def on_completion(params: t.CompletionParams):
            def feature(an):
                items = completion.complete(an, *self._position(an, params.position))
                return t.CompletionList(is_incomplete=False, items=items)
            return await self._on(params.text_document.uri, feature)

        @ls.feature(t.TEXT_DOCUMENT_SIGNATURE_HELP, t.SignatureHelpOptions(trigger_characters=[" "]))
        async def on_signature(params: t.SignatureHelpParams):
            def feature(an):
                return completion.signature(an, *self._position(an, params.position))
            return await self._on(params.text_document.uri, feature)

        @ls.feature(t.TEXT_DOCUMENT_CODE_ACTION,
                    t.CodeActionOptions(code_action_kinds=[t.CodeActionKind.QuickFix]))
        async def on_code_action(params: t.CodeActionParams):
            def feature(an):
                return findings.code_actions(an, params.range, self.docs)
            return await self._on(params.text_document.uri, feature)

        @ls.feature(t.TEXT_DOCUMENT_FORMATTING)
        async def on_formatting(params: t.DocumentFormattingParams):
            from .formatting import format_edits  # the layout engine, loaded when first asked

            doc = self.ls.workspace.get_text_document(params.text_document.uri)
            return await self._run(format_edits, doc.source, self.store.encoding)


def serve(start: HandOver) -> int:
    """Serve stdin/stdout from where the fast start (`start`) stopped."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    server = ShapeServer(start)
    server.take_over(start, stdout)
    try:
        server.ls.start_io(Replay(start.unread, stdin), stdout)
    finally:
        server.worker.shutdown(wait=False, cancel_futures=True)
    return 0
