"""Renderers: the checked IR and its diagnostics as text for people, JSON for tools."""
from .json import diagnostic_json, spec_json, to_json
from .text import check_text, diagnostic_text

__all__ = ["check_text", "diagnostic_json", "diagnostic_text", "spec_json", "to_json", "trace_lines",
           "trace_text"]


def __getattr__(name):
    """The trace table is loaded when asked for: `check` does not need it."""
    if name in ("trace_lines", "trace_text"):
        from . import table
        return getattr(table, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
