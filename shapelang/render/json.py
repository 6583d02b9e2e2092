"""JSON renderer: the checked IR and its diagnostics for tools (`--format json`)."""
from __future__ import annotations

import json

from ..checker import dims as dimlib
from ..checker.ir import CheckedSpec
from ..syntax.diagnostics import Diagnostic
from .common import _axes, example_number, example_shape, notation, types_of


def diagnostic_json(d: Diagnostic) -> dict:
    return {"severity": d.severity, "code": d.code, "message": d.message,
            "line": d.span.line, "column": d.span.column,
            "end_line": d.span.end_line, "end_column": d.span.end_column,
            "help": d.help, "notes": list(d.notes), "counterexample": d.counterexample,
            "fix": None if d.fix is None else {
                "line": d.fix[0].line, "column": d.fix[0].column, "end_line": d.fix[0].end_line,
                "end_column": d.fix[0].end_column, "replacement": d.fix[1], "rewritten_line": d.fix[2]},
            "labels": [{"line": s.line, "column": s.column, "end_line": s.end_line,
                        "end_column": s.end_column, "text": text} for s, text in d.labels]}


def _binding_json(spec, b, types) -> dict:
    n = notation(spec)
    steps = []
    for s in b.steps:
        shape_in = types.get(s.inputs[0]).shape if s.inputs and s.inputs[0] in types else None
        steps.append({
            "op": s.text, "kind": s.op, "line": s.span.line, "column": s.span.column,
            "inputs": list(s.inputs),
            "shape_in": [dimlib.show(d, n, code=True) for d in shape_in] if shape_in is not None else None,
            "shape": [dimlib.show(d, n, code=True) for d in s.out.shape],
            "example": example_shape(spec, s.out.shape),
            "outputs": [[dimlib.show(d, n, code=True) for d in t.shape] for t in s.outputs],
            "dtype": s.out.dtype, "dtypes": [t.dtype for t in s.outputs],
            "contiguous": s.out.is_contiguous,
            "params": dimlib.show(s.params, n, code=True), "params_example": example_number(spec, s.params),
            "flops": dimlib.show(s.flops, n, code=True), "flops_example": example_number(spec, s.flops),
            "axes": _axes(s),
            **({"block": s.block.name} if s.block is not None else {}),
        })
    main = b.types[0]
    return {"name": ", ".join(b.names), "line": b.span.line,
            "shape": [dimlib.show(d, n, code=True) for d in main.shape], "example": example_shape(spec, main.shape),
            "dtype": main.dtype,
            "steps": steps}


def spec_json(spec: CheckedSpec, with_trace: bool) -> dict:
    out = {"file": spec.path, "ok": spec.ok,
           "diagnostics": [diagnostic_json(d) for d in spec.diagnostics],
           "acknowledged": [{**diagnostic_json(d), "reason": why} for d, why in spec.acknowledged]}
    types = types_of(spec, spec.decls, spec.bindings)
    out["bindings"] = [_binding_json(spec, b, types) for b in spec.bindings]
    if with_trace:
        n = notation(spec)
        out["dims"] = spec.dims
        out["example"] = spec.example or None
        out["inputs"] = [{"name": d.name, "kind": d.kind, "shape": [dimlib.show(x, n, code=True) for x in d.type.shape],
                          "example": example_shape(spec, d.type.shape), "dtype": d.type.dtype,
                          **({"frozen": True} if d.frozen else {})}
                         for d in spec.decls]
        blocks = []
        for name, insts in spec.blocks.items():
            for ir in insts:
                btypes = types_of(spec, ir.inputs + ir.params + ir.buffers, ir.bindings)
                blocks.append({"name": name, "line": ir.span.line,
                               "inputs": {d.name: [dimlib.show(x, n, code=True) for x in d.type.shape] for d in ir.inputs},
                               "sizes": {str(k): dimlib.show(v, n, code=True) for k, v in ir.size_args.items()},
                               "sizes_example": {str(k): example_number(spec, v) for k, v in ir.size_args.items()},
                               "bound": {str(k): dimlib.show(v, n, code=True)
                                         for k, v in ir.binding_of_dims.items() if k not in ir.size_args},
                               "params": dimlib.show(ir.total_params, n, code=True),
                               "params_example": example_number(spec, ir.total_params),
                               "flops": dimlib.show(ir.total_flops, n, code=True),
                               "flops_example": example_number(spec, ir.total_flops),
                               "bindings": [_binding_json(spec, b, btypes) for b in ir.bindings]})
        out["blocks"] = blocks
        out["total"] = {"params": dimlib.show(spec.total_params, n, code=True),
                        "params_example": example_number(spec, spec.total_params),
                        "flops": dimlib.show(spec.total_flops, n, code=True),
                        "flops_example": example_number(spec, spec.total_flops)}
        if spec.frozen_params != 0:     # part of "params", as model.parameters() counts them
            out["total"].update(frozen_params=dimlib.show(spec.frozen_params, n, code=True),
                                frozen_params_example=example_number(spec, spec.frozen_params))
    return out


def to_json(obj) -> str:
    return json.dumps(obj, indent=2) + "\n"
