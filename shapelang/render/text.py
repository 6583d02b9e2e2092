"""Text renderer: diagnostics with carets, for people (the trace table: table.py).

Nothing here decides anything: it prints what the checker computed.
"""
from __future__ import annotations

from ..checker.ir import CheckedSpec
from ..syntax.diagnostics import Diagnostic

# ------------------------------------------------------------------ diagnostics

def diagnostic_text(d: Diagnostic, path: str, source: str) -> str:
    lines = source.split("\n")
    head = f"{path}:{d.span.line}:{d.span.column}: {d.severity}[{d.code}]: {d.message}"
    out = [head]
    if 0 < d.span.line <= len(lines):
        text = lines[d.span.line - 1].rstrip("\r")
        gutter = str(d.span.line)
        pad = " " * len(gutter)
        end = d.span.end_column if d.span.end_line == d.span.line else len(text) + 1
        width = max(1, min(end, len(text) + 1) - d.span.column)
        text, col, width = _window(text, d.span.column, width)
        caret = " " * (col - 1) + "^" * width
        out += [f"{pad} |", f"{gutter} | {text}", f"{pad} | {caret}"]
        prefix = f"{pad} = "
    else:
        prefix = "  = "
    for note in d.notes:
        out.append(f"{prefix}note: {note}")
    if d.help:
        out.append(f"{prefix}help: {d.help}")
    return "\n".join(out)


WINDOW = 160   # characters of a source line shown around the caret


def _window(text: str, col: int, width: int) -> tuple[str, int, int]:
    """A long line cut to the part around the caret (`…` where it is cut); the caret's
    column and width in what is shown."""
    if len(text) <= WINDOW:
        return text, col, width
    width = min(width, WINDOW // 2)
    start = max(0, min(col - 1 - WINDOW // 4, len(text) - WINDOW))
    shown = text[start:start + WINDOW]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + WINDOW < len(text) else ""
    return prefix + shown + suffix, col - start + len(prefix), width


def explain_footer(diagnostics) -> str:
    """The closing lines that point at `shapelang explain`, as rustc points at `--explain`."""
    codes = sorted({d.code for d in diagnostics})   # E before W
    if len(codes) == 1:
        kind = "error" if codes[0].startswith("E") else "warning"
        return f"For more about this {kind}, try `shapelang explain {codes[0]}`."
    return (f"Some of these have detailed explanations: {', '.join(codes)}.\n"
            f"For more about one of them, try `shapelang explain {codes[0]}`.")


def check_text(spec: CheckedSpec) -> str:
    parts = [diagnostic_text(d, spec.path, spec.source) for d in spec.diagnostics]
    n_err = len(spec.errors())
    n_warn = len(spec.diagnostics) - n_err
    if n_err or n_warn:
        parts.append(f"{spec.path}: {n_err} error{'s' if n_err != 1 else ''}, "
                     f"{n_warn} warning{'s' if n_warn != 1 else ''}\n" + explain_footer(spec.diagnostics))
    else:
        n_steps = sum(len(b.steps) for b in spec.bindings)
        n_steps += sum(len(b.steps) for insts in spec.blocks.values() for ir in insts
                       for b in ir.bindings)
        parts.append(f"{spec.path}: ok ({len(spec.bindings)} bindings, {n_steps} steps proved "
                     "for all sizes that satisfy the assumptions)")
    return "\n\n".join(parts) + "\n"
