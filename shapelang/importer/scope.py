"""Import, the spec's statements: pieces chained into bindings, module calls into blocks.

One `Scope` is the body of the spec or of one block. Its nodes are walked in graph order;
the nodes of a submodule's call (by `nn_module_stack`) become a block when the call takes
tensors in and gives one tensor out and reads no weight from outside (`attn: ln_1 -> Attention`),
and calls of the modules of one ModuleList (or of torchvision's named nn.Sequential,
`encoder_layer_0`, `encoder_layer_1`) that chain into each other with the same block become
`stack N Block`. A piece continues the binding before it when it pipes that binding's
last value and nothing else reads it; a learned step starts a binding of its own, named after
its module (`c_attn: ln_1 -> linear 3*D`).
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field

from .graph import dtype_word, is_tensor, target_name, tok, val
from .load import WRAPPED, ImportFailure
from .translate import Piece

SKIP = {"aten.sym_size.int", "aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default",
        "aten._assert_tensor_metadata.default", "aten.sym_constrain_range.default"}
TOKEN = re.compile("\x00([^\x00]*)\x00")
LAYER = re.compile(r"(|.*[._])(\d+)")
KEYWORDS = {"dim", "assume", "example", "input", "param", "buffer", "expect", "block", "end", "return",
            "causal", "stack", "int", "float", "bool", "keepdim", "true", "false"}


class NotABlock(Exception):
    """This call cannot be a block of its own: its nodes go into the scope around it."""


@dataclass
class Binding:
    head: str
    ops: list
    tail: str
    pieces: list
    outs: list | None = None
    names: list = field(default_factory=list)
    comments: list = field(default_factory=list)
    stack: tuple | None = None      # (block, module path, layers) for `stack N Block`


def call_stack(node) -> list[tuple]:
    """The module calls around a node, outermost first, as (call key, path, class name); the
    wrapper and the user's top module are left out."""
    stack = node.meta.get("nn_module_stack") or {}
    out = []
    for key, (path, cls) in stack.items():
        if path in ("", WRAPPED) or key.startswith("_empty_nn_module_stack"):
            continue
        if path.startswith(WRAPPED + "."):
            path = path[len(WRAPPED) + 1:]
        cls_name = cls.rsplit(".", 1)[-1] if isinstance(cls, str) else getattr(cls, "__name__", "Block")
        out.append((key, path, cls_name))
    return out


def layer(path: str) -> tuple[str, int | None]:
    """A module's place in a list of layers: (what comes before its number, the number) for
    `h.3` (a ModuleList) and `layers.encoder_layer_3` (torchvision's named nn.Sequential);
    (path, None) for a module with no number."""
    m = LAYER.fullmatch(path)
    return (m.group(1), int(m.group(2))) if m else (path, None)


def real_users(node) -> list:
    return [u for u in node.users if u.op == "output" or target_name(u) not in SKIP
            and (is_tensor(u) or isinstance(val(u), (list, tuple)))]


class Scope:
    def __init__(self, ctx, depth: int, inputs: dict[str, str], reserved: set, block: bool):
        self.ctx, self.tr, self.depth, self.block = ctx, ctx.tr, depth, block
        self.names: dict[str, str] = dict(inputs)      # key -> spec name
        self.taken = set(reserved) | set(inputs.values())
        self.bindings: list[Binding] = []
        self.owner: dict[str, Binding] = {}
        self.pending: list = []                          # (Piece or block call) in order
        self.refs_outside: set[str] = set()
        self.path, self.inside = "", set()                 # a block: its module and its call's nodes
        self.decls: list[str] = []                       # a block's own `param`/`buffer` lines
        self.owned: dict[str, str] = {}                  # their names -> the module's names

    # ------------------------------------------------------------------ walking nodes
    def key(self, k: str) -> str:
        return self.ctx.resolve(k)

    def emit_nodes(self, nodes: list, depth: int) -> None:
        i = 0
        while i < len(nodes):
            node = nodes[i]
            stack = call_stack(node)
            if len(stack) > depth and self.ctx.translatable(node):
                key = stack[depth][0]
                j = i
                while j < len(nodes) and (not self.ctx.translatable(nodes[j]) or
                                          (len(call_stack(nodes[j])) > depth and
                                           call_stack(nodes[j])[depth][0] == key)):
                    j += 1
                segment = [n for n in nodes[i:j] if self.ctx.translatable(n)]
                self.emit_call(segment, nodes[i:j], depth, stack[depth])
                # the nodes skipped inside the segment (shape arithmetic) need nothing
                i = j
                continue
            if self.ctx.translatable(node):
                self.emit_node(node, stack[-1][1] if stack else "")
            i += 1

    def emit_call(self, segment, raw, depth, call) -> None:
        _key, path, cls = call
        real = [n for n in segment if self.ctx.is_step(n)]
        if len(real) > 1:
            try:
                self.add(self.ctx.block_call(raw, depth + 1, path, cls))
                return
            except NotABlock:
                pass                  # its steps go into this scope instead
        self.emit_nodes(raw, depth + 1)

    def emit_node(self, node, path: str) -> None:
        if target_name(node) == "aten.scaled_dot_product_attention.default":
            for role, a in zip("qkv", node.args[:3]):
                self.ctx.roles.setdefault(self.key(a.name), role)
        piece = self.tr.piece(node, path)
        pieces = piece if isinstance(piece, list) else [piece]
        for p in pieces:
            if p is None:
                self.ctx.alias[node.name] = node.args[0].name
                continue
            if p.weight is not None:
                self.ctx.weights[node.name] = p.weight
            self.add(p)

    # ------------------------------------------------------------------ pieces -> bindings
    def add(self, p: Piece) -> None:
        if self.stacks(p):
            return
        refs = [self.key(r) for r in p.refs]
        text = TOKEN.sub(lambda m: tok(self.key(m.group(1))), p.text)
        for r in refs + ([self.key(p.pipe)] if p.pipe else []):
            if r not in self.names and r not in self.owner:
                self.need_outside(r)
        last = self.bindings[-1] if self.bindings else None
        if p.pipe is not None:
            pipe = self.key(p.pipe)
            if (last is not None and last.outs is None and last.tail == pipe and not p.strong and not p.outs
                    and self.ctx.single_use(pipe) and not self.ctx.is_output(pipe)):
                last.ops.append(text)
                last.tail = p.key
                last.pieces.append(p)
                if p.comment:
                    last.comments.append(p.comment)
                self.owner[p.key] = last
                return
            b = Binding(tok(pipe), [text], p.key, [p])
        else:
            b = Binding(text, [], p.key, [p])
        if p.outs:
            b.outs = p.outs
            for o in p.outs:
                self.owner[o] = b
        if p.comment:
            b.comments.append(p.comment)
        block = p.block
        b.stack = (block[0], block[1], 1, tuple(self.key(r) for r in p.refs)) if block else None
        self.owner[p.key] = b
        self.bindings.append(b)

    def stacks(self, p: Piece) -> bool:
        """A call of the next module of a ModuleList on the last one's result: one more layer."""
        last = self.bindings[-1] if self.bindings else None
        block = p.block
        if block is None or last is None or getattr(last, "stack", None) is None:
            return False
        name, path, _inside = block
        lname, lpath, count, lrefs = last.stack
        refs = tuple(self.key(r) for r in p.refs)     # the same mask for every layer: `stack N Block(mask)`
        parent, index = layer(path)
        lparent, lindex = layer(lpath)
        if not (name == lname and parent == lparent and index is not None and lindex is not None and refs == lrefs
                and index == lindex + 1 and last.tail == self.key(p.pipe)
                and all(u.name in _inside for u in self.ctx.users(last.tail))
                and not self.ctx.is_output(last.tail)):
            return False
        last.stack = (name, path, count + 1, refs)
        extra = "(" + ", ".join(tok(r) for r in refs) + ")" if refs else ""
        last.ops = [f"stack {self.ctx.sizes.count(count + 1)} {name}{extra}"]
        last.pieces = [Piece(p.key, last.ops[0], refs=list(refs), hint=parent.rstrip("._").rpartition(".")[2] or "layers",
                             strong=True)]
        last.tail = p.key
        self.owner[p.key] = last
        return True

    def need_outside(self, key: str) -> None:
        """A tensor from outside this scope: a weight read directly, or (in a block) an error."""
        if key in self.ctx.params:
            if self.block:
                self.names[key] = self.own(key)
                return
            self.names[key] = self.ctx.declare(key)
            return
        raise NotABlock(key) if self.block else ImportFailure(f"the graph reads `{key}` before it is made")

    def own(self, key: str) -> str:
        """A weight of the block's own module (RMSNorm's `self.weight`, rotary tables) that no
        step outside this call reads: a `param` (or `buffer`) line of the block."""
        kind, fqn = self.ctx.params[key]
        prefix = self.path + "." if self.path else ""
        node = self.ctx.by_name[key]
        if not fqn.startswith(prefix) or any(u.name not in self.inside for u in real_users(node)):
            raise NotABlock(key)
        name = self.claim(fqn[len(prefix):].replace(".", "_"))
        shape = self.tr.shape(node, "size")
        word = dtype_word(val(node))
        if kind == "PARAMETER":
            self.decls.append(f"param {name}: {shape}")
        else:
            self.decls.append(f"buffer {name}: {shape}" + ("" if word == "float" else f" {word}"))
        self.owned[name] = fqn
        return name

    # ------------------------------------------------------------------ naming and text
    def claim(self, want: str) -> str:
        base = re.sub(r"\W", "_", want) or "t"
        if base[0].isdigit():
            base = "t" + base
        if base in KEYWORDS:
            base += "_"
        name, n = base, 2
        taken = self.taken | set(self.ctx.declared.values())
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name

    def finish(self) -> list[str]:
        roles = self.ctx.roles
        for b in reversed(self.bindings):       # q's role reaches back to the split that made it
            head = b.head.strip("\x00")
            if b.tail in roles and not b.outs and "\x00" not in head and head not in roles \
                    and self.ctx.single_use(head) and head in self.owner and self.owner[head].outs:
                roles[head] = roles[b.tail]
        for b in self.bindings:
            if b.outs:
                b.names = [self.claim(roles.get(o) or ("_" + b.pieces[0].hint if o.startswith("\x01")
                                                       else b.pieces[0].hint)) for o in b.outs]
                for o, n in zip(b.outs, b.names):
                    self.names[o] = n
                continue
            strong = next((p.hint for p in b.pieces if p.strong), None)
            role = roles.get(b.tail)
            if role and b.head.strip("\x00") in self.names and self.names[b.head.strip("\x00")] == role:
                role += "h"
            want = role or strong or b.pieces[0].hint
            b.names = [self.claim(want)]
            self.names[b.tail] = b.names[0]
        lines = []
        for b in self.bindings:
            for c in b.comments:
                lines.append(f"# {c}")
            text = " -> ".join([self.sub(b.head)] + [self.sub(o) for o in b.ops])
            lines.append(f"{', '.join(b.names)}: {text}")
        return lines

    def sub(self, text: str) -> str:
        def name(m):
            k = self.key(m.group(1))
            if k not in self.names:
                raise ImportFailure(f"internal: no name for `{k}`")
            return self.names[k]
        return TOKEN.sub(name, text)


def segment_io(segment: list, raw: list, ctx) -> tuple[list, list]:
    """The tensors a call reads from outside (in first-use order) and the ones it gives out."""
    inside = {n.name for n in raw}
    inputs, outputs = [], []
    for n in segment:
        for a in n.all_input_nodes:
            a_key = ctx.resolve(a.name)
            if a.name in inside or a_key in inside or not is_tensor(a) or a.name in ctx.params:
                continue
            if target_name(a) in ("aten.chunk.default", "aten.split.Tensor") or a.target is operator.getitem \
                    and a.args[0].name in ctx.params:
                continue
            if a_key not in inputs:
                inputs.append(a_key)
        if any(u.name not in inside for u in real_users(n)):
            outputs.append(n.name)
    return inputs, outputs
