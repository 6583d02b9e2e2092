"""Text renderer: diagnostics with carets, for people (the trace table: table.py).

Nothing here decides anything: it prints what the checker computed.
"""
from __future__ import annotations

from ..checker.ir import CheckedSpec
from ..syntax.diagnostics import Diagnostic

# ------------------------------------------------------------------ diagnostics

def diagnostic_text(d: Diagnostic, path: str, source: str) -> str:
    """One diagnostic as rustc shows one: the header, each line it points at with `^^^`
    under the primary span and `---` with their text under the secondary labels, then the
    notes and the help."""
    lines = source.split("\n")
    head = f"{path}:{d.span.line}:{d.span.column}: {d.severity}[{d.code}]: {d.message}"
    out = [head]
    marks = _marks(d, lines)
    if marks:
        rows = sorted(marks)
        pad = " " * len(str(rows[-1]))
        out.append(f"{pad} |")
        prev = None
        for row in rows:
            if prev is not None and row > prev + 1:
                out.append("...")
            out += _source_line(row, lines[row - 1].rstrip("\r"), marks[row], pad)
            prev = row
        prefix = f"{pad} = "
    else:
        prefix = "  = "
    for note in d.notes:
        out.append(f"{prefix}note: {note}")
    if d.help:
        out.append(f"{prefix}help: {d.help}")
    return "\n".join(out)


def _marks(d: Diagnostic, lines: list[str]) -> dict[int, list]:
    """Per line: (column, width, primary, text) of what is marked on it."""
    out: dict[int, list] = {}
    primary_text = None
    for span, text in d.labels:
        if span == d.span:
            primary_text = text
    for span, text, primary in [(d.span, primary_text, True)] + \
            [(s, t, False) for s, t in d.labels if s != d.span]:
        if not 0 < span.line <= len(lines):
            continue
        line = lines[span.line - 1].rstrip("\r")
        end = span.end_column if span.end_line == span.line else len(line) + 1
        width = max(1, min(end, len(line) + 1) - span.column)
        out.setdefault(span.line, []).append((span.column, width, primary, text))
    return out


def _source_line(row: int, text: str, items: list, pad: str) -> list[str]:
    """A source line and, under it, its marks: `^` primary, `-` secondary; the label of the
    mark that ends last follows the marks, the others hang below on `|` lines."""
    anchor = min((c for c, _, p, _ in items if p), default=min(c for c, *_ in items))
    shown, shift = _window(text, anchor)
    placed = []
    for col, width, primary, label in items:
        col -= shift
        if col < 1 or col > len(shown) + 1:
            continue
        placed.append((col, min(width, WINDOW // 2), primary, label))
    out = [f"{str(row).ljust(len(pad))} | {shown}"]
    if not placed:
        return out
    size = max(c + w for c, w, *_ in placed)
    under = [" "] * (size - 1)
    for col, width, primary, _ in sorted(placed, key=lambda m: not m[2]):   # primary first
        whole = primary or not any(p and c == col and w == width for c, w, p, _ in placed)
        if whole:
            for k in range(col - 1, col - 1 + width):
                under[k] = "^" if primary else "-"
    labelled = sorted((m for m in placed if m[3]), key=lambda m: m[0])
    inline = None
    if labelled and labelled[-1][0] + labelled[-1][1] == size:
        inline = labelled.pop()
    first = "".join(under).rstrip()
    out.append(f"{pad} | {first}" + (f" {inline[3]}" if inline else ""))
    if labelled:
        bars = [" "] * size
        for col, *_ in labelled:
            bars[col - 1] = "|"
        out.append(f"{pad} | {''.join(bars).rstrip()}")
        for k in range(len(labelled) - 1, -1, -1):
            col, _, _, label = labelled[k]
            row_chars = [" "] * (col - 1)
            for c2, *_ in labelled[:k]:
                row_chars[c2 - 1] = "|"
            out.append(f"{pad} | {''.join(row_chars)}{label}")
    return out


WINDOW = 160   # characters of a source line shown around the caret


def _window(text: str, col: int) -> tuple[str, int]:
    """A long line cut to the part around column `col` (`…` where it is cut), and how many
    columns the shown text is shifted left."""
    if len(text) <= WINDOW:
        return text, 0
    start = max(0, min(col - 1 - WINDOW // 4, len(text) - WINDOW))
    shown = text[start:start + WINDOW]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + WINDOW < len(text) else ""
    return prefix + shown + suffix, start - len(prefix)


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
