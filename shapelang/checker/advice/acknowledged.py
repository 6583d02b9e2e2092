"""Warnings the spec's author meant: a line whose comment says `allow` and the code.

Some warnings point at what is usually a mistake but is sometimes the model itself:
DeepSeek's rotary embedding regroups the interleaved pairs of each head on purpose
(`view [.., Dr/2, 2] -> transpose 4 3 -> reshape [.., Dr]`), which W302 reads as
pieces merged out of order. `# allow W302` in that line's comment (the reason may
follow: `# allow W302: the checkpoint stores interleaved pairs`) says the author
knows: `check` then leaves that warning out. Only warnings are acknowledged this way,
only on their own line and only by their exact code; an error is always reported. (A
code alone in a comment is not enough: the test corpus marks expected findings so.)
"""
from __future__ import annotations

import re

from ...syntax.comments import comment_of

_ALLOW = re.compile(r"\ballow\s+(W\d{3}\b(?:\s*,\s*W\d{3}\b)*)")
_CODE = re.compile(r"W\d{3}")


_comment = comment_of


def codes_by_line(text: str) -> dict[int, set[str]]:
    """Line number (1-based) -> the warning codes its comment names."""
    out = {}
    for k, line in enumerate(text.split("\n"), start=1):
        if "#" in line:
            named = {c for m in _ALLOW.finditer(_comment(line)) for c in _CODE.findall(m.group(1))}
            if named:
                out[k] = named
    return out


def split(text: str, diagnostics: list) -> tuple[list, list]:
    """(the diagnostics without the warnings their line's comment acknowledges, those
    acknowledged as (diagnostic, the reason written after the code)): the trace and JSON show
    the second list, so that a deliberate choice stays visible; `check` and `--strict` see
    only the first."""
    named = codes_by_line(text)
    if not named:
        return diagnostics, []
    keep, meant = [], []
    lines = text.split("\n")
    for d in diagnostics:
        if d.severity == "warning" and d.span is not None and d.code in named.get(d.span.line, ()):
            meant.append((d, reason(lines[d.span.line - 1])))
        else:
            keep.append(d)
    return keep, meant


def reason(line: str) -> str:
    """What follows `allow Wxxx:` in a line's comment ('' when nothing does)."""
    m = re.search(r"\ballow\s+W\d{3}(?:\s*,\s*W\d{3})*\s*:?\s*(.*)", _comment(line))
    return m.group(1).strip() if m else ""


def drop(text: str, diagnostics: list) -> list:
    """The diagnostics without the warnings their line's comment acknowledges."""
    return split(text, diagnostics)[0]
