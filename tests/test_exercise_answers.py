"""Finding the answers in a submission: each statement is read by the parser and
the answer is the text under the node where the exercise has its blank, as the
learner wrote it (brackets included), wherever the statement's lines, comments
and spaces are. A statement that does not parse costs only its own blanks."""
from __future__ import annotations

from pathlib import Path

import pytest
from work import bounded

from shapelang.teaching.exercise import ExerciseError, extract, load_template

TEMPLATE = """\
dim B, D
input x: [B, D]
y: ?a -> softmax -1
z: x -> linear ?w
s: x -> scale 1/sqrt(?d)
m: ?m @ x
e: x -> ?op -> relu
expect y: ?shape
block F(h: [B, D]):
  g: h -> ?inner
  return ?ret
end
"""
RIGHT = {"a": "x", "w": "D", "d": "D", "m": "x", "op": "relu", "shape": "[B, D]",
         "inner": "relu", "ret": "g"}


def submission(**changes) -> str:
    text = TEMPLATE
    for name, answer in {**RIGHT, **changes}.items():
        text = text.replace(f"?{name}", answer)
    return text


def answers(text: str) -> dict:
    ex = extract(load_template(TEMPLATE), text)
    return {n: (a.text, a.status, a.line) for n, a in ex.answers.items()}


def test_every_blank_is_found_with_its_line():
    got = answers(submission())
    assert got == {"a": ("x", "given", 3), "w": ("D", "given", 4), "d": ("D", "given", 5),
                   "m": ("x", "given", 6), "op": ("relu", "given", 7),
                   "shape": ("[B, D]", "given", 8), "inner": ("relu", "given", 10),
                   "ret": ("g", "given", 11)}


def test_answers_keep_the_brackets_the_learner_wrote():
    got = answers(submission(a="(x) -> scale 2", w="(2*D + D) bias=true", d="(D)",
                             m="(x -> relu)"))
    assert got["a"][0] == "(x) -> scale 2"           # a blank at a pipeline's head takes steps
    assert got["w"][0] == "(2*D + D) bias=true"      # the last argument takes the rest
    assert got["d"][0] == "(D)"                      # not the brackets of `sqrt(...)`
    assert got["m"][0] == "(x -> relu)"
    assert answers(submission(d="D"))["d"][0] == "D"


def test_continuation_lines_comments_and_spacing_do_not_matter():
    text = submission().replace("e: x -> relu -> relu",
                                "e: x   # mine\n  -> transpose 0 1\n\n  -> relu   -> relu")
    text = text.replace("return g", "return g -> relu   # done")
    got = answers(text)
    assert got["op"] == ("transpose 0 1 -> relu", "given", 8)
    assert got["ret"] == ("g -> relu", "given", 14)
    assert got["shape"][2] == 11


def test_a_statement_that_does_not_parse_costs_only_its_blanks():
    got = answers(submission(op="view [B, D] 3=", shape="[B, D"))
    assert got["op"][:2] == ("view [B, D] 3=", "given")   # the judge says it does not parse
    assert got["shape"][:2] == ("[B, D", "given")
    assert all(got[n][1] == "given" for n in RIGHT)


def test_unfilled_emptied_changed_and_missing_blanks():
    text = submission(op="?op", w="").replace("s: x -> scale", "s: x -> relu -> scale")
    text = text.replace("m: x @ x\n", "")
    got = answers(text)
    assert got["op"][1] == "unfilled" and got["w"][1] == "empty"
    assert got["d"][1] == "changed" and got["m"][1] == "missing"


def test_editing_a_fixed_part_is_not_an_answer():
    got = answers(submission().replace("softmax -1", "softmax 0"))
    assert got["a"][1] == "changed"


def test_an_exercise_that_does_not_parse_is_the_authors_error():
    with pytest.raises(ExerciseError, match=r"<exercise>:2: unexpected"):
        load_template("dim B\ninput x: [?b\n")


@pytest.mark.parametrize("line, removed", [
    ("z: x -> linear {i} -> relu", "z: x -> linear D\n"),      # alike, each different
    ("z: x -> linear [{i}", "z: x -> linear D\n"),             # alike, none parses
    ("e: x -> relu -> relu -> scale {i}", "e: x -> relu -> relu\n"),
    ("expect y: [B, {i}]", "expect y: [B, D]\n"),
    ("m: " + "(" * 60 + "x{i}" + ")" * 60 + " @ x", "m: x @ x\n"),
    ("e: x -> " + " -> ".join(["relu"] * 300) + " -> scale {i}", "e: x -> relu -> relu\n"),
    ("expect y: [" + "-" * 900 + "B, {i}]", "expect y: [B, D]\n"),   # nesting without brackets
])
def test_hostile_submissions_are_read_quickly(line, removed):
    tmpl = load_template(TEMPLATE)
    text = submission().replace(removed, "")
    text += "".join(line.replace("{i}", str(i)) + "\n" for i in range(250_000 // len(line)))
    ex = bounded(lambda: extract(tmpl, text), 5_000_000)   # calls, not seconds (tests/work.py)
    assert ex.answers["ret"].text == "g" and ex.answers["a"].text == "x"


@pytest.mark.parametrize("answer, check_says", [
    ("[B, H, S, D]", "[B, H, S, D] = [1, 8, 4, 512]"),
    ("[B, H, S, D/3]", "[B, H, S, D/3] = [1, 8, 4, 170.7]"),
    ("[B, H, S, dh]", "did you mean `Dh`?"),
])
def test_grade_shows_shapes_and_suggests_names_as_check_does(answer, check_says):
    from shapelang.checker.checker import check_text
    from shapelang.teaching.grader import Grader

    root = Path(__file__).resolve().parent.parent / "exercises"
    exercise = (root / "02_split_heads.shape").read_text()
    solution = (root / "solutions" / "02_split_heads.shape").read_text()
    g = Grader(exercise, solution)
    answers = {n: a for n, a in g.ref_answers.items() if a is not None}
    answers["qh"] = answer
    text = exercise
    for name, a in answers.items():
        text = text.replace(f"?{name}", a)
    checked = " ".join(f"{d.message} {d.help}" for d in check_text(text).errors())
    feedback = next(b.feedback for b in g.grade_text(text).blanks if b.name == "qh")
    assert check_says in checked and check_says in feedback, (checked, feedback)
