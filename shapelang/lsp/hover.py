"""Hover: what is under the cursor, symbolic and at the example sizes.

A dim shows its definition and example value; a declared tensor its declared
shape; a binding's name its proved shape (with its dtype unless float32); a block its signature and the shapes
of its calls; anywhere else, the step (operation) whose span holds the cursor
shows its input and output shapes. Names and steps inside a block are shown
for each distinct call of the block.
"""
from __future__ import annotations

from .. import api
from .documents import Analysis
from .positions import contains, size
from .symbols import Symbol


def _at_example(spec: api.CheckedSpec, shape) -> str:
    ex = api.example_shape(spec, shape)
    return "" if ex is None else f"  (example: [{', '.join(map(str, ex))}])"


def _typed_shape(spec: api.CheckedSpec, ty) -> str:
    """`[B, S] bool`: the shape, and the dtype unless it is the default float32."""
    return api.shape_text(ty.shape, spec) + api.dtype_suffix(ty.dtype)


def _typed(spec, name: str, decls, bindings):
    for d in decls:
        if d.name == name:
            return d.type
    for b in bindings:
        if name in b.names:
            return b.types[b.names.index(name)]
    return None


def _calls(spec: api.CheckedSpec):
    """(call step, block instance) of every block call, nested ones too."""
    out, stack, seen = [], [spec.bindings], set()
    while stack:
        for b in stack.pop():
            for s in b.steps:
                if s.block is not None:
                    out.append((s, s.block))
                    if id(s.block) not in seen:
                        seen.add(id(s.block))
                        stack.append(s.block.bindings)
    return out


def _bound(spec: api.CheckedSpec, name: str, block: str | None) -> list[str]:
    """How each call binds a dim of a block's signature: `Mlp(x, F=4*D)` on line 12: F = 4*D (256)."""
    rows = []
    for step, ir in _calls(spec):
        if block is not None and ir.name != block:
            continue
        for sym, value in ir.binding_of_dims.items():
            if str(sym) == name:
                n = api.example_number(spec, value)
                row = (f"`{step.text}` on line {step.span.line}: {name} = {api.shape_text([value], spec)[1:-1]}"
                       + (f" ({n})" if n is not None and str(n) != api.shape_text([value], spec)[1:-1] else ""))
                if row not in rows:
                    rows.append(row)
    return rows


def _dim(spec: api.CheckedSpec, sym: Symbol) -> str:
    if sym.scope is not None:     # a size parameter: `block Mlp(x: [B, S, D], dim F)`
        rows = _bound(spec, sym.name, sym.scope)
        return "\n\n".join([f"```shapelang\ndim {sym.name}\n```",
                             f"size parameter of block `{sym.scope}`, given at each call"] + rows)
    head = f"dim {sym.name}"
    if sym.name in spec.definitions:
        head += f" = {spec.definitions[sym.name]}"
    lines = [f"```shapelang\n{head}\n```"]
    value = spec.example.get(sym.name)
    if value is None and sym.name in spec.definitions:
        value = api.example_number(spec, spec.definitions[sym.name])
    if value is not None:
        lines.append(f"example: `{sym.name} = {value}`")
    if sym.name in spec.call_bound:
        lines.append("bound at each block call:")
        lines += _bound(spec, sym.name, None)
    return "\n\n".join(lines)


def _tensor(spec: api.CheckedSpec, sym: Symbol) -> str | None:
    if sym.scope is None:
        ty = _typed(spec, sym.name, spec.decls, spec.bindings)
        if ty is None:
            return None
        example = _at_example(spec, ty.shape).strip()   # after the fence: CommonMark closes a fence
        return (f"```shapelang\n{sym.kind} {sym.name}: {_typed_shape(spec, ty)}\n```"   # alone on its line
                + (f"\n\n{example}" if example else ""))
    rows = []
    for k, ir in enumerate(spec.blocks.get(sym.scope, [])):
        ty = _typed(spec, sym.name, ir.inputs + ir.params + ir.buffers, ir.bindings)
        if ty is not None:
            row = f"`{sym.name}: {_typed_shape(spec, ty)}`{_at_example(spec, ty.shape)}"
            if row not in rows:
                rows.append(row)
    if not rows:
        return None
    return f"{sym.kind} of block `{sym.scope}`\n\n" + "\n\n".join(rows)


def _block(spec: api.CheckedSpec, sym: Symbol) -> str:
    node = sym.node
    sig = ", ".join([f"{d.name}: [{', '.join(_src(e) for e in d.shape.dims)}]" for d in node.inputs]
                    + [f"dim {p.name}" for p in getattr(node, "sizes", ())])
    out = [f"```shapelang\nblock {sym.name}({sig})\n```"]
    for ir in spec.blocks.get(sym.name, []):
        if ir.output is not None:
            shown = ", ".join(f"{api.shape_text(t.shape, spec)}{_at_example(spec, t.shape)}"
                              for t in ir.outputs or (ir.output,))   # `return h, k, v`: each
            row = f"returns {shown}; params {ir.total_params}"
            if row not in out:
                out.append(row)
    return "\n\n".join(out)


def _src(e) -> str:
    return getattr(e, "name", None) or getattr(e, "text", None) or "…"


def _scopes(spec: api.CheckedSpec):
    """(types by ref, bindings) of the top level and of every block instance."""
    yield api.types_of(spec, spec.decls, spec.bindings), spec.bindings
    for insts in spec.blocks.values():
        for ir in insts:
            yield api.types_of(spec, ir.inputs + ir.params + ir.buffers, ir.bindings), ir.bindings


def _step(spec: api.CheckedSpec, line: int, col: int) -> str | None:
    hits = [(s, types) for types, bindings in _scopes(spec) for b in bindings for s in b.steps
            if contains(s.span, line, col)]
    if not hits:
        return None
    best = min(size(s.span) for s, _ in hits)
    rows = []
    for s, types in hits:
        if size(s.span) != best:
            continue
        outs = ", ".join(_typed_shape(spec, o) for o in s.outputs)
        ex = _at_example(spec, s.out.shape) if len(s.outputs) == 1 else ""
        ins = [_typed_shape(spec, types[r]) for r in s.inputs if r in types]
        row = f"`{s.text}` ({s.op}): " + (f"{', '.join(ins)} → " if ins else "") + f"{outs}{ex}"
        if s.params != 0:
            row += f"; params {s.params}"
        if row not in rows:
            rows.append(row)
    return "\n\n".join(rows)


def hover(an: Analysis, line: int, col: int) -> tuple[str, object] | None:
    """(markdown, span) for 1-based (line, column), or None."""
    spec, index = an.spec, an.index
    occ = index.at(line, col)
    sym = index.resolve(occ) if occ is not None else None
    text = None
    if sym is not None:
        if sym.kind == "dim":
            text = _dim(spec, sym)
        elif sym.kind == "block":
            text = _block(spec, sym)
        else:
            text = _tensor(spec, sym)
        if text is not None:
            return text, occ.span
    text = _step(spec, line, col)
    return (text, None) if text else None

