"""The fast start of `shapelang lsp`: before pygls is loaded, the server answers `initialize`
and publishes the first opened document's diagnostics; both must be what pygls itself would
have sent, and pygls must then serve the session as if it had read every message itself."""
from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

pytest.importorskip("pygls", reason="the language server needs the `lsp` extra (pygls)")
import tiers
from lsp_session import BAD, GOOD, ROOT, Wire
from lsprotocol import types as t

from shapelang.lsp import findings
from shapelang.lsp.documents import DocumentStore
from shapelang.lsp.fast_start import FastStart
from shapelang.lsp.server import ShapeServer

URI = "file:///home/learner/naïve attn.shape"
CASES = ROOT / "tests" / "cases"
# findings with related information, notes and help, counterexamples (data), proved fixes
BROKEN = {"non-ascii": BAD, **{p.stem: p.read_text() for p in
                                (CASES / "done_when.shape", CASES / "sizes.shape", CASES / "layout.shape")}}


def _initialize(capabilities: dict, options=None, msg_id=1) -> dict:
    params = {"processId": None, "rootUri": "file:///work", "capabilities": capabilities}
    if options is not None:
        params["initializationOptions"] = options
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params}


def _open(text: str, version: int = 1, uri: str = URI) -> dict:
    return {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "shapelang", "version": version, "text": text}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "initialized", "params": {}}


def _frames(data: bytes) -> list[bytes]:
    """The framed messages of a stream, each with its header."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        out.append(head + b"\r\n\r\n" + rest[:length])
        data = rest[length:]
    return out


def _fast(*messages) -> list[bytes]:
    """What the fast start writes for these messages (nothing of pygls loaded for it)."""
    out = io.BytesIO()
    FastStart(io.BytesIO(b"".join(Wire.frame(m) for m in messages)), out).run()
    return _frames(out.getvalue())


class _Kept:
    def __init__(self):
        self.sent = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        pass


def _pygls(initialize: dict) -> tuple[ShapeServer, list[bytes]]:
    """A server that pygls alone has initialized (no fast start), and what it wrote."""
    server, kept = ShapeServer(), _Kept()
    proto = server.ls.protocol
    proto.set_writer(kept)
    proto.handle_message(json.loads(json.dumps(initialize), object_hook=proto.structure_message))
    return server, kept.sent


CLIENTS = {
    "nothing": {},
    "utf-8 offered": {"general": {"positionEncodings": ["utf-8", "utf-16"]}},
    "utf-32 offered": {"general": {"positionEncodings": ["utf-32"]}},
    "unknown first": {"general": {"positionEncodings": ["utf-7", "utf-32", "utf-8"]}},
    "none known": {"general": {"positionEncodings": ["latin-1"]}},
    "empty list": {"general": {"positionEncodings": []}},
    "will save, not until": {"textDocument": {"synchronization": {"willSave": False, "didSave": True}}},
    "odd": {"textDocument": {"synchronization": {"willSave": True, "willSaveWaitUntil": True},
                             "rename": {"prepareSupport": True}, "diagnostic": {}},
            "notebookDocument": {"synchronization": {}},
            "workspace": {"fileOperations": {"willCreate": True, "didRename": True, "willDelete": True}},
            "window": {"workDoneProgress": True}, "experimental": {"anything": [1, 2]}},
}


@pytest.mark.parametrize("client", CLIENTS, ids=list(CLIENTS))
def test_initialize_is_answered_as_pygls_answers_it(client):
    for msg_id in (1, "init-7"):
        message = _initialize(CLIENTS[client], msg_id=msg_id)
        fast = _fast(message)
        _, by_pygls = _pygls(message)
        assert fast == by_pygls, (
            "the stored answer (fast_start.CAPABILITIES) is not pygls's any more; pygls says:\n"
            + by_pygls[0].decode())


@pytest.mark.parametrize("options", [None, {"diagnosticsDocs": "https://example.org/codes.html",
                                            "debounceMs": 40}])
@pytest.mark.parametrize("name", BROKEN)
def test_first_diagnostics_are_pygls_bytes(name, options):
    _assert_same_publish(BROKEN[name], options)


@pytest.mark.parametrize("spec", tiers.sample(tiers.LIBRARY, every=12, always={"deepseek_v2_lite", "sizes"}))
def test_first_diagnostics_are_pygls_bytes_on_the_library(spec):
    _assert_same_publish(spec.read_text(encoding="utf-8"), None)


def _assert_same_publish(text: str, options) -> None:
    init = _initialize({}, options)
    _, fast = _fast(init, INITIALIZED, _open(text, 3))
    server, _ = _pygls(init)
    store = DocumentStore()
    store.update(URI, 3, text)
    an = store.analysis(URI)
    kept = _Kept()
    server.ls.protocol.set_writer(kept)
    server.ls.text_document_publish_diagnostics(   # what ShapeServer.publish sends
        t.PublishDiagnosticsParams(uri=URI, diagnostics=findings.diagnostics(an, server.docs), version=3))
    assert fast == kept.sent[0]
    sent = json.loads(fast.split(b"\r\n\r\n", 1)[1])["params"]
    assert len(sent["diagnostics"]) == len(an.spec.diagnostics)
    if options and an.spec.diagnostics:
        assert sent["diagnostics"][0]["codeDescription"]["href"].startswith(options["diagnosticsDocs"])


def _ask(w: Wire, msg_id, method: str, params: dict):
    w.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return json.loads(w.until(lambda m: m.get("id") == msg_id))


def test_the_session_goes_on_in_pygls_after_the_first_diagnostic():
    w = Wire()
    doc = {"textDocument": {"uri": URI}}
    try:
        w.send(_initialize({}), INITIALIZED, _open(BAD, 1))
        first = w.until(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        assert [d["code"] for d in json.loads(first)["params"]["diagnostics"]] == ["E101", "E112", "E001"]
        on_q = {**doc, "position": {"line": 5, "character": 8}}   # the Q of `scores: Q @ K`
        hover = _ask(w, 2, "textDocument/hover", on_q)["result"]
        assert "Q: [B, S, D]" in hover["contents"]["value"]
        assert _ask(w, 3, "textDocument/definition", on_q)["result"]["range"]["start"]["line"] == 3
        items = _ask(w, 4, "textDocument/completion", {**doc, "position": {"line": 5, "character": 12}})
        assert items["result"]["items"]
        edits = _ask(w, 5, "textDocument/formatting",
                     {**doc, "options": {"tabSize": 2, "insertSpaces": True}})
        assert "result" in edits and "error" not in edits
        # the same document opened again is published by pygls: the same bytes as the fast start's
        w.send({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": doc}, _open(BAD, 1))
        again = w.until(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                        and m["params"].get("version") == 1)
        w.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": GOOD}]}})
        fixed = w.until(lambda m: m.get("method") == "textDocument/publishDiagnostics")
    finally:
        status, err = w.finish()
    assert again == first
    assert json.loads(fixed)["params"] == {"uri": URI, "diagnostics": [], "version": 2}
    # one answer to initialize; v1 published once before the close, once after the reopen
    assert [json.loads(b).get("id") for b in w.seen].count(1) == 1
    assert [json.loads(b)["params"].get("version") for b in w.published(URI)] == [1, None, 1, 2]
    assert status == 0 and b"Traceback" not in err, err.decode()


def test_a_change_right_after_the_open_is_published_for_its_version():
    w = Wire()
    try:
        w.send(_initialize({}), INITIALIZED, _open(BAD, 1), {
            "jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": GOOD}]}})
        w.until(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                and m["params"].get("version") == 2)
    finally:
        status, err = w.finish()
    published = [json.loads(b)["params"] for b in w.published(URI)]
    versions = [p["version"] for p in published]
    assert versions in ([1, 2], [2])   # v1 (if the fast start got to it) is right for v1
    assert published[-1]["diagnostics"] == []
    if versions[0] == 1:
        assert [d["code"] for d in published[0]["diagnostics"]] == ["E101", "E112", "E001"]
    assert status == 0, err.decode()


def _exchange(*messages: bytes | dict) -> tuple[subprocess.CompletedProcess, list[dict]]:
    data = b"".join(m if isinstance(m, bytes) else Wire.frame(m) for m in messages)
    proc = subprocess.run([sys.executable, "-m", "shapelang", "lsp"], input=data, capture_output=True,
                          timeout=120, cwd=ROOT, check=False)
    return proc, [json.loads(f.split(b"\r\n\r\n", 1)[1]) for f in _frames(proc.stdout)]


def test_shutdown_and_exit_before_any_document():
    init = _initialize(CLIENTS["utf-8 offered"])
    proc, got = _exchange(init, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
                          {"jsonrpc": "2.0", "method": "exit"})
    _, by_pygls = _pygls(init)
    assert got == [json.loads(by_pygls[0].split(b"\r\n\r\n", 1)[1]), {"id": 2, "jsonrpc": "2.0", "result": None}]
    assert got[0]["result"]["capabilities"]["positionEncoding"] == "utf-8"
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr.decode()


def test_a_client_that_never_opens_a_document():
    w = Wire()
    try:
        w.send(_initialize({}), INITIALIZED)
        w.until(lambda m: m.get("id") == 1)
        hover = _ask(w, 2, "textDocument/hover", {"textDocument": {"uri": URI},
                                                  "position": {"line": 0, "character": 0}})
        assert hover["result"] is None
    finally:
        status, err = w.finish()
    assert [json.loads(b).get("id") for b in w.seen] == [1, 2, "bye"]
    assert status == 0 and b"Traceback" not in err, err.decode()


def test_what_the_fast_start_does_not_read_plainly_is_read_by_pygls():
    """A body that is not JSON, an unknown header, the input ending: the fast start stops at
    once and pygls reads the same bytes as it always has."""
    proc, got = _exchange(_initialize({}), b"Content-Length: 5\r\n\r\n{nope", INITIALIZED)
    assert [m.get("id") for m in got].count(1) == 1 and got[0]["id"] == 1
    assert proc.returncode == 0

    w = Wire()
    try:
        w.send(_initialize({}), Wire.frame(INITIALIZED, b"X-Odd: 1\r\n"), _open(BAD, 1))
        first = w.until(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        assert _ask(w, 2, "textDocument/hover", {"textDocument": {"uri": URI},
                                                 "position": {"line": 5, "character": 8}})["result"]
    finally:
        status, err = w.finish()
    assert [d["code"] for d in json.loads(first)["params"]["diagnostics"]] == ["E101", "E112", "E001"]
    assert len(w.published(URI)) == 1 and [json.loads(b).get("id") for b in w.seen].count(1) == 1
    assert status == 0 and b"Traceback" not in err, err.decode()


@pytest.mark.parametrize("header", [b"", b"X-Odd: 1\r\n"], ids=["fast start", "pygls alone"])
def test_a_client_that_counts_in_utf8_gets_utf8_positions(header):
    """pygls chooses UTF-8 when the client offers it first; every position the server sends
    and reads is then in bytes of UTF-8 (here after an emoji and an accent). An unknown header
    on `initialize` leaves the whole session to pygls."""
    from shapelang import api

    lines = BAD.split("\n")
    expected = [((d.span.line - 1, len(lines[d.span.line - 1][:d.span.column - 1].encode())),
                 (d.span.end_line - 1, len(lines[d.span.end_line - 1][:d.span.end_column - 1].encode())))
                for d in api.check(BAD, "attn.shape").diagnostics]
    row = next(k for k, line in enumerate(lines) if line.startswith('w: "'))
    q = len(lines[row][:lines[row].index("Q")].encode())
    w = Wire()
    try:
        w.send(Wire.frame(_initialize(CLIENTS["utf-8 offered"]), header), INITIALIZED, _open(BAD, 1))
        assert json.loads(w.until(lambda m: m.get("id") == 1))["result"]["capabilities"]["positionEncoding"] \
            == "utf-8"
        first = w.until(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        hover = _ask(w, 2, "textDocument/hover", {"textDocument": {"uri": URI},
                                                  "position": {"line": row, "character": q}})["result"]
        w.send({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": URI}}},
               _open(BAD, 1))
        again = w.until(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                        and m["params"].get("version") == 1)
    finally:
        status, _ = w.finish()
    got = [((d["range"]["start"]["line"], d["range"]["start"]["character"]),
            (d["range"]["end"]["line"], d["range"]["end"]["character"]))
           for d in json.loads(first)["params"]["diagnostics"]]
    assert got == expected
    assert again == first   # pygls, after the hand-over, counts in the same units
    assert "Q: [B, S, D]" in hover["contents"]["value"]
    assert status == 0


HOVER = {"jsonrpc": "2.0", "id": 9, "method": "textDocument/hover",
         "params": {"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}}
QUIET = [{"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}},
         {"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", "params": {"settings": {}}}]


@pytest.mark.parametrize("before, answered, published", [
    ([_initialize({}), INITIALIZED, *QUIET], True, True),
    ([_initialize({}), INITIALIZED, HOVER], True, False),
    ([_initialize({}), INITIALIZED, {**_open(GOOD), "params": {"textDocument": {"uri": URI}}}], True, False),
    ([INITIALIZED, _initialize({})], False, False),
    ([{**_initialize({}), "id": True}], False, False),
    ([_initialize({"general": {"positionEncodings": [8]}})], False, False),
], ids=["quiet notifications", "a request", "an open without text", "initialized first",
        "an odd id", "an odd encoding list"])
def test_the_fast_start_stops_where_pygls_must_read(before, answered, published):
    """What the fast start answers, and that pygls is left exactly the bytes after the
    `initialize` it answered (or all of them), in order, then the rest of the stream."""
    from shapelang.lsp.fast_start import Replay

    stream = b"".join(map(Wire.frame, [*before, _open(BAD, 1)]))
    stdin, out = io.BytesIO(stream), io.BytesIO()
    start = FastStart(stdin, out).run()
    written = [json.loads(f.split(b"\r\n\r\n", 1)[1]) for f in _frames(out.getvalue())]
    assert [m.get("id", m.get("method")) for m in written] == \
        [1] * answered + ["textDocument/publishDiagnostics"] * published
    assert (start.initialize is not None) == answered
    rest = Replay(start.unread, stdin)
    again = rest.read(len(start.unread) + 3) + b"".join(iter(rest.readline, b""))   # across the seam
    skipped = Wire.frame(before[0]) if answered else b""
    assert again == stream[len(skipped):]
