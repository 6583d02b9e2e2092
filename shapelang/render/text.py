"""Text renderer: diagnostics with carets and the trace table, for people.

Nothing here decides anything: it prints what the checker computed.
"""
from __future__ import annotations

import sympy as sp

from ..checker import dims as dimlib
from ..checker import dtypes
from ..checker.ir import CheckedSpec
from ..syntax.diagnostics import Diagnostic
from .common import _axes, _ex, _num, _shape, _types

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
        shape = " | ".join(_shape(t.shape) + dtypes.suffix(t.dtype) for t in s.outputs)
        ex_text = ("[" + ", ".join(map(str, ex)) + "]") if ex is not None else ""
        if len(s.outputs) > 1:
            exs = [_ex(spec, t.shape) for t in s.outputs]
            ex_text = " | ".join("[" + ", ".join(map(str, e)) + "]" for e in exs if e is not None)
        params = _num(spec, s.params)
        flops = _num(spec, s.flops)
        shape_in = "; ".join(_shape(types[r].shape) for r in s.inputs if r in types)
        rows.append([indent + (name if k == len(b.steps) - 1 else ""), s.span.line, s.text,
                     shape_in, shape, ex_text, "" if s.params == 0 else _fmt_int(params) or dimlib.show(s.params),
                     "" if s.flops == 0 else _fmt_int(flops) or dimlib.show(s.flops)])
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
        rows.append([d.name, d.span.line, kind, "", _shape(d.type.shape),
                     "[" + ", ".join(map(str, ex)) + "]" if ex else "",
                     _fmt_int(_num(spec, n)) if d.kind == "param" else "", ""]
                    + (["[" + ", ".join(dimlib.show(x) for x in d.type.shape) + "]"] if axes else []))
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
    return f"{label}: {dimlib.show(e)}" + (f" = {_fmt_int(n)}" if n is not None else "")


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
            args = ", ".join(f"{d.name}: {_shape(d.type.shape)}"
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


