"""The passes after the checker's walk are one ordered list (shapelang.checker.advice.PASSES)
that `check_text` runs: the order is pinned here, and each pass that needs another's work is
shown to lose it when the two are exchanged."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_habits import HEAD
from test_habits import STAR as KT  # HEAD and `kt: K -> transpose -2 -1`

from shapelang.checker import advice
from shapelang.checker import checker as checker_module
from shapelang.checker.checker import check_text

ROOT = Path(__file__).resolve().parent.parent
PYTORCH = HEAD + "y: X.transpose(1, 2)\n"                 # E001: a habit, its rewrite proved
STAR = KT + "scores: Q * kt -> softmax -1\n"              # E102: `@` proposed, then proved
PAIRS = ("dim B, S, Dr\nassume Dr % 2 == 0\nexample B=1, S=4, Dr=8\ninput x: [B, S, Dr]\n"
         "p: x -> view [B, S, Dr/2, 2] -> transpose 3 2 -> reshape [B, S, Dr]")


def test_the_passes_run_in_this_order():
    assert [name for name, _ in advice.PASSES] == ["acknowledged", "habits", "fixes", "habits proved"]


def test_check_text_runs_the_list(monkeypatch):
    """check_text runs exactly the passes of the list, in its order, on the checked spec; the
    re-check of each candidate rewrite runs them too, with no fixes to prove."""
    seen = []
    recorded = tuple((name, lambda f, name=name, step=step: (seen.append((name, f.recheck is None)),
                                                              step(f)))
                     for name, step in advice.PASSES)
    monkeypatch.setattr(advice, "PASSES", recorded)
    spec = check_text(STAR, "p.shape")
    names = [name for name, _ in recorded]
    assert [n for n, again in seen if not again] == names
    rechecks = [n for n, again in seen if again]
    assert rechecks and rechecks == names * (len(rechecks) // len(names))
    assert _only(spec, "E102").fix is not None


def _order(first: str, then: str) -> tuple:
    """PASSES with `first` and `then` exchanged."""
    names = [n for n, _ in advice.PASSES]
    i, j = names.index(first), names.index(then)
    out = list(advice.PASSES)
    out[i], out[j] = out[j], out[i]
    return tuple(out)


def _check(monkeypatch, text: str, passes=None):
    """(the spec, how many candidate rewrites were checked again)."""
    if passes is not None:
        monkeypatch.setattr(advice, "PASSES", passes)
    rechecks = []
    real = checker_module.check_text

    def counted(source, path="<input>", **kw):
        if kw.get("prove_fixes") is False:
            rechecks.append(source)
        return real(source, path, **kw)

    monkeypatch.setattr(checker_module, "check_text", counted)
    return real(text, "p.shape"), len(rechecks)


def _only(spec, code):
    (d,) = [d for d in spec.diagnostics if d.code == code]
    return d


def test_the_habits_are_named_before_the_fixes_are_proved(monkeypatch):
    spec, _ = _check(monkeypatch, PYTORCH)
    assert _only(spec, "E001").fix[2] == "y: X -> transpose 1 2"
    spec, _ = _check(monkeypatch, PYTORCH, _order("habits", "fixes"))
    assert _only(spec, "E001").fix is None   # the rewrite came too late to be proved


def test_the_at_is_asked_for_once_its_fix_is_proved(monkeypatch):
    spec, _ = _check(monkeypatch, STAR)
    assert _only(spec, "E102").help.startswith("did you mean `@`?")
    assert _only(spec, "E102").fix[2] == "scores: Q @ kt -> softmax -1"
    spec, _ = _check(monkeypatch, STAR, _order("fixes", "habits proved"))
    assert not (_only(spec, "E102").help or "").startswith("did you mean `@`?")


def test_an_acknowledged_warning_costs_no_recheck(monkeypatch):
    """The author's `# allow W302` is read before the fixes are proved: no candidate of a
    warning nobody will see is checked again."""
    plain, n_plain = _check(monkeypatch, PAIRS + "\n")
    assert [d.code for d in plain.diagnostics] == ["W302"] and n_plain > 0   # it has candidates
    meant, n_meant = _check(monkeypatch, PAIRS + "  # allow W302: interleaved pairs\n")
    assert meant.diagnostics == [] and [d.code for d, _ in meant.acknowledged] == ["W302"]
    assert n_meant == 0
    _, n_late = _check(monkeypatch, PAIRS + "  # allow W302: interleaved pairs\n",
                       _order("acknowledged", "fixes"))
    assert n_late > 0


_LOADED = ("import sys, json; from shapelang import check\n"
           "def loaded(path):\n"
           "    check(open(path).read(), 'p.shape')\n"
           "    return sorted(m for m in sys.modules if m.startswith('shapelang.checker.'))\n"
           "print(json.dumps([loaded({clean!r}), loaded({habit!r})]))")


def test_advice_is_loaded_only_when_there_is_something_to_advise(tmp_path):
    """A spec that checks clean loads neither the habits nor the prover of fixes; the first
    finding with a habit in it loads both."""
    habit = tmp_path / "p.shape"
    habit.write_text(PYTORCH)
    code = _LOADED.format(clean=str(ROOT / "specs" / "mha_self_attention.shape"), habit=str(habit))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    clean, after = json.loads(out.splitlines()[-1])
    assert "shapelang.checker.checker" in clean
    assert "shapelang.checker.habits" not in clean and "shapelang.checker.advice.fixes" not in clean
    assert "shapelang.checker.habits" in after and "shapelang.checker.advice.fixes" in after
