"""Blocks: calling a block binds its dims to the caller's sizes, checks its body in a
scope of its own, and caches the result per argument shapes; `stack N Block`."""
from __future__ import annotations

import sympy as sp

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Assume, Binding, Block, Call, DimDecl, Example, Name, Return
from . import dtypes, ops
from .ir import BindingIR, BlockIR, Decl
from .layout import TensorType
from .scope import Poisoned, Scope


def call_bound_dims(statements, dims) -> list[str]:
    """Dims named in a block's input shapes and nowhere outside the blocks: each call binds
    them to the caller's sizes (`block Block(x: [B, N, D])` called with [B, T, D])."""
    in_blocks, outside = [], set()
    for s in statements:
        if isinstance(s, Block):
            for decl in s.inputs:
                in_blocks += [d.name for d in decl.shape.dims if isinstance(d, Name)]
        elif not isinstance(s, (DimDecl, Example)):
            outside |= _names(s)
        elif isinstance(s, DimDecl) and s.value is not None:
            outside |= _names(s.value)
    return [n for n in dict.fromkeys(in_blocks) if n in dims and n not in outside]


def _names(node, depth=0) -> set:
    """Every name a statement or expression mentions."""
    if isinstance(node, Name):
        return {node.name}
    out = set()
    if depth > 200:
        return out
    if isinstance(node, (tuple, list)):
        for x in node:
            out |= _names(x, depth + 1)
    elif hasattr(node, "__dataclass_fields__"):
        for f in node.__dataclass_fields__:
            v = getattr(node, f)
            if isinstance(v, (tuple, list)) or hasattr(v, "__dataclass_fields__"):
                out |= _names(v, depth + 1)
    return out


class BlockCalls:
    """The checker's block machinery; owns nothing but works in the checker's scope."""

    def __init__(self, checker):
        self.c = checker

    def _declared_shape(self, decl) -> list:
        c = self.c
        """A block input's shape in the block's own dims, whatever the caller renamed."""
        caller, c.scope.subst = c.scope.subst, {}
        try:
            return [c.build(d) for d in decl.shape.dims]
        finally:
            c.scope.subst = caller

    def keywords(self, op) -> ShapeError:
        """`-> Block eps=1e-6`: a block call has no keyword arguments."""
        return ShapeError("E110", f"`{op.kwargs[0].name}=`: a block call takes no keyword arguments",
                          span=op.kwargs[0].span, help="a block's sizes are the dims of its inputs")

    def block_step(self, block: Block, args, text, span) -> list:
        c = self.c
        ir = self.call_block(block, [t for t, _ in args], [r for _, r in args], span)
        res = ops.Result(tuple(ir.outputs), params=ir.total_params, flops=ir.total_flops,
                         detail={"block": block.name})
        return c.emit("block", text, span, [r for _, r in args], res, block=ir)

    def stack(self, op, x, ref) -> list:
        c = self.c
        if len(op.args) < 2:
            raise ShapeError("E110", "`stack` takes a count and a block: `stack L Layer`",
                             span=op.span)
        count = c.ctx.dim(op.args[0])
        c.ctx.need_positive(count, op.args[0].span, what=lambda: f"the layer count {c.sz(count)}")
        c.ctx.need_whole(count, span=op.args[0].span, what=lambda: f"the layer count {c.sz(count)}")
        target = op.args[1]
        name = target.func if isinstance(target, Call) else getattr(target, "name", None)
        if name not in c.blocks:
            raise ShapeError("E111", f"`stack` needs a block, and `{name or '?'}` is not one",
                             span=target.span, help=c._did_you_mean(name or "", c.blocks))
        extra_nodes = list(target.args) if isinstance(target, Call) else []
        extra_nodes += list(op.args[2:])
        extra = [c.tensor_value(a) for a in extra_nodes]
        block = c.blocks[name]
        sliced = [self._per_layer(block, k + 1, t, count, op.span) for k, (t, _) in enumerate(extra)]
        given = [t.restrided(t.shape[1:], lambda st: st[1:]) if cut else t    # past_k[i]: a view
                 for (t, _), cut in zip(extra, sliced)]
        ir = self.call_block(block, [x] + given, [ref] + [r for _, r in extra], op.span)
        c.need_shape_equal(ir.output.shape, x.shape, span=op.span, code="E114",
                              message=lambda: f"`{name}` turns {c.show(x)} into {c.show(ir.output)}, "
                                      "so its copies cannot be stacked")
        if ir.output.dtype != x.dtype:
            raise ShapeError("E114", f"`{name}` turns {dtypes.show(x.dtype)} values into "
                             f"{dtypes.show(ir.output.dtype)} ones, so its copies cannot be stacked",
                             span=op.span)
        # a block returning several tensors is scanned: the first is handed on to the next
        # layer, the others are collected, one slice per layer, into [N, ..] results
        collected = tuple(t.with_shape((count,) + tuple(t.shape)) for t in ir.outputs[1:])
        res = ops.Result((ir.output,) + collected, params=sp.expand(count * ir.total_params),
                         flops=sp.expand(count * ir.total_flops),
                         detail={"block": name, "count": count, "sliced": tuple(sliced),
                                 "collected": len(collected)})
        return c.emit("stack", op.text, op.span, [ref] + [r for _, r in extra], res, block=ir)

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

    def call_block(self, block: Block, args: list[TensorType], refs, span) -> BlockIR:
        c = self.c
        if len(args) != len(block.inputs):
            raise ShapeError("E113", f"block `{block.name}` takes {len(block.inputs)} input"
                             f"{'s' if len(block.inputs) != 1 else ''}, got {len(args)}", span=span)
        key = (block.name, tuple(args))
        if key in c.block_cache:
            cached = c.block_cache[key]
            if cached is None:
                raise Poisoned()
            return cached
        subst = {}
        for decl, t, ref in zip(block.inputs, args, refs):
            declared = self._declared_shape(decl)
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
        subst = {k: v for k, v in subst.items() if k != v}
        outer, outer_steps = c.scope, c.scope.steps
        c.scope = Scope(subst)
        c.block_cache[key] = None
        called = span != block.span
        if called:   # what the body reports says where the block was called from, with what
            given = ", ".join(f"{d.name}: {c.show_shape(t.shape)}" for d, t in zip(block.inputs, args))
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
                         result[0][0] if result else None, subst,
                         tuple(r for _, r in result or ()), tuple(t for t, _ in result or ()))
        finally:
            c.scope = outer
            c.scope.steps = outer_steps
            if called:
                c.calls.pop()
        if ir.output is None:
            raise Poisoned()
        c.block_cache[key] = ir
        c.out.blocks.setdefault(block.name, []).append(ir)
        return ir
