"""Diagnostics as LSP sends them: the checker's findings as the JSON of `publishDiagnostics`.

The one place where a finding becomes an LSP diagnostic. It builds plain JSON (dicts
in the field order lsprotocol writes, absent fields left out), so that the first
diagnostic of a session (fast_start) needs neither lsprotocol nor pygls; the server
reads the same JSON into lsprotocol objects (findings.py) and pygls writes it back
unchanged (tests/test_lsp_fast_start.py pins that, byte for byte).

Codes, messages and spans are those of `shapelang check --format json`; only the
positions change units (positions.LineMap). Secondary labels become related
information at their own places, notes and the help at the finding's own place.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from .. import api
from .documents import Analysis

SOURCE = "shapelang"
PUBLISH = "textDocument/publishDiagnostics"
ERROR, WARNING = 1, 2   # DiagnosticSeverity
_DOCS = Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"


class CodeDocs:
    """Where a code is explained: `base#anchor`. The base is the client's
    `initializationOptions.diagnosticsDocs` (a URL), else docs/diagnostics.md of a
    source checkout when there is one; without either, no link."""

    def __init__(self, base: str | None = None):
        self.anchors: dict[str, str] = {}
        text = ""
        if base is None and _DOCS.is_file():
            base = _DOCS.as_uri()
            text = _DOCS.read_text(encoding="utf-8", errors="replace")
        self.base = base
        for m in re.finditer(r"^#+\s+([EW]\d{3})\b(.*)$", text, re.MULTILINE):
            slug = re.sub(r"[^\w\- ]", "", (m.group(1) + m.group(2)).strip().lower()).replace(" ", "-")
            self.anchors.setdefault(m.group(1), slug)

    def href(self, code: str) -> str | None:
        if not self.base:
            return None
        anchor = self.anchors.get(code)
        return f"{self.base}#{anchor}" if anchor else self.base


class Options:
    """The client's `initializationOptions` the server reads: where codes are explained
    (`diagnosticsDocs`, a URL) and how long to wait after typing (`debounceMs`, 0-5000).
    Anything else, or a value of the wrong kind, leaves the default."""

    def __init__(self, given, debounce: float):
        opts = given if isinstance(given, dict) else {}
        docs = opts.get("diagnosticsDocs")
        self.docs = CodeDocs(docs) if isinstance(docs, str) else None
        ms = opts.get("debounceMs")
        ok = isinstance(ms, (int, float)) and not isinstance(ms, bool) and 0 <= ms <= 5000
        self.debounce = ms / 1000 if ok else debounce


def lsp_range(an: Analysis, span: api.Span) -> dict:
    (l0, c0), (l1, c1) = an.lines.span_range(span)
    return {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}


def diagnostic(an: Analysis, d: api.Diagnostic, docs: CodeDocs) -> dict:
    rng = lsp_range(an, d.span)
    here = {"uri": an.uri, "range": rng}
    related = [{"location": {"uri": an.uri, "range": lsp_range(an, span)}, "message": text}
               for span, text in d.labels]
    related += [{"location": here, "message": f"note: {note}"} for note in d.notes]
    if d.help:
        related.append({"location": here, "message": f"help: {d.help}"})
    out = {"range": rng, "message": d.message, "severity": ERROR if d.severity == "error" else WARNING,
           "code": d.code}
    href = docs.href(d.code)
    if href:
        out["codeDescription"] = {"href": href}
    out["source"] = SOURCE
    if related:
        out["relatedInformation"] = related
    if d.counterexample:
        out["data"] = {"counterexample": d.counterexample}
    return out


def diagnostics(an: Analysis, docs: CodeDocs) -> list[dict]:
    return [diagnostic(an, d, docs) for d in an.spec.diagnostics]


def frame(message: dict) -> bytes:
    """One message with its base-protocol header, as pygls writes it (its body is ASCII:
    json.dumps escapes the rest, so the length in characters is the length in bytes)."""
    body = json.dumps(message)
    return (f"Content-Length: {len(body)}\r\n"
            f"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{body}").encode()


def publish(uri: str, version: int | None, diags: list[dict]) -> bytes:
    """The framed `publishDiagnostics` notification for one version of a document."""
    params = {"uri": uri, "diagnostics": diags}
    if version is not None:
        params["version"] = version
    return frame({"params": params, "method": PUBLISH, "jsonrpc": "2.0"})
