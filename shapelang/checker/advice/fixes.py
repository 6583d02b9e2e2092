"""Fixes proved before they are shown.

A diagnostic may carry candidate rewrites of the source (a span and the text to
put there). Each candidate is applied to the spec and the whole spec is checked
again; a candidate is shown only if its diagnostic is gone and that line and
everything after it check with no new error or warning. The help then shows the
rewritten line, as rustc does. Candidates that fail are dropped silently, so a
help never leads a learner into a new error or a scrambled result.
"""
from __future__ import annotations

from dataclasses import replace

from ...syntax.comments import code_of

MAX_VERIFIED = 12   # re-checks per spec: bounds the work a file with many findings causes


def apply(source: str, span, text: str) -> tuple[str, str] | None:
    """The source with `span` replaced by `text`, and the rewritten line (for an inserted
    line, the line itself); None if out of range."""
    lines = source.split("\n")
    if not (0 < span.line == span.end_line <= len(lines)):
        return None
    line = lines[span.line - 1]
    if not (0 < span.column <= span.end_column <= len(line) + 1):
        return None
    new_line = line[:span.column - 1] + text + line[span.end_column - 1:]
    lines[span.line - 1] = new_line
    return "\n".join(lines), new_line.split("\n")[0] if inserts(span, text) else new_line


def inserts(span, text: str) -> int:
    """How many whole lines a candidate inserts before its line (0 for a rewrite)."""
    if span.column == span.end_column == 1 and text.endswith("\n"):
        return text.count("\n")
    return 0


def _code(line: str) -> str:
    """The line without its comment, for showing (a `#` inside a quoted pattern stays)."""
    return code_of(line).strip()


def _after(diags, line: int, inserted: int = 0, where: int = 0) -> dict:
    """What counts against a fix: every finding on its line and after it.
    `inserted` lines before line `where` (a new `assume`): later lines move down by that
    many, and any finding on an inserted line counts against the fix."""
    out: dict = {}
    for d in diags:
        at = d.span.line
        if inserted and at >= where:
            if at < where + inserted:
                key = (d.code, "inserted")
                out[key] = out.get(key, 0) + 1
                continue
            at -= inserted
        if at >= line:   # a help whose rewritten spec gets any new finding at or after it is not shown
            key = (d.code, at)
            out[key] = out.get(key, 0) + 1
    return out


def _help(d, why: str | None, span, text: str, shown: str) -> str:
    lead = why or d.help
    lead = (f"{lead} " if lead.endswith("?") else f"{lead}: ") if lead else ""
    if inserts(span, text):
        return f"{lead}add the line `{shown}` after line {span.line - 1}"
    if not shown:
        return f"{lead}delete line {span.line}"
    if span.line != d.span.line:
        return f"{lead}write line {span.line} as `{shown}`"
    return f"{lead}write it as `{shown}`"


def prove(spec, check) -> None:
    """Replace each diagnostic's candidates by its first proved fix (spec.diagnostics in place).

    A candidate is (span, text) or (span, text, why): `why` leads the help when it is the
    one proved. `check(text)` re-checks a rewritten source without proving fixes again."""
    budget = MAX_VERIFIED
    out = []
    for d in spec.diagnostics:
        if not d.fixes:
            out.append(d)
            continue
        proved = None
        for span, text, *why in d.fixes:
            if budget <= 0:
                break
            applied = apply(spec.source, span, text)
            if applied is None:
                continue
            budget -= 1
            new_source, new_line = applied
            again = check(new_source)
            first = min(d.span.line, span.line)
            before = _after(spec.diagnostics, first)
            key = (d.code, d.span.line)
            before[key] = before.get(key, 0) - 1
            now = _after(again.diagnostics, first, inserts(span, text), span.line)
            if all(n <= before.get(k, 0) for k, n in now.items()):
                proved = (span, text, _code(new_line), why[0] if why else None)
                break
        if proved is None:
            out.append(replace(d, fixes=()))
        else:
            span, text, shown, why = proved
            out.append(replace(d, fixes=(), fix=(span, text, shown),
                               help=_help(d, why, span, text, shown)))
    spec.diagnostics[:] = out
