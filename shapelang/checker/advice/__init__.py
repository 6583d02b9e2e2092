"""Advice on what the checker found, given by the passes that run after the checker's
walk: one ordered list, `PASSES`, that `check_text` runs.

The walk (`Checker.run`) ends with the axis provenance (W301-W313) and the findings
sorted by position. Then each pass runs, in order, on the same `Findings`:

1. `acknowledged`: a warning its line's comment acknowledges (`# allow W302`) is set
   aside in `spec.acknowledged` (acknowledged.py), before anything is spent on advice
   for it;
2. `habits`: a finding caused by writing PyTorch is named, with the line in shapelang as
   a candidate rewrite (shapelang.checker.habits);
3. `fixes`: each finding's candidate rewrites (from the checker, causes.py, suggest.py and
   the habits) are proved by checking the rewritten text again, and the first proved one
   is shown (fixes.py); in a re-check the candidates are dropped;
4. `habits proved`: `did you mean `@`?` where the `@` rewrite was the one proved.

A text over the limits of untrusted input (syntax/limits.py) is not read at all: its one
finding (E004) gets no advice. The exercise guard is not one of these: it belongs to the teaching stage, and
`shapelang.api` applies it to what `check_text` gives.

The modules a pass needs are loaded only when there is something to give it: a spec
that checks clean loads none of them.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..ir import CheckedSpec


@dataclass
class Findings:
    """What a pass reads and rewrites: the checked spec (its `diagnostics` in place), its
    text, and `recheck(text) -> CheckedSpec`, which checks a candidate rewrite without
    proving fixes again (None while checking a candidate itself)."""
    text: str
    spec: CheckedSpec
    recheck: Callable[[str], CheckedSpec] | None


def acknowledge(f: Findings) -> None:
    if not any(d.severity == "warning" for d in f.spec.diagnostics):   # only warnings are acknowledged
        return
    from . import acknowledged

    f.spec.diagnostics[:], f.spec.acknowledged = acknowledged.split(f.text, f.spec.diagnostics)


def name_habits(f: Findings) -> None:
    if f.recheck is None or not f.spec.diagnostics:
        return
    from .. import habits

    f.spec.diagnostics[:] = [habits.improve(f.text, d) for d in f.spec.diagnostics]


def prove_fixes(f: Findings) -> None:
    if not any(d.fixes for d in f.spec.diagnostics):
        return
    if f.recheck is None:
        drop_fixes(f)
        return
    from . import fixes

    fixes.prove(f.spec, f.recheck)


def drop_fixes(f: Findings) -> None:
    f.spec.diagnostics[:] = [replace(d, fixes=()) for d in f.spec.diagnostics]


def habits_proved(f: Findings) -> None:
    if not any(d.fix for d in f.spec.diagnostics):   # only `prove_fixes` sets a proved fix
        return
    from .. import habits

    f.spec.diagnostics[:] = [habits.proved(f.text, d) for d in f.spec.diagnostics]


PASSES: tuple[tuple[str, Callable[[Findings], None]], ...] = (
    ("acknowledged", acknowledge),
    ("habits", name_habits),
    ("fixes", prove_fixes),
    ("habits proved", habits_proved),
)


def run(passes, findings: Findings) -> CheckedSpec:
    for _name, step in passes:
        step(findings)
    return findings.spec
