"""The start of a session, before pygls is loaded: the first diagnostic without waiting for it.

Input: the first messages on stdin (the base protocol: `Content-Length` headers, JSON
bodies). Output: the answer to `initialize` and the diagnostics of the first opened
document, written as pygls writes them; then a `HandOver` for the server (server.serve).

Loading lsprotocol and pygls costs about half a second, more than checking a spec; an
editor shows nothing until the server has answered `initialize` and published. So
`initialize` is answered here from a stored copy of what pygls answers (pinned to
pygls by tests/test_lsp_fast_start.py), the first `didOpen` is checked with the
server's own DocumentStore and published with wire.py's JSON, and only then is pygls
loaded. The server reads every byte taken here again, in order, so pygls ends in the
state it would have reached alone (client capabilities, position encoding, workspace,
the open document, the client's options); of its answers it drops the second one to
`initialize` and the diagnostics of the version already published. Anything else
before the first `didOpen` (a request, a change, a header that is not plain, the end
of the input) ends the fast start at once and leaves it all to pygls.
"""
from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field

from .. import __version__
from . import wire
from .documents import DocumentStore

DEBOUNCE = 0.15   # seconds after the last change before the document is checked (the server's default)

# What pygls 2 answers to `initialize` for the server's features, with the position encoding
# it chooses put in and `willSave`/`willSaveWaitUntil` added where the client names them
# (`sync_options`). Its answer depends on no other client capability for these features.
CAPABILITIES = {
    "textDocumentSync": {"openClose": True, "change": 2, "save": True},
    "completionProvider": {"triggerCharacters": [">"]},
    "hoverProvider": True,
    "signatureHelpProvider": {"triggerCharacters": [" "]},
    "definitionProvider": True,
    "referencesProvider": True,
    "codeActionProvider": {"codeActionKinds": ["quickfix"]},
    "documentFormattingProvider": True,
    "executeCommandProvider": {"commands": []},
    "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True},
                  "fileOperations": {}},
}
ENCODINGS = ("utf-8", "utf-16", "utf-32")   # pygls's, in no order: the client's order decides
# Notifications that may come between `initialized` and the first `didOpen` and change
# nothing the first diagnostic depends on (pygls reads them again after the hand-over).
PASSING = frozenset({"initialized", "workspace/didChangeConfiguration", "$/setTrace"})

_LENGTH = re.compile(rb"Content-Length: (\d+)\r\n")
_MOST = 1 << 26   # bytes of a body read here; a larger one is pygls's to read (or refuse)
_TYPE = re.compile(rb"Content-Type: [^\r\n]*\r\n")


def position_encoding(capabilities: dict) -> str | None:
    """The encoding pygls chooses: the client's first one it knows, else UTF-16; None
    where the client's list is not one pygls would read."""
    general = capabilities.get("general")
    offered = general.get("positionEncodings") if isinstance(general, dict) else None
    if offered is None:
        return "utf-16"
    if not isinstance(offered, list) or not all(isinstance(e, str) for e in offered):
        return None
    return next((e for e in offered if e in ENCODINGS), "utf-16")


def sync_options(capabilities: dict) -> dict:
    """pygls writes `willSave: <the client's flag> and <the server handles it>`: false where
    the client gives the flag (the server handles neither), left out where it does not."""
    document = capabilities.get("textDocument")
    told = document.get("synchronization") if isinstance(document, dict) else None
    told = told if isinstance(told, dict) else {}
    sync = dict(CAPABILITIES["textDocumentSync"])
    save = sync.pop("save")
    sync.update({key: False for key in ("willSave", "willSaveWaitUntil") if told.get(key) is not None})
    return {**sync, "save": save}


def initialize_result(capabilities: dict, encoding: str) -> dict:
    return {"capabilities": {"positionEncoding": encoding, **CAPABILITIES,
                             "textDocumentSync": sync_options(capabilities)},
            "serverInfo": {"name": "shapelang", "version": __version__}}


def _plain_initialize(msg: dict) -> dict | None:
    """The params of an `initialize` request whose every field the fast start reads is of
    the kind LSP gives it (the rest is pygls's to read); None otherwise."""
    params = msg.get("params")
    if msg.get("method") != "initialize" or type(msg.get("id")) not in (int, str) \
            or not isinstance(params, dict) or not isinstance(params.get("capabilities"), dict):
        return None
    kinds = {"processId": int, "rootUri": str, "rootPath": str, "workspaceFolders": list}
    if any(params.get(k) is not None and type(params[k]) is not kind for k, kind in kinds.items()):
        return None
    return params


@dataclass
class HandOver:
    """What the fast start leaves to the server."""
    store: DocumentStore = field(default_factory=DocumentStore)
    initialize: bytes | None = None   # the body of the `initialize` request answered here
    unread: bytes = b""               # the bytes taken from stdin after it, for pygls to read
    published: dict = field(default_factory=dict)   # uri -> the version whose diagnostics went out
    docs: wire.CodeDocs | None = None


class FastStart:
    def __init__(self, stdin, stdout):
        self.stdin, self.stdout = stdin, stdout
        self.taken = bytearray()
        self.out = HandOver()

    def _take(self, data: bytes) -> bytes:
        self.taken += data
        return data

    def _message(self) -> tuple[dict, bytes] | None:
        """The next message and its body, read as pygls reads it; None where it is not a
        plain one (pygls decides what it is)."""
        length = None
        while True:
            line = self._take(self.stdin.readline())
            m = _LENGTH.fullmatch(line)
            if m and length is None and int(m.group(1)) <= _MOST:
                length = int(m.group(1))
            elif line == b"\r\n" and length:
                break
            elif not _TYPE.fullmatch(line):
                return None
        body = self._take(self.stdin.read(length))
        try:
            msg = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return (msg, body) if isinstance(msg, dict) and msg.get("jsonrpc") == "2.0" else None

    def run(self) -> HandOver:
        """Answer the start of the session as far as it goes plainly; what pygls is left."""
        try:
            self._run()
        finally:
            self.out.unread = bytes(self.taken)
        return self.out

    def _run(self) -> None:
        got = self._message()
        params = _plain_initialize(got[0]) if got else None
        encoding = position_encoding(params["capabilities"]) if params else None
        if encoding is None:
            return
        msg, body = got
        self.stdout.write(wire.frame({"id": msg["id"], "jsonrpc": "2.0",
                                      "result": initialize_result(params["capabilities"], encoding)}))
        self.stdout.flush()
        self.out.initialize, self.taken = body, bytearray()
        self.out.store.encoding = encoding
        self.out.docs = wire.Options(params.get("initializationOptions"), DEBOUNCE).docs or wire.CodeDocs()
        while (got := self._message()) is not None and "id" not in got[0]:
            msg = got[0]
            if msg.get("method") == "textDocument/didOpen":
                self._open(msg.get("params"))
                return
            if msg.get("method") not in PASSING:
                return

    def _open(self, params) -> None:
        doc = params.get("textDocument") if isinstance(params, dict) else None
        if not isinstance(doc, dict):
            return
        uri, version, text = doc.get("uri"), doc.get("version"), doc.get("text")
        if not (isinstance(uri, str) and type(version) is int and isinstance(text, str)):
            return
        store = self.out.store
        store.update(uri, version, text)
        try:
            an = store.analysis(uri)
            diags = wire.diagnostics(an, self.out.docs)
        except Exception:   # noqa: BLE001 - the server meets it again, and reports it as it always has
            store.close(uri)
            return
        self.stdout.write(wire.publish(uri, version, diags))
        self.stdout.flush()
        self.out.published[uri] = version


class Replay:
    """stdin for pygls (which calls `readline` and `read(n)`): the bytes the fast start
    took, then the rest of the stream."""

    def __init__(self, taken: bytes, rest):
        self.taken, self.rest = io.BytesIO(taken), rest

    def readline(self, size: int = -1) -> bytes:
        line = self.taken.readline()
        return line if line.endswith(b"\n") else line + self.rest.readline()

    def read(self, size: int = -1) -> bytes:
        data = self.taken.read(size)
        if size < 0:
            return data + self.rest.read()
        return data if len(data) == size else data + self.rest.read(size - len(data))
