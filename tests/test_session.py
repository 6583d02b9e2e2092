"""Checking a document as it is edited (checker/session.py): every answer of a `CheckSession`
is byte for byte what a fresh check of the same text gives, the statements that did not change
are not parsed again, and a check that a newer edit has made stale stops."""
from __future__ import annotations

import json

import pytest
from tiers import LIBRARY, examples

from shapelang.api import render_check, to_json
from shapelang.checker.checker import Stale, check_text
from shapelang.checker.session import CheckSession
from shapelang.syntax.parser import parse_recovering
from shapelang.syntax.reuse import ParseMemo

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note, settings
from hypothesis import strategies as st

# library specs that check in well under a second: the property test edits them many times
SMALL = [p for p in LIBRARY if len(p.read_text(encoding="utf-8").splitlines()) <= 60]
MHA = next(p for p in LIBRARY if p.stem == "mha_self_attention").read_text(encoding="utf-8")


def _seen(spec) -> tuple[str, str]:
    """What a user sees of a check: the printed diagnostics and the JSON of the trace."""
    return render_check(spec), json.dumps(to_json(spec, trace=True), sort_keys=True, default=str)


# edits a person makes: a line typed in (one copied from elsewhere), a line deleted, a line
# changed (a name or number typed over, a character dropped, an operation swapped)
_SWAPS = (("relu", "gelu"), ("-1", "-2"), ("2", "3"), ("D", "H"), ("softmax", "sum"),
          ("transpose", "permute"), (" ", ""), (":", ""), ("->", "-> relu ->"))


@st.composite
def _edits(draw, lines: list[str]):
    out = list(lines)
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("insert", "delete", "change", "change")))
        i = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "insert" or not out:
            out.insert(i, draw(st.sampled_from(lines or [""])))
        elif kind == "delete":
            del out[i]
        else:
            old, new = draw(st.sampled_from(_SWAPS))
            out[i] = out[i].replace(old, new, 1)
        steps.append("\n".join(out) + "\n")
    return steps


@settings(max_examples=examples(100), deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_a_session_answers_as_a_fresh_check_after_every_edit(data):
    path = data.draw(st.sampled_from(SMALL), label="spec")
    text = path.read_text(encoding="utf-8")
    session = CheckSession(str(path))
    assert _seen(session.check(text)) == _seen(check_text(text, str(path)))
    for edited in data.draw(_edits(text.splitlines()), label="edits"):
        note(edited)
        assert _seen(session.check(edited)) == _seen(check_text(edited, str(path)))


def test_unchanged_statements_are_not_parsed_again():
    memo = ParseMemo()
    fresh = parse_recovering(MHA, "a.shape")
    assert memo.parse(MHA, "a.shape") == fresh
    statements = memo.parsed
    assert statements == len(fresh[0].statements)
    lines = MHA.splitlines()
    k = next(i for i, ln in enumerate(lines) if "-> softmax" in ln)
    edited = "\n".join(lines[:k] + [lines[k].replace("softmax", "log_softmax")] + lines[k + 1:]) + "\n"
    assert memo.parse(edited, "a.shape") == parse_recovering(edited, "a.shape")
    assert memo.parsed == statements + 1    # the edited statement alone
    inserted = "\n".join(lines[:k] + ["# a note", lines[k]] + lines[k + 1:]) + "\n"
    assert memo.parse(inserted, "a.shape") == parse_recovering(inserted, "a.shape")
    below = sum(1 for s in fresh[0].statements if s.span.line >= k + 1)
    assert memo.parsed == statements + 1 + below   # what moved down is parsed at its new line


def test_the_same_text_is_answered_without_checking_again():
    session = CheckSession("a.shape")
    first = session.check(MHA)
    session.check(MHA + "Z: X -> relu\n")
    assert session.check(MHA) is first
    assert session.checks == 2


def test_a_stale_check_stops_and_leaves_nothing_behind():
    session = CheckSession("a.shape")
    asked = []

    def stale():
        asked.append(1)
        return len(asked) > 3     # a newer edit arrives while the fourth statement is checked

    with pytest.raises(Stale):
        session.check(MHA, stale=stale)
    assert session.checks == 0 and not session.results
    assert _seen(session.check(MHA)) == _seen(check_text(MHA, "a.shape"))
