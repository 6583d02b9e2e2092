"""Grader feedback names the real mistake (the reproductions of "grader feedback that
names the wrong thing"), and credit is monotone.

Each reproduction grades a learner's file of the course in exercises/ (or, for
a width of `4*D` that no exercise of the course asks for, an exercise made
here with `shapelang exercise make`) through the Python API, and some through
the `shapelang grade` command. The last test makes many single-mistake
variants of every blank of every exercise and checks that the feedback names
the dim or factor that was changed, and that an answer right only at the
example sizes scores between the right answer and a wrong one.
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
from exercise_kit import grader
from shape_text import dims_of

from shapelang import cli
from shapelang.teaching.exercise import ExerciseError, make
from shapelang.teaching.grader import Grader, text_report

ROOT = Path(__file__).resolve().parent.parent / "exercises"
NAMES = sorted(p.stem for p in ROOT.glob("*.shape"))


def reference(name: str) -> dict:
    g = grader(name)
    return {n: a if a is not None else g._reference_text(g.tmpl.blanks[n]).strip("`").split(" = ")[0]
            for n, a in g.ref_answers.items()}


def submission(name: str, answers: dict) -> str:
    """The exercise file with every blank answered (the reference where `answers` is silent)."""
    filled = {**reference(name), **answers}
    code = []
    for line in (ROOT / f"{name}.shape").read_text().split("\n"):
        if line.lstrip().startswith("#"):
            code.append(line)
        else:
            code.append(re.sub(r"\?([A-Za-z0-9_]+)", lambda m: filled[m.group(1)], line))
    return "\n".join(code)


def graded(name: str, answers: dict, blank: str | None = None):
    res = grader(name).grade_text(submission(name, answers), "learner.shape")
    b = next(x for x in res.blanks if x.name == (blank or next(iter(answers))))
    return b, res


# an exercise that asks for a width of 4*D inside one statement, so the width shows only
# in a step that the result's shape hides
FFN = """\
dim B          # batch
dim S          # tokens
dim D          # model width
example B=1, S=4, D=768

input x: [B, S, D]
# ?wide = 4*D; 2 points; hint: the hidden layer is wider than the model
y: x -> linear 4*D -> gelu -> linear D
expect y: [B, S, D]
"""


@functools.cache
def ffn() -> tuple[str, Grader]:
    ex, _ = make(FFN, "ffn.shape")
    return ex, Grader(ex, FFN, "ffn.shape", "ffn.solution.shape")


def ffn_grade(answer: str):
    ex, g = ffn()
    res = g.grade_text(ex.replace("linear ?wide", f"linear {answer}"), "learner.shape")
    return res.blanks[0]


# ------------------------------------------------------------------ factors

def test_a_width_that_is_off_is_named_with_its_factor():
    b = ffn_grade("D")
    assert b.status == "wrong"
    assert "width, `D`, is 4 times too small: multiply by 4" in b.feedback, b.feedback
    assert "wrong places" not in b.feedback
    b = ffn_grade("3*D")
    assert "width, `3*D`, is 3/4 of the size needed: multiply by 4/3" in b.feedback, b.feedback
    b = ffn_grade("8*D")
    assert "2 times too big: divide by 2" in b.feedback, b.feedback
    # the course's feed-forward exercise: the result's shape shows the width
    b, _ = graded("10_feed_forward", {"up": "linear D"})
    assert "3 times too small: multiply by 3" in b.feedback


def test_a_view_that_is_off_by_a_factor_says_which_size_and_how():
    b, _ = graded("02_split_heads", {"split": "view [B, S, H, D]"})
    assert "the last size, `D`, is H times too big: divide by H" in b.feedback, b.feedback
    assert "elements cannot become" not in b.feedback
    b, _ = graded("02_split_heads", {"split": "view [B, S, H, D*H]"})
    assert "H**2 times too big: divide by H**2" in b.feedback, b.feedback
    b, _ = graded("02_split_heads", {"split": "view [B, S, 2*H, Dh]"})
    assert "size 2, `2*H`, is 2 times too big: divide by 2" in b.feedback, b.feedback


# ------------------------------------------------------------------ order and rank

def test_an_order_mistake_names_the_pair_of_axes_to_exchange():
    b, _ = graded("02_split_heads", {"swap": "transpose 2 3"})
    assert "your `transpose 2 3` exchanges `H` and `Dh`" in b.feedback, b.feedback
    assert "the dims that must change places are `S` and `H` (dims 1 and 2)" in b.feedback
    b, _ = graded("03_qk_scores", {"kt": "transpose 1 2"})
    assert "must change places are `S` and `Dh` (dims 2 and 3)" in b.feedback, b.feedback
    b, _ = graded("07_concat_heads", {"back": "permute 0 1 3 2"})
    assert "must change places are `H` and `S` (dims 1 and 2)" in b.feedback, b.feedback
    b, _ = graded("06_attention_values", {"heads": "[B, H, Dh, S]"})
    assert "`Dh` comes before `S`; dims 2 and 3 must change places" in b.feedback


def test_a_rank_mistake_names_the_missing_or_extra_dim():
    b, _ = graded("03_qk_scores", {"scores": "[B, H, S]"})
    assert "has 3 dims; `scores` has 4: `S`" in b.feedback and "missing at dim 3" in b.feedback
    b, _ = graded("03_qk_scores", {"scores": "[B, S, S]"})
    assert "`H` (heads) is missing at dim 1" in b.feedback, b.feedback
    b, _ = graded("05_softmax", {"rowsum": "[B, H, S]"})
    assert "a dim of size 1 is missing at dim 3 (the last)" in b.feedback
    b, _ = graded("05_softmax", {"total": "[B, H, S, 1]"})
    assert "dim 3 (the last) (`1`) is one too many" in b.feedback
    b, _ = graded("04_masking", {"pad4": "[B, S]"})
    assert "2 dims of size 1 are missing, at dims 1 and 2" in b.feedback, b.feedback
    b, _ = graded("07_concat_heads", {"merged": "[B, S, H, Dh]"})
    assert "dims 2 and 3 (`H`, `Dh`) must be one dim" in b.feedback, b.feedback


# ------------------------------------------------------------------ query and key lengths

def test_cross_attention_lengths_are_named_as_query_and_key_lengths():
    b, _ = graded("11_cross_attention", {"scores": "[B, H, St, St]"})
    assert "dim 3 (the last) wrong: it is `St`, the query length; here it must be `Sc`, " \
           "the key length" in b.feedback, b.feedback
    assert "the queries come from `target`, the keys come from `memory`" in b.feedback
    b, _ = graded("11_cross_attention", {"out": "[B, Sc, D]"})
    assert "`Sc`, the key length; here it must be `St`, the query length" in b.feedback
    b, _ = graded("11_cross_attention", {"src": "target"})
    assert "`view [B, Sc, H, Dh]` gets [B, St, D]" in b.feedback, b.feedback
    assert "the query length; here it must be `Sc`, the key length" in b.feedback
    b, _ = graded("11_cross_attention", {"ksplit": "view [B, St, H, Dh]"})
    assert "size 1 is `St`, the query length; here it must be `Sc`" in b.feedback, b.feedback


# ------------------------------------------------------------------ the exercise's own dims

@pytest.mark.parametrize("name, answers, meant", [
    ("02_split_heads", {"split": "view [B, S, H, d_k]"}, "did you mean `Dh` (width of one head (d_k))?"),
    ("02_split_heads", {"qh": "[B, H, S, d_k]"}, "did you mean `Dh`"),
    ("12_dk_dv", {"heads": "[H, N, d_v]"}, "did you mean `Dv`"),
    ("02_split_heads", {"qh": "[batch_size, H, S, Dh]"}, "did you mean `B`"),
])
def test_suggestions_use_the_exercises_owndims_of(name, answers, meant):
    b, _ = graded(name, answers)
    assert "declare it" not in b.feedback and "`dim " not in b.feedback, b.feedback
    assert "is not a dim of this exercise" in b.feedback and meant in b.feedback, b.feedback


# ------------------------------------------------------------------ numbers where dims belong

def test_numbers_inside_view_reshape_and_linear_get_the_partial_share():
    """exercises/README.md: an answer right only at the example sizes gets `@partial`."""
    readme = (ROOT / "README.md").read_text()
    assert "gets the `@partial` share" in " ".join(readme.split())
    assert "`view [B, S, H, 64]`" in readme
    for name, answers in [("02_split_heads", {"split": "view [B, S, H, 64]"}),
                          ("02_split_heads", {"split": "view [B, S, H, 512/8]"}),
                          ("02_split_heads", {"split": "reshape [1, 4, 8, 64]"}),
                          ("12_dk_dv", {"vsplit": "view [N, H, 80]"}),
                          ("07_concat_heads", {"merge": "reshape [B, S, 768]"}),
                          ("10_feed_forward", {"up": "linear 2304"})]:
        b, _ = graded(name, answers)
        assert b.status == "partial" and b.points == b.max_points / 2, (answers, b.feedback)
        assert "right only for those sizes" in b.feedback
    b = ffn_grade("3072")
    assert b.status == "partial" and "`3072` is right only for those sizes" in b.feedback
    # a number that is wrong even at the example sizes earns nothing
    for name, answers in [("02_split_heads", {"split": "view [B, S, H, 32]"}),
                          ("10_feed_forward", {"up": "linear 3072"})]:
        b, _ = graded(name, answers)
        assert b.status == "wrong" and b.points == 0, b.feedback


def test_scores_are_monotone_for_the_width():
    points = [ffn_grade(a).points for a in ("4*D", "3072", "3*D")]
    assert points == sorted(points, reverse=True) and points[0] > points[1] > points[2]


# ------------------------------------------------------------------ other spellings

@pytest.mark.parametrize("answer", ["D*H**-1", "H**-1*D", "D * H ** -1", "(D*H**-1)",
                                    "D*H**(-1)"])
def test_a_negative_power_is_exact_division(answer):
    for blank, text in (("split", f"view [B, S, H, {answer}]"), ("qh", f"[B, H, S, {answer}]")):
        b, _ = graded("02_split_heads", {blank: text})
        assert b.status == "correct" and b.points == b.max_points, b.feedback
        assert "not allowed" not in b.feedback and "`/` is exact division" in b.feedback


@pytest.mark.parametrize("answer, spelled", [("Dh**-0.5", "(1/sqrt(Dh))"),
                                             ("1/Dh**0.5", "1/sqrt(Dh)"),
                                             ("(D/H)**(-0.5)", "(1/sqrt(D/H))")])
def test_a_power_of_one_half_is_a_square_root(answer, spelled):
    b, _ = graded("03_qk_scores", {"factor": answer})
    assert b.status == "correct" and f"write it as `{spelled}`" in b.feedback, b.feedback
    wrong, _ = graded("03_qk_scores", {"factor": answer.replace("Dh", "D").replace("D/H", "D")})
    assert wrong.status == "wrong" and "scale factor" in wrong.feedback, wrong.feedback


def test_a_sum_as_an_argument_is_graded_like_the_sum_in_parentheses():
    plain, grouped = ffn_grade("2*D + 2*D"), ffn_grade("(2*D + 2*D)")
    assert plain.points == grouped.points == plain.max_points
    assert "write it as `linear (2*D + 2*D)`" in plain.feedback
    for answer in ("linear 2*D + 2*D", "linear D + D"):      # both wrong in exercise 10
        a, _ = graded("10_feed_forward", {"up": answer})
        b, _ = graded("10_feed_forward", {"up": f"linear ({answer[7:]})"})
        assert a.points == b.points == 0 and a.status == b.status == "wrong"
        assert b.feedback in a.feedback
    right, _ = graded("10_feed_forward", {"up": "linear 2*D + D"})
    assert right.status == "correct"


@pytest.mark.parametrize("name, old, new, spelled", [
    ("02_split_heads", "transpose 1 2", "transpose 1,2", "transpose 1 2"),
    ("02_split_heads", "transpose 1 2", "transpose 1, 2", "transpose 1 2"),
    ("05_softmax", "softmax -1", "softmax(dim=-1)", "softmax -1"),
    ("09_layernorm_stats", "mean -1 keepdim", "mean(dim=-1, keepdim=True)", "mean -1 keepdim"),
    ("02_split_heads", "Q -> view [B, S, H, Dh] -> transpose 1 2",
     "Q.view(B, S, H, Dh).transpose(1, 2)", "Q -> view [B, S, H, Dh] -> transpose 1 2"),
])
def test_pytorch_spellings_get_how_to_write_them(name, old, new, spelled):
    text = submission(name, {})
    assert old in text
    res = grader(name).grade_text(text.replace(old, new, 1), "learner.shape")
    changed = [b for b in res.blanks if b.feedback not in ("", "right")]
    assert changed, text_report(res)
    for b in changed:
        assert f"write it as `{spelled}`" in b.feedback, b.feedback
        assert "unexpected" not in b.feedback and "does not parse" not in b.feedback
    assert res.score == res.max_score and not res.findings
    assert f"write it as `{spelled}`" in text_report(res)


def test_a_pytorch_spelling_of_a_wrong_answer_is_still_wrong():
    text = submission("02_split_heads", {"swap": "transpose 2,3"})
    b = next(x for x in grader("02_split_heads").grade_text(text).blanks if x.name == "swap")
    assert b.status == "wrong" and "read as `transpose 2 3`" in b.feedback
    assert "exchanges `H` and `Dh`" in b.feedback


# ------------------------------------------------------------------ exercise 05's hint

def test_exercise_05_does_not_give_the_axis_away():
    text = (ROOT / "05_softmax.shape").read_text()
    g = grader("05_softmax")
    hint = g.tmpl.blanks["axis"].hint
    assert hint and not re.search(r"\blast\b", hint.lower())
    comments = " ".join(ln.comment or "" for ln in g.tmpl.lines).lower()
    assert "the last axis" not in comments and "last one" not in comments
    assert "-1" not in hint and "?axis" in text
    leaky = (ROOT / "solutions" / "05_softmax.shape").read_text().replace(
        "a row of weights runs over the key tokens", "the last one")
    with pytest.raises(ExerciseError, match="gives the answer away"):
        make(leaky, "05.shape")


# ------------------------------------------------------------------ through the command

def test_the_grade_command_gives_the_same_feedback(tmp_path, capsys):
    name = "02_split_heads"
    sub = tmp_path / "learner.shape"
    sub.write_text(submission(name, {"swap": "transpose 2 3", "split": "view [B, S, H, 64]",
                                     "qh": "[B, H, S, D*H**-1]"}))
    out = tmp_path / "results.json"
    status = cli.main(["grade", str(ROOT / f"{name}.shape"), str(sub), "--format", "json",
                       "-o", str(out)])
    assert status == 1
    blanks = {b["name"]: b for b in json.loads(out.read_text())["submissions"][0]["blanks"]}
    assert "must change places are `S` and `H`" in blanks["?swap"]["feedback"]
    assert blanks["?split"]["status"] == "partial" and blanks["?split"]["points"] == 1
    assert blanks["?qh"]["status"] == "correct" and "D/H" in blanks["?qh"]["feedback"]
    assert cli.main(["grade", str(ROOT / f"{name}.shape"), str(sub)]) == 1
    printed = capsys.readouterr().out
    assert "exchanges `H` and `Dh`" in printed and "write it as `[B, H, S, D/H]`" in printed


# ------------------------------------------------------------------ single-mistake variants



def _shape(dims: list[str]) -> str:
    return "[" + ", ".join(dims) + "]"


def _names(size: str) -> tuple:
    """The dims a size is written with: the feedback must name them."""
    return tuple(re.findall(r"[A-Za-z_]\w*", size))


def _example(name: str) -> dict:
    g = grader(name)
    p, env = g.judge.prover, g.judge.ref.example_env
    return {n: env[s] for n, s in p.user.items() if s in env}


def variants(name: str) -> list:
    """(blank, answer, kind, the words the feedback must hold) for single mistakes in the
    answers of `name` that are shapes, dims, or operations with a shape or a width."""
    out = []
    example = _example(name)
    for blank, ref in reference(name).items():
        dims = dims_of(ref)
        inner = re.fullmatch(r"(view|reshape) (\[.*\])", ref)
        if inner:
            dims, wrap = dims_of(inner.group(2)), inner.group(1) + " "
        else:
            wrap = ""
        if dims is None and re.fullmatch(r"[A-Za-z_]\w*", ref) and grader(name).tmpl.stmts[
                grader(name).tmpl.blanks[blank].stmt].kind in ("param", "input"):
            out.append((blank, f"2*{ref}", "factor", "2 times too big"))
            if ref in example:
                out.append((blank, str(example[ref]), "numbers", "right only for those sizes"))
            continue
        m = re.fullmatch(r"linear (.+)", ref)
        if m:
            out.append((blank, f"linear 2*({m.group(1)})", "factor",
                        ("2 times too big",) + _names(m.group(1))))
            continue
        if dims is None:
            continue
        for k in range(len(dims)):
            if dims[k] in ("1", "-1"):
                continue
            out.append((blank, wrap + _shape(dims[:k] + [f"2*{dims[k]}"] + dims[k + 1:]),
                        "factor", ("2 times too big",) + _names(dims[k])))
        if not wrap:
            for k in range(len(dims)):
                rest = dims[:k] + dims[k + 1:]
                if rest:
                    out.append((blank, _shape(rest), "missing",
                                "size 1" if dims[k] == "1" else f"`{dims[k]}`"))
            for k in range(len(dims) - 1):
                if dims[k] != dims[k + 1]:
                    swapped = dims[:k] + [dims[k + 1], dims[k]] + dims[k + 2:]
                    out.append((blank, _shape(swapped), "order",
                                (f"dims {k} and {k + 1}", f"`{dims[k]}`", f"`{dims[k + 1]}`")))
        if all(d in example or d == "1" for d in dims) and any(d in example for d in dims):
            nums = [str(example[d]) if d in example else d for d in dims]
            out.append((blank, wrap + _shape(nums), "numbers", "right only for those sizes"))
    return out


def test_the_variants_cover_the_course():
    kinds = {}
    for name in NAMES:
        for _, _, kind, _ in variants(name):
            kinds[kind] = kinds.get(kind, 0) + 1
    assert set(kinds) == {"factor", "missing", "order", "numbers"}
    assert sum(kinds.values()) >= 150, kinds


@pytest.mark.parametrize("name", NAMES)
def test_single_mistakes_are_named_and_credit_is_monotone(name):
    g = grader(name)
    right = {b.name: b.points for b in g.grade_text(submission(name, {})).blanks}
    for blank, answer, kind, words in variants(name):
        b, res = graded(name, {blank: answer}, blank)
        what = (name, blank, answer, b.feedback)
        for w in (words,) if isinstance(words, str) else words:
            assert w in b.feedback, (w, what)
        if kind == "numbers":
            assert b.status == "partial", what
            assert 0 < b.points < right[blank], what
        else:
            assert b.status == "wrong" and b.points == 0 < right[blank], what
        if kind == "missing":
            assert "missing" in b.feedback, what
        # a mistake in one blank costs only that blank
        assert res.score == res.max_score - (right[blank] - b.points), what


# ------------------------------------------------------------------ transcripts

TRANSCRIPTS = sorted((Path(__file__).resolve().parent / "grading").glob("*.shape"))


@pytest.mark.parametrize("sub", TRANSCRIPTS, ids=lambda p: p.stem)
def test_feedback_transcripts(sub, update_goldens):
    """One learner's file per message class (tests/grading/EXERCISE.CLASS.shape) and what
    `shapelang grade` says about it, beside it (EXERCISE.CLASS.grade.txt). Run
    `python -m pytest --update-goldens` to rewrite them, then review the diff."""
    name = sub.name.split(".")[0]
    res = grader(name).grade_text(sub.read_text(), f"tests/grading/{sub.name}")
    got = text_report(res)
    golden = sub.with_suffix(".grade.txt")
    if update_goldens or not golden.exists():
        golden.write_text(got)
        if not update_goldens:
            pytest.fail(f"{golden.name} did not exist; written, review and commit it")
    assert got == golden.read_text(), f"{golden.name} differs; rerun with --update-goldens"


def test_keyword_spelling_of_a_positional_argument_is_shapelang_and_gets_full_marks():
    # `softmax dim=-1` names softmax's axis by its PyTorch keyword: valid shapelang, no note
    text = submission("05_softmax", {})
    res = grader("05_softmax").grade_text(text.replace("softmax -1", "softmax dim=-1", 1), "learner.shape")
    assert res.score == res.max_score, text_report(res)
    res = grader("05_softmax").grade_text(text.replace("softmax -1", "softmax dim=-2", 1), "learner.shape")
    assert res.score < res.max_score, text_report(res)
