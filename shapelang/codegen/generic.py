"""Codegen, one class per block definition: which sizes its constructor takes.

Input: the checked IR (the instantiations of every block and the generic check the
checker makes of a block that has size parameters or is called at several sizes).
Output: for a block written once for every call, the dims bound at its calls that
the class needs when it is built (`block WindowAttention(x: [Bw, N, C], dim NH)`
called at widths 96, 192, ...: `WindowAttention(cfg, NH, C)` with
`nn.Linear(C, 3 * C)`), and what each call gives them (`WindowAttention(cfg, 2 * cfg.Nh,
2 * cfg.D)`).

A dim bound at a call is a constructor argument when some call binds it to another
size than itself and the class needs it in `__init__` (a layer's width, a table's
shape) or in `forward` without an input that shows it. Every other dim stays as
before: read from the inputs in `forward`, or a config field when every call binds
it to itself.
"""
from __future__ import annotations

import sympy as sp

from ..checker.ir import BlockIR, CheckedSpec
from .naming import _symbols_in


def instances(spec: CheckedSpec) -> list[BlockIR]:
    """Every instantiation of a block codegen may write: the calls of the spec, and the calls
    made inside the generic checks (a generic block's calls, in its own dims)."""
    seen, out = set(), []
    todo = [ir for insts in spec.blocks.values() for ir in insts]
    todo += [ir for ir in spec.generic_blocks.values() if ir is not None]
    while todo:
        ir = todo.pop()
        if id(ir) in seen:
            continue
        seen.add(id(ir))
        out.append(ir)
        for b in ir.bindings:
            for s in b.steps:
                if s.block is not None:
                    todo.append(s.block)
    return out


def varying(spec: CheckedSpec) -> dict[str, list]:
    """block name -> the dims of its inputs that some call binds to another size, in the
    order the block declares them."""
    bound: dict[str, set] = {}
    for ir in instances(spec):
        for local, outer in ir.binding_of_dims.items():
            if local not in ir.size_args and sp.sympify(outer) != local:
                bound.setdefault(ir.name, set()).add(local)
    out = {}
    for name, dims in bound.items():
        generic = spec.generic_blocks.get(name)
        order = []
        for d in generic.inputs if generic is not None else ():
            for x in d.type.shape:
                for s in sorted(sp.sympify(x).free_symbols, key=str):
                    if s in dims and s not in order:
                        order.append(s)
        out[name] = order + sorted(dims - set(order), key=str)
    return out


def given(ir: BlockIR, local) -> sp.Expr:
    """What one call gives the constructor argument `local`: its size parameter's value, or
    the size its input bound the dim to (the dim itself when the call passes it unchanged)."""
    if local in ir.size_args:
        return sp.sympify(ir.size_args[local])
    return sp.sympify(ir.binding_of_dims.get(local, local))


def settle(unit, readable: dict, block_sizes: set) -> None:
    """Once the class is written: keep the dims bound at calls that it needs when it is built
    (used in `__init__`, or used in `forward` with no input showing them; `readable`: size ->
    (input, axis)), and take as well a dim bound at calls that `forward` needs and no input
    shows, which no config field could hold."""
    for s in list(unit.bound_args):
        if s not in unit.init_own and (s not in unit.needed or s in readable):
            del unit.size_args[s]
            unit.bound_args.discard(s)
            unit.passed.pop(s, None)
    for s in sorted(unit.needed & block_sizes, key=str):
        if s not in unit.size_args and s not in readable:
            unit.size_args[s] = s
            unit.bound_args.add(s)
            if unit.block is not None and not unit.generic:
                unit.passed[s] = given(unit.block, s)


def call_sizes(ir: BlockIR, child) -> list:
    """The sizes one call gives the class's constructor arguments, in the caller's dims."""
    return [child.passed[k] if k in child.passed else given(ir, k) for k in child.size_args]


def renames(ir: BlockIR) -> tuple[dict, dict]:
    """(rename, size_rename): the caller's sizes as the block's own names in its class.
    `rename` (outer size -> the block's dim) is for forward, which reads the block's own
    dims (`x: [B, S, D]` called with [B, T, D] reads S); `size_rename` (outer size -> size
    parameter) for __init__ too: a size parameter is its own name (`self.F`)."""
    rename, taken = {}, set()
    for local_sym, outer in ir.binding_of_dims.items():
        if local_sym in ir.size_args:
            continue
        # a dim bound to a number (N = 1) keeps the number: renaming every 1 of the
        # block to N would print `c: [N, N, S, Dr]` for a [1, 1, S, Dr] input
        if outer not in rename and local_sym not in taken and not sp.sympify(outer).is_Number:
            rename[outer] = local_sym
            taken.add(local_sym)
    # ... unless the block also uses the outer size of that name
    present = set()
    for d in ir.inputs + ir.params + ir.buffers:
        for x in d.type.shape:
            present |= sp.sympify(x).free_symbols
    for b in ir.bindings:
        for s in b.steps:
            for t in s.outputs:
                for x in t.shape:
                    present |= sp.sympify(x).free_symbols
            present |= _symbols_in(s.detail)
    rename = {o: loc for o, loc in rename.items() if loc not in present}
    # a size parameter is its own name in the class (`self.F`), whatever the call gave
    size_rename = {}
    for local_sym, outer in ir.size_args.items():
        outer = sp.sympify(outer)
        if outer in rename or outer in size_rename or outer.is_Number:
            continue      # a number stays a number (`3` may be any 3 of the block)
        size_rename[outer] = local_sym
    rename.update(size_rename)
    return rename, size_rename
