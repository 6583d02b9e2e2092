"""Codegen: the registry of emitters, one per emitter name of the operation table.

Every entry of the table names its emitter (OpDef.emitter_key: its `emitter` field, else its
own name; several operations share one by naming it, as `rmsnorm` names `layernorm`'s). An
emitter registers under that name with the decorator:

    @emitter("linear")
    def _linear(o: Op) -> list[str]: ...

and `EMITTERS`, which the code generator reads, maps every IR operation to its emitter: it is
derived from the table, never written out. The checker's operators (`+`, `@`, `<`, ..) have no
table entry; their emitters register under their IR names (arith.SYMBOLS, the comparisons).
Registering a name no operation uses, or a name twice, fails at import.
"""
from __future__ import annotations

from collections.abc import Callable

from ..checker.arith import SYMBOLS
from ..checker.ops.table import TABLE
from ..checker.ops.tables import COMPARISONS

OPERATORS = frozenset(SYMBOLS) | frozenset(COMPARISONS.values())
REGISTERED: dict[str, Callable] = {}   # emitter name -> emitter
EMITTERS: dict[str, Callable] = {}     # IR operation -> emitter, derived from the table


def users(name: str) -> list[str]:
    """The IR operations whose emitter is `name`."""
    ops = sorted({d.ir_name for d in TABLE.values() if d.emitter_key == name})
    return ops or ([name] if name in OPERATORS else [])


def emitter(*names: str) -> Callable:
    """Registers the decorated function as the emitter of each name (of the table's emitter
    names, or of the checker's operators)."""
    def register(fn: Callable) -> Callable:
        for name in names:
            ops = users(name)
            if not ops:
                raise LookupError(f"no operation of the table has the emitter `{name}`")
            if name in REGISTERED:
                raise LookupError(f"two emitters registered for `{name}`")
            REGISTERED[name] = fn
            EMITTERS.update(dict.fromkeys(ops, fn))
        return fn
    return register
