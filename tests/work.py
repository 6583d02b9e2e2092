"""Bounding work, not seconds.

A bound in seconds fails when the machine is busy (another process, a second test worker).
The guards against blow-ups on hostile input count what the code does instead: the Python
function calls (and calls into C) it makes, which a loaded machine does not change. A case
that really hangs is still aborted by an alarm far above any real run. Timings belong in
bench/.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading

HANG_S = 120   # an alarm for a real hang only: no run of these tests comes near it


class _Count:
    def __init__(self):
        self.calls = 0

    def __call__(self, frame, event, arg):
        if event == "call" or event == "c_call":
            self.calls += 1


@contextlib.contextmanager
def hard_limit(seconds: int):
    """Abort a hung call with TimeoutError after `seconds` (Unix main thread only): a hang
    detector, never a bound on how fast something runs."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if usable:
        def handler(signum, frame):
            raise TimeoutError(f"still running after {seconds} s: a hang")
        old = signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, seconds, 0.25)   # re-fires if a finalizer swallows it
    try:
        yield
    finally:
        if usable:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def calls(fn):
    """fn()'s result and the number of calls it made."""
    count = _Count()
    with hard_limit(HANG_S):
        sys.setprofile(count)
        try:
            out = fn()
        finally:
            sys.setprofile(None)
    return out, count.calls


def bounded(fn, max_calls: int):
    """fn()'s result; fails if it made more than `max_calls` calls."""
    out, n = calls(fn)
    assert n <= max_calls, f"{n:,} calls, more than the bound of {max_calls:,}"
    return out


def linear(make, fn, n: int, slack: float = 2.6):
    """fn(make(n)) and fn(make(2 * n)): doubling the input at most doubles the work (with
    `slack` for what does not scale); returns the second result."""
    _, small = calls(lambda: fn(make(n)))
    out, big = calls(lambda: fn(make(2 * n)))
    assert big <= slack * small, f"{small:,} calls for n={n}, {big:,} for 2n: not linear"
    return out
