"""Text renderer: diagnostics with carets and the trace table, for people.

Nothing here decides anything: it prints what the checker computed.
"""
from __future__ import annotations

import sympy as sp

from ..checker import dims as dimlib
from ..checker.ir import CheckedSpec
from ..syntax.diagnostics import Diagnostic
from .common import _axes, _ex, _num, _shape, _types, notation

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


# ------------------------------------------------------------------ trace

def _fmt_int(n) -> str:
    return "" if n is None else f"{n:,}"


def _table(rows, header) -> list[str]:
    widths = [max(len(str(r[k])) for r in rows + [header]) for k in range(len(header))]
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def _binding_rows(spec, b, types, indent="", axes=False) -> list:
    rows = []
    name = ", ".join(b.names)
    for k, s in enumerate(b.steps):
        ex = _ex(spec, s.out.shape)
        shape = _shape(s.out.shape, spec) if len(s.outputs) == 1 else \
            " | ".join(_shape(t.shape, spec) for t in s.outputs)
        ex_text = ("[" + ", ".join(map(str, ex)) + "]") if ex is not None else ""
        if len(s.outputs) > 1:
            exs = [_ex(spec, t.shape) for t in s.outputs]
            ex_text = " | ".join("[" + ", ".join(map(str, e)) + "]" for e in exs if e is not None)
        params = _num(spec, s.params)
        flops = _num(spec, s.flops)
        shape_in = "; ".join(_shape(types[r].shape, spec) for r in s.inputs if r in types)
        rows.append([indent + (name if k == len(b.steps) - 1 else ""), s.span.line, s.text,
                     shape_in, shape, ex_text, "" if s.params == 0 else _fmt_int(params) or dimlib.show(s.params, notation(spec)),
                     "" if s.flops == 0 else _fmt_int(flops) or dimlib.show(s.flops, notation(spec))])
        if axes:
            got = _axes(s)
            rows[-1].append("?" if got is None else "[" + ", ".join(got) + "]")
    return rows


HEADER = ["binding", "line", "operation", "shape in", "shape out", "example out", "params", "flops"]


def _decl_rows(spec, decls, axes=False) -> list:
    rows = []
    for d in decls:
        ex = _ex(spec, d.type.shape)
        n = sp.Integer(1)
        for x in d.type.shape:
            n *= x
        kind = d.kind + ("" if d.type.dtype == "float" else f" {d.type.dtype}")
        rows.append([d.name, d.span.line, kind, "", _shape(d.type.shape, spec),
                     "[" + ", ".join(map(str, ex)) + "]" if ex else "",
                     _fmt_int(_num(spec, n)) if d.kind == "param" else "", ""]
                    + ([_shape(d.type.shape, spec)] if axes else []))
    return rows


def _rows_in_file_order(spec, decls, bindings, axes=False) -> list:
    """Declarations and bindings interleaved as they appear in the file."""
    types = _types(spec, decls, bindings)
    groups = [(d.span.line, [row]) for d, row in zip(decls, _decl_rows(spec, decls, axes))]
    groups += [(b.span.line, _binding_rows(spec, b, types, axes=axes)) for b in bindings]
    groups.sort(key=lambda g: g[0])
    return [row for _, rows in groups for row in rows]


def _total_line(spec, label, e) -> str:
    n = _num(spec, e)
    return f"{label}: {dimlib.show(e, notation(spec))}" + (f" = {_fmt_int(n)}" if n is not None else "")


def trace_text(spec: CheckedSpec, provenance: bool = False) -> str:
    """The trace table; with `provenance`, a last column says where each axis comes from."""
    header = HEADER + (["axes from"] if provenance else [])
    out = [f"trace of {spec.path}"]
    if spec.example:
        given = {k: v for k, v in spec.example.items() if k in spec.dims}
        out.append("example: " + ", ".join(f"{k}={v}" for k, v in given.items()))
    out.append("")
    out.extend(_table(_rows_in_file_order(spec, spec.decls, spec.bindings, provenance), header))
    shown = set()
    for name, insts in spec.blocks.items():
        for ir in insts:
            if name in shown:
                continue
            shown.add(name)
            args = ", ".join(f"{d.name}: {_shape(d.type.shape, spec)}"
                             + ("" if d.type.dtype == "float" else f" {d.type.dtype}")
                             for d in ir.inputs)
            out += ["", f"block {name}({args})", _total_line(spec, "  parameters", ir.total_params)]
            rows = _rows_in_file_order(spec, ir.params + ir.buffers, ir.bindings, provenance)
            out.extend(_table(rows, header))
    out += ["", _total_line(spec, "total parameters", spec.total_params),
            _total_line(spec, "total multiply-add FLOPs (forward)", spec.total_flops)]
    if spec.diagnostics:
        out += ["", check_text(spec).rstrip()]
    return "\n".join(out) + "\n"


