"""Gradescope: results.json in Markdown with configurable visibility, and the
autograder script run in a fake /autograder tree, reporting every exit status
of `shapelang grade` truthfully."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_grading_uploads import EXERCISE, FULL, ROOT, SOLUTION, course, fill, grade

from shapelang import cli
from shapelang.teaching.grader import Grader
from shapelang.teaching.results import VISIBILITIES, Visibility, gradescope_json

SCRIPT = ROOT / "exercises" / "gradescope" / "run_autograder"


def _tests(out: dict) -> dict:
    return {t["name"].split()[0]: t for t in out["tests"]}


# ------------------------------------------------------------------ 19: the results file

def test_results_are_markdown_with_one_paragraph_per_message(tmp_path):
    ex = course(tmp_path)
    sub = tmp_path / "a.shape"
    sub.write_text(fill({"qh": "[B, S, D]"}) + "%% junk\n")
    status, out = grade(ex, sub, tmp=tmp_path)
    assert status == 1
    assert out["output_format"] == "md" and out["test_output_format"] == "md"
    qh = _tests(out)["?qh"]
    assert qh["output_format"] == "md"
    # the answer, the feedback and the hint are separate paragraphs (a single newline
    # would run them together in Markdown)
    assert qh["output"].startswith("your answer: `[B, S, D]`\n\n")
    assert "\n\nhint: " in qh["output"]
    assert "\n\nnote (line " in out["output"]


def test_an_answer_with_backquotes_stays_inside_its_code_span():
    g = Grader(EXERCISE.read_text(), SOLUTION.read_text())
    res = g.grade_text(fill({"qh": "[B, H, S, Dh]`**bold**`"}))
    out = gradescope_json(res)
    line = _tests(out)["?qh"]["output"].split("\n\n")[0]
    assert line == "your answer: `` [B, H, S, Dh]`**bold**` ``"


def test_visibility_defaults_visible_and_hidden_tests_after_the_due_date(tmp_path):
    ex = course(tmp_path)
    sub = tmp_path / "a.shape"
    sub.write_text(fill({}))
    _, out = grade(ex, sub, tmp=tmp_path)
    assert out["visibility"] == "visible"
    assert {t["visibility"] for t in out["tests"]} == {"visible"}
    _, out = grade(ex, sub, tmp=tmp_path, extra=["--hidden", "?qh,one"])
    tests = _tests(out)
    assert tests["?qh"]["visibility"] == tests["?one"]["visibility"] == "after_due_date"
    assert tests["?split"]["visibility"] == tests["whole"]["visibility"] == "visible"
    assert out["visibility"] == "visible" and out["score"] == FULL


@pytest.mark.parametrize("vis", VISIBILITIES)
def test_every_documented_visibility_can_be_chosen(tmp_path, vis):
    ex = course(tmp_path)
    sub = tmp_path / "a.shape"
    sub.write_text(fill({}))
    _, out = grade(ex, sub, tmp=tmp_path, extra=["--visibility", vis, "--hidden", "swap",
                                                      "--hidden-visibility", "after_published"])
    assert out["visibility"] == vis
    tests = _tests(out)
    assert tests["?swap"]["visibility"] == "after_published"
    assert tests["?split"]["visibility"] == vis


def test_unknown_visibility_or_blank_is_a_usage_error(tmp_path, capsys):
    ex = course(tmp_path)
    sub = tmp_path / "a.shape"
    sub.write_text(fill({}))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["grade", str(ex), str(sub), "--visibility", "never"])
    assert exit_.value.code == 2
    assert cli.main(["grade", str(ex), str(sub), "--hidden", "nope"]) == 2
    assert "no blank ?nope" in capsys.readouterr().err
    with pytest.raises(ValueError):
        Visibility("sometimes")


def test_grade_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["grade", "--help"])
    out = capsys.readouterr().out
    for code in ("0", "1", "2", "3"):
        assert f"  {code}  " in out
    assert "--file" in out and "--visibility" in out


# ------------------------------------------------------------------ 16: run_autograder

def autograder(tmp_path: Path, files: dict, env: dict | None = None, conf: str | None = None,
               python: str | None = None):
    """A fake /autograder tree; run the script; returns (process, results.json)."""
    src, sub = tmp_path / "source", tmp_path / "submission"
    src.mkdir(exist_ok=True)
    sub.mkdir(exist_ok=True)
    shutil.copy(EXERCISE, src / "exercise.shape")
    shutil.copy(SOLUTION, src / "solution.shape")
    if conf is not None:
        (src / "grading.conf").write_text(conf)
    for name, text in files.items():
        (sub / name).parent.mkdir(parents=True, exist_ok=True)
        (sub / name).write_text(text)
    results = tmp_path / "results" / "results.json"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SHAPELANG_")}
    full_env.update({"AUTOGRADER_SOURCE": str(src), "AUTOGRADER_SUBMISSION": str(sub),
                     "AUTOGRADER_RESULTS": str(results), "PYTHON": python or sys.executable,
                     **(env or {})})
    done = subprocess.run(["bash", str(SCRIPT)], env=full_env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done, json.loads(results.read_text())


def test_autograder_grades_the_upload(tmp_path):
    done, out = autograder(tmp_path, {"exercise.shape": fill({"swap": "transpose 0 1"})})
    assert out["score"] == FULL - 2 and out["output_format"] == "md"
    assert "status 1 (points lost" in done.stdout
    assert "Traceback" not in done.stderr


def test_autograder_refuses_two_files_and_a_link(tmp_path):
    _, out = autograder(tmp_path, {"a.shape": fill({"qh": "[B]"}), "b.shape": fill({})})
    assert out["score"] == 0 and "2 .shape files" in out["output"]
    (tmp_path / "submission" / "a.shape").unlink()
    (tmp_path / "submission" / "b.shape").unlink()
    (tmp_path / "submission" / "answers.shape").symlink_to(tmp_path / "source" / "solution.shape")
    _, out = autograder(tmp_path, {})
    assert out["score"] == 0 and "link" in out["output"]


def test_autograder_settings_from_grading_conf_and_environment(tmp_path):
    files = {"answers.shape": fill({"qh": "[B, S, D]"}), "scratch/try.shape": fill({})}
    conf = ("# settings\nSHAPELANG_FILE=answers.shape   # the file to grade\n"
            "SHAPELANG_VISIBILITY=after_published\n"
            "SHAPELANG_HIDDEN=\"qh one\"  \r\nSHAPELANG_TIME_LIMIT=5")
    _, out = autograder(tmp_path, files, conf=conf)
    assert out["score"] == FULL - 2 and out["visibility"] == "after_published"
    tests = _tests(out)
    assert tests["?qh"]["visibility"] == "after_due_date"
    assert tests["?split"]["visibility"] == "after_published"
    # the environment wins over the file
    _, out = autograder(tmp_path, {}, conf=conf,
                           env={"SHAPELANG_FILE": "scratch/try.shape",
                                "SHAPELANG_HIDDEN_VISIBILITY": "hidden"})
    assert out["score"] == FULL and _tests(out)["?qh"]["visibility"] == "hidden"


def test_autograder_reports_a_failure_of_the_grader_as_such(tmp_path):
    """A real run where the grader fails (a bad time limit is the simplest way to make
    `shapelang grade` exit 2): the learner is told it is not their fault, with the
    true status."""
    _, out = autograder(tmp_path, {"exercise.shape": fill({})},
                        env={"SHAPELANG_TIME_LIMIT": "-1"})
    assert out["score"] == 0
    assert "exited with status 2" in out["output"] and "not 0 or 1" not in out["output"]
    assert "not a mistake in your file" in out["output"]


@pytest.mark.parametrize("status,words", [
    (0, "full marks"), (1, "points lost"), (2, "set up wrongly"),
    (3, "grader failed"), (137, "stopped unexpectedly")])
def test_autograder_names_each_exit_status_truthfully(tmp_path, status, words):
    """With a stand-in for python that exits with `status` (after writing results or not),
    the script says which status it was and why, and always leaves a results file."""
    fake = tmp_path / "fake-python"
    fake.write_text("#!/usr/bin/env bash\n"
                    "out=''; while [ $# -gt 0 ]; do [ \"$1\" = --output ] && out=$2; shift; done\n"
                    f"[ {status} -le 1 ] || [ {status} -eq 3 ] && "
                    "echo '{\"score\": 1, \"output\": \"graded\", \"tests\": []}' > \"$out\"\n"
                    f"exit {status}\n")
    fake.chmod(0o755)
    done, out = autograder(tmp_path, {"exercise.shape": fill({})}, python=str(fake))
    assert f"status {status} (" in done.stdout and words in done.stdout
    if status in (0, 1, 3):
        assert out == {"score": 1, "output": "graded", "tests": []}
    else:
        assert out["score"] == 0 and f"exited with status {status}" in out["output"]
        assert words in out["output"]


def test_visibility_written_in_the_exercise_and_overridden_on_the_command_line(tmp_path, capsys):
    ex = course(tmp_path)
    text = ex.read_text()
    ex.write_text(text.replace("\ndim B", "\n# @visibility: after_published\n# @hidden: ?qh\n"
                                         "# @hidden visibility: hidden\ndim B", 1))
    sub = tmp_path / "a.shape"
    sub.write_text(fill({"qh": "[B, S, D]"}))
    status, out = grade(ex, sub, tmp=tmp_path)
    assert status == 1 and out["score"] == FULL - 2      # the lines moved nothing
    tests = _tests(out)
    assert out["visibility"] == tests["?split"]["visibility"] == "after_published"
    assert tests["?qh"]["visibility"] == "hidden"
    g = Grader(ex.read_text(), SOLUTION.read_text())          # the exercise's lines stay
    assert g.tmpl.blanks["qh"].line == 32 and g.visibility.hidden == {"qh"}
    _, out = grade(ex, sub, tmp=tmp_path, extra=["--visibility", "visible", "--hidden", "one"])
    tests = _tests(out)
    assert tests["?split"]["visibility"] == "visible" and tests["?one"]["visibility"] == "hidden"
    assert tests["?qh"]["visibility"] == "visible"
    ex.write_text(text.replace("\ndim B", "\n# @visibility: later\ndim B", 1))
    assert cli.main(["grade", str(ex), str(sub)]) == 2
    assert "bad value `later`" in capsys.readouterr().err
    ex.write_text(text.replace("\ndim B", "\n# @hidden: ?nope\ndim B", 1))
    assert cli.main(["grade", str(ex), str(sub)]) == 2
    assert "?nope" in capsys.readouterr().err
