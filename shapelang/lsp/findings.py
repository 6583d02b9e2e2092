"""Diagnostics and quick fixes: the checker's findings in LSP terms.

Codes, messages and spans are those of `shapelang check --format json`; only
the positions change units (positions.LineMap). Secondary labels become related
information at their own places, notes and the help at the finding's own place; a proved fix (`Diagnostic.fix`)
becomes a quick fix that edits the span it names.
"""
from __future__ import annotations

import re
from pathlib import Path

from lsprotocol import types as t

from .. import api
from .documents import Analysis

SOURCE = "shapelang"
_DOCS = Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"


def lsp_range(an: Analysis, span: api.Span) -> t.Range:
    (l0, c0), (l1, c1) = an.lines.span_range(span)
    return t.Range(t.Position(l0, c0), t.Position(l1, c1))


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


def to_lsp(an: Analysis, d: api.Diagnostic, docs: CodeDocs) -> t.Diagnostic:
    rng = lsp_range(an, d.span)
    here = t.Location(an.uri, rng)
    related = [t.DiagnosticRelatedInformation(t.Location(an.uri, lsp_range(an, span)), text)
               for span, text in d.labels]
    related += [t.DiagnosticRelatedInformation(here, f"note: {note}") for note in d.notes]
    if d.help:
        related.append(t.DiagnosticRelatedInformation(here, f"help: {d.help}"))
    href = docs.href(d.code)
    data = {"counterexample": d.counterexample} if d.counterexample else None
    return t.Diagnostic(
        range=rng, message=d.message, code=d.code, source=SOURCE,
        severity=t.DiagnosticSeverity.Error if d.severity == "error" else t.DiagnosticSeverity.Warning,
        code_description=t.CodeDescription(href) if href else None,
        related_information=related or None, data=data)


def diagnostics(an: Analysis, docs: CodeDocs) -> list[t.Diagnostic]:
    return [to_lsp(an, d, docs) for d in an.spec.diagnostics]


def _overlaps(a: t.Range, b: t.Range) -> bool:
    def key(p):
        return (p.line, p.character)
    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def code_actions(an: Analysis, wanted: t.Range, docs: CodeDocs) -> list[t.CodeAction]:
    """A quick fix for every proved fix whose finding overlaps `wanted`."""
    out = []
    for d in an.spec.diagnostics:
        if d.fix is None:
            continue
        diag = to_lsp(an, d, docs)
        if not _overlaps(diag.range, wanted):
            continue
        span, replacement, rewritten = d.fix
        edit = t.TextEdit(lsp_range(an, span), replacement)
        inserted = span.column == span.end_column == 1 and replacement.endswith("\n")   # `assume ..`
        out.append(t.CodeAction(
            title=f"{d.code}: {'add the line' if inserted else 'write it as'} `{rewritten}`",
            kind=t.CodeActionKind.QuickFix,
            diagnostics=[diag], is_preferred=True,
            edit=t.WorkspaceEdit(changes={an.uri: [edit]})))
    return out
