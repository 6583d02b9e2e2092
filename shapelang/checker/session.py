"""Checking one document again and again as it is edited (an editor's buffer, the
playground's text box, a notebook's cells).

A `CheckSession` gives exactly what a fresh `check_text` gives for every text (tests
compare them byte for byte), and spends less on the way:

- a text checked recently (an undo, a hover after the diagnostics, the same cell run
  again) is answered from the last `keep` results;
- the statements whose lines did not change are not parsed again (syntax/reuse.py),
  nor are they in the re-checks of candidate fixes, which differ in one line;
- the shape rules' results are kept from one check to the next while the `dim`, `assume`
  and `example` lines and the blocks' signatures stay as they are (checker/rulememo.py):
  an edit applies again only the rules of operations or input types that changed;
- `stale`, a function asked between statements, stops a check that a newer edit has
  made moot (`Stale` is raised and no result is kept).

The sympy and lark caches of the process stay warm between checks as well.
"""
from __future__ import annotations

from collections import OrderedDict

from ..syntax.reuse import ParseMemo
from .checker import Stale, check_text
from .ir import CheckedSpec
from .rulememo import RuleMemo

__all__ = ["CheckSession", "Stale"]


class CheckSession:
    def __init__(self, path: str = "<input>", keep: int = 4):
        self.path = path
        self.keep = keep
        self.memo = ParseMemo()
        self.rules = RuleMemo()
        self.results: OrderedDict[tuple[str, str], CheckedSpec] = OrderedDict()
        self.checks = 0    # texts checked (not answered from `results`)

    def check(self, text: str, path: str | None = None, *, stale=None) -> CheckedSpec:
        """What `check_text(text, path)` gives; raises `Stale` when `stale()` turns true."""
        key = (path or self.path, text)
        hit = self.results.get(key)
        if hit is not None:
            self.results.move_to_end(key)
            return hit
        out = check_text(text, key[0], memo=self.memo, stale=stale, rules=self.rules)
        self.checks += 1
        self.results[key] = out
        while len(self.results) > self.keep:
            self.results.popitem(last=False)
        return out
