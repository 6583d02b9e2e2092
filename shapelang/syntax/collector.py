"""Python's cyclic garbage collector, paused while a spec is parsed and while it is checked.

A check makes hundreds of thousands of small objects, so the collector's automatic passes
run during it, and a full pass walks every object the process holds (sympy alone is a
few hundred thousand): 15-20% of a check of a 48-layer model in a process that has
imported sympy (bench/RESULTS.md). A check's own objects are freed by reference counting
when it is dropped (the checker's parts refer back to their owner weakly; tests/
test_check_memory.py keeps it so), so the collector has nothing of the check's to find.
The pause ends with the outermost check (a fix's re-check runs inside one), and the
collector's state is restored as it was found, even when the check raises.
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
            gc.enable()
