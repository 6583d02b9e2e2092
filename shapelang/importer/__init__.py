"""The import stage: an existing PyTorch nn.Module -> a `.shape` spec (`shapelang import`).

It sits beside codegen and is the only stage besides codegen's runner that imports torch;
`check` and `trace` never import it. The pipeline:

    load.py       find the module, make example inputs, torch.export with dynamic axes
    sizes.py      name every size (config attributes, input axes) and the guards as `assume`s
    graph.py      reading the traced graph: a node's value, operation and arguments
    translate.py  one ATen node -> one spec step (layout); elementwise.py: arithmetic, functions,
                  tables; conv.py: convolutions; learned.py: linear, norms, embeddings, attention
    patterns.py   sizes a step's role derives (Dh from a head split, G from repeated heads)
    scope.py      steps chained into bindings; module calls into blocks and `stack N Block`
    build.py      the whole spec text and the weight mapping
    verify.py     the spec checked, generated, loaded with the weights and compared
    weights.py    the mapping applied to a generated module (`copy_weights`)

`import_module(...)` returns an `Imported`: the spec text, the mapping, the number of
opaque steps, and the verification's numbers (None when opaque steps prevent it).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import sympy as sp

from .load import (
    ImportFailure,
    InputSpec,
    UsageError,
    default_axes,
    export,
    forward_names,
    name_dynamic,
    parse_input,
    resolve,
)
from .weights import WeightsError, copy_weights

__all__ = ["ImportFailure", "Imported", "InputSpec", "UsageError", "WeightsError", "copy_weights", "import_module"]


@dataclass
class Imported:
    text: str
    mapping: dict
    opaque: int               # steps kept as `opaque`: the spec is a sketch, not the module
    verified: object | None   # verify.Verified, or None when opaque steps prevent the check
    class_name: str


def import_module(target, inputs: list[str], *, dims: dict | None = None, sizes: dict | None = None,
                  kwargs: dict | None = None, call_kwargs: dict | None = None,
                  path: str = "imported.shape", command: str | None = None) -> Imported:
    """Trace `target` (an nn.Module, or `MODULE:CLASS` / `MODULE:factory` built with `kwargs`)
    on inputs of the sizes given (`["idx=2x8:int"]`) and write its spec.

    `dims` names input axes (`{"idx": ["B", "S"]}`, `None` or `"_"` for a fixed axis), `sizes`
    names fixed sizes (`{"F": 80}`), `call_kwargs` are passed to forward (`need_weights=False`).
    """
    import torch

    from .build import Context, write_spec
    from .sizes import Sizes, config_sizes
    from .verify import verify

    module = resolve(target, kwargs) if isinstance(target, str) else target
    module.eval()
    names = forward_names(module)
    specs = [parse_input(t, k, names) for k, t in enumerate(inputs)]
    if not specs:
        raise UsageError("give the example input sizes, e.g. --input idx=2x8:int")
    for inp in specs:
        wanted = (dims or {}).get(inp.name)
        if wanted is not None:
            if len(wanted) != len(inp.shape):
                raise UsageError(f"--dims {inp.name}: {len(wanted)} names for {len(inp.shape)} axes")
            inp.axes = [None if w in (None, "_", "") else w for w in wanted]
            inp.named = True
    from .scope import KEYWORDS
    for inp in specs:        # `input` (nn.Linear's forward) is a word of the language
        if inp.name in KEYWORDS or not inp.name.isidentifier():
            inp.name = (inp.name if inp.name.isidentifier() else "x") + "_"
    default_axes(specs, channels_first=any(isinstance(m, torch.nn.Conv1d) for m in module.modules()))
    from .load import check_example_size
    check_example_size(specs)
    embeddings = [m.num_embeddings for m in module.modules() if isinstance(m, torch.nn.Embedding)]
    vocab = min(embeddings) if embeddings else 2
    from .load import example_inputs
    tensors = example_inputs(specs, vocab)
    ep = export(module, specs, tensors, dict(call_kwargs or {}))
    config, sources = config_sizes(module, kwargs if isinstance(target, str) else None)
    named = Sizes(config, dict(sizes or {}))
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    fixed_syms = _pinned_symbols(ep)
    named.symbols.update({sym: sp.Integer(v) for sym, v in fixed_syms.items()})
    ranges = dict(ep.range_constraints) | {sym: _One(v) for sym, v in fixed_syms.items()}
    exprs = [[_free(s, ranges) for s in placeholders[key].meta["val"].shape] for key in user]
    for inp, shape in zip(specs, exprs):
        for a, name in enumerate(inp.axes):
            if name is not None and shape[a] is None and inp.named:
                raise ImportFailure(f"the model fixes axis {a} of `{inp.name}` to {inp.shape[a]}: it "
                                    f"cannot be the size {name}")
    name_dynamic(specs, exprs)
    for inp, shape in zip(specs, exprs):
        for a, name in enumerate(inp.axes):
            if name is not None:
                named.name_axis(shape[a], name, inp.shape[a])
    named.ranges(ep.range_constraints)
    for node in ep.graph.nodes:
        if node.op == "call_function" and "_assert_scalar" in str(node.target):
            cond = node.args[0].meta.get("val") if hasattr(node.args[0], "meta") else None
            if cond is not None and hasattr(cond, "node") and not (cond.node.expr.free_symbols & set(fixed_syms)):
                rel = named.relation(cond.node.expr)
                if rel:
                    named.assumes.append(rel)
    dynamic = [n for n in named.dynamic]
    cls = type(module).__name__
    how = command or (f"shapelang import {target}" if isinstance(target, str) else "shapelang.importer")
    header = [f"# {cls}, imported from PyTorch by `{how}` (torch.export).",
              "# Each learned step is named after its module; the weights mapping written beside",
              "# this file gives the module's own parameter names (docs/import.md).", ""]
    canonical = {}
    first: dict[int, str] = {}
    for fqn, p in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        canonical[fqn] = first.setdefault(id(p), fqn)     # a tied weight goes by its first name
    ctx = Context(ep, named, [s.name for s in specs], canonical, module)
    comments = {n: "named with --size" for n in (sizes or {})}
    comments.update({n: f"{sources[n]}" for n in sources if n not in comments})
    for n in named.dynamic:
        comments.setdefault(n, "dynamic: " + ", ".join(
            f"{s.name}[{a}]" for s in specs for a, x in enumerate(s.axes) if x == n))
    text, mapping = write_spec(ctx, specs, header, comments)
    mapping["inputs"] = [{"name": s.name, "shape": list(s.shape), "dtype": s.dtype} for s in specs]
    mapping["format"] = "shapelang-import-weights/1"
    if ctx.opaque == 0:
        from .conv import allow_rounding
        text = allow_rounding(text, os.path.basename(path))
        text = _pinned_if_needed(text, named, comments, os.path.basename(path))
    verified = None
    if ctx.opaque == 0:
        verified = verify(text, os.path.basename(path), module, specs, dict(call_kwargs or {}), mapping,
                          dynamic, vocab)
    return Imported(text, mapping, ctx.opaque, verified, cls)


class _One:
    """A range of one value."""

    def __init__(self, v):
        self.lower = self.upper = v


def _pinned_symbols(ep) -> dict:
    """Sizes export left symbolic but asserts equal to a number (`2 * D == 64` from a reshape
    into a linear layer): they are fixed, whatever Dim.AUTO kept."""
    out = {}
    for node in ep.graph.nodes:
        if node.op != "call_function" or "_assert_scalar" not in str(node.target):
            continue
        cond = node.args[0].meta.get("val") if hasattr(node.args[0], "meta") else None
        expr = getattr(getattr(cond, "node", None), "expr", None)
        if isinstance(expr, sp.Eq) and len(expr.free_symbols) == 1:
            sym = next(iter(expr.free_symbols))
            roots = sp.solve(expr, sym)
            if len(roots) == 1 and roots[0].is_Integer:
                out[sym] = int(roots[0])
    return out


def _free(size, ranges: dict):
    """An input axis's size as export traced it: its symbolic expression, or None when fixed
    (a number, or a symbol whose range is one value: `2 * D == 64` fixes D)."""
    expr = getattr(getattr(size, "node", None), "expr", None)
    if expr is None or getattr(expr, "is_number", False):
        return None
    for sym in getattr(expr, "free_symbols", ()):
        vr = ranges.get(sym)
        if vr is not None and vr.lower == vr.upper:
            return None
    return expr


def _bounds_as_written(text: str, named, path: str, fixed_too: bool = False) -> str:
    """Export's bounds on a dynamic size, in the terms the spec's steps use: `S <= 40` found
    from a slice of a 20-row table to the S/2 frames after a stride-2 convolution is
    written `assume S/2 <= N` where the checker asks for it (no counterexample: the bound
    the import's comparison runs within it), so it is proved with the table's rows named rather than fixed."""
    import re

    from ..checker.checker import check_text

    wanted = re.compile(r"add (?:the line )?`assume ([^`]+)`")
    for _ in range(3):
        spec = check_text(text, path)
        if spec.ok:
            return text
        new = []
        for d in spec.diagnostics:
            m = wanted.search(d.help or "") if d.code in ("E105", "E109") else None
            words = re.findall(r"[A-Za-z_]\w*", m.group(1)) if m else []
            # a bound on a dynamic size, or between the model's own sizes (GPT-NeoX's rotary
            # width 2*N within the head, Dh >= 2*N + 1): true of the module traced
            if m and words and (any(n in words for n in named.dynamic) or (fixed_too and all(n in named.values or n in named.derived for n in words)
                                       and re.fullmatch(r"[\w*+ ]+ [<>]=? [\w*+ ]+", m.group(1)))) \
                    and f"assume {m.group(1)}" not in text:
                new.append(f"assume {m.group(1)}")
        if not new:
            return text
        lines = text.split("\n")
        last = max(k for k, line in enumerate(lines) if line.startswith(("assume ", "dim ")))
        text = "\n".join(lines[:last + 1] + list(dict.fromkeys(new)) + lines[last + 1:])
    return text


def _pinned_if_needed(text: str, named, comments: dict, path: str) -> str:
    """A module that reshapes with numbers (`x.view(B, S, 4, D // 4)` where no attribute names
    the 4), or slices a table no attribute sizes, is right for its own sizes only: when the
    spec does not check with its fixed sizes free, the fewest are written with their values
    (`dim N = 20`): one size no attribute named, else all of those, else every fixed size."""
    from ..checker.checker import check_text
    from .sizes import FRESH

    text = _bounds_as_written(text, named, path)
    if check_text(text, path).ok:
        return text
    bounded = _bounds_as_written(text, named, path, fixed_too=True)
    if check_text(bounded, path).ok:
        return bounded
    before = "\n".join(named.header(comments))
    if before not in text:
        return text
    fresh = [n for n in named.fresh if n in named.used]
    counts = {n for n in fresh if n in FRESH["size"] + FRESH["image"]}   # not a width
    tries = [{n} for n in fresh] + [counts, set(fresh), True]
    for pins in tries:
        named.pinned = pins
        after = "\n".join(named.header(comments))
        pinned = text.replace(before, after, 1)
        if after != before and check_text(pinned, path).ok:
            return pinned
    named.pinned = False
    return text
