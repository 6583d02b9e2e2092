"""The course in exercises/: every exercise grades its solution at full marks,
typical wrong answers lower with feedback that names the mistake, and
differently written right answers at full marks.

A case fills some blanks (the others keep the reference answer) the way a
learner would write them in the exercise file.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from shapelang.teaching.exercise import _squash, make
from shapelang.teaching.grader import Grader, text_report

ROOT = Path(__file__).resolve().parent.parent / "exercises"
NAMES = sorted(p.stem for p in ROOT.glob("*.shape"))

# exercise -> (right answers, wrong answers as (answers, blank, words in the feedback))
CASES = {
    "01_embedding": (
        [{"rows": "V", "cols": "D"},
         {"tokens": "[B, S, 2*D/2]", "x": "[1*B, S, D]"},
         {"factor": "D/sqrt(D)"},
         {"factor": "sqrt(D)*1", "first": "select -2 0"},
         {"tokens": "[B,S,D]", "rows": "V*1"},
         {"x": "[B, S, D]   "}],
        [({"rows": "D", "cols": "V"}, "rows", "dim 0 wrong"),
         ({"tokens": "[B, S]"}, "tokens", "shape of `ids`"),
         ({"tokens": "[S, B, D]"}, "tokens", "`S` comes before `B`"),
         ({"factor": "1/sqrt(D)"}, "factor", "scale factor `1/sqrt(D)` is not right"),
         ({"x": "[S, D]"}, "x", "shape of `P`"),
         ({"first": "slice 1 0 1"}, "first", "has 3 dims"),
         ({"rows": "9735"}, "rows", "right only for those sizes")]),
    "02_split_heads": (
        [{"split": "view [B, S, H, D/H]", "swap": "transpose 2 1", "qh": "[B, H, S, D//H]"},
         {"split": "reshape [B, -1, H, Dh]", "swap": "permute 0 2 1 3"},
         {"swap": "transpose -3 -2", "split": "view [B, S, H, -1]"},
         {"swap": "transpose 1 2 -> contiguous"},
         {"qh": "[B, H, S, D/H]", "one": "[B, S, D/H]"},
         {"split": "view [B, S, H, D//H]", "one": "[B,S,Dh]"}],
        [({"split": "view [B, H, S, Dh]"}, "split", "after your `view [B, H, S, Dh]`"),
         ({"split": "view [B, S, Dh, H]"}, "split", "`Dh` comes before `H`"),
         ({"swap": "transpose 0 1"}, "swap", "must change places are `S` and `H`"),
         ({"qh": "[B, S, H, Dh]"}, "qh", "partway through line"),
         ({"qh": "[B, H, S, D]"}, "qh", "H times too big"),
         ({"qh": "[1, 8, 4, 64]"}, "qh", "right only for those sizes"),
         ({"one": "[B, H, S, Dh]"}, "one", "shape of `Qh`"),
         ({"split": "view [B, S, H, 64]"}, "split", "right only for those sizes"),
         ({"split": "view [B, S, H, D]"}, "split", "`D`, is H times too big: divide by H")]),
    "03_qk_scores": (
        [{"kt": "transpose 3 2", "factor": "1/sqrt(D/H)"},
         {"kt": "permute 0 1 3 2", "kt_shape": "[B, H, D/H, S]"},
         {"kt": "transpose -1 -2", "factor": "sqrt(Dh)/Dh"},
         {"kt": "transpose 2 3", "scores": "[B,H,S,S]"},
         {"factor": "1/sqrt(D//H)", "kt_shape": "[B, H, D//H, S]"}],
        [({"kt": "transpose 1 2"}, "kt", "must change places are `S` and `Dh`"),
         ({"kt_shape": "[B, H, S, Dh]"}, "kt_shape", "shape of `Kh`"),
         ({"factor": "1/sqrt(D)"}, "factor", "scale factor"),
         ({"factor": "1/Dh"}, "factor", "scale factor"),
         ({"scores": "[B, H, Dh, Dh]"}, "scores", "dims 2 and 3 wrong"),
         ({"scores": "[B, S, S]"}, "scores", "has 3 dims")]),
    "04_masking": (
        [{"grow": "view [B, 1, 1, S]"},
         {"grow": "unsqueeze 1 -> unsqueeze 1"},
         {"grow": "unsqueeze -2 -> unsqueeze 1"},
         {"grow": "reshape [B, 1, 1, -1]", "pad4": "[B,1,1,S]"},
         {"masked": "[B, H, S, S]", "causal": "mask  causal"}],
        [({"causal": "softmax -1"}, "causal", "`softmax` is not the operation"),
         ({"grow": "unsqueeze 1"}, "grow", "has 3 dims; `pad4` has 4"),
         ({"grow": "unsqueeze 1 -> unsqueeze 3"}, "grow", "wrong order"),
         ({"pad4": "[B, S]"}, "pad4", "shape of `pad`"),
         ({"pad4": "[B, 1, S, 1]"}, "pad4", "wrong order"),
         ({"masked": "[B, H, S]"}, "masked", "has 3 dims")]),
    "05_softmax": (
        [{"axis": "3"},
         {"weights": "[B,H,S,S]"},
         {"axis": "-1", "rowsum": "[B, H, S, 1]"},
         {"total": "[B, H, S]  "},
         {"axis": "3", "total": "[B,H,S]", "rowsum": "[B,H,S,1]"}],
        [({"axis": "2"}, "axis", "normalises over the wrong dim"),
         ({"axis": "-2"}, "axis", "normalises over the wrong dim"),
         ({"axis": "0"}, "axis", "normalises over the wrong dim"),
         ({"rowsum": "[B, H, S]"}, "rowsum", "has 3 dims"),
         ({"rowsum": "[B, H, 1, S]"}, "rowsum", "wrong order"),
         ({"total": "[B, H, S, 1]"}, "total", "has 4 dims")]),
    "06_attention_values": (
        [{"mix": "weights -> einsum \"bhqk,bhkd->bhqd\" Vh"},
         {"mix": "weights -> einsum \"abcd,abde->abce\" Vh"},
         {"mix": "Vh -> einsum \"bhkd,bhqk->bhqd\" weights"},
         {"mix": "weights @ (Vh -> contiguous)"},
         {"mix": "(weights) @ Vh", "heads": "[B,H,S,Dh]"},
         {"row": "[B, S]"}],
        [({"mix": "Vh @ weights"}, "mix", "cannot multiply"),
         ({"mix": "(weights -> transpose -2 -1) @ Vh"}, "mix", "wrong tensors"),
         ({"mix": "weights * Vh"}, "mix", "broadcast"),
         ({"heads": "[B, H, S, S]"}, "heads", "shape of `weights`"),
         ({"heads": "[B, H, Dh, S]"}, "heads", "wrong order"),
         ({"row": "[S]"}, "row", "has 1 dim")]),
    "07_concat_heads": (
        [{"back": "transpose 2 1", "merge": "reshape [B, S, H*Dh]"},
         {"back": "permute 0 2 1 3", "merge": "flatten 2"},
         {"merge": "reshape [B, S, -1]"},
         {"merge": "contiguous -> view [B, S, D]"},
         {"swapped": "[B, S, H, D/H]", "merged": "[B, S, H*Dh]"},
         {"back": "transpose -3 -2"}],
        [({"back": "transpose 2 3"}, "back", "must change places are `H` and `S`"),
         ({"back": "contiguous"}, "back", "shape of `heads`"),
         ({"merge": "view [B, S, D]"}, "merge", "without copying"),
         ({"merge": "reshape [B, D, S]"}, "merge", "`D` comes before `S`"),
         ({"swapped": "[B, H, S, Dh]"}, "swapped", "shape of `heads`"),
         ({"merged": "[B, S, H, Dh]"}, "merged", "shape of `swapped`")]),
    "08_output_projection": (
        [{"w_in": "D", "w_out": "D", "bias": "D*1"},
         {"proj": "linear 2*D/2"},
         {"out": "[B,S,D]"},
         {"proj": "linear D bias=true"},
         {"bias": "2*D - D", "out": "[B, S, D]"}],
        [({"w_in": "S"}, "w_in", "dim 0 wrong"),
         ({"w_out": "D*2"}, "w_out", "2 times too big"),
         ({"bias": "S"}, "bias", "dim 0 wrong"),
         ({"proj": "linear S"}, "proj", "dim 2 (the last) wrong"),
         ({"proj": "linear D bias=false"}, "proj", "different arguments"),
         ({"out": "[B, D]"}, "out", "has 2 dims")]),
    "09_layernorm_stats": (
        [{"mean": "mean 2 keepdim"},
         {"mean": "mean -1 keepdim=true"},
         {"var": "var 2 keepdim"},
         {"mu": "[B,S,1]", "gamma": "D*1"},
         {"y2": "[B, S, D]", "var": "var -1 keepdim=true"}],
        [({"mean": "mean -1"}, "mean", "has 2 dims"),
         ({"mean": "mean 1 keepdim"}, "mean", "runs along dim 1 (`S`); here it must run along dim 2 (`D`)"),
         ({"mean": "sum -1 keepdim"}, "mean", "`sum` is not the operation"),
         ({"var": "mean -1 keepdim"}, "var", "`mean` is not the operation"),
         ({"mu": "[B, S]"}, "mu", "has 2 dims"),
         ({"gamma": "S"}, "gamma", "dim 0 wrong")]),
    "10_feed_forward": (
        [{"up": "linear 3*D"},
         {"up": "linear D*3", "h": "[B, S, 3*D]"},
         {"up": "linear (2*D + D)"},
         {"down": "linear F/3"},
         {"h": "[B,S,D*3]", "y": "[B, S, F/3]"}],
        [({"up": "linear D"}, "up", "3 times too small: multiply by 3"),
         ({"up": "linear 4*D"}, "up", "4/3 of the size needed"),
         ({"down": "linear F"}, "down", "3 times too big: divide by 3"),
         ({"h": "[B, S, D]"}, "h", "shape of `x`"),
         ({"y": "[B, S, F]"}, "y", "shape of `h`"),
         ({"up": "linear 2304"}, "up", "right only for those sizes")]),
    "11_cross_attention": (
        [{"ksplit": "view [B, Sc, H, D/H]", "vsplit": "reshape [B, Sc, H, Dh]"},
         {"ksplit": "view [B, -1, H, Dh]"},
         {"out": "[B, St, H*Dh]"},
         {"scores": "[B,H,St,Sc]", "heads": "[B, H, St, D/H]"},
         {"vsplit": "view [B, Sc, H, -1]", "src": "memory"}],
        [({"src": "target"}, "src", "`St`, the query length; here it must be `Sc`, the key length"),
         ({"ksplit": "view [B, St, H, Dh]"}, "ksplit", "here it must be `Sc`, the key length"),
         ({"scores": "[B, H, Sc, St]"}, "scores", "`Sc` comes before `St`"),
         ({"scores": "[B, H, St, St]"}, "scores", "dim 3 (the last) wrong"),
         ({"heads": "[B, H, Sc, Dh]"}, "heads", "shape of `v`"),
         ({"out": "[B, Sc, D]"}, "out", "dim 1 wrong")]),
    "12_dk_dv": (
        [{"wv": "Dv*H", "wo": "Dv*H"},
         {"vsplit": "view [N, H, -1]"},
         {"vsplit": "reshape [N, H, Dv]"},
         {"heads": "[H,N,Dv]"},
         {"scores": "[H, N, N]", "wv": "H * Dv"}],
        [({"wv": "H*Dk"}, "wv", "dim 1 (the last) wrong"),
         ({"wv": "D"}, "wv", "dim 1 (the last) wrong"),
         ({"vsplit": "view [N, H, Dk]"}, "vsplit", "the last size, `Dk`"),
         ({"scores": "[H, N, Dk]"}, "scores", "shape of `Kh`"),
         ({"heads": "[H, N, Dk]"}, "heads", "dim 2 (the last) wrong"),
         ({"wo": "D"}, "wo", "dim 0 wrong")]),
    "13_attention_all_shapes": (
        [{"Qh": "[B, H, S, D/H]", "Kh": "[B, H, S, D//H]"},
         {"scores": "[B,H,S,S]", "weights": "[B, H, S, S]"},
         {"q": "[B, S, 3*D/3]"},
         {"merged": "[B, S, H*Dh]", "heads": "[B, H, S, D/H]"},
         {"normed": "[B, S, D]"}],
        [({"q": "[B, S, 3*D]"}, "q", "before `chunk 3 -1`"),
         ({"Qh": "[B, S, H, Dh]"}, "Qh", "partway through line"),
         ({"scores": "[B, H, S, Dh]"}, "scores", "which `scores` is computed from"),
         ({"heads": "[B, H, S, S]"}, "heads", "shape of `weights`"),
         ({"merged": "[B, S, H, Dh]"}, "merged", "before `reshape [B, S, D]`"),
         ({"out": "[1, 4, 512]"}, "out", "right only for those sizes")]),
}


def test_every_exercise_has_cases():
    assert len(NAMES) >= 12
    assert sorted(CASES) == NAMES
    for name, (right, wrong) in CASES.items():
        assert len(right) >= 5 and len(wrong) >= 5, name


@functools.cache
def grader(name: str, engine: str | None = None) -> Grader:
    return Grader((ROOT / f"{name}.shape").read_text(),
                  (ROOT / "solutions" / f"{name}.shape").read_text(),
                  f"{name}.shape", f"solutions/{name}.shape", engine=engine)


def submission(name: str, answers: dict) -> str:
    g = grader(name)
    filled = {**{n: a for n, a in g.ref_answers.items() if a is not None}, **answers}
    text = (ROOT / f"{name}.shape").read_text()
    for n in g.tmpl.blanks:
        if n not in filled:       # an `expect X: ?` without reference text: use the shape
            filled[n] = g._reference_text(g.tmpl.blanks[n]).strip("`").split(" = ")[0]
    return re.sub(r"\?([A-Za-z0-9_]+)", lambda m: filled.get(m.group(1), m.group(0)), text)


@pytest.mark.parametrize("name", NAMES)
def test_exercise_is_made_from_its_solution(name):
    """The committed exercise is exactly what `exercise make` produces, and gives no answer away."""
    solution = (ROOT / "solutions" / f"{name}.shape").read_text()
    made, _ = make(solution, f"solutions/{name}.shape", all_shapes="all_shapes" in name)
    assert made == (ROOT / f"{name}.shape").read_text()
    g = grader(name)
    comments = _squash(" ".join(ln.comment or "" for ln in g.tmpl.lines))
    for blank, answer in g.ref_answers.items():
        hint = g.tmpl.blanks[blank].hint or ""
        if answer and len(_squash(answer)) >= 3:
            assert _squash(answer) not in comments, (blank, answer)
            assert _squash(answer) not in _squash(hint)


@pytest.mark.parametrize("name", NAMES)
def test_solution_gets_full_marks(name):
    g = grader(name)
    res = g.grade_text((ROOT / "solutions" / f"{name}.shape").read_text(), "solution")
    if "all_shapes" in name:       # its solution has the expect lines, so it is a full answer
        assert res.score == res.max_score
    assert res.score == res.max_score, text_report(res)
    assert not res.findings


@pytest.mark.parametrize("name", NAMES)
def test_right_answers_get_full_marks(name):
    g = grader(name)
    for answers in CASES[name][0]:
        res = g.grade_text(submission(name, answers), "right")
        assert res.score == res.max_score, (answers, text_report(res))
        assert not res.findings, answers


@pytest.mark.parametrize("name", NAMES)
def test_wrong_answers_lose_points_and_are_explained(name):
    g = grader(name)
    for answers, blank, words in CASES[name][1]:
        res = g.grade_text(submission(name, answers), "wrong")
        b = next(x for x in res.blanks if x.name == blank)
        assert res.score < res.max_score, answers
        assert b.status in ("wrong", "partial"), (answers, text_report(res))
        assert b.points < b.max_points
        assert words in b.feedback, (answers, b.feedback)
        ref = g.ref_answers.get(blank)
        visible = _squash(" ".join(st.code for st in g.tmpl.stmts))
        if ref and len(_squash(ref)) >= 3 and _squash(ref) not in _squash(answers[blank]) \
                and _squash(ref) not in visible:
            assert _squash(ref) not in _squash(b.feedback), (answers, b.feedback)
        others = [x for x in res.blanks if x.name not in answers]
        assert all(x.status == "correct" for x in others), text_report(res)


@pytest.mark.parametrize("name", ["02_split_heads", "07_concat_heads", "11_cross_attention"])
def test_fast_and_whole_file_engines_agree(name):
    fast, full = grader(name), grader(name, "full")
    assert type(full.engine).__name__ == "FullEngine"
    for answers in CASES[name][0] + [a for a, _, _ in CASES[name][1]]:
        text = submission(name, answers)
        a, b = fast.grade_text(text), full.grade_text(text)
        assert [(x.name, x.points) for x in a.blanks] == [(x.name, x.points) for x in b.blanks], \
            (answers, text_report(a), text_report(b))
