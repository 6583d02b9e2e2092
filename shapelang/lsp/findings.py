"""Diagnostics and quick fixes as lsprotocol objects, for the server's features.

A diagnostic is made once, as JSON (wire.py, which the first diagnostic of a session
sends as it is); here it is read into lsprotocol's types, which pygls writes back as
the same JSON. A proved fix (`Diagnostic.fix`) becomes a quick fix that edits the span
it names.
"""
from __future__ import annotations

from functools import cache

from lsprotocol import types as t
from lsprotocol.converters import get_converter

from .. import api
from . import wire
from .documents import Analysis
from .wire import SOURCE, CodeDocs  # noqa: F401 - the server's and the tests' names for them


@cache
def _converter():
    return get_converter()


def lsp_range(an: Analysis, span: api.Span) -> t.Range:
    return _converter().structure(wire.lsp_range(an, span), t.Range)


def to_lsp(an: Analysis, d: api.Diagnostic, docs: CodeDocs) -> t.Diagnostic:
    return _converter().structure(wire.diagnostic(an, d, docs), t.Diagnostic)


def diagnostics(an: Analysis, docs: CodeDocs) -> list[t.Diagnostic]:
    return _converter().structure(wire.diagnostics(an, docs), list[t.Diagnostic])


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
