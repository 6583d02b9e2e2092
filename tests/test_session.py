"""Checking a document as it is edited (checker/session.py): every answer of a `CheckSession`
is byte for byte what a fresh check of the same text gives, the statements that did not change
are not parsed again, and a check that a newer edit has made stale stops."""
from __future__ import annotations

import json
import re

import pytest
from tiers import LIBRARY, examples

from bench.specgen import gpt_spec, llama_spec
from shapelang.api import render_check, to_json
from shapelang.checker.checker import Stale, check_text
from shapelang.checker.session import CheckSession
from shapelang.syntax.parser import parse_recovering
from shapelang.syntax.reuse import ParseMemo

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note, settings
from hypothesis import strategies as st

# library specs that check in well under a second: the property test edits them many times;
# and a small GPT written both ways (a block called by `stack`, and its layers unrolled, where
# each layer repeats the operations of the one before)
SMALL = [(str(p), p.read_text(encoding="utf-8")) for p in LIBRARY
         if len(p.read_text(encoding="utf-8").splitlines()) <= 60]
SMALL += [(f"{name}_{form}.shape", spec(2, form)) for name, spec in (("gpt", gpt_spec), ("llama", llama_spec))
          for form in ("stack", "unrolled")]
MHA = next(p for p in LIBRARY if p.stem == "mha_self_attention").read_text(encoding="utf-8")


def _seen(spec) -> tuple[str, str]:
    """What a user sees of a check: the printed diagnostics and the JSON of the trace."""
    return render_check(spec), json.dumps(to_json(spec, trace=True), sort_keys=True, default=str)


# edits a person makes: a line typed in (one copied from elsewhere), a line deleted, a line
# changed (a name or number typed over, a character dropped, an operation swapped)
_SWAPS = (("relu", "gelu"), ("-1", "-2"), ("2", "3"), ("D", "H"), ("softmax", "sum"),
          ("transpose", "permute"), (" ", ""), (":", ""), ("->", "-> relu ->"),
          # assumptions and sizes changed, taken back, or made false
          ("assume", "# assume"), ("== 0", "== 1"), ("<=", ">="), ("%", "//"), ("dim ", "# dim "),
          ("example", "# example"), ("end", ""))


@st.composite
def _edits(draw, lines: list[str]):
    out = list(lines)
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("insert", "delete", "change", "change", "rename")))
        i = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "rename":   # a dim or tensor renamed everywhere (each use follows)
            names = sorted({n for ln in out for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", ln)})
            if names:
                old = draw(st.sampled_from(names))
                out = [re.sub(rf"\b{re.escape(old)}\b", f"{old}2", ln) for ln in out]
        elif kind == "insert" or not out:
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
    path, text = data.draw(st.sampled_from(SMALL), label="spec")
    session = CheckSession(path)
    assert _seen(session.check(text)) == _seen(check_text(text, path))
    for edited in data.draw(_edits(text.splitlines()), label="edits"):
        note(edited)
        assert _seen(session.check(edited)) == _seen(check_text(edited, path))


def test_an_edit_that_breaks_a_layer_is_reported_there_and_below_as_fresh():
    """The unrolled GPT with one layer's output width changed: the error where it is added
    to the residual stream, and the later layers that read it, exactly as a fresh check."""
    text = gpt_spec(4, "unrolled")
    session = CheckSession("gpt.shape")
    assert session.check(text).ok
    lines = text.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith("m_1:"))
    lines[k] = lines[k].replace("linear 4*D -> gelu -> linear D", "linear 4*D -> gelu -> linear H")
    edited = "\n".join(lines) + "\n"
    seen = session.check(edited)
    assert _seen(seen) == _seen(check_text(edited, "gpt.shape"))
    # `linear H` is fine alone; the residual add is refused, and what reads its result is silent
    assert [lines[d.span.line - 1].split(":")[0] for d in seen.errors()] == ["x_2"]
    session.check(text)
    undone = session.check(text + "\n")
    assert _seen(undone) == _seen(check_text(text + "\n", "gpt.shape")) and undone.ok


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


def _rules_applied(fn) -> int:
    """How many shape rules `fn()` applies (not answered from what a check keeps)."""
    from unittest import mock

    from shapelang.checker import ops
    with mock.patch.object(ops, "apply", wraps=ops.apply) as applied:
        fn()
    return applied.call_count


def test_an_edit_applies_again_only_the_rules_of_what_it_changed():
    text = gpt_spec(8, "unrolled")
    lines = text.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith("m_4:"))
    lines[k] = lines[k].replace("-> gelu ->", "-> relu ->")
    edited = "\n".join(lines) + "\n"
    session = CheckSession("gpt.shape")
    session.check(text)
    # checked again unchanged (a blank line more): only a rule that reads a tensor by name
    # (`embed W_te`) is applied again
    again = _rules_applied(lambda: session.check(text + "\n"))
    assert again <= 1
    assert _rules_applied(lambda: session.check(edited)) == again + 1   # `relu` on that type is new
    assert _seen(session.check(edited)) == _seen(check_text(edited, "gpt.shape"))
    fresh = _rules_applied(lambda: check_text(edited, "gpt.shape"))
    assert fresh > 10   # a fresh check applies each layer's rules once
    # the sizes' statements edited: nothing kept is valid, every rule is applied again
    assumed = edited.replace("assume S <= Ctx", "assume S <= Ctx - 1")
    assert _rules_applied(lambda: session.check(assumed)) == _rules_applied(
        lambda: check_text(assumed, "gpt.shape"))
    assert _seen(session.check(assumed)) == _seen(check_text(assumed, "gpt.shape"))
