"""Renderers: the checked IR and its diagnostics as text for people, JSON for tools."""
from .json import diagnostic_json, spec_json, to_json
from .table import trace_lines, trace_text
from .text import check_text, diagnostic_text

__all__ = ["check_text", "diagnostic_json", "diagnostic_text", "spec_json", "to_json", "trace_lines",
           "trace_text"]
