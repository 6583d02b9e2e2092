"""Completion and signature help: operation names from the table of operations
(the op table, with their usage and doc line), block names, and
the dims and tensors in scope at the cursor."""
from __future__ import annotations

import re

from lsprotocol import types as t

from .. import api
from .documents import Analysis
from .hover import _typed

_AFTER_ARROW = re.compile(r"->\s*([A-Za-z_]\w*)?$")
_IN_OP = re.compile(r"->\s*([A-Za-z_]\w*)((?:\s+[^\s>-][^\s]*|\s+-\d+)*)\s*$")
_PREFIX = re.compile(r"[A-Za-z_]\w*$")
_KEYWORDS = ("dim", "assume", "example", "input", "param", "buffer", "expect", "block", "return", "end")


def _ops(an: Analysis) -> list[t.CompletionItem]:
    items = [t.CompletionItem(label=name, kind=t.CompletionItemKind.Function, detail=d.usage,
                              documentation=t.MarkupContent(t.MarkupKind.Markdown,
                                                            f"`{d.usage}`\n\n{d.doc}"))
             for name, d in api.operations().items()]
    for name, block in an.index.blocks.items():
        sizes = "".join(f" {p.name}=" for p in block.sizes)
        items.append(t.CompletionItem(label=name, kind=t.CompletionItemKind.Class,
                                      detail=f"block {name}{sizes} (line {block.span.line})"))
    return items


def _names(an: Analysis, line: int) -> list[t.CompletionItem]:
    scope = an.index.scope_at(line)
    items = []
    for sym in an.index.visible(scope):
        if sym.span.line >= line and sym.kind != "dim" and sym.kind != "block":
            continue   # a tensor is usable only after the line that defines it
        if sym.kind == "dim" and sym.scope is not None:
            detail, kind = f"size parameter of block {sym.scope}", t.CompletionItemKind.Constant
        elif sym.kind == "dim":
            detail = "dim" + (f" = {an.spec.definitions[sym.name]}" if sym.name in an.spec.definitions
                              else "")
            if sym.name in an.spec.example:
                detail += f" (example {an.spec.example[sym.name]})"
            kind = t.CompletionItemKind.Constant
        elif sym.kind == "block":
            continue
        else:
            ty = _typed(an.spec, sym.name, an.spec.decls, an.spec.bindings) if sym.scope is None else None
            detail = f"{sym.kind}" + (f" {api.shape_text(ty.shape, an.spec)}" if ty is not None else "")
            kind = t.CompletionItemKind.Variable
        items.append(t.CompletionItem(label=sym.name, kind=kind, detail=detail))
    return items


MAX_LOOKBEHIND = 240   # characters before the cursor that completion looks at


def complete(an: Analysis, line: int, col: int) -> list[t.CompletionItem]:
    before = an.lines.line(line)[:col - 1][-MAX_LOOKBEHIND:]
    if _AFTER_ARROW.search(before):
        return _ops(an)
    items = _names(an, line)
    if not before.strip() or _PREFIX.fullmatch(before.strip()):
        items += [t.CompletionItem(label=k, kind=t.CompletionItemKind.Keyword) for k in _KEYWORDS]
    return items


def signature(an: Analysis, line: int, col: int) -> t.SignatureHelp | None:
    """The usage of the operation being written at the cursor (after `-> name `)."""
    before = an.lines.line(line)[:col - 1][-MAX_LOOKBEHIND:]
    m = _IN_OP.search(before)
    if m is not None and m.group(1) in an.index.blocks and an.index.blocks[m.group(1)].sizes:
        return _block_signature(an.index.blocks[m.group(1)], m.group(2), before)
    if m is None or m.group(1) not in api.operations():
        return None
    d = api.operations()[m.group(1)]
    params = d.usage.split()[1:]
    typed = len(m.group(2).split())
    if before.endswith((" ", "\t")):
        active = typed
    else:
        active = max(typed - 1, 0)
    info = t.SignatureInformation(
        label=d.usage, documentation=t.MarkupContent(t.MarkupKind.Markdown, d.doc),
        parameters=[t.ParameterInformation(label=p) for p in params])
    return t.SignatureHelp(signatures=[info], active_signature=0,
                           active_parameter=min(active, max(len(params) - 1, 0)))


def _block_signature(block, typed: str, before: str) -> t.SignatureHelp:
    """`-> Mlp F=4*D`: the sizes a block with size parameters takes, as keywords."""
    params = [f"{p.name}=" for p in block.sizes]
    label = f"{block.name} " + " ".join(params)
    given = [w.split("=")[0] + "=" for w in typed.split() if "=" in w]
    active = next((k for k, p in enumerate(params) if p not in given), len(params) - 1)
    info = t.SignatureInformation(
        label=label, documentation=t.MarkupContent(
            t.MarkupKind.Markdown, f"block `{block.name}`: each call gives its sizes "
            + ", ".join(f"`{p}`" for p in params)),
        parameters=[t.ParameterInformation(label=p) for p in params])
    return t.SignatureHelp(signatures=[info], active_signature=0, active_parameter=active)
