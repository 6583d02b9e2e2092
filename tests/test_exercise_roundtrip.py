"""`exercise make` and `grade` agree: whatever a tag blanks, when `exercise make` accepts it,
grading the solution against the exercise it made gives full marks.

A property test tags the shipped solutions anew: one item of one statement, chosen among
every form a tag can take (a dim of a param's or an input's shape, a run of dims, a whole
shape, a number, an operation's argument, a keyword or its value, a call's argument, one
step or a run of steps of a pipeline), found from the parser's nodes. The reproductions of
the issue (`# ?table = V, D` over `param W_emb: [V, D]`, a call-form blank
`concat(?axis, ...)`) are tests of their own.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import tiers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapelang.syntax.nodes import Call, KwArg, Num, Op, Pipeline, ShapeLit, Span
from shapelang.syntax.parser import parse
from shapelang.teaching.exercise import ExerciseError, make
from shapelang.teaching.grader import Grader, text_report
from shapelang.teaching.template import _TAG, walk

ROOT = Path(__file__).resolve().parent.parent / "exercises" / "solutions"
SOLUTIONS = sorted(ROOT.glob("*.shape"))


def _untagged(text: str) -> str:
    """The solution without its own tags (their lines dropped, trailing tags cut off)."""
    out = []
    for line in text.split("\n"):
        i = line.find("#")
        if i >= 0 and _TAG.match(line[i:].strip()):
            if not line[:i].strip():
                continue
            line = line[:i].rstrip()
        out.append(line)
    return "\n".join(out)


def _text(lines: list[str], a: Span, b: Span) -> str | None:
    if a.line != b.end_line:
        return None
    return lines[a.line - 1][a.column - 1:b.end_column - 1]


def items(text: str) -> list:
    """(form, line, text) of every item a tag can blank, on one-line statements."""
    lines = text.split("\n")
    out = []
    for stmt in parse(text, "solution.shape").statements:
        if stmt.span.line != stmt.span.end_line or type(stmt).__name__ in ("Block", "DimDecl",
                                                                         "Assume", "Example"):
            continue
        kind = getattr(stmt, "kind", None) or type(stmt).__name__.lower()
        for n in walk([stmt]):
            found = []
            if isinstance(n, ShapeLit):
                found.append((f"{kind} shape", n.span, n.span))
                for k in range(len(n.dims)):
                    for j in range(k, len(n.dims)):
                        found.append((f"{kind} dims", n.dims[k].span, n.dims[j].span))
            elif isinstance(n, Num):
                found.append(("number", n.span, n.span))
            elif isinstance(n, Pipeline) and n.ops:
                for k in range(len(n.ops)):
                    for j in range(k, len(n.ops)):
                        found.append(("steps" if j > k else "step", n.ops[k].span, n.ops[j].span))
            elif isinstance(n, Op):
                for a in n.args:
                    found.append(("argument", a.span, a.span))
            elif isinstance(n, KwArg):
                found.append(("keyword", n.span, n.span))
                found.append(("keyword value", n.value.span, n.value.span))
            elif isinstance(n, Call):
                for a in n.args:
                    found.append(("call argument", a.span, a.span))
            for form, a, b in found:
                t = _text(lines, a, b)
                if t and t.strip() and "\n" not in t:
                    out.append((form, a.line, t.strip()))
    return sorted(set(out))


def tagged(text: str, line: int, answer: str) -> str:
    """`text` with the tag `# ?t = answer; occurrence 1` before `line`."""
    lines = text.split("\n")
    code = lines[line - 1]
    indent = code[:len(code) - len(code.lstrip())]
    return "\n".join(lines[:line - 1] + [f"{indent}# ?t = {answer}; occurrence 1; 2 points"]
                     + lines[line - 1:])


# a solution with keywords and calls, beside the course's
KEYWORDS = """\
dim B, C, D, P, G, S
assume D % G == 0
example B=2, C=3, D=64, P=4, G=8, S=16
input pixels: [B, C, P*G, P*G]
patches: pixels -> conv2d D P stride=P bias=false -> flatten 2 -> transpose 1 2
expect patches: [B, G*G, D]
tokens: patches -> linear D bias=false -> softmax -1 dtype=float32
pos: arange(S, dtype=float)
both: concat(1, patches, tokens)
expect both: [B, 2*G*G, D]
"""


def _texts() -> list:
    out = [(p.name, _untagged(p.read_text())) for p in SOLUTIONS]
    return out + [("keywords.shape", KEYWORDS)]


ITEMS = [(name, text, form, line, answer) for name, text in _texts()
         for form, line, answer in items(text)]


def test_the_items_cover_every_form_of_tag():
    forms = {form for _, _, form, _, _ in ITEMS}
    assert {"param shape", "param dims", "input shape", "input dims", "number", "argument",
            "keyword", "keyword value", "step", "steps", "expect shape", "expect dims",
            "binding shape"} <= forms, forms


def _round_trip(name: str, text: str, line: int, answer: str) -> str:
    """'refused' when `exercise make` refuses the tag, else 'graded' (and full marks)."""
    solution = tagged(text, line, answer)
    try:
        exercise, _ = make(solution, "solution.shape")
    except ExerciseError:
        return "refused"
    g = Grader(exercise, solution, "exercise.shape", "solution.shape")
    res = g.grade_text(solution, "solution.shape")
    assert res.score == res.max_score and not res.internal_error, \
        (answer, line, name, text_report(res))
    return "graded"


@settings(max_examples=tiers.examples(1000), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ITEMS))
def test_a_tag_that_exercise_make_accepts_grades_the_solution_full_marks(item):
    name, text, _form, line, answer = item
    _round_trip(name, text, line, answer)


@pytest.mark.parametrize("per_form", tiers.sweep(10**6, 1))
def test_every_form_of_item_is_made_into_a_blank_and_graded(per_form):
    # the property above is not vacuous: exercise make accepts every form of item (the first
    # `per_form` items of each form whose text occurs once in its line), and they grade
    taken, accepted = {}, {}
    for name, text, form, line, answer in ITEMS:
        code = text.split("\n")[line - 1]
        if taken.get(form, 0) >= per_form or code.count(answer) != 1:
            continue
        taken[form] = taken.get(form, 0) + 1
        if _round_trip(name, text, line, answer) == "graded":
            accepted[form] = accepted.get(form, 0) + 1
    assert set(accepted) == set(taken), (taken, accepted)


# ------------------------------------------------------------------ the reproductions

EMBED = """\
dim B, S, V, D
example B=2, S=4, V=100, D=16
input ids: [B, S] int
# ?table = V, D; 2 points
param W_emb: [V, D]
x: ids -> embed W_emb
y: x -> linear D
# ?axis = 1; hint: the axis of the features... the one after the tokens
z: concat(1, y, y)
"""


def test_a_run_of_dims_and_a_call_axis_round_trip():
    exercise, _ = make(EMBED, "emb.shape")
    assert "param W_emb: [?table]" in exercise and "concat(?axis, y, y)" in exercise
    g = Grader(exercise, EMBED, "emb.shape", "solutions/emb.shape")
    res = g.grade_text(EMBED)
    assert res.score == res.max_score == 3, text_report(res)
    wrong = g.grade_text(EMBED.replace("[V, D]", "[D, V]").replace("concat(1,", "concat(2,"))
    assert {b.name: b.points for b in wrong.blanks} == {"table": 0, "axis": 0}, text_report(wrong)
    wrong = g.grade_text(EMBED.replace("[V, D]", "[V, D, 1]"))
    assert next(b for b in wrong.blanks if b.name == "table").points == 0


def test_an_unfilled_call_form_blank_is_a_blank_for_check():
    from shapelang import check
    spec = check("dim B, D\ninput y: [B, D]\nz: concat(?axis, y, y)\n")
    assert [d.code for d in spec.diagnostics] == ["E116"]
    assert "?axis" in spec.diagnostics[0].message


def test_items_are_found_from_the_nodes():
    got = items("dim B, D\ninput x: [B, D]\ny: x -> linear 2*D bias=false -> softmax -1\n")
    assert ("input dims", 2, "B, D") in got and ("keyword", 3, "bias=false") in got
    assert ("steps", 3, "linear 2*D bias=false -> softmax -1") in got
