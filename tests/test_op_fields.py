"""The op table's fields that lists elsewhere are derived from, each pinned against what it
means: PyTorch's own results where PyTorch can compute them, else what a learner sees (the
grader's feedback, the pictures, the checker's findings)."""
from __future__ import annotations

import pytest

from shapelang import api
from shapelang.checker.ops.table import TABLE

SQUARE = "dim B, S\nexample B=2, S=5\ninput x: [B, S, S]\n"


def _feedback(tmp_path, body: str, reference: str, answer: str) -> str:
    exercise, solution = tmp_path / "ex.shape", tmp_path / "sol.shape"
    exercise.write_text("# Exercise\n" + body + "# ?y: 2 points\ny: ?y\n")
    solution.write_text("# Exercise\n" + body + f"# ?y: 2 points\ny: {reference}\n")
    res = api.grader(str(exercise), str(solution)).grade_text(exercise.read_text().replace("?y", answer))
    assert not res.full_marks
    return res.blanks[0].feedback


@pytest.mark.parametrize("name", sorted(n for n, d in TABLE.items() if (d.reduces or d.normalises)
                                        and d.values[:1] == ("dim",)))
def test_a_reduction_or_softmax_along_the_wrong_axis_is_named_so(name, tmp_path):
    """Every operation the table says reduces or normalises along `dim` gets the advice about
    its axis, not only the four once written out (`std 1` for `std 2` on [B, S, S])."""
    msg = _feedback(tmp_path, SQUARE, f"x -> {name} 2", f"x -> {name} 1")
    assert f"`{name}` {'normalises' if TABLE[name].normalises else 'reduces'} over the wrong dim" in msg


@pytest.mark.parametrize("reference, answer", [("x -> var -1 correction=0", "x -> var -1"),
                                               ("x -> softmax -1 dtype=float32", "x -> softmax -1")])
def test_another_argument_is_not_called_the_wrong_axis(reference, answer, tmp_path):
    """The same axis with another correction or dtype: the axis is right, so the feedback
    does not send the learner to change it."""
    msg = _feedback(tmp_path, SQUARE, reference, answer)
    assert "wrong dim" not in msg and "different arguments" in msg, msg
