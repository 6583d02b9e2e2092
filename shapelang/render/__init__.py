"""Renderers: the checked IR and its diagnostics as text for people, JSON for tools, pictures,
and reports for CI. The output formats are registered in `formats`.

Each name loads its module when first asked for, so that `shapelang --help` (which lists the
formats) and `check` (which prints text) load only what they use.
"""
import importlib

_NAMES = {"check_text": "text", "diagnostic_text": "text", "diagnostic_json": "json", "spec_json": "json",
          "to_json": "json", "trace_lines": "table", "trace_text": "table"}

__all__ = ["check_text", "diagnostic_json", "diagnostic_text", "spec_json", "to_json", "trace_lines", "trace_text"]


def __getattr__(name):
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
