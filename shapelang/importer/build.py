"""Import, the whole spec: the traced program -> spec text and the weight mapping.

`Context` holds what every scope shares: the graph, which placeholders are weights, the
aliases (steps that change nothing), the blocks written so far, the `param`/`buffer`
declarations and the weights of every learned step by node. `write_spec` walks the top
scope and assembles the file: a header comment, the sizes, the inputs, the weights read
directly, the blocks, the bindings. One module class is one block: a later call of a class
reads its input sizes by the first call's names (`Sizes.bind_like`), nn.MultiheadAttention is
written with a memory wherever the module also uses it for cross-attention (attention.py),
and blocks of one class that differ only in sizes are merged (merge.py).
"""
from __future__ import annotations

import operator

import torch
from torch import nn

from ..checker.checker import check_text
from . import conv, elementwise, learned, reductions  # noqa: F401  (register their steps in the operation table)
from .attention import reads_memory, recognise, with_memory
from .graph import dtype_word, is_tensor, target_name, tok, val
from .load import WRAPPED, ImportFailure
from .merge import merge_blocks
from .scope import SKIP, NotABlock, Scope, real_users, segment_io
from .sizes import Sizes
from .translate import Piece, Translator, _leaf

IDENTITY = {"aten.clone.default", "aten.alias.default", "aten.detach.default", "aten.dropout.default",
            "aten.lift_fresh_copy.default", "aten._to_copy.default", "aten.to.dtype", "aten.contiguous.default"}
BLOCK_INPUTS = ["x", "y", "z", "u", "w"]


class Context:
    def __init__(self, ep, sizes: Sizes, input_names: list[str], canonical: dict | None = None,
                 module=None):
        self.ep, self.sizes, self.module = ep, sizes, module
        self.nodes = list(ep.graph.nodes)
        self.by_name = {n.name: n for n in self.nodes}
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.params: dict[str, tuple] = {}      # placeholder -> (kind, fqn)
        self.user_inputs: list[str] = []
        for spec in ep.graph_signature.input_specs:
            kind = spec.kind.name
            if kind == "USER_INPUT":
                self.user_inputs.append(spec.arg.name)
            elif kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
                fqn = spec.target or spec.arg.name
                if fqn.startswith(WRAPPED + "."):
                    fqn = fqn[len(WRAPPED) + 1:]
                fqn = (canonical or {}).get(fqn, fqn)
                self.params[spec.arg.name] = (kind, fqn)
        shared = {n.name for n in self.nodes if n.name in self.params and len(n.users) > 1}
        self.tr = Translator(sizes, self.params, shared)
        self.tr.buffers = set(module.state_dict()) if module is not None else None
        self.alias: dict[str, str] = {}
        self.roles: dict[str, str] = {}
        self.weights: dict[str, tuple] = {}     # node -> (kind, {local name: source})
        self.order: dict[str, float] = {}       # a block's own weights: just before its first step
        self.decls: list[str] = []
        self.declared: dict[str, str] = {}
        self.decl_map: list[dict] = []
        self.memory: dict[str, tuple] = {}       # a self-attention's query read as its memory -> (query, axis, length)
        self.class_axes: dict[str, list] = {}    # a module class -> the sizes its first call's inputs bind
        self._reads_memory = None
        self.blocks: dict[str, str] = {}         # block text -> name
        self.block_lines: list[str] = []
        self.opaque = 0
        out = next(n for n in self.nodes if n.op == "output")
        self.output_args = list(out.args[0]) if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
        self.outputs = {a.name for a in self.output_args if hasattr(a, "name")}
        self.input_names = input_names
        self.reserved = set(sizes.values) | {"causal"}

    def resolve(self, k: str) -> str:
        while k in self.alias:
            k = self.alias[k]
        return k

    # ------------------------------------------------------------------ node kinds
    def translatable(self, node) -> bool:
        if node.op != "call_function" or target_name(node) in SKIP:
            return False
        if node.target is operator.getitem:
            return False
        v = val(node)
        if not (is_tensor(node) or isinstance(v, (list, tuple))):
            return False
        if target_name(node) in ("aten.chunk.default", "aten.split.Tensor") and \
                node.args[0].op == "placeholder" and node.args[0].name in self.params:
            return False           # cutting a weight into q, k, v rows: read by `Translator.source`
        # positions for an embedding are read by it: `slice 0 0 S`
        return not (target_name(node).startswith("aten.arange") and all(
            target_name(u) == "aten.embedding.default" and u.args[1] is node for u in node.users))

    def value(self, key: str):
        """The example value of a tensor by key (a self-attention's memory: its query's)."""
        return val(self.by_name[self.memory[key][0] if key in self.memory else key])

    def dims(self, key: str) -> list:
        """The sizes of a tensor by key, one per axis (a memory: its own length)."""
        dims = [d.node.expr if isinstance(d, torch.SymInt) else int(d) for d in self.value(key).shape]
        if key in self.memory:
            _q, axis, length = self.memory[key]
            dims[axis] = length
        return dims

    def reads_memory(self) -> bool:
        if self._reads_memory is None:
            self._reads_memory = reads_memory(self)
        return self._reads_memory

    def is_step(self, node) -> bool:
        return self.translatable(node) and target_name(node) not in IDENTITY

    def users(self, key: str) -> list:
        out = []
        for u in real_users(self.by_name[key]):
            if u.op != "output" and self.resolve(u.name) == key:
                out += self.users(u.name)
            else:
                out.append(u)
        return out

    def single_use(self, key: str) -> bool:
        if "\x02" in key:          # a step the importer wrote itself: read once, by the next
            return True
        return key in self.by_name and len(self.users(key)) == 1

    def module_path(self, sub) -> str:
        """`path.` of a submodule of the user's module (`""` for the module itself)."""
        for name, m in self.module.named_modules():
            if m is sub:
                return name + "." if name else ""
        return ""

    def submodule(self, path: str):
        try:
            return self.module.get_submodule(path) if self.module is not None else None
        except AttributeError:
            return None

    def is_output(self, key: str) -> bool:
        return any(self.resolve(o) == key for o in self.outputs)

    # ------------------------------------------------------------------ declarations
    def declare(self, key: str) -> str:
        """A weight read directly (tied, or a raw parameter): a `param` (or `buffer`) line."""
        if key in self.declared:
            return self.declared[key]
        kind, fqn = self.params[key]
        parts = fqn.split(".")
        want = parts[-2] if parts[-1] == "weight" and len(parts) > 1 else "_".join(parts[-2:])
        taken = self.reserved | set(self.declared.values()) | set(self.input_names)
        name, n = want, 2
        while name in taken:
            name, n = f"{want}_{n}", n + 1
        node = self.by_name[key]
        shape = self.tr.shape(node, "size")
        if kind == "PARAMETER":
            self.decls.append(f"param {name}: {shape}")
        else:
            word = dtype_word(val(node))
            self.decls.append(f"buffer {name}: {shape}" + ("" if word == "float" else f" {word}"))
        self.decl_map.append({"name": name, "kind": kind.lower(), "source": fqn})
        self.declared[key] = name
        return name

    # ------------------------------------------------------------------ blocks
    def block_call(self, raw: list, depth: int, path: str, cls: str) -> Piece:
        segment = [n for n in raw if self.translatable(n)]
        inputs, outputs = segment_io(segment, raw, self)
        if len(outputs) != 1 or not inputs or len(inputs) > len(BLOCK_INPUTS):
            raise NotABlock(f"{path}: reads {inputs}, gives {outputs}")
        sub = self.submodule(path)
        if isinstance(sub, nn.MultiheadAttention) and len(inputs) < len(BLOCK_INPUTS):
            inputs = with_memory(self, sub, inputs)
        names = dict(zip(inputs, BLOCK_INPUTS))
        exprs = [e for k in inputs for e in self.dims(k) if not isinstance(e, int)]
        saved = self.sizes.block_dims(exprs, self.reserved)
        # a module class is one block: a later call reads its sizes by the first call's names
        axes = [self.sizes.binds(e) for k in inputs for e in self.dims(k)]
        self.sizes.bind_like(axes, self.class_axes.setdefault(cls, axes))
        try:
            return self._block(raw, depth, path, cls, inputs, outputs, names)
        finally:
            self.sizes.local = saved

    def _block(self, raw, depth, path, cls, inputs, outputs, names) -> Piece:
        child = Scope(self, depth, names, self.reserved, block=True)
        child.path, child.inside = path, {n.name for n in raw}
        sub = self.submodule(path)
        canonical = recognise(self, child, raw, sub, inputs, outputs[0]) \
            if isinstance(sub, nn.MultiheadAttention) else None
        if canonical:
            for p in canonical:
                child.add(p)
        else:
            child.emit_nodes(raw, depth)
        out = self.resolve(outputs[0])
        if out in names:
            raise NotABlock(path)
        lines = child.finish()
        args = ", ".join(f"{names[k]}: [" + ", ".join(self.sizes.text(e, "input") for e in self.dims(k)) + "]"
                         for k in inputs)
        body = "\n".join(["  " + line for line in child.decls + lines] + [f"  return {child.names[out]}", "end"])
        if child.owned:        # the block's module holds them: one step of the mapping, before its own
            key = f"{raw[0].name}\x02own"
            self.weights[key] = ("block", dict(child.owned))
            self.order[key] = self.index[raw[0].name] - 0.5
        key_text = f"({args}):\n{body}"
        if key_text not in self.blocks:
            base = "".join(c for c in cls if c.isalnum() or c == "_") or "Block"
            if base[0].isdigit() or base[0].islower():
                base = base[:1].upper() + base[1:] if base[0].isalpha() else "B" + base
            name, n = base, 2
            while name in self.blocks.values() or name in self.reserved:
                name, n = f"{base}_{n}", n + 1
            self.blocks[key_text] = name
            self.block_lines += [f"block {name}{key_text}", ""]
        name = self.blocks[key_text]
        outer = [self.memory[k][0] if k in self.memory else k for k in inputs]   # a memory is its query
        extra = "(" + ", ".join(tok(k) for k in outer[1:]) + ")" if len(inputs) > 1 else ""
        return Piece(out, name + extra, outer[0], refs=outer[1:], hint=_leaf(path) or "out",
                     strong=True, block=(name, path, frozenset(n.name for n in raw)))


def write_spec(ctx: Context, inputs, header: list[str], comments: dict) -> tuple[str, dict]:
    """The spec's text and the mapping: learned steps in the order they run, and declared weights."""
    names = {}
    for key, inp in zip(ctx.user_inputs, inputs):
        names[key] = inp.name
    # the inputs first: their fixed sizes get the model's names (D) before any step's
    input_lines = []
    for key, inp in zip(ctx.user_inputs, inputs):
        word = dtype_word(val(ctx.by_name[key]))
        dims = val(ctx.by_name[key]).shape
        image = len(dims) == 4 and word == "float"
        roles = ["image" if image and k >= 2 else "channels" if image and k == 1
                 else "model" if k == len(dims) - 1 else "size" for k in range(len(dims))]
        shape = "[" + ", ".join(ctx.sizes.text(s if not isinstance(s, int) else int(s), r)
                                for s, r in zip(dims, roles)) + "]"
        input_lines.append(f"input {inp.name}: {shape}" + ("" if word == "float" else f" {word}"))
    ctx.reserved |= set(ctx.sizes.values)
    top = Scope(ctx, 0, names, ctx.reserved, block=False)
    calls = [n for n in ctx.nodes if n.op == "call_function"]
    canonical = None
    if isinstance(ctx.module, nn.MultiheadAttention):
        outs = [a.name for a in ctx.output_args if hasattr(a, "name")]
        if len(outs) == 1:
            canonical = recognise(ctx, top, calls, ctx.module, list(ctx.user_inputs), outs[0])
    if canonical:
        for p in canonical:
            top.add(p)
    else:
        top.emit_nodes(calls, 0)
    lines = top.finish()
    out_names = []
    for a in ctx.output_args:
        if a is None or not hasattr(a, "name"):
            continue
        k = ctx.resolve(a.name)
        if k in names or k not in top.names:
            raise ImportFailure(f"the module returns `{a.name}` unchanged from its inputs; the spec "
                                "cannot return an input")
        if ctx.users(k) and any(u.op != "output" for u in ctx.users(k)):
            raise ImportFailure(f"the module returns `{top.names[k]}` and uses it again: a spec "
                                "returns only what nothing else uses")
        out_names.append(top.names[k])
    # a block is one entry of block_lines, its lines joined: its opaque steps count too
    opaque = [line for line in "\n".join(lines + ctx.block_lines).splitlines()
              if line.lstrip().startswith("# opaque:")]
    ctx.opaque = len(opaque)
    def assemble(block_lines, lines):
        return "\n".join(header + ctx.sizes.header(comments) + [""] + input_lines + ctx.decls + [""]
                         + block_lines + lines) + "\n"

    text = assemble(ctx.block_lines, lines)
    if ctx.opaque == 0:
        text = _one_block_per_class(ctx, text, lines, assemble)
    order = sorted(ctx.weights, key=lambda k: ctx.order.get(k, ctx.index.get(k)))
    steps = [{"kind": ctx.weights[k][0], "tensors": {n: _src(s) for n, s in ctx.weights[k][1].items()}}
             for k in order]
    mapping = {"steps": steps, "declared": ctx.decl_map, "outputs": out_names}
    return text, mapping


def _one_block_per_class(ctx: Context, text: str, lines: list[str], assemble) -> str:
    """`text` with the blocks of one class that differ only in sizes merged (merge.py), when
    the merged spec checks with no more diagnostics than `text`."""
    sizes = ctx.sizes
    dims = set(sizes.values) | set(sizes.derived) | set(sizes.block_names)
    fixed = dims - set(sizes.dynamic) - set(sizes.block_names)
    bound: dict[str, str] = {}
    merged = merge_blocks(ctx.block_lines, lines, dims, fixed, bound)
    if merged is None:
        return text
    saved = dict(sizes.block_names)
    sizes.block_names.update(bound)
    candidate = assemble(*merged)
    before, after = check_text(text, "imported.shape"), check_text(candidate, "imported.shape")
    if after.ok and len(after.diagnostics) <= len(before.diagnostics):
        return candidate
    sizes.block_names = saved
    return text


def _src(s):
    return s if isinstance(s, str) else list(s)
