"""Grading: what an instructor and a learner see.

Equivalent answers score full marks, typical mistakes are named in the
learner's terms, broken or hostile submissions get a score and a clear
message quickly, and the output formats are what Gradescope, PrairieLearn and
nbgrader read.
"""
from __future__ import annotations

import functools
import json
import re
import time
from pathlib import Path

import pytest
from tiers import examples
from work import bounded

from shapelang import cli
from shapelang.teaching.exercise import ExerciseError, load_template, make
from shapelang.teaching.grader import Grader, gradescope_json, prairielearn_json, result_json, text_report

SOLUTION = """\
# @title: Splitting heads
dim B          # batch
dim S          # tokens
dim D          # model width
dim H          # heads
dim Dh = D / H # head width
assume D % H == 0
example B=1, S=4, D=512, H=8

input X: [B, S, D]
param W_q: [D, D]
Q: X @ W_q
# ?split = view [B, S, H, Dh]; 2 points; hint: cut the last dim into H pieces
# ?swap = transpose 1 2; hint: bring the heads next to the batch
Qh: Q -> view [B, S, H, Dh] -> transpose 1 2
# ?qh = [B, H, S, Dh]; 2 points
expect Qh: [B, H, S, Dh]
Kt: Qh -> transpose -2 -1
# ?axis = -1
scores: Qh @ Kt -> scale 1/sqrt(Dh) -> softmax -1
expect scores: [B, H, S, S]
"""


@functools.cache
def exercise_text() -> str:
    text, _ = make(SOLUTION, "solution.shape")
    return text


@functools.cache
def grader(reveal: bool = False) -> Grader:
    ex = exercise_text()
    if reveal:
        ex = "# @reveal: yes\n" + ex
    return Grader(ex, SOLUTION, "exercise.shape", "solution.shape")


def fill(answers: dict, text: str | None = None) -> str:
    text = exercise_text() if text is None else text
    return re.sub(r"\?([A-Za-z0-9_]+)", lambda m: answers.get(m.group(1), m.group(0)), text)


RIGHT = {"split": "view [B, S, H, Dh]", "swap": "transpose 1 2", "qh": "[B, H, S, Dh]",
         "axis": "-1"}


def grade(answers: dict, g: Grader | None = None):
    return (g or grader()).grade_text(fill({**RIGHT, **answers}), "alice.shape")


def blank(res, name):
    return next(b for b in res.blanks if b.name == name)


# ------------------------------------------------------------------ the format

def test_make_turns_tags_into_blanks_with_points_and_hints():
    text = exercise_text()
    assert "Qh: Q -> ?split -> ?swap" in text
    assert "expect Qh: ?qh" in text
    assert "scores: Qh @ Kt -> scale 1/sqrt(Dh) -> softmax ?axis" in text
    assert "# ?split: 2 points; hint: cut the last dim into H pieces" in text
    tmpl = load_template(text)
    assert {n: b.points for n, b in tmpl.blanks.items()} == \
        {"split": 2, "swap": 1, "qh": 2, "axis": 1}
    assert tmpl.blanks["swap"].hint == "bring the heads next to the batch"
    assert tmpl.options.title == "Splitting heads"


def test_made_exercise_checks_apart_from_its_blanks():
    from shapelang.checker.checker import check_text
    spec = check_text(exercise_text(), "exercise.shape")
    assert spec.errors() and {d.code for d in spec.errors()} == {"E116"}


def test_made_exercise_never_contains_an_answer():
    solution = SOLUTION.replace(
        "input X: [B, S, D]",
        "# After the split, Qh is [B, H, S, Dh] = [1, 8, 4, 64].\n"
        "#! solution note: view [B, S, H, Dh] then transpose 1 2\n"
        "input X: [B, S, D]   # heads: [B, H, S, Dh]")
    text, warnings = make(solution, "solution.shape")
    squashed = "".join(text.split())
    for answer in ("view[B,S,H,Dh]", "transpose12", "[B,H,S,Dh]", "[1,8,4,64]"):
        assert answer not in squashed
    assert "input X: [B, S, D]" in text          # the code line survives, its comment does not
    assert any("gives an answer away" in w for w in warnings)


def test_a_hint_that_gives_the_answer_away_is_an_error():
    bad = SOLUTION.replace("hint: bring the heads next to the batch",
                           "hint: write transpose 1 2")
    with pytest.raises(ExerciseError, match="gives the"):
        make(bad, "solution.shape")


def test_make_rejects_ambiguous_overlapping_and_missing_tag_text():
    amb = SOLUTION.replace("expect scores:", "# ?keys = S\nexpect scores:")
    with pytest.raises(ExerciseError, match="occurs 2 times.*occurrence"):
        make(amb, "solution.shape")
    chosen = SOLUTION.replace("expect scores:", "# ?keys = S; occurrence 2\nexpect scores:")
    text, _ = make(chosen, "solution.shape")
    assert "expect scores: [B, H, S, ?keys]" in text
    overlap = SOLUTION.replace("# ?swap = transpose 1 2;", "# ?swap = S;")
    with pytest.raises(ExerciseError, match="overlaps"):
        make(overlap, "solution.shape")
    missing = SOLUTION.replace("# ?swap = transpose 1 2;", "# ?swap = transpose 0 1;")
    with pytest.raises(ExerciseError, match="does not occur"):
        make(missing, "solution.shape")


def test_make_refuses_a_solution_that_does_not_check():
    with pytest.raises(ExerciseError, match="does not check"):
        make(SOLUTION.replace("Q: X @ W_q", "Q: X @ W_k"), "solution.shape")


def test_all_shapes_asks_for_the_shape_after_every_binding():
    plain = "\n".join(ln for ln in SOLUTION.splitlines() if "# ?" not in ln) + "\n"
    text, _ = make(plain, "solution.shape", all_shapes=True)
    for name in ("Q", "Kt"):
        assert re.search(rf"^expect {name}: \?{name}$", text, re.MULTILINE)
    assert "expect Qh: ?Qh" in text and "expect scores: ?scores" in text
    assert "[B, H, S, S]" not in text and "[B, H, S, Dh]" not in text
    g = Grader(text, plain)
    ok = g.grade_text(fill({"Q": "[B, S, D]", "Qh": "[B, H, S, D/H]", "Kt": "[B, H, Dh, S]",
                            "scores": "[B, H, S, S]"}, text))
    assert ok.score == ok.max_score == 4


def test_exercise_directive_errors_are_reported_to_the_author():
    with pytest.raises(ExerciseError, match="no blanks"):
        load_template("dim B\n")
    with pytest.raises(ExerciseError, match="unknown option"):
        load_template("# @colour: red\ndim B\ninput x: [?b]\n")
    with pytest.raises(ExerciseError, match="appears twice"):
        load_template("dim B\ninput x: [?b]\ninput y: [?b]\n")
    with pytest.raises(ExerciseError, match="cannot read"):
        load_template("# ?b: lots of points\ndim B\ninput x: [?b]\n")


# ------------------------------------------------------------------ right answers

@pytest.mark.parametrize("answers", [
    {},
    {"split": "view [B, S, H, D/H]", "qh": "[B, H, S, D//H]"},
    {"split": "view [B,S,H,-1]", "swap": "transpose 2 1", "qh": "[B, H, S, D/H]"},
    {"swap": "transpose -3 -2", "axis": "3"},
    {"swap": "permute 0 2 1 3", "split": "reshape [B, S, H, Dh]"},
    {"split": "reshape [B, -1, H, Dh]", "swap": "transpose 1 2 -> contiguous"},
])
def test_equivalent_answers_get_full_marks(answers):
    res = grade(answers)
    assert res.score == res.max_score == 6, text_report(res)
    assert not res.findings


def test_dim_names_are_the_exercises_own():
    sol = ("dim batch, seq, d_model, h\ndim d_k = d_model / h\nassume d_model % h == 0\n"
           "input x: [batch, seq, d_model]\n"
           "heads: x -> view [batch, seq, h, d_k] -> transpose 1 2\n"
           "# ?shape = [batch, h, seq, d_k]\n"
           "expect heads: [batch, h, seq, d_k]\n")
    ex, _ = make(sol, "s.shape")
    g = Grader(ex, sol)
    for right in ("[batch, h, seq, d_model/h]", "[batch, h, seq, d_model//h]"):
        assert g.grade_text(ex.replace("?shape", right)).score == 1
    wrong = g.grade_text(ex.replace("?shape", "[B, H, S, D/H]"))
    assert wrong.score == 0
    assert "not a dim of this exercise" in wrong.blanks[0].feedback
    assert "batch, seq, d_model, h, d_k" in wrong.blanks[0].feedback


def test_view_where_the_layout_forbids_it_is_wrong_but_reshape_is_right():
    sol = ("dim B, S, D, H\ndim Dh = D / H\nassume D % H == 0\ninput heads: [B, H, S, Dh]\n"
           "# ?merge = reshape [B, S, D]\n"
           "merged: heads -> transpose 1 2 -> reshape [B, S, D]\n")
    ex, _ = make(sol, "s.shape")
    g = Grader(ex, sol)
    assert g.grade_text(ex.replace("?merge", "contiguous -> view [B, S, D]")).score == 1
    res = g.grade_text(ex.replace("?merge", "view [B, S, D]"))
    assert res.score == 0 and "without copying" in res.blanks[0].feedback


# ------------------------------------------------------------------ mistakes, in the learner's terms

def test_heads_before_the_batch_is_named():
    res = grade({"qh": "[H, B, S, Dh]"})
    b = blank(res, "qh")
    assert b.status == "wrong" and b.points == 0
    assert "right sizes in the wrong order" in b.feedback and "`H` comes before `B`" in b.feedback


def test_the_shape_before_splitting_the_heads_is_named():
    res = grade({"qh": "[B, S, D]"})
    assert "the shape of `Q`" in blank(res, "qh").feedback


def test_the_shape_before_the_transpose_is_named():
    res = grade({"qh": "[B, S, H, Dh]"})
    assert "partway through line 16" in blank(res, "qh").feedback
    res = grade({"swap": "transpose 1 1"})
    b = blank(res, "swap")
    assert b.status == "wrong" and "exchanges nothing" in b.feedback
    assert "the dims that must change places are `S` and `H`" in b.feedback


def test_wrong_rank_and_factor_are_named():
    assert "has 3 dims; `Qh` has 4" in blank(grade({"qh": "[B, H, S]"}), "qh").feedback
    fb = blank(grade({"qh": "[B, H, S, D]"}), "qh").feedback
    assert "off by a factor in dim 3" in fb and "H times too big" in fb


def test_same_shape_but_wrong_numbers_is_caught():
    """A `view` straight to [B, H, S, Dh] has the right shape but mixes tokens and heads."""
    res = grade({"split": "view [B, H, S, Dh]", "swap": "contiguous"})
    assert blank(res, "split").status == "wrong"
    res = grade({"axis": "2"})
    assert "normalises over the wrong dim" in blank(res, "axis").feedback


def test_numbers_instead_of_dims_get_partial_credit():
    res = grade({"qh": "[1, 8, 4, 64]"})
    b = blank(res, "qh")
    assert b.status == "partial" and b.points == 1 and b.max_points == 2
    assert "right only for those sizes" in b.feedback


def test_feedback_never_reveals_the_reference_unless_allowed():
    res = grade({"qh": "[B, S, H, Dh]", "split": "view [B, S, D]"})
    for b in res.blanks:
        assert "[B, H, S, Dh]" not in b.feedback and "view [B, S, H, Dh]" not in b.feedback
    revealed = grade({"qh": "[B, S, H, Dh]"}, grader(reveal=True))
    assert "The expected answer: `[B, H, S, Dh]" in blank(revealed, "qh").feedback


def test_a_later_step_broken_by_an_answer_is_reported_there():
    res = grade({"swap": "transpose 2 3"})
    assert blank(res, "swap").status == "wrong"
    assert res.findings, "the whole-file check should report the broken later step"
    assert any("?swap" in msg for _, msg in res.findings)


def test_hints_are_shown_only_for_wrong_blanks():
    res = grade({"split": "view [B, S, D]"})
    assert blank(res, "split").hint == "cut the last dim into H pieces"
    assert blank(res, "swap").hint is None


# ------------------------------------------------------------------ broken submissions

def test_a_line_that_does_not_parse_costs_only_its_blanks():
    text = fill(RIGHT).replace("expect Qh: [B, H, S, Dh]", "expect Qh: [B, H, S, Dh")
    res = grader().grade_text(text)
    assert blank(res, "split").status == "correct" and blank(res, "axis").status == "correct"
    assert blank(res, "qh").status == "wrong" and "parse" in blank(res, "qh").feedback
    assert res.score == 4
    assert (18, "this line does not parse: the file ends in the middle of a statement") \
        in res.notes or any(ln == 18 and "does not parse" in m for ln, m in res.notes)


def test_changed_missing_and_extra_lines_are_reported_not_fatal():
    text = fill(RIGHT)
    text = text.replace("Kt: Qh -> transpose -2 -1", "Kt: Qh -> transpose -2 -1\nmine: Qh -> relu")
    text = text.replace("expect scores: [B, H, S, S]\n", "")
    text = text.replace("Qh: Q -> view [B, S, H, Dh] -> transpose 1 2",
                        "Qh: X -> view [B, S, H, Dh] -> transpose 1 2")
    res = grader().grade_text(text)
    assert blank(res, "qh").status == "correct" and blank(res, "axis").status == "correct"
    assert blank(res, "split").status == "missing" and "changed" in blank(res, "split").feedback
    notes = " ".join(m for _, m in res.notes)
    assert "not part of the exercise" in notes and "expect scores" in notes


def test_comments_spacing_and_continuation_lines_do_not_matter():
    text = fill(RIGHT).replace("Qh: Q -> view [B, S, H, Dh] -> transpose 1 2",
                               "Qh: Q   # my answer\n   -> view [ B,S , H,Dh ]\n\n   -> transpose 1 2")
    res = grader().grade_text(text)
    assert res.score == res.max_score


def test_nothing_to_grade_is_not_gradable():
    for text in ("", "hello world\n", "\x00\x01binary"):
        res = grader().grade_text(text)
        assert res.score == 0 and not res.gradable and res.error
    pl = prairielearn_json(grader().grade_text("garbage ]]]"))
    assert pl["gradable"] is False and pl["format_errors"] and pl["score"] == 0


def test_unfilled_and_emptied_blanks():
    res = grader().grade_text(fill({**RIGHT, "qh": "?qh"}).replace("-> ?split", "->"))
    assert blank(res, "qh").status == "unfilled"
    assert blank(res, "split").feedback


# ------------------------------------------------------------------ hostile submissions

def _fast(fn):
    """fn() is refused with little work: calls counted, not seconds (tests/work.py). The
    heaviest case here, an exercise's grader built and a submission refused, makes about
    650,000; an unbounded case makes hundreds of millions."""
    return bounded(fn, 3_000_000)


def _cut(fn, by: float):
    """fn() is interrupted by a deadline: it returns long before the `by` seconds that the
    work it was given would take (a sleep of `by` seconds, or a proof that runs for minutes)."""
    start = time.monotonic()
    out = fn()
    assert time.monotonic() - start < by / 2
    return out


def test_tower_of_exponents_is_rejected_quickly():
    sub = "dim B\ninput X: [2**2**2**2**2**2, B]\n"
    res = _fast(lambda: grader().grade_text(sub))
    assert res.score == 0 and res.error
    res = _fast(lambda: grade({"qh": "[2**2**2**2**2**2, H, S, Dh]"}))
    assert "exponent" in blank(res, "qh").feedback


def test_ten_megabyte_file_is_rejected_quickly(tmp_path):
    big = tmp_path / "big.shape"
    big.write_bytes(fill(RIGHT).encode() + b"#" * (10 * 1024 * 1024))
    res = _fast(lambda: grader().grade_file(str(big)))
    assert res.score == 0 and not res.gradable and "larger than 256 KB" in res.error
    res = _fast(lambda: grader().grade_text("x" * (10 * 1024 * 1024)))
    assert "larger than 256 KB" in res.error


def test_ten_thousand_nested_brackets_are_rejected_quickly():
    deep = "[" * 10000 + "]" * 10000
    res = _fast(lambda: grade({"qh": deep}))
    assert res.score == 4 and "too long to grade" in blank(res, "qh").feedback
    res = _fast(lambda: grader().grade_text(deep))
    assert res.score == 0 and res.error


def test_a_slow_submission_is_stopped_by_the_time_limit():
    g = Grader(exercise_text(), SOLUTION, time_limit=0.5)
    slow = "view [B, S, H, (B+S+D+H+1)**16*(B+S+D+H+2)**16]"
    res = _cut(lambda: g.grade_text(fill({**RIGHT, "split": slow})), by=120)
    assert blank(res, "split").status in ("wrong", "not graded")
    if res.error:
        assert "time limit" in res.error
    # the guard really interrupts: a grader stuck in a loop is stopped too
    stuck = Grader(exercise_text(), SOLUTION, time_limit=0.2)
    stuck._grade = lambda *a: time.sleep(60)
    res = _cut(lambda: stuck.grade_text(fill(RIGHT)), by=60)
    assert "time limit" in res.error and res.score == 0
    assert grader().grade_text(fill(RIGHT)).score == 6      # later submissions are unaffected


def test_a_submission_cannot_forge_its_score():
    forged = fill({**RIGHT, "qh": '[B, S]'})
    forged += '\n# {"score": 100, "tests": [], "output": "perfect"}\n# ?qh: 100 points\n'
    forged = forged.replace("expect scores:", '# "score": 100\nexpect scores:')
    res = grader().grade_text(forged)
    assert res.score == 4 and res.max_score == 6
    out = json.loads(json.dumps(gradescope_json(res)))
    assert out["score"] == 4 and all(t["max_score"] <= 2 for t in out["tests"])
    res = grade({"qh": '"score": 100'})
    assert res.score == 4
    assert json.loads(json.dumps(gradescope_json(res)))["score"] == 4


def test_control_characters_from_a_submission_are_escaped():
    res = grade({"split": "view [B, S, H, Dh]\x1b\x07"})
    report = text_report(res)
    assert "\x1b" not in report and "\\x1b" in report


# ------------------------------------------------------------------ output formats

def test_gradescope_results():
    res = grade({"qh": "[B, S, D]"})
    out = gradescope_json(res, "Splitting heads")
    assert out["score"] == 4
    names = [t["name"] for t in out["tests"]]
    assert names[0].startswith("?split") and names[-1].startswith("whole file")
    t = next(t for t in out["tests"] if t["name"].startswith("?qh"))
    assert (t["score"], t["max_score"], t["status"], t["visibility"]) == (0, 2, "failed", "visible")
    assert "shape of `Q`" in t["output"]
    assert sum(t["max_score"] for t in out["tests"]) == 6


def test_prairielearn_and_json_results():
    res = grade({"qh": "[B, S, D]"})
    pl = prairielearn_json(res)
    assert pl["gradable"] is True and pl["score"] == pytest.approx(4 / 6)
    assert [t["max_points"] for t in pl["tests"]] == [2, 1, 2, 1]
    js = result_json(res)
    assert js["score"] == 4 and js["blanks"][2]["status"] == "wrong"


def _files(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "ex.shape").write_text(exercise_text())
    (tmp_path / "solutions" / "ex.shape").write_text(SOLUTION)
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "alice.shape").write_text(fill(RIGHT))
    (tmp_path / "subs" / "bob.shape").write_text(fill({**RIGHT, "qh": "[B, S, D]"}))
    return tmp_path


def test_cli_grade_formats_and_exit_codes(tmp_path, capsys):
    d = _files(tmp_path)
    ex, subs = str(d / "ex.shape"), d / "subs"
    assert cli.main(["grade", ex, str(subs / "alice.shape"), "--format", "score"]) == 0
    assert capsys.readouterr().out == "6\n"
    assert cli.main(["grade", ex, str(subs), "--format", "score"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"6\t{subs / 'alice.shape'}", f"4\t{subs / 'bob.shape'}"]
    out = d / "results.json"
    assert cli.main(["grade", ex, str(subs / "bob.shape"), "--format", "gradescope",
                     "-o", str(out)]) == 1
    assert json.loads(out.read_text())["score"] == 4
    assert cli.main(["grade", ex, str(subs), "--format", "text"]) == 1
    text = capsys.readouterr().out
    assert "alice.shape: 6/6 points" in text and "bob.shape: 4/6 points" in text


def test_gradescope_upload_with_another_file_name(tmp_path, capsys):
    d = _files(tmp_path)
    upload = d / "upload"
    upload.mkdir()
    (upload / "my answers.txt").write_text(fill(RIGHT))
    out = d / "results.json"
    assert cli.main(["grade", str(d / "ex.shape"), str(upload), "--format", "gradescope",
                     "-o", str(out)]) == 0
    assert json.loads(out.read_text())["score"] == 6
    (upload / "my answers.txt").unlink()
    assert cli.main(["grade", str(d / "ex.shape"), str(upload), "--format", "prairielearn",
                     "-o", str(out)]) == 1
    pl = json.loads(out.read_text())
    assert pl["gradable"] is False and "no .shape file" in pl["format_errors"][0]


def test_cli_grade_usage_errors(tmp_path, capsys):
    d = _files(tmp_path)
    (d / "lonely.shape").write_text(exercise_text())
    assert cli.main(["grade", str(d / "lonely.shape"), str(d / "subs")]) == 2
    assert "no solution found" in capsys.readouterr().err
    assert cli.main(["grade", str(d / "ex.shape"), str(d / "nope.shape")]) == 2
    assert cli.main(["grade", str(d / "missing.shape"), str(d / "subs"),
                     "--solution", str(d / "solutions" / "ex.shape")]) == 2


def test_cli_make(tmp_path, capsys):
    sol = tmp_path / "sol.shape"
    sol.write_text(SOLUTION)
    out = tmp_path / "ex.shape"
    assert cli.main(["exercise", "make", str(sol), "-o", str(out)]) == 0
    assert out.read_text() == exercise_text()
    assert cli.main(["exercise", "make", str(sol), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert cli.main(["exercise", "make", str(sol), "-o", str(out), "--force"]) == 0
    assert cli.main(["exercise", "make", str(sol), "-o", str(sol), "--force"]) == 2
    bad = tmp_path / "bad.shape"
    bad.write_text("dim B\ninput x: [B]\n")
    assert cli.main(["exercise", "make", str(bad)]) == 1


def test_gradescope_run_autograder_script(tmp_path):
    import os
    import subprocess
    import sys
    script = Path(__file__).resolve().parent.parent / "exercises" / "gradescope" / "run_autograder"
    src, sub = tmp_path / "source", tmp_path / "submission"
    src.mkdir()
    sub.mkdir()
    (src / "exercise.shape").write_text(exercise_text())
    (src / "solution.shape").write_text(SOLUTION)
    (sub / "exercise.shape").write_text(fill({**RIGHT, "axis": "2"}))
    results = tmp_path / "results" / "results.json"
    env = {**os.environ, "AUTOGRADER_SOURCE": str(src), "AUTOGRADER_SUBMISSION": str(sub),
           "AUTOGRADER_RESULTS": str(results), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(results.read_text())
    assert out["score"] == 5
    assert any(t["status"] == "failed" and t["name"].startswith("?axis") for t in out["tests"])


# ------------------------------------------------------------------ never a crash

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=400))
def test_any_text_gets_a_result(text):
    res = grader().grade_text(text)
    assert 0 <= res.score <= res.max_score
    assert len(res.blanks) == 4 and all(b.feedback for b in res.blanks if b.status != "correct")
    json.dumps(gradescope_json(res))


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mangled_submissions_get_a_result(data):
    text = fill(RIGHT)
    for _ in range(data.draw(st.integers(1, 4))):
        k = data.draw(st.integers(0, len(text)))
        if data.draw(st.booleans()):
            text = text[:k] + text[k + data.draw(st.integers(1, 30)):]
        else:
            text = text[:k] + data.draw(st.sampled_from(
                ["[", "]", "(", "->", "?", "#", "\n", "**16", ",", "-> ?x", '"', "\x00"])) + text[k:]
    res = grader().grade_text(text)
    assert 0 <= res.score <= res.max_score
    json.dumps(prairielearn_json(res))


def test_blanks_in_dim_lines_and_blocks_are_graded_by_whole_file_checks():
    sol = ("dim B, S, D, H\n# ?dh = D / H\ndim Dh = D / H\nassume D % H == 0\n"
           "example B=1, S=4, D=512, H=8\ninput X: [B, S, D]\n"
           "block Heads(x: [B, S, D]):\n"
           "  # ?split = view [B, S, H, Dh] -> transpose 1 2; 2 points\n"
           "  h: x -> view [B, S, H, Dh] -> transpose 1 2\n  return h\nend\n"
           "Qh: X -> Heads\nexpect Qh: [B, H, S, Dh]\n")
    ex, _ = make(sol, "s.shape")
    g = Grader(ex, sol)
    assert type(g.engine).__name__ == "FullEngine"

    def score(dh, split):
        res = g.grade_text(ex.replace("?dh", dh).replace("?split", split))
        return {b.name: b for b in res.blanks}

    right = score("D//H", "reshape [B, S, H, D/H] -> permute 0 2 1 3")
    assert right["dh"].status == right["split"].status == "correct"
    wrong = score("D", "view [B, H, S, Dh]")          # the right shape, the wrong numbers
    assert "not always the size" in wrong["dh"].feedback
    assert wrong["split"].status == "wrong" and "wrong places" in wrong["split"].feedback
