"""Untrusted uploads: exactly one file per learner is graded, links are never
followed, hidden files and copies of the project are not submissions.

The exercise is the course's 02_split_heads (7 points: ?split 2, ?swap 2,
?qh 2, ?one 1); answers are written into it the way a learner would.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from shapelang import cli

ROOT = Path(__file__).resolve().parent.parent
EXERCISE = ROOT / "exercises" / "02_split_heads.shape"
SOLUTION = ROOT / "exercises" / "solutions" / "02_split_heads.shape"
RIGHT = {"split": "view [B, S, H, Dh]", "swap": "transpose 1 2", "qh": "[B, H, S, Dh]",
         "one": "[B, S, Dh]"}
FULL = 7


def fill(answers: dict) -> str:
    """The exercise with `answers` (the rest right) in place of its blanks."""
    answers = {**RIGHT, **answers}
    return re.sub(r"\?([a-z_0-9]+)(?!:)", lambda m: answers.get(m.group(1), m.group(0)),
                  EXERCISE.read_text())


def course(tmp_path: Path) -> Path:
    """An exercise with its solution beside it, as the instructor keeps them."""
    d = tmp_path / "course"
    (d / "solutions").mkdir(parents=True)
    shutil.copy(EXERCISE, d / "ex.shape")
    shutil.copy(SOLUTION, d / "solutions" / "ex.shape")
    return d / "ex.shape"


def grade(ex: Path, *paths, fmt: str = "gradescope", extra=(), tmp: Path | None = None):
    """Run `shapelang grade` in-process; returns (exit status, parsed output)."""
    out = (tmp or ex.parent) / "results.json"
    if out.exists():
        out.unlink()
    status = cli.main(["grade", str(ex), *map(str, paths), "--format", fmt, "-o", str(out),
                       *extra])
    text = out.read_text() if out.exists() else ""
    return status, (json.loads(text) if fmt in ("gradescope", "prairielearn", "json") else text)


def gs_message(out: dict) -> str:
    return out["output"]


# ------------------------------------------------------------------ 13: the best file wins

def test_two_files_differing_in_one_answer_are_refused_not_the_best_graded(tmp_path):
    ex = course(tmp_path)
    up = tmp_path / "upload"
    up.mkdir()
    (up / "a.shape").write_text(fill({"split": "view [B, H, S, Dh]"}))     # 5/7
    (up / "b.shape").write_text(fill({"qh": "[B, S, D]"}))                 # 5/7
    status, out = grade(ex, up)
    assert status == 1
    assert out["score"] == 0
    assert "2 .shape files" in gs_message(out) and "`a.shape`" in gs_message(out)
    status, pl = grade(ex, up, fmt="prairielearn")
    assert status == 1 and pl["score"] == 0 and pl["gradable"] is False
    assert "2 .shape files" in pl["format_errors"][0]


def test_one_file_named_like_the_exercise_among_others_is_still_refused(tmp_path):
    ex = course(tmp_path)
    up = tmp_path / "upload"
    up.mkdir()
    (up / "ex.shape").write_text(fill({"qh": "[B, S, D]"}))
    (up / "copy.shape").write_text(fill({}))
    status, out = grade(ex, up)
    assert status == 1 and out["score"] == 0


def test_the_instructor_names_the_file_to_grade(tmp_path):
    ex = course(tmp_path)
    up = tmp_path / "upload"
    (up / "work").mkdir(parents=True)
    (up / "answers.shape").write_text(fill({"qh": "[B, S, D]"}))          # 5/7
    (up / "work" / "scratch.shape").write_text(fill({}))                  # 7/7, not graded
    status, out = grade(ex, up, extra=["--file", "answers.shape"])
    assert status == 1 and out["score"] == FULL - 2
    status, out = grade(ex, up, extra=["--file", "work/scratch.shape"])
    assert status == 0 and out["score"] == FULL
    status, out = grade(ex, up, extra=["--file", "missing.shape"])
    assert status == 1 and out["score"] == 0 and "no file named `missing.shape`" in out["output"]


def test_named_file_in_a_folder_of_learners(tmp_path):
    ex = course(tmp_path)
    subs = tmp_path / "subs"
    for who, answers in (("alice", {}), ("bob", {"swap": "transpose 0 1"})):
        (subs / who).mkdir(parents=True)
        (subs / who / "answers.shape").write_text(fill(answers))
        (subs / who / "scratch.shape").write_text(fill({"qh": "[B]"}))
    status, text = grade(ex, subs, fmt="score", extra=["--file", "answers.shape"])
    assert status == 1
    assert text.splitlines() == [f"{FULL}\t{subs / 'alice' / 'answers.shape'}",
                                 f"{FULL - 2}\t{subs / 'bob' / 'answers.shape'}"]


def test_an_upload_with_one_file_under_another_name_is_graded(tmp_path):
    ex = course(tmp_path)
    up = tmp_path / "upload"
    up.mkdir()
    (up / "my answers.txt").write_text(fill({}))
    status, out = grade(ex, up)
    assert status == 0 and out["score"] == FULL
    (up / "README.md").write_text("notes")
    status, out = grade(ex, up)
    assert status == 1 and out["score"] == 0 and "no .shape file" in out["output"]


# ------------------------------------------------------------------ 14: links

def test_a_link_inside_the_upload_to_the_solution_is_refused(tmp_path):
    ex = course(tmp_path)
    up = tmp_path / "upload"
    up.mkdir()
    (up / "answers.shape").symlink_to(ex.parent / "solutions" / "ex.shape")
    for fmt in ("gradescope", "prairielearn"):
        status, out = grade(ex, up, fmt=fmt)
        assert status == 1 and out["score"] == 0
        assert "link" in json.dumps(out)
    # an honest file beside the link does not make the link acceptable
    (up / "honest.shape").write_text(fill({"qh": "[B, S, D]"}))
    status, out = grade(ex, up)
    assert status == 1 and out["score"] == 0 and "link" in out["output"]


def test_a_link_to_a_folder_with_a_copy_of_the_project_is_refused(tmp_path):
    """The zip layout of exercises/README.md: a copy of the project as shapelang/,
    which holds the course's solutions."""
    ex = course(tmp_path)
    source = tmp_path / "source"
    (source / "shapelang" / "exercises" / "solutions").mkdir(parents=True)
    shutil.copy(SOLUTION, source / "shapelang" / "exercises" / "solutions" / "02.shape")
    up = tmp_path / "upload"
    up.mkdir()
    (up / "copy").symlink_to(source / "shapelang" / "exercises" / "solutions",
                             target_is_directory=True)
    status, out = grade(ex, up)
    assert status == 1 and out["score"] == 0 and "link" in out["output"]
    status, out = grade(ex, up, fmt="text")
    assert status == 1 and "link" in out and "7/7" not in out


def test_a_link_given_as_the_submission_is_refused(tmp_path):
    ex = course(tmp_path)
    link = tmp_path / "alice.shape"
    link.symlink_to(ex.parent / "solutions" / "ex.shape")
    for fmt in ("gradescope", "prairielearn", "json"):
        status, out = grade(ex, link, fmt=fmt)
        assert status == 1
        assert "link" in json.dumps(out)
        assert (out.get("score") if fmt != "json" else out["submissions"][0]["score"]) == 0
    status, text = grade(ex, link, fmt="score")
    assert status == 1 and text == "0\n"


def test_a_link_in_a_folder_of_learners_is_that_learners_refusal(tmp_path):
    ex = course(tmp_path)
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.shape").write_text(fill({}))
    (subs / "mallory.shape").symlink_to(subs / "alice.shape")
    status, text = grade(ex, subs, fmt="score")
    assert status == 1
    assert text.splitlines() == [f"{FULL}\t{subs / 'alice.shape'}",
                                 f"0\t{subs / 'mallory.shape'}"]


def test_hidden_files_and_a_project_copy_in_the_upload_are_not_submissions(tmp_path):
    ex = course(tmp_path)
    up = tmp_path / "upload"
    (up / ".git").mkdir(parents=True)
    (up / "answers.shape").write_text(fill({"qh": "[B, S, D]"}))
    (up / ".answers.shape").write_text(fill({}))
    (up / ".git" / "old.shape").write_text(fill({}))
    project = up / "shapelang"
    (project / "exercises" / "solutions").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'shapelang'\n")
    shutil.copy(SOLUTION, project / "exercises" / "solutions" / "02_split_heads.shape")
    (up / ".hidden_link.shape").symlink_to(SOLUTION)
    status, out = grade(ex, up)
    assert status == 1 and out["score"] == FULL - 2


def test_the_instructors_own_folder_is_not_graded_as_submissions(tmp_path):
    """Grading the folder that holds the exercise skips the exercise and solutions/."""
    ex = course(tmp_path)
    (ex.parent / "alice.shape").write_text(fill({"one": "[B, S, D]"}))
    status, text = grade(ex, ex.parent, fmt="score")
    assert status == 1 and text == f"{FULL - 1}\n"


def test_a_fifo_is_refused_without_waiting(tmp_path):
    ex = course(tmp_path)
    up = tmp_path / "upload"
    up.mkdir()
    os.mkfifo(up / "answers.shape")
    start = time.monotonic()
    status, out = grade(ex, up / "answers.shape", fmt="json")
    assert time.monotonic() - start < 60     # a FIFO would block forever: refused, not opened
    assert status == 1 and out["submissions"][0]["score"] == 0
    assert "not a regular file" in out["submissions"][0]["error"]
    status, out = grade(ex, up)
    assert status == 1 and out["score"] == 0


@pytest.mark.parametrize("fmt", ["gradescope", "prairielearn"])
def test_an_empty_upload_is_the_learners_result_not_a_usage_error(tmp_path, fmt):
    ex = course(tmp_path)
    up = tmp_path / "upload"
    up.mkdir()
    status, out = grade(ex, up, fmt=fmt)
    assert status == 1 and out["score"] == 0 and "no .shape file" in json.dumps(out)


def test_an_upload_of_too_many_files_is_refused(tmp_path, monkeypatch):
    from shapelang.teaching import results
    monkeypatch.setattr(results, "MAX_ENTRIES", 30)
    ex = course(tmp_path)
    up = tmp_path / "upload"
    up.mkdir()
    (up / "answers.shape").write_text(fill({}))
    for k in range(40):
        (up / f"junk{k}.txt").write_text("x")
    status, out = grade(ex, up)
    assert status == 1 and out["score"] == 0 and "more than" in out["output"]
    assert cli.main(["grade", str(ex), str(up), "--format", "score"]) == 2


def test_grade_file_refuses_links_folders_and_fifos_itself(tmp_path):
    """The library call is as careful as the command: nothing but a regular file is read."""
    from shapelang.teaching.grader import Grader
    g = Grader(EXERCISE.read_text(), SOLUTION.read_text())
    (tmp_path / "link.shape").symlink_to(SOLUTION)
    os.mkfifo(tmp_path / "fifo.shape")
    (tmp_path / "folder.shape").mkdir()
    for name, words in (("link.shape", "is a link"), ("fifo.shape", "not a regular file"),
                        ("folder.shape", "not a regular file"), ("none.shape", "cannot read")):
        res = g.grade_file(str(tmp_path / name))
        assert res.score == 0 and not res.gradable and words in res.error, name
    (tmp_path / "ok.shape").write_text(fill({}))
    assert g.grade_file(str(tmp_path / "ok.shape")).score == FULL


def test_a_folder_given_through_a_link_is_searched_but_links_inside_are_not(tmp_path):
    ex = course(tmp_path)
    real = tmp_path / "real-upload"
    real.mkdir()
    (real / "answers.shape").write_text(fill({"one": "[B]"}))
    (tmp_path / "upload").symlink_to(real, target_is_directory=True)
    status, out = grade(ex, tmp_path / "upload")
    assert status == 1 and out["score"] == FULL - 1
    (real / "more.shape").symlink_to(SOLUTION)
    status, out = grade(ex, tmp_path / "upload")
    assert status == 1 and out["score"] == 0 and "link" in out["output"]
