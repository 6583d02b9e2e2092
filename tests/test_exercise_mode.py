"""Exercise mode: `check`, the language server, `serve` and the notebook magic never give a
blank's answer away, and no message names the checker's internal sizes.

The leak test fills one blank of an exercise with a wrong answer from the grading corpus
(every single-mistake variant of every blank of every exercise, as the naming test makes
them: tests/test_grading_feedback.py), the others at their reference answers, and asks
every surface what it says about the file. No output may hold the blank's answer or an
equivalent of it:

- the reference answer's text, or the reference shape as the checker prints it (compared
  without spaces, round brackets as square ones; an answer that the learner's file already
  holds, in the exercise's code or another answer, is no leak);
- any fix or quick fix that, applied, would make that blank grade full marks;
- any help that would write the code of a line that holds a blank.

The trace picture and hover show the shapes of the learner's own steps, as `trace` does;
they are not part of this test.
"""
from __future__ import annotations

import functools
import json
import re

import pytest
import tiers
from exercise_kit import grader
from test_grading_feedback import NAMES, ROOT, reference, submission, variants

import shapelang
from shapelang.serve.work import Work
from shapelang.teaching.exercise import _squash
from shapelang.teaching.guard import answer_statements
from shapelang.teaching.notebook import parts_of

INTERNAL = re.compile(r"(?<![\w`])_+[A-Za-z]\w*|\b\w+_over_\w+|\bDummy\b|_plus_1")


def corpus() -> list:
    return [(name, blank, answer) for name in NAMES for blank, answer, _, _ in variants(name)]


CORPUS = corpus()


def _sample(n: int) -> list:
    step = max(len(CORPUS) // n, 1)
    return CORPUS[::step][:n] if n < len(CORPUS) else CORPUS


@functools.cache
def _work(name: str) -> Work:
    return Work(exercise=str(ROOT / f"{name}.shape"))


def _code(text: str) -> str:
    """The code of a file (comments removed), squashed."""
    return _squash("\n".join(line.split("#", 1)[0] for line in text.split("\n")))


def needles(name: str, blank: str, text: str) -> set:
    """The blank's answer as the outputs could show it, less what the learner's file already
    holds (the exercise's code, the wrong answer, the other blanks' answers)."""
    g = grader(name)
    ref = reference(name)[blank]
    out = {_squash(ref), _squash(g._reference_text(g.tmpl.blanks[blank]).strip("`"))}
    return {n for n in out if len(n) >= 4 and n not in _code(text)}


def surfaces(name: str, text: str) -> dict:
    """What each surface says about `text`: (text shown, fixes offered as (span, text))."""
    out = {}
    spec = shapelang.check(text, f"{name}.shape")
    fixes = [d.fix[:2] for d in spec.diagnostics if d.fix is not None]
    out["check"] = (shapelang.render_check(spec) + json.dumps(shapelang.to_json(spec)), fixes)
    got = _work(name).check(text.encode())
    got.pop("picture", None)   # the picture comes in its own request (shows the learner's shapes)
    out["serve"] = (json.dumps(got), [])
    try:
        from shapelang.lsp import findings
        from shapelang.lsp.documents import DocumentStore
    except ImportError:            # the `lsp` extra is not installed
        pass
    else:
        store = DocumentStore()
        uri = f"file:///course/{name}.shape"
        store.update(uri, 1, text)
        an = store.analysis(uri)
        docs = findings.CodeDocs(None)
        shown = [findings.to_lsp(an, d, docs) for d in an.spec.diagnostics]
        from lsprotocol import types as t
        everything = t.Range(t.Position(0, 0), t.Position(10**6, 0))
        actions = findings.code_actions(an, everything, docs)
        out["lsp"] = (repr(shown) + repr(actions), [])
        assert not actions or all(a.edit for a in actions)
        out["lsp quick fixes"] = ("", [(a.edit.changes[uri][0], None) for a in actions])
    from shapelang.notebook.cell import Session, run_cell
    session, plain = Session(), []
    for k, part in enumerate(parts_of(text), 1):
        plain.append(run_cell(f"--part {k}", part, session).plain)
    out["notebook"] = ("\n".join(plain), [])
    return out


def _apply(text: str, span, replacement: str) -> str:
    lines = text.split("\n")
    start = sum(len(ln) + 1 for ln in lines[:span.line - 1]) + span.column - 1
    end = sum(len(ln) + 1 for ln in lines[:span.end_line - 1]) + span.end_column - 1
    return text[:start] + replacement + text[end:]


@pytest.mark.parametrize("count", tiers.sweep(len(CORPUS), 12))
def test_no_surface_gives_a_blanks_answer_away(count):
    leaks = []
    for name, blank, answer in _sample(count):
        text = submission(name, {blank: answer})
        g = grader(name)
        wrong = next(b for b in g.grade_text(text).blanks if b.name == blank)
        assert wrong.status != "correct", (name, blank, answer)
        stmts = answer_statements(text)
        for surface, (shown, fixes) in surfaces(name, text).items():
            squashed = _squash(shown)
            for n in needles(name, blank, text):
                if n in squashed:
                    leaks.append((name, blank, answer, surface, n))
            for span, replacement in fixes:
                if replacement is None:           # an LSP edit: its own range and text
                    span, replacement = _lsp_span(span), span.new_text
                if any(s.first <= span.line <= s.last for s in stmts):
                    leaks.append((name, blank, answer, surface, f"edits a blank's line: {replacement!r}"))
                fixed = g.grade_text(_apply(text, span, replacement))
                if next(b for b in fixed.blanks if b.name == blank).status == "correct":
                    leaks.append((name, blank, answer, surface, f"fix {replacement!r}"))
            if "write it as `" in shown:
                leaks.append((name, blank, answer, surface, "write it as"))
    assert not leaks, "\n".join(map(repr, leaks[:40]))


def _lsp_span(edit):
    from shapelang.syntax.nodes import Span
    r = edit.range
    return Span(r.start.line + 1, r.start.character + 1, r.end.line + 1, r.end.character + 1)


def test_the_issues_reproduction_gives_the_hint_not_the_line():
    text = submission("02_split_heads", {"split": "view [B, H, S, Dh]"})
    for surface, (shown, fixes) in surfaces("02_split_heads", text).items():
        assert "Qh: Q -> view [B, S, H, Dh]" not in shown, surface
        assert not fixes, surface
    out = surfaces("02_split_heads", text)["check"][0]
    assert "keep B and S, cut D into H pieces of width Dh" in out


def test_an_unfilled_blank_says_its_hint():
    spec = shapelang.check((ROOT / "02_split_heads.shape").read_text(), "02_split_heads.shape")
    (d,) = spec.diagnostics
    assert d.code == "E116" and "keep B and S" in d.help


def test_a_help_never_asks_to_edit_a_line_of_the_exercise(tmp_path):
    # `chunk 2 1` where the exercise wants a split of the last axis: the checker would add an
    # `assume` line, which the learner may not write
    ex = tmp_path / "ex.shape"
    ex.write_text("dim B, S, D\nexample B=1, S=4, D=8\ninput x: [B, S, D]\n"
                  "# ?halves: 2 points; hint: two halves of the last axis\n"
                  "a, b: x -> ?halves\n")
    filled = ex.read_text().replace("-> ?halves", "-> chunk 2 1")
    from shapelang.checker.checker import check_text
    raw = check_text(filled, "ex.shape")
    assert any(d.fix is not None or d.fixes for d in raw.diagnostics)     # the plain checker's help
    spec = shapelang.check(filled, "ex.shape")
    assert spec.diagnostics and all(d.fix is None and not d.fixes for d in spec.diagnostics)
    assert all("assume" not in (d.help or "") for d in spec.diagnostics)
    assert any("two halves of the last axis" in (d.help or "") for d in spec.diagnostics)


def test_a_spec_that_is_not_an_exercise_keeps_its_helps():
    text = "dim B, S, D\ninput Q: [B, S, D]\ninput K: [B, S, D]\nscores: Q @ K\n"
    spec = shapelang.check(text)
    assert spec.diagnostics[0].fix is not None and "write it as" in spec.diagnostics[0].help


# ------------------------------------------------------------------ internal names

def test_the_internal_pattern_finds_internal_names():
    assert INTERNAL.search("into __D_over_H_over_2 pieces")
    assert INTERNAL.search("k is _D_over_H")
    assert not INTERNAL.search("`D/H` with `Dh`, dims 1 and 2, [B, S, D], W_q, x_1")


@pytest.mark.parametrize("count", tiers.sweep(len(CORPUS), 40))
def test_no_message_of_the_corpus_names_an_internal_size(count):
    found = []
    for name, blank, answer in _sample(count):
        text = submission(name, {blank: answer})
        spec = shapelang.check(text, f"{name}.shape")
        from shapelang.checker.checker import check_text
        for d in [*spec.diagnostics, *check_text(text, "x.shape").diagnostics]:
            words = " ".join([d.message, d.help or "", *d.notes, *(t for _, t in d.labels)])
            if INTERNAL.search(words):
                found.append((name, blank, answer, words))
        res = grader(name).grade_text(text)
        for b in res.blanks:
            if INTERNAL.search(b.feedback or ""):
                found.append((name, blank, answer, b.feedback))
    assert not found, found[:5]


SPLITS = ["q1, q2: q -> split 2 -1", "q1, q2: q -> split H -1", "q1, q2: q -> split 3 -2",
          "q1, q2, q3: q -> chunk 3 -1", "q1: q -> view [B, S, H, D/H/3]", "q1: q -> split D/H/2 -1",
          "q1: q -> view [B, S, D/H, H]", "q1: q -> repeat_interleave D/H 1"]


@pytest.mark.parametrize("line", SPLITS)
def test_sizes_the_prover_made_are_printed_in_the_learners_terms(line):
    text = f"dim B, S, D, H\nassume D % H == 0\nexample B=1, S=4, D=512, H=8\ninput q: [B, S, H, D/H]\n{line}\n"
    spec = shapelang.check(text)
    for d in spec.diagnostics:
        words = " ".join([d.message, d.help or "", *d.notes, *(t for _, t in d.labels)])
        assert not INTERNAL.search(words), words
        assert "split [D, D, D]" not in words


@pytest.mark.parametrize("name", NAMES)
def test_every_blank_of_every_exercise_is_found_in_exercise_mode(name):
    """Every statement with a blank, in the exercise and in a filled copy (the same lines),
    is an answer statement; the directives give the blanks' names."""
    tmpl = grader(name).tmpl
    for text in ((ROOT / f"{name}.shape").read_text(), submission(name, {})):
        found = answer_statements(text)
        for b in tmpl.blanks.values():
            st = tmpl.stmts[b.stmt]
            hit = [s for s in found if s.first <= st.line <= s.last]
            assert hit, (name, b.name)
            named = {n for n, _ in hit[0].blanks}
            assert b.name in named or named == {""}, (name, b.name, named)
    assert not answer_statements((ROOT / "solutions" / f"{name}.shape").read_text())


def test_serve_sends_an_exercise_the_meaning_of_a_code_without_its_examples():
    """A code's explanation carries wrong and right examples, and E103's right example is
    02_split_heads' `view [B, S, H, Dh]`: in an exercise the page gets the meaning only."""
    text = (ROOT / "02_split_heads.shape").read_text().replace("?split", "view [2*B, S, H, Dh]")
    got = _work("02_split_heads").check(text.encode())
    assert got["explanations"] and all("Right:" not in why for why in got["explanations"].values())
    assert "view [B, S, H, Dh]" not in json.dumps(got)
    plain = _work("02_split_heads").check(b"dim B\ninput x: [B, 4]\ny: x -> view [B, 3]\n")
    assert all("Right:" in why for why in plain["explanations"].values()) and plain["explanations"]
