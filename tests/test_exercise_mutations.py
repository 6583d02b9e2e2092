"""Answers are read through the parser: however a submission is written, the
solution's answers get full marks, and an answer replaced by another one loses
its points.

Submissions are generated with a fixed seed from the course in exercises/:
the reference answers written with other spacing, comments, blank lines,
continuation lines and swapped factors (full marks), or with one blank's
answer replaced by another blank's answer of the same exercise (fewer points,
and the grader reports the replacement as that blank's answer).
"""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from exercise_kit import grader

from shapelang.teaching.exercise import _squash
from shapelang.teaching.grader import text_report

ROOT = Path(__file__).resolve().parent.parent / "exercises"
NAMES = sorted(p.stem for p in ROOT.glob("*.shape"))
SEED = 20261123
COUNT = 50


def reference(name: str) -> dict:
    g = grader(name)
    out = {}
    for n, b in g.tmpl.blanks.items():
        out[n] = g.ref_answers[n] if g.ref_answers[n] is not None else \
            g._reference_text(b).strip("`").split(" = ")[0]
    return out


def filled(name: str, answers: dict) -> str:
    text = (ROOT / f"{name}.shape").read_text()
    return re.sub(r"\?([A-Za-z0-9_]+)", lambda m: answers.get(m.group(1), m.group(0)), text)


def _respace(answer: str, rng: random.Random) -> str:
    out = []
    for ch in answer:
        if ch in "[],*/" and rng.random() < 0.6:
            out.append(f" {ch}  " if ch != "," else ",   ")
        else:
            out.append(ch)
    return "".join(out)


def _swap_factors(answer: str) -> str:
    return re.sub(r"\b([A-Za-z_]\w*|\d+)\*([A-Za-z_]\w*)\b(?![/(])", r"\2*\1", answer, count=1)


def _noise(text: str, rng: random.Random) -> str:
    """Comments, blank lines and continuation lines that do not change the meaning."""
    out = []
    for line in text.split("\n"):
        if line.strip() and not line.lstrip().startswith("#"):
            if rng.random() < 0.3:
                line = line.replace(" -> ", "   # step\n      -> ", 1)
            if rng.random() < 0.3:
                line += "   # mine"
            if rng.random() < 0.2:
                out.append("")
        out.append(line)
    return "\n".join(out)


def mutations():
    rng = random.Random(SEED)
    cases = []
    while len(cases) < COUNT:
        name = rng.choice(NAMES)
        ref = reference(name)
        blank = rng.choice(sorted(ref))
        if rng.random() < 0.5:
            answers = dict(ref)
            answers[blank] = _swap_factors(_respace(ref[blank], rng))
            cases.append((name, "same", blank, _noise(filled(name, answers), rng), None))
            continue
        others = sorted({a for n, a in ref.items() if _squash(a) != _squash(ref[blank])})
        if not others:
            continue
        other = rng.choice(others)
        text = _noise(filled(name, {**ref, blank: other}), rng)
        cases.append((name, "changed", blank, text, other))
    return cases


CASES = mutations()


def test_the_mutations_cover_the_course():
    assert len(CASES) == COUNT
    assert len({c[0] for c in CASES}) >= 8
    assert 15 <= sum(c[1] == "changed" for c in CASES) <= 35


@pytest.mark.parametrize("case", range(COUNT))
def test_a_mutated_submission_is_graded_by_its_answers(case):
    name, kind, blank, text, other = CASES[case]
    res = grader(name).grade_text(text, "mutated.shape")
    got = next(b for b in res.blanks if b.name == blank)
    if kind == "same":
        assert res.score == res.max_score, text_report(res)
        return
    assert res.score < res.max_score, (blank, other, text_report(res))
    assert got.status != "correct" and got.points < got.max_points, text_report(res)
    assert got.answer == " ".join(other.split()), (got.answer, other)
    others = [b for b in res.blanks if b.name != blank]
    assert all(b.status == "correct" for b in others), text_report(res)


@pytest.mark.parametrize("name", NAMES)
def test_the_solution_written_another_way_gets_full_marks(name):
    rng = random.Random(f"{SEED}{name}")
    text = _noise((ROOT / "solutions" / f"{name}.shape").read_text(), rng)
    res = grader(name).grade_text(text, "solution.shape")
    assert res.score == res.max_score, text_report(res)
    assert not res.notes, res.notes
