"""Blocks: calling a block binds its dims to the caller's sizes, checks its body in a
scope of its own, and caches the result per argument shapes; `stack N Block`."""
from __future__ import annotations

import weakref

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Assume, Binding, Block, Call, DimDecl, Example, Name, Return, Span
from . import dtypes, ops
from .advice import causes
from .ir import BindingIR, BlockIR, Decl
from .layout import TensorType
from .lazysympy import sympy as sp
from .scope import Poisoned, Scope


def call_bound_dims(statements, dims) -> list[str]:
    """Dims named in a block's input shapes and nowhere outside the blocks (an `assume` about
    them is the blocks' assumption: `assume R % W == 0`), and the size
    parameters of blocks (`dim F` in the signature): each call binds them to the caller's
    sizes (`block Block(x: [B, N, D])` called with [B, T, D]; `Mlp(x, F=4*D)`)."""
    in_blocks, outside = [], set()
    for s in statements:
        if isinstance(s, Block):
            for decl in s.inputs:
                in_blocks += [d.name for d in decl.shape.dims if isinstance(d, Name)]
            in_blocks += [p.name for p in s.sizes]
    if not in_blocks:   # no block binds a dim: nothing to read outside them
        return []
    for s in statements:
        if isinstance(s, Block):
            continue
        if not isinstance(s, (DimDecl, Example, Assume)):
            outside |= _names(s)
        elif isinstance(s, DimDecl) and s.value is not None:
            outside |= _names(s.value)
    sizes = {p.name for s in statements if isinstance(s, Block) for p in s.sizes}
    return [n for n in dict.fromkeys(in_blocks) if n in dims and (n not in outside or n in sizes)]


def _names(node) -> set:
    """Every name a statement or expression mentions."""
    out: set = set()
    _collect_names(node, out, 0)
    return out


_FIELDS: dict = {}   # node type -> its dataclass fields (none for anything else)


def _collect_names(node, out: set, depth: int) -> None:
    if isinstance(node, Name):
        out.add(node.name)
        return
    if depth > 200:
        return
    if isinstance(node, (tuple, list)):
        for x in node:
            _collect_names(x, out, depth + 1)
        return
    fields = _FIELDS.get(type(node))
    if fields is None:
        fields = _FIELDS[type(node)] = tuple(getattr(type(node), "__dataclass_fields__", ()))
    for f in fields:
        v = getattr(node, f)
        if isinstance(v, (tuple, list)) or type(v) in _FIELDS or hasattr(v, "__dataclass_fields__"):
            _collect_names(v, out, depth + 1)


class BlockCalls:
    """The checker's block machinery; owns nothing but works in the checker's scope."""

    def __init__(self, checker):
        # the checker owns this; a weak reference back keeps the two out of a reference cycle,
        # so that a finished check (its parse tree, its IR) is freed as soon as it is dropped
        # instead of waiting for the garbage collector's full pass
        self.c = weakref.proxy(checker)
        self._local = None      # the symbols bound at block calls, once the dims are known

    def _declared_shape(self, decl, block: Block) -> list:
        """A block input's shape in the block's own dims, whatever the caller renamed (its size
        parameters may appear: `block Up(x: [B, S, F], dim F)`)."""
        c = self.c
        caller, sizes = c.scope.subst, c.scope.sizes
        c.scope.subst, c.scope.sizes = {}, sizes | {p.name for p in block.sizes}
        try:
            return [c.build(d) for d in decl.shape.dims]
        finally:
            c.scope.subst, c.scope.sizes = caller, sizes

    def own_types(self, block: Block) -> list:
        """The types of a block's inputs as declared (a block checked on its own)."""
        c = self.c
        sizes = c.scope.sizes
        c.scope.sizes = sizes | {p.name for p in block.sizes}
        try:
            return [c._decl_type(d, {}) for d in block.inputs]
        finally:
            c.scope.sizes = sizes

    def size_args(self, block: Block, kwargs, span) -> dict:
        """The sizes a call gives a block's size parameters (`Mlp(x, F=4*D)`), in the caller's
        dims: each given once, none missing, none unknown, each a whole positive size."""
        c = self.c
        if any(p.name not in c.prover.user for p in block.sizes):
            raise Poisoned()     # its signature is in error: that is the error to fix
        params = {p.name: p for p in block.sizes}
        given, out = {}, {}
        for k in kwargs:
            if k.name in given:
                raise ShapeError("E110", f"the size `{k.name}=` is given twice", span=k.span,
                                 help="give each size of the block once")
            if k.name not in params:
                if params:
                    help = (c._did_you_mean(k.name, params) or "") + \
                        f" `{block.name}` takes the size{'s' if len(params) > 1 else ''} " + \
                        ", ".join(f"`{n}=`" for n in params)
                else:
                    help = (f"`{block.name}` has no size parameters; a block's sizes are the dims "
                            f"of its inputs, or declare one in its signature: "
                            f"`block {block.name}(..., dim {k.name})`")
                raise ShapeError("E110", f"block `{block.name}` has no size `{k.name}=`", span=k.span,
                                 help=help.strip(), fixes=c._close_fix(k.name, params, _name_span(k)))
            given[k.name] = k
        missing = [n for n in params if n not in given]
        if missing:
            n = missing[0]
            raise ShapeError("E113", f"block `{block.name}` needs its size `{n}=`"
                             + (f" (and {', '.join(f'`{m}=`' for m in missing[1:])})"
                                if len(missing) > 1 else ""),
                             span=span, help=f"give it at the call: `{block.name}(..., {n}=...)` or "
                             f"`-> {block.name} {n}=...`",
                             fixes=self._missing_fix(block, missing, span))
        for name, k in sorted(given.items(), key=lambda kv: list(params).index(kv[0])):
            value = c.dim(k.value)
            c.need_whole(value, span=k.value.span, what=lambda v=value, n=name: f"`{n}={c.sz(v)}`")
            c.need_positive(value, k.value.span, what=lambda v=value, n=name: f"the size `{n}={c.sz(v)}`")
            out[c.prover.user[name]] = value
        self._block_assumptions(block, out, given, span)
        return out

    def _missing_fix(self, block: Block, missing, span) -> tuple:
        """`Mlp(x)` where the caller has a size of the same name: `Mlp(x, F=F)` (proved
        before it is shown, like every fix)."""
        c = self.c
        line = c.spec.source.split("\n")[span.line - 1] if span.line == span.end_line else ""
        text = line[span.column - 1:span.end_column - 1]
        if not text:
            return ()
        visible = [n for n in missing if n in c.prover.user
                   and (n not in c.local_sizes or n in c.scope.sizes)]
        earlier = next((ir.size_args for ir in c.out.blocks.get(block.name, ()) if ir.size_args), {})
        given = {str(k): c.sz(v) for k, v in earlier.items()}
        out = []
        for values, why in (({n: n for n in visible}, "the size{s} of the same name{s}"),
                            (given, "the size{s} of its earlier call")):
            if len(values) != len(missing) or any(n not in values for n in missing):
                continue
            plural = "s" if len(missing) > 1 else ""
            if text.endswith(")"):
                extra = ", ".join(f"{n}={values[n]}" for n in missing)
                new = text[:-1] + ("" if text.endswith("()") else ", ") + extra + ")"
            else:
                new = text + " " + ", ".join(f"{n}={_tight(values[n])}" for n in missing)
            out.append((span, new, f"give `{block.name}` " + why.format(s=plural)))
        return tuple(out)

    def _local_dims(self) -> set:
        """The symbols bound at block calls: size parameters and dims named only in blocks'
        input shapes. A top-level `assume` about them is the blocks' assumption."""
        c = self.c
        if self._local is None:
            self._local = {c.prover.user[n] for n in call_bound_dims(c.spec.statements, c.prover.user)}
        return self._local

    def _block_assumptions(self, block: Block, sizes: dict, given, span, inputs: bool = False) -> None:
        """The top-level assumptions about a block's size parameters hold at each call, for the
        sizes given (`assume F % 64 == 0`, then `Mlp(x, F=96)` is refused). With `inputs`,
        `sizes` is everything the call binds, the dims of its input shapes too, and the
        assumptions checked are those about a dim bound only at calls (`assume R % W == 0`
        for `block Stage(x: [B, R, R, C])`) that this call binds whole."""
        c = self.c
        if not sizes:
            return
        local = self._local_dims()
        params = {c.prover.user[p.name] for p in block.sizes if p.name in c.prover.user}
        for a, cmp, b, stmt in c.out.assumptions:
            syms = a.free_symbols | b.free_symbols
            if not syms & set(sizes) or cmp == "!=":
                continue
            mine = syms & local
            if inputs and (not mine - params or not mine <= set(sizes)):
                continue    # about size parameters alone (checked with them), or not all bound here
            if not inputs and not mine <= params:
                continue    # about a dim of the inputs too: checked once the inputs bind it
            a2, b2 = a.xreplace(sizes), b.xreplace(sizes)
            if a2 == a and b2 == b:
                continue
            if cmp in (">=", ">"):
                a2, b2, cmp2 = b2, a2, "<=" if cmp == ">=" else "<"
            else:
                cmp2 = cmp
            if cmp2 == "==":
                verdict = c.prover.equal(a2, b2)
            else:
                verdict = c.prover.leq(a2 + 1 if cmp2 == "<" else a2, b2)
            if verdict.ok:
                continue
            where = next((given[n].span for n in given if c.prover.user[n] in syms), span)
            bound = ", ".join(f"{s} = {c.sz(v)}" for s, v in sizes.items() if s in syms)
            # the assumption in the caller's sizes (`E % 2 == 0` for `F % 2 == 0` with F = E):
            # a fix when the call's size is a dim the spec may assume it of
            fixes = () if not (a2.free_symbols | b2.free_symbols) else causes.assume_line(
                c, f"{c.sz(a.xreplace(sizes))} {cmp} {c.sz(b.xreplace(sizes))}",
                f"if the size given to `{block.name}` always satisfies it, say so")
            want = stmt.text[7:].strip()
            help = (f"call `{block.name}` on a tensor whose sizes satisfy `{want}`" if inputs else
                    f"give `{block.name}` a size that satisfies `{want}`")
            raise c._fail(verdict, "E113", f"block `{block.name}` assumes `{want}`, "
                          f"which does not hold for {bound}", help, where,
                          claim=f"`{stmt.text[7:].strip()}` holds for {bound}", fixes=fixes)

    def block_step(self, block: Block, args, text, span, kwargs=()) -> list:
        c = self.c
        sizes = self.size_args(block, kwargs, span)
        ir = self.call_block(block, [t for t, _ in args], [r for _, r in args], span, sizes)
        res = ops.Result(tuple(ir.outputs), params=ir.total_params, flops=ir.total_flops,
                         detail={"block": block.name})
        return c.emit("block", text, span, [r for _, r in args], res, block=ir)

    def stack(self, op, x, ref) -> list:
        c = self.c
        first = next((k for k in op.kwargs if k.name == "first"), None)
        shared = self._shared(next((k for k in op.kwargs if k.name == "shared"), None))
        kwargs = [k for k in op.kwargs if k.name not in ("first", "shared")]
        if kwargs and not isinstance(op.args[-1] if op.args else None, (Call, Name)):
            raise ShapeError("E110", f"`{kwargs[0].name}=`: `stack` takes a count and a block",
                             span=kwargs[0].span)
        if len(op.args) < 2:
            raise ShapeError("E110", "`stack` takes a count and a block: `stack L Layer`",
                             span=op.span)
        count = c.ctx.dim(op.args[0])
        c.ctx.need_positive(count, op.args[0].span, what=lambda: f"the layer count {c.sz(count)}")
        c.ctx.need_whole(count, span=op.args[0].span, what=lambda: f"the layer count {c.sz(count)}")
        target = op.args[1]
        name = self._block_name(target)
        extra_nodes = list(target.args) if isinstance(target, Call) else []
        extra_nodes += list(op.args[2:])
        extra = [c.tensor_value(a) for a in extra_nodes]
        block = c.blocks[name]
        detail = {"block": name, "count": count}
        if first is not None:      # `stack L Moe first=Dense`: layer 0 is another block
            wide = next((block.inputs[k + 1].name for k, (t, _) in enumerate(extra) if k + 1 < len(block.inputs)
                         and t.rank == len(block.inputs[k + 1].shape.dims) + 1), None)
            if wide is not None:
                raise ShapeError("E110", f"`first=` and the per-layer input `{wide}` do not go together: "
                                 "the first layer is another block, so the slices would not line up with "
                                 "the layers", span=first.span,
                                 help="write the first layer apart: `h: x -> Dense -> stack (L - 1) "
                                 f"{name}(..)`, with the per-layer inputs of L - 1 layers")
            x, ref = self._first_layer(first, op, x, ref, extra, name)
            count = sp.expand(count - 1)
            detail = {"block": name, "count": count, "first": ref, "layers": c.ctx.dim(op.args[0])}
        # an input with one more, leading, axis of the count than the block declares: layer i
        # (copy e of a stack of experts) gets its slice i, a view
        sliced = [self._per_layer(block, k + 1, t, count, op.span) for k, (t, _) in enumerate(extra)]
        given = [t.restrided(t.shape[1:], lambda st: st[1:]) if cut else t
                 for (t, _), cut in zip(extra, sliced)]
        kwargs = (list(target.kwargs) if isinstance(target, Call) else []) + kwargs
        sizes = self.size_args(block, kwargs, op.span)
        ir = self.call_block(block, [x] + given, [ref] + [r for _, r in extra], op.span, sizes)
        c.need_shape_equal(ir.output.shape, x.shape, span=op.span, code="E114",
                              message=lambda: f"`{name}` turns {c.show(x)} into {c.show(ir.output)}, "
                                      "so its copies cannot be stacked")
        if ir.output.dtype != x.dtype:
            raise ShapeError("E114", f"`{name}` turns {dtypes.show(x.dtype)} values into "
                             f"{dtypes.show(ir.output.dtype)} ones, so its copies cannot be stacked",
                             span=op.span)
        if first is not None and len(ir.outputs) > 1:
            raise ShapeError("E110", f"`first=` and a `{name}` returning several tensors do not go "
                             "together: the first layer would collect nothing", span=first.span,
                             help=f"write the first layer apart: `h: x -> Dense -> stack (L - 1) {name}(..)`")
        # a block returning several tensors is scanned: the first is handed on to the next
        # layer, the others are collected, one slice per layer, into [N, ..] results
        collected = tuple(t.with_shape((count,) + tuple(t.shape)) for t in ir.outputs[1:])
        detail.update(sliced=tuple(sliced), collected=len(collected), shared=shared)
        # `shared=true`: one layer's weights applied `count` times (ALBERT; Perceiver's tied layers)
        res = ops.Result((ir.output,) + collected, params=sp.expand((1 if shared else count) * ir.total_params),
                         flops=sp.expand(count * ir.total_flops), detail=detail)
        return c.emit("stack", op.text, op.span, [ref] + [r for _, r in extra], res, block=ir)

    @staticmethod
    def _shared(k) -> bool:
        """`shared=true`: every layer of the stack is one module, its weights shared."""
        if k is None:
            return False
        if isinstance(k.value, Name) and k.value.name in ("true", "false", "True", "False"):
            return k.value.name.lower() == "true"
        raise ShapeError("E110", "`shared=` takes true or false: `stack L Layer shared=true` applies one "
                         "layer's weights L times", span=k.span)

    def _block_name(self, target) -> str:
        c = self.c
        name = target.func if isinstance(target, Call) else getattr(target, "name", None)
        if name not in c.blocks:
            raise ShapeError("E111", f"`stack` needs a block, and `{name or '?'}` is not one",
                             span=target.span, help=c._did_you_mean(name or "", c.blocks))
        return name

    def _first_layer(self, first, op, x, ref, extra, main: str):
        """`first=Dense` (or `first=Dense(F=4*D)`): layer 0 of the stack, a block that must also
        return the shape it takes; the step it makes is layer 0 of the stack's module list. It
        gets the stack's extra inputs, or its own (`first=Cross(data)`, Perceiver's first layer)."""
        c = self.c
        target = first.value
        name = self._block_name(target)
        if isinstance(target, Call) and target.args:    # `first=Cross(data)`: inputs of its own
            extra = [c.tensor_value(a) for a in target.args]
        sizes = self.size_args(c.blocks[name], list(target.kwargs) if isinstance(target, Call) else [],
                               first.span)
        ir = self.call_block(c.blocks[name], [x] + [t for t, _ in extra], [ref] + [r for _, r in extra],
                             first.span, sizes)
        c.need_shape_equal(ir.output.shape, x.shape, span=first.span, code="E114",
                              message=lambda: f"the first layer `{name}` turns {c.show(x)} into "
                                      f"{c.show(ir.output)}, so `{main}` cannot follow it in the stack")
        res = ops.Result((ir.output,), params=ir.total_params, flops=ir.total_flops,
                         detail={"block": name, "stack_first": True})
        text = c.source_of(first)
        return c.emit("block", text, first.span, [ref] + [r for _, r in extra], res, block=ir)[0]

    def generic(self, block: Block) -> None:
        """A block with size parameters, or one called at several sizes, checked once more
        with its own dims and sizes free, silently: if that checks (its assumptions suffice),
        codegen writes one class for every call (`Mlp(cfg, F)`, `WindowAttention(cfg, NH, C)`)."""
        c = self.c
        if not any(k[0] == block.name for k in c.block_cache):
            return
        if not block.sizes and len(c.out.blocks.get(block.name, ())) < 2:
            return
        n, seen = len(c.out.diagnostics), set(c.seen)
        counts = {name: len(insts) for name, insts in c.out.blocks.items()}
        ir = None
        try:
            args = self.own_types(block)
            sizes = {c.prover.user[p.name]: c.prover.user[p.name] for p in block.sizes
                     if p.name in c.prover.user}
            ir = self.call_block(block, args, [d.name for d in block.inputs], block.span, sizes)
        except (ShapeError, Poisoned):
            ir = None
        failed = any(d.severity == "error" for d in c.out.diagnostics[n:])
        del c.out.diagnostics[n:]
        c.seen = seen
        for name in list(c.out.blocks):
            del c.out.blocks[name][counts.get(name, 0):]
            if not c.out.blocks[name]:
                del c.out.blocks[name]
        c.out.generic_blocks[block.name] = None if failed else ir

    def _per_layer(self, block: Block, k: int, t: TensorType, count, span) -> bool:
        """Whether the stack hands input k to its layers one slice at a time: it is given with
        one more, leading, axis than the block declares, of the layer count's size
        (`past_k: [L, B, H, P, Dh]` for `k: [B, H, P, Dh]`: layer i gets past_k[i])."""
        if k >= len(block.inputs) or t.rank != len(block.inputs[k].shape.dims) + 1:
            return False
        c = self.c
        c.need_equal(t.shape[0], count, code="E113", span=span,
                     message=lambda: f"`{block.inputs[k].name}` is given per layer with "
                     f"{c.show(t)}, whose first axis is not the layer count {c.sz(count)}")
        return True

    def call_block(self, block: Block, args: list[TensorType], refs, span, sizes=None) -> BlockIR:
        """`sizes`: the block's size parameters (symbol -> size in the caller's dims); None
        for a block checked on its own, whose size parameters stay free."""
        c = self.c
        if len(args) != len(block.inputs):
            raise ShapeError("E113", f"block `{block.name}` takes {len(block.inputs)} input"
                             f"{'s' if len(block.inputs) != 1 else ''}, got {len(args)}", span=span)
        sizes = dict(sizes or {})
        key = (block.name, tuple(args), tuple(sizes.items()))
        called = span != block.span
        owner = c.block_cache.get(key + ("data",))   # the prover of its data-dependent sizes
        if key in c.block_cache and owner in (None, c.prover):
            cached = c.block_cache[key]
            if cached is None:
                raise Poisoned()
            # a block that makes data-dependent sizes makes new ones at every call after the first
            if not (called and key in c.fresh_blocks and c.fresh_blocks[key]):
                if called and key in c.fresh_blocks:
                    c.fresh_blocks[key] = True
                return cached
        subst = dict(sizes)
        for decl, t, ref in zip(block.inputs, args, refs):
            declared = self._declared_shape(decl, block)
            want = dtypes.canonical(decl.dtype) if decl.dtype else None
            if want is not None and want != t.dtype:
                raise ShapeError("E113", f"block `{block.name}` expects `{decl.name}` of "
                                 f"{dtypes.show(want)} values, got {dtypes.show(t.dtype)}", span=span,
                                 help=f"cast it: `-> to {want}`")
            if len(declared) != t.rank:
                raise ShapeError("E113", f"block `{block.name}` expects `{decl.name}` with "
                                 f"{len(declared)} dims, got {c.show(t)}", span=span)
            for d, actual in zip(declared, t.shape):
                # a dim's first occurrence binds it; a repeated one (`[G, G]`) is compared
                # with that binding, in the caller's terms
                if d.is_Symbol and d in c.prover.user.values() and d not in subst \
                        and d not in c.prover.definition:
                    subst[d] = actual
                else:
                    d = d.xreplace(subst)
                    c.need_equal(d, actual, code="E113", span=span,
                                    message=lambda decl=decl, declared=declared, t=t:
                                    f"block `{block.name}` expects `{decl.name}` to be "
                                    f"{c.show_shape(declared)}, got {c.show(t)}")
        size_args = {k: subst[k] for k in sizes}
        subst = {k: v for k, v in subst.items() if k != v}
        if called:
            self._block_assumptions(block, subst, {}, span, inputs=True)
        outer, outer_steps = c.scope, c.scope.steps
        c.scope = Scope(dict(subst))
        c.scope.sizes = {p.name for p in block.sizes}
        c.block_cache[key] = None
        unbacked = len(c.prover.unbacked)
        if called:   # what the body reports says where the block was called from, with what
            given = ", ".join([f"{d.name}: {c.show_shape(t.shape)}" for d, t in zip(block.inputs, args)]
                              + [f"{k} = {c.sz(v)}" for k, v in size_args.items()])
            c.calls.append((span, f"`{block.name}` is called here with {given}"))
        try:
            inputs = []
            for decl, t in zip(block.inputs, args):
                c.scope.values[decl.name] = (t, decl.name)
                c.scope.spans[decl.name] = decl.span
                inputs.append(Decl("input", decl.name, t, decl.span))
            bindings, result = [], None
            for s in block.body:
                if isinstance(s, Return):
                    c.scope.steps = []
                    c.binding_names = (f"{block.name}_out",)   # names a data-dependent size made here
                    try:
                        vals = [v for p in (s.values or (s.value,)) for v in c.pipeline(p)]
                        result = vals
                        bindings.append(BindingIR(("return",), s.span, c.scope.steps,
                                                  tuple(r for _, r in vals), tuple(t for t, _ in vals)))
                    except ShapeError as err:
                        c.report(err.at(s.span))
                    except Poisoned:
                        pass
                elif isinstance(s, Binding):
                    b = c._binding(s)
                    if b is not None:
                        bindings.append(b)
                elif isinstance(s, Assume):
                    c.error("E115", "assumptions belong at the top of the file", s.span,
                            "move this `assume` line above the block")
                else:
                    c._statement(s)
            if not any(isinstance(s, Return) for s in block.body):
                c.error("E110", f"block `{block.name}` has no `return`", block.end_span,
                        "end the block with `return <tensor>`")
            ir = BlockIR(block.name, block.span, inputs,
                         [d for d in c.scope.decls if d.kind == "param"],
                         [d for d in c.scope.decls if d.kind == "buffer"],
                         bindings, result[0][1] if result else None,
                         result[0][0] if result else None, subst, size_args,
                         tuple(r for _, r in result or ()), tuple(t for t, _ in result or ()))
        finally:
            c.scope = outer
            c.scope.steps = outer_steps
            if called:
                c.calls.pop()
        if ir.output is None:
            raise Poisoned()
        c.block_cache[key] = ir
        if len(c.prover.unbacked) > unbacked:   # data-dependent sizes: new ones at every call
            c.fresh_blocks[key] = c.fresh_blocks.get(key, False) or called
            c.block_cache[key + ("data",)] = c.prover
        c.out.blocks.setdefault(block.name, []).append(ir)
        return ir


def _name_span(k) -> Span:
    """The span of a keyword's name (`F` of `F=4*D`)."""
    return Span(k.span.line, k.span.column, k.span.line, k.span.column + len(k.name))


def _tight(text: str) -> str:
    """A size as an operation's keyword value: parenthesised when it has spaces (`F=(D + 1)`)."""
    return f"({text})" if " " in text else text
