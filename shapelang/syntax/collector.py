"""Python's cyclic garbage collector, paused while a spec is parsed and while it is checked.

A check makes hundreds of thousands of small objects, so the collector's automatic passes
run during it, and a full pass walks every object the process holds (sympy alone is a
few hundred thousand): 15-20% of a check of a 48-layer model in a process that has
imported sympy (bench/RESULTS.md). A check's own objects are freed by reference counting
when it is dropped (the checker's parts refer back to their owner weakly; tests/
test_check_memory.py keeps it so), so the collector has nothing of the check's to find.
The pause ends with the outermost check (a fix's re-check runs inside one), and the
collector's state is restored as it was found, even when the check raises.

When the pause ends, what the check keeps (its result: thousands of steps, shapes and
provenance records) would all be young, and the collector's next pass over the young
generation would walk every one of them to find no cycle: 10-20 ms after a 48-layer check.
They are moved to the oldest generation instead (`gc.freeze()` then `gc.unfreeze()`, which
moves the objects without looking at them), where only the collector's rare full passes
look. Where the process keeps frozen objects of its own (a server that forks), that is
left alone.
"""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def paused():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()       # every tracked object, now in the oldest generation
            gc.enable()
