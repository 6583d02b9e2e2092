"""Document formatting: `shapelang fmt`'s layout as one edit of the whole document."""
from __future__ import annotations

from lsprotocol import types as t

from .. import api
from .positions import length, normalise


def format_edits(source: str, encoding: str = "utf-16") -> list[t.TextEdit] | None:
    """The edit that lays `source` out as `shapelang fmt` does; [] when it already is, None
    when it does not parse (the diagnostics say why; nothing is changed)."""
    text = normalise(source)
    try:
        formatted = api.format_spec(text)
    except (api.FormatError, api.LayoutBug):
        return None
    if formatted == text:
        return []
    lines = text.split("\n")
    end = t.Position(len(lines) - 1, length(lines[-1], encoding))
    return [t.TextEdit(range=t.Range(t.Position(0, 0), end), new_text=formatted)]
