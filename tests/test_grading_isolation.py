"""No single file can stop a class's grading, and no file makes unbounded output.

Each submission is graded in isolation: an error of the grader becomes that
submission's result ("the grader failed", exit status 3), never a traceback,
and every other submission is still graded. A submission's notes are capped,
and a byte-order mark or trailing blank lines change nothing.
"""
from __future__ import annotations

import json
import time

import pytest
from test_grading_uploads import FULL, course, fill, grade
from work import bounded

from shapelang import cli
from shapelang.teaching import judge as judge_module
from shapelang.teaching.grader import Grader
from shapelang.teaching.results import MAX_NOTES, prairielearn_json, text_report


def folder_of(tmp_path, **files):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, text in files.items():
        (subs / f"{name}.shape").write_text(text)
    return subs


def scores(text: str) -> dict:
    return {line.split("\t")[1].rsplit("/", 1)[1]: float(line.split("\t")[0])
            for line in text.splitlines()}


# ------------------------------------------------------------------ 15: one huge answer

@pytest.mark.parametrize("huge", ["[B, H, S, ((D**16)**16)**16]", "[B, H, S, ((H**16)**16)**15]",
                                  "[B, H, ((S**16)**16)**16, Dh]",
                                  "[B, H, S, ((Dh**16)**16)**16]"])
def test_one_huge_answer_does_not_stop_the_batch(tmp_path, capsys, huge):
    ex = course(tmp_path)
    subs = folder_of(tmp_path, alice=fill({}), huge=fill({"qh": huge}),
                     zoe=fill({"swap": "transpose 0 1"}))
    status, text = grade(ex, subs, fmt="score", tmp=tmp_path)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    got = scores(text)
    assert got == {"alice.shape": FULL, "huge.shape": FULL - 2, "zoe.shape": FULL - 2}
    assert status in (1, 3)           # 3 only when the grader failed on it, and says so
    if status == 3:
        assert "huge.shape" in err


def test_the_huge_answer_gets_a_result_in_every_format(tmp_path, capsys):
    ex = course(tmp_path)
    sub = tmp_path / "huge.shape"
    sub.write_text(fill({"qh": "[B, H, S, ((D**16)**16)**16]"}))
    for fmt in ("gradescope", "prairielearn", "json", "text"):
        status, out = grade(ex, sub, fmt=fmt, tmp=tmp_path)
        assert status in (1, 3)
        assert "Traceback" not in capsys.readouterr().err
        assert out


# ------------------------------------------------------------------ any internal error

def _break_judge(monkeypatch, when: str, error: BaseException):
    real = judge_module.Judge.statement

    def statement(self, st, answers):
        if any(when in a for a in answers.values()):
            raise error
        return real(self, st, answers)
    monkeypatch.setattr(judge_module.Judge, "statement", statement)


@pytest.mark.parametrize("error", [ValueError("Exceeds the limit (4300 digits)"),
                                   RecursionError(), KeyError("x"), MemoryError()])
def test_an_internal_error_is_that_submissions_result_and_exit_3(tmp_path, capsys,
                                                                  monkeypatch, error):
    ex = course(tmp_path)
    _break_judge(monkeypatch, "Dh, S", error)
    subs = folder_of(tmp_path, alice=fill({}), bob=fill({"qh": "[B, H, Dh, S]"}),
                     zoe=fill({"one": "[B, S]"}))
    status, out = grade(ex, subs, fmt="json", tmp=tmp_path)
    assert status == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and "bob.shape" in err
    by_name = {s["file"].rsplit("/", 1)[1]: s for s in out["submissions"]}
    assert by_name["alice.shape"]["score"] == FULL and not by_name["alice.shape"]["internal_error"]
    assert by_name["zoe.shape"]["score"] == FULL - 1
    bob = by_name["bob.shape"]
    assert bob["internal_error"] and bob["error"] is None   # confined to one answer
    qh = next(b for b in bob["blanks"] if b["name"] == "?qh")
    assert qh["status"] == "not graded" and "grader failed" in qh["feedback"]
    assert "not a mistake in your file" in qh["feedback"]
    assert bob["score"] == FULL - 2          # the other blanks keep their points


def test_an_internal_error_is_reported_to_gradescope_and_prairielearn(tmp_path, monkeypatch):
    ex = course(tmp_path)
    _break_judge(monkeypatch, "Dh, S", ValueError("boom"))
    sub = tmp_path / "bob.shape"
    sub.write_text(fill({"qh": "[B, H, Dh, S]"}))
    status, gs = grade(ex, sub, tmp=tmp_path)
    assert status == 3 and any("grader failed" in t["output"] for t in gs["tests"])
    assert gs["score"] == FULL - 2
    status, pl = grade(ex, sub, fmt="prairielearn", tmp=tmp_path)
    # the failure is confined to ?qh: PrairieLearn gets the other blanks' points
    assert status == 3 and pl["gradable"] is True and pl["score"] == pytest.approx((FULL - 2) / FULL)
    qh = next(t for t in pl["tests"] if t["name"] == "?qh")
    assert qh["points"] == 0 and "grader failed" in qh["message"]


@pytest.mark.parametrize("error", [ValueError("boom"), KeyError("x"), RecursionError()])
def test_one_blanks_failure_never_costs_the_other_blank_of_its_line(tmp_path, monkeypatch, error):
    # ?split fails inside the grader; ?swap, on the same line, is right and keeps its 2 points
    ex = course(tmp_path)
    _break_judge(monkeypatch, "D/H]", error)
    sub = tmp_path / "bob.shape"
    sub.write_text(fill({"split": "view [B, S, H, D/H]"}))
    status, pl = grade(ex, sub, fmt="prairielearn", tmp=tmp_path)
    tests = {t["name"]: t for t in pl["tests"]}
    assert status == 3 and pl["gradable"] is True
    assert tests["?split"]["points"] == 0 and "grader failed" in tests["?split"]["message"]
    assert tests["?swap"]["points"] == tests["?swap"]["max_points"] == 2
    assert pl["score"] == pytest.approx((FULL - 2) / FULL)


@pytest.mark.parametrize("huge", ["((D**16)**16)**16", "D**16*D**16*D**16*D**16*D**16",
                                  "(99999999999**16)**16"])
def test_a_pathological_size_is_that_blanks_mistake_and_the_other_blank_keeps_its_points(
        tmp_path, huge):
    ex = course(tmp_path)
    sub = tmp_path / "bob.shape"
    sub.write_text(fill({"split": f"view [B, S, H, {huge}]"}))
    status, pl = grade(ex, sub, fmt="prairielearn", tmp=tmp_path)
    tests = {t["name"]: t for t in pl["tests"]}
    assert status == 1 and pl["gradable"] is True, pl
    assert tests["?split"]["points"] == 0 and "grader failed" not in tests["?split"]["message"]
    assert tests["?swap"]["points"] == 2
    assert pl["score"] == pytest.approx((FULL - 2) / FULL)


def test_an_error_outside_the_blanks_fails_only_that_submission(tmp_path, capsys, monkeypatch):
    from shapelang.teaching import grader as grader_module
    real = grader_module.extract

    def extract(tmpl, text):
        if "explode" in text:
            raise TypeError("unexpected")
        return real(tmpl, text)
    monkeypatch.setattr(grader_module, "extract", extract)
    ex = course(tmp_path)
    subs = folder_of(tmp_path, a=fill({}), b=fill({}) + "# explode\n", c=fill({}))
    status, text = grade(ex, subs, fmt="text", tmp=tmp_path)
    assert status == 3
    assert "Traceback" not in capsys.readouterr().err
    assert text.count(f"{FULL}/{FULL} points") == 2
    assert "b.shape: 0/7 points" in text and "grader failed" in text


def test_a_timeout_is_the_graders_failure_and_later_submissions_are_graded(tmp_path, monkeypatch):
    ex = course(tmp_path)
    real = judge_module.Judge.statement

    def statement(self, st, answers):
        if any("Dh, S" in a for a in answers.values()):
            time.sleep(60)
        return real(self, st, answers)
    monkeypatch.setattr(judge_module.Judge, "statement", statement)
    subs = folder_of(tmp_path, a=fill({"qh": "[B, H, Dh, S]"}), b=fill({}))
    start = time.monotonic()
    status, out = grade(ex, subs, fmt="json", extra=["--time-limit", "0.5"], tmp=tmp_path)
    assert time.monotonic() - start < 30       # cut: the answer sleeps for 60 s
    assert status == 3
    a, b = out["submissions"]
    assert a["internal_error"] and "time limit" in a["error"]
    assert b["score"] == FULL and not b["internal_error"]


def test_bad_time_limit_is_a_usage_error(tmp_path, capsys):
    ex = course(tmp_path)
    sub = tmp_path / "a.shape"
    sub.write_text(fill({}))
    assert cli.main(["grade", str(ex), str(sub), "--time-limit", "0"]) == 2
    assert "--time-limit" in capsys.readouterr().err


# ------------------------------------------------------------------ 18: messages

def _grader():
    from test_grading_uploads import EXERCISE, SOLUTION
    return Grader(EXERCISE.read_text(), SOLUTION.read_text(), "ex.shape", "solution.shape")


def test_a_byte_order_mark_changes_nothing(tmp_path):
    g = _grader()
    for data in (b"\xef\xbb\xbf" + fill({}).encode(), "\ufeff" + fill({})):
        res = g.grade_bytes(data) if isinstance(data, bytes) else g.grade_text(data)
        assert res.score == FULL and res.notes == [] and res.error is None
    ex = course(tmp_path)
    sub = tmp_path / "bom.shape"
    sub.write_bytes(b"\xef\xbb\xbf" + fill({}).encode())
    status, text = grade(ex, sub, fmt="text", tmp=tmp_path)
    assert status == 0 and "note" not in text


@pytest.mark.parametrize("blank", ["\n", "\r\n", "   \n"])
def test_many_blank_lines_change_nothing(blank):
    g = _grader()
    for text in (fill({}) + blank * 5001, blank * 5001 + fill({}),
                 fill({}).replace("\n", "\n" + blank * 2, 1000)):
        res = g.grade_text(text)
        assert res.score == FULL and res.gradable, res.error


def test_thousands_of_junk_lines_give_a_bounded_list_of_notes():
    g = _grader()
    junk = "\n".join(f"%% junk line {i} -> [" for i in range(4900))
    for text in (fill({}) + junk, junk + "\n" + fill({}),
                 "\n".join(line + "\n@@@" for line in fill({}).splitlines())):
        res = g.grade_text(text)
        assert res.score == FULL
        assert len(res.notes) <= MAX_NOTES + 1
        assert res.notes[-1][1].startswith("and ") and "more notes" in res.notes[-1][1]
        assert len(json.dumps(prairielearn_json(res))) < 20_000
        assert len(text_report(res)) < 10_000


def test_notes_below_the_cap_are_all_shown():
    g = _grader()
    res = g.grade_text(fill({}) + "%% one\n%% two\n")
    assert 2 <= len(res.notes) <= MAX_NOTES and not any("more notes" in m for _, m in res.notes)


# ------------------------------------------------------------------ 17: slow files (grader side)

def _bounded(fn):
    """A guard against blow-ups: the calls counted (tests/work.py), not seconds. The cases
    below make up to a few million; a quadratic blow-up makes hundreds of millions."""
    return bounded(fn, 20_000_000)


def test_long_and_many_statement_submissions_finish_with_their_answers_graded():
    g = _grader()
    g.time_limit = 1.0
    sol = fill({})
    cases = [
        sol + "".join(f"x{i}: Q -> view [B, S, H, Dh]\n" + ("%% (\n" if i % 7 == 0 else "")
                      for i in range(400)),
        sol + "Qh: Q -> a a a a a a a a a a a a a a a a a a a a a a a\n" * 2900,
        sol + "x: " + "a " * 100_000 + "\n",
    ]
    for text in cases:
        res = _bounded(lambda t=text: g.grade_text(t))
        assert res.score == FULL
        assert len(res.notes) <= MAX_NOTES + 1


def test_naming_the_lines_that_do_not_parse_has_its_own_small_budget(monkeypatch):
    """A slow search for syntax errors costs only its list, not the learner's points."""
    g = _grader()
    g.time_limit = 5.0
    monkeypatch.setattr(g, "_syntax_notes", lambda text: time.sleep(60) or [])
    start = time.monotonic()        # wall time: the slow search sleeps, it is cut by a deadline
    res = g.grade_text(fill({}) + "%% junk\n")
    assert time.monotonic() - start < 30
    assert res.score == FULL and not res.internal_error
    assert any("not listed" in m for _, m in res.notes)


def test_a_nested_deadline_leaves_the_outer_one_running():
    from shapelang.teaching.grader import GradingTimeout, deadline
    start = time.monotonic()
    with pytest.raises(GradingTimeout), deadline(0.5):
        with deadline(100):
            pass
        time.sleep(60)
    assert time.monotonic() - start < 30    # the outer deadline cut the sleep
    # the inner one is cut to what the outer one has left
    start = time.monotonic()
    with pytest.raises(GradingTimeout), deadline(0.3), deadline(100):
        time.sleep(60)
    assert time.monotonic() - start < 30
