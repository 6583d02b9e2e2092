"""Renderers: checked IR and diagnostics -> text for people, JSON for tools.

Nothing here decides anything: it prints what the checker computed.
"""
from __future__ import annotations

import json

import sympy as sp

from . import dims as dimlib
from .diagnostics import Diagnostic
from .ir import CheckedSpec

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
        caret = " " * (d.span.column - 1) + "^" * width
        out += [f"{pad} |", f"{gutter} | {text}", f"{pad} | {caret}"]
        prefix = f"{pad} = "
    else:
        prefix = "  = "
    for note in d.notes:
        out.append(f"{prefix}note: {note}")
    if d.help:
        out.append(f"{prefix}help: {d.help}")
    return "\n".join(out)


def check_text(spec: CheckedSpec) -> str:
    parts = [diagnostic_text(d, spec.path, spec.source) for d in spec.diagnostics]
    n_err = len(spec.errors())
    n_warn = len(spec.diagnostics) - n_err
    if n_err or n_warn:
        parts.append(f"{spec.path}: {n_err} error{'s' if n_err != 1 else ''}, "
                     f"{n_warn} warning{'s' if n_warn != 1 else ''}")
    else:
        n_steps = sum(len(b.steps) for b in spec.bindings)
        n_steps += sum(len(b.steps) for insts in spec.blocks.values() for ir in insts
                       for b in ir.bindings)
        parts.append(f"{spec.path}: ok ({len(spec.bindings)} bindings, {n_steps} steps proved "
                     "for all sizes that satisfy the assumptions)")
    return "\n\n".join(parts) + "\n"


def diagnostic_json(d: Diagnostic) -> dict:
    return {"severity": d.severity, "code": d.code, "message": d.message,
            "line": d.span.line, "column": d.span.column,
            "end_line": d.span.end_line, "end_column": d.span.end_column,
            "help": d.help, "notes": list(d.notes), "counterexample": d.counterexample}


# ------------------------------------------------------------------ trace

def _ex(spec: CheckedSpec, shape):
    vals = [spec.example_value(d) for d in shape]
    if any(v is None or dimlib.as_int(v) is None for v in vals):
        return None
    return [dimlib.as_int(v) for v in vals]


def _shape(shape) -> str:
    return "[" + ", ".join(dimlib.show(d) for d in shape) + "]"


def _num(spec, e) -> int | None:
    v = spec.example_value(sp.Integer(e) if isinstance(e, int) else e)
    return dimlib.as_int(v) if v is not None else None


def _types(spec: CheckedSpec, decls, bindings) -> dict:
    types = {d.name: d.type for d in decls}
    for b in bindings:
        for s in b.steps:
            types[s.ref] = s.out
            for k, t in enumerate(s.outputs):
                types[f"{s.ref}.{k}"] = t
    return types


def _binding_json(spec, b, types) -> dict:
    steps = []
    for s in b.steps:
        shape_in = types.get(s.inputs[0]).shape if s.inputs and s.inputs[0] in types else None
        steps.append({
            "op": s.text, "kind": s.op, "line": s.span.line, "column": s.span.column,
            "inputs": list(s.inputs),
            "shape_in": [dimlib.show(d) for d in shape_in] if shape_in is not None else None,
            "shape": [dimlib.show(d) for d in s.out.shape],
            "example": _ex(spec, s.out.shape),
            "outputs": [[dimlib.show(d) for d in t.shape] for t in s.outputs],
            "contiguous": s.out.is_contiguous,
            "params": dimlib.show(s.params), "params_example": _num(spec, s.params),
            "flops": dimlib.show(s.flops), "flops_example": _num(spec, s.flops),
            **({"block": s.block.name} if s.block is not None else {}),
        })
    main = b.types[0]
    return {"name": ", ".join(b.names), "line": b.span.line,
            "shape": [dimlib.show(d) for d in main.shape], "example": _ex(spec, main.shape),
            "steps": steps}


def spec_json(spec: CheckedSpec, with_trace: bool) -> dict:
    out = {"file": spec.path, "ok": spec.ok,
           "diagnostics": [diagnostic_json(d) for d in spec.diagnostics]}
    types = _types(spec, spec.decls, spec.bindings)
    out["bindings"] = [_binding_json(spec, b, types) for b in spec.bindings]
    if with_trace:
        out["dims"] = spec.dims
        out["example"] = spec.example or None
        out["inputs"] = [{"name": d.name, "kind": d.kind, "shape": [dimlib.show(x) for x in d.type.shape],
                          "example": _ex(spec, d.type.shape), "dtype": d.type.dtype}
                         for d in spec.decls]
        blocks = []
        for name, insts in spec.blocks.items():
            for ir in insts:
                btypes = _types(spec, ir.inputs + ir.params + ir.buffers, ir.bindings)
                blocks.append({"name": name, "line": ir.span.line,
                               "inputs": {d.name: [dimlib.show(x) for x in d.type.shape] for d in ir.inputs},
                               "params": dimlib.show(ir.total_params),
                               "params_example": _num(spec, ir.total_params),
                               "flops": dimlib.show(ir.total_flops),
                               "flops_example": _num(spec, ir.total_flops),
                               "bindings": [_binding_json(spec, b, btypes) for b in ir.bindings]})
        out["blocks"] = blocks
        out["total"] = {"params": dimlib.show(spec.total_params),
                        "params_example": _num(spec, spec.total_params),
                        "flops": dimlib.show(spec.total_flops),
                        "flops_example": _num(spec, spec.total_flops)}
    return out


def _fmt_int(n) -> str:
    return "" if n is None else f"{n:,}"


def _table(rows, header) -> list[str]:
    widths = [max(len(str(r[k])) for r in rows + [header]) for k in range(len(header))]
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def _binding_rows(spec, b, types, indent="") -> list:
    rows = []
    name = ", ".join(b.names)
    for k, s in enumerate(b.steps):
        ex = _ex(spec, s.out.shape)
        shape = _shape(s.out.shape) if len(s.outputs) == 1 else \
            " | ".join(_shape(t.shape) for t in s.outputs)
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
    return rows


HEADER = ["binding", "line", "operation", "shape in", "shape out", "example out", "params", "flops"]


def _decl_rows(spec, decls) -> list:
    rows = []
    for d in decls:
        ex = _ex(spec, d.type.shape)
        n = sp.Integer(1)
        for x in d.type.shape:
            n *= x
        kind = d.kind + ("" if d.type.dtype == "float" else f" {d.type.dtype}")
        rows.append([d.name, d.span.line, kind, "", _shape(d.type.shape),
                     "[" + ", ".join(map(str, ex)) + "]" if ex else "",
                     _fmt_int(_num(spec, n)) if d.kind == "param" else "", ""])
    return rows


def _rows_in_file_order(spec, decls, bindings) -> list:
    """Declarations and bindings interleaved as they appear in the file."""
    types = _types(spec, decls, bindings)
    groups = [(d.span.line, [row]) for d, row in zip(decls, _decl_rows(spec, decls))]
    groups += [(b.span.line, _binding_rows(spec, b, types)) for b in bindings]
    groups.sort(key=lambda g: g[0])
    return [row for _, rows in groups for row in rows]


def _total_line(spec, label, e) -> str:
    n = _num(spec, e)
    return f"{label}: {dimlib.show(e)}" + (f" = {_fmt_int(n)}" if n is not None else "")


def trace_text(spec: CheckedSpec) -> str:
    out = [f"trace of {spec.path}"]
    if spec.example:
        given = {k: v for k, v in spec.example.items() if k in spec.dims}
        out.append("example: " + ", ".join(f"{k}={v}" for k, v in given.items()))
    out.append("")
    out.extend(_table(_rows_in_file_order(spec, spec.decls, spec.bindings), HEADER))
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
            rows = _rows_in_file_order(spec, ir.params + ir.buffers, ir.bindings)
            out.extend(_table(rows, HEADER))
    out += ["", _total_line(spec, "total parameters", spec.total_params),
            _total_line(spec, "total multiply-add FLOPs (forward)", spec.total_flops)]
    if spec.diagnostics:
        out += ["", check_text(spec).rstrip()]
    return "\n".join(out) + "\n"


def to_json(obj) -> str:
    return json.dumps(obj, indent=2) + "\n"
