"""Axis provenance: the attention bugs that shapes alone miss, at the line of their cause,
with fixes that are proved before they are shown; and silence on the correct forms."""
from __future__ import annotations

from pathlib import Path

import pytest

from shapelang import check, render_check
from shapelang.checker.advice import fixes

ROOT = Path(__file__).resolve().parent.parent

HEAD = """dim B, S, D, H
assume D % H == 0
example B=1, S=4, D=512, H=8
dim Dh = D / H
input X: [B, S, D]
Q: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2
K: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2
V: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2
"""
LINE = HEAD.count("\n") + 1   # the first line after HEAD


def findings(text: str):
    return [(d.code, d.span.line) for d in check(text).diagnostics if d.code.startswith("W3")]


BUGS = {
    # the six reproductions of the issue, and variants of each
    "heads split from tokens": ("Qb: X -> linear D -> view [B, H, S, Dh]\n", "W301", 0),
    "heads split via reshape": ("Qb: X -> reshape [B, H, S, Dh]\n", "W301", 0),
    "merge without moving H back": ("a: Q @ (K -> transpose -2 -1) -> softmax -1\no: a @ V -> reshape [B, S, D]\n",
                                    "W302", 1),
    "merge after the wrong transpose": (("a: Q @ (K -> transpose -2 -1) -> softmax -1\n"
                                        "o: a @ V -> transpose 2 3 -> reshape [B, S, D]\n"), "W302", 1),
    "merge via flatten": (("a: Q @ (K -> transpose -2 -1) -> softmax -1\no: a @ V -> flatten 1\n"
                          "o2: o -> view [B, S, D]\n"), "W302", 2),
    # a softmax's axis is checked where its weights are used (here `@ V`, over the keys)
    "softmax over the queries": ("a: Q @ (K -> transpose -2 -1) -> softmax -2\no: a @ V\n", "W303", 0),
    "softmax over the heads": ("a: Q @ (K -> transpose -2 -1) -> softmax 1\no: a @ V\n", "W303", 0),
    "softmax over queries via einsum": (('a: einsum("bhqd,bhkd->bhqk", Q, K) -> softmax 2\n'
                                        'o: einsum("bhqk,bhkd->bhqd", a, V)\n'), "W303", 0),
    # statistics are checked where they normalise: a mean and a variance along different axes
    "mean over the tokens": ("mu: X -> mean 1 keepdim\nc: (X - mu) / (X -> var -1 keepdim -> sqrt)\n",
                             "W304", 0),
    "var over the tokens": ("v: X -> var 1 keepdim\nn: (X - (X -> mean -1 keepdim)) / (v -> sqrt)\n",
                            "W304", 0),
    "rms over the tokens": ("ms: X -> square -> mean 1 keepdim\nn: X * (ms + 1e-6 -> rsqrt)\n", "W304", 0),
    "layernorm after a transpose": ("n: X -> transpose 1 2 -> layernorm\n", "W304", 0),
    "causal mask on cross-attention": (("dim T\ninput Y: [B, T, D]\n"
                                       "Qy: Y -> linear D -> view [B, T, H, Dh] -> transpose 1 2\n"
                                       "a: Qy @ (K -> transpose -2 -1) -> mask causal -> softmax -1\n"),
                                       "W305", 3),
    "causal mask over cached keys": (("dim P\ninput Kc: [B, H, P + S, Dh]\n"
                                     "a: Q @ (Kc -> transpose -2 -1) -> mask causal -> softmax -1\n"), "W305", 2),
    "scale by the model width": ("a: Q @ (K -> transpose -2 -1) -> scale 1/sqrt(D) -> softmax -1\n",
                                 "W306", 0),
    "divide by the model width": ("a: Q @ (K -> transpose -2 -1) / sqrt(D)\n", "W306", 0),
    "scores added transposed": ("a: Q @ (K -> transpose -2 -1)\nb: a + (a -> transpose -2 -1)\n", "W307", 1),
    # the contracts of W309-W313, and a causal triangle that forgets the cached positions
    "convolution over the features": ("c: X -> linear D -> conv1d S 3 padding=1\n", "W309", 0),
    "positions counted by the batch": (("dim P = 64\nparam W_pos: [P, D]\np: arange(B) -> embed W_pos -> unsqueeze 1\n"
                                       "y: X + p\n"), "W311", 2),
    "scale after the softmax": ("a: Q @ (K -> transpose -2 -1) -> softmax -1 -> scale 1/sqrt(Dh)\no: a @ V\n",
                                "W312", 0),
    "a keep mask after the softmax": (("a: Q @ (K -> transpose -2 -1) -> softmax -1\n"
                                     "m: where((arange(S) -> unsqueeze 1) >= arange(S), a, -inf)\no: m @ V\n"),
                                     "W312", 1),
    "fill mask keeping the diagonal": ("a: Q @ (K -> transpose -2 -1) -> mask (ones([S, S]) -> tril -> bool)\n",
                                       "W313", 0),
    "causal triangle without the cache offset": (("dim P\ninput Kc: [B, H, P + S, Dh]\n"
                                                 "fut: (arange(P + S) -> unsqueeze 0) > (arange(S) -> unsqueeze 1)\n"
                                                 "a: Q @ (Kc -> transpose -2 -1) -> masked_fill fut -inf\n"), "W305", 3),
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_is_found_at_its_line(name):
    body, code, offset = BUGS[name]
    spec = check(HEAD + body)
    assert spec.ok, render_check(spec)          # the shapes are valid: only provenance sees it
    assert findings(HEAD + body) == [(code, LINE + offset)], render_check(spec)


CLEAN = {
    # the correct forms of the contract cases above
    "convolution over time": "c: X -> linear D -> transpose 1 2 -> conv1d D 3 padding=1 -> transpose 1 2\n",
    "positions counted by the tokens": "dim P = 64\nassume S <= P\nparam W_pos: [P, D]\np: arange(S) -> embed W_pos\n"
                                       "y: X + p\n",
    "fill mask hiding the future": "a: Q @ (K -> transpose -2 -1) -> mask (ones([S, S]) -> triu 1 -> bool) -> softmax -1\n"
                                   "o: a @ V\n",
    "causal triangle offset by the cache": "dim P = 3\ninput Kc: [B, H, P + S, Dh]\n"
                                           "fut: (arange(P + S) -> unsqueeze 0) > (arange(P, P + S) -> unsqueeze 1)\n"
                                           "a: Q @ (Kc -> transpose -2 -1) -> masked_fill fut -inf -> softmax -1\n",
    "view then transpose": "o: Q @ (K -> transpose -2 -1) -> scale 1/sqrt(Dh) -> softmax -1\n"
                           "y: o @ V -> transpose 1 2 -> reshape [B, S, D] -> linear D\nr: X + y\n",
    "transpose 2 1 and contiguous view": "a: Q @ (K -> transpose 3 2) -> softmax 3\n"
                                         "y: a @ V -> transpose 2 1 -> contiguous -> view [B, S, D]\n",
    "permute and flatten": "a: Q @ (K -> transpose -2 -1) -> softmax -1\n"
                           "y: a @ V -> permute 0 2 1 3 -> flatten 2\n",
    "reshape with -1": "a: Q @ (K -> transpose -2 -1) -> softmax -1\ny: a @ V -> transpose 1 2 -> reshape [B, S, -1]\n",
    "rearrange both ways": 'q: X -> rearrange "b s (h d) -> b h s d" h=H\n'
                           'k: X -> rearrange "b s (h d) -> b h s d" h=H\n'
                           'a: einsum("bhqd,bhkd->bhqk", q, k) -> softmax -1\n'
                           'y: einsum("bhqk,bhkd->bhqd", a, q) -> rearrange "b h s d -> b s (h d)"\n',
    "layernorm by hand": "mu: X -> mean -1 keepdim\nv: X -> var -1 keepdim\nn: (X - mu) / v\n",
    "causal self-attention": "a: Q @ (K -> transpose -2 -1) -> mask causal -> softmax -1\n",
    "pooling over tokens": "p: X -> mean 1\n",
}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_correct_forms_are_silent(name):
    spec = check(HEAD + CLEAN[name])
    assert spec.ok and not spec.diagnostics, render_check(spec)


def test_gqa_and_per_head_weights_are_silent():
    text = """dim B, S, H, G, Dh
assume H % G == 0
dim D = H * Dh
dim Nrep = H / G
input X: [B, S, D]
param Wk: [D, G*Dh]
param Wh: [H, D, Dh]
q: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2
k: X @ Wk -> view [B, S, G, Dh] -> transpose 1 2 -> repeat_interleave Nrep 1
k2: X @ Wk -> view [B, S, G, 1, Dh] -> expand [B, S, G, Nrep, Dh] -> reshape [B, S, H, Dh] -> transpose 1 2
a: q @ (k -> transpose -2 -1) -> softmax -1
a2: q @ (k2 -> transpose -2 -1) -> softmax -1
ph: einsum("bsd,hde->bhse", X, Wh)
a3: ph @ (ph -> transpose -2 -1) -> scale 1/sqrt(Dh) -> softmax -1
"""
    spec = check(text)
    assert spec.ok and not spec.diagnostics, render_check(spec)


def test_shipped_specs_have_no_findings():
    paths = sorted((ROOT / "specs").glob("**/*.shape")) + sorted((ROOT / "exercises" / "solutions").glob("*.shape"))
    assert len(paths) > 15
    for path in paths:
        spec = check(path.read_text(), str(path))
        assert not [d for d in spec.diagnostics if d.code.startswith("W3")], render_check(spec)


def test_trace_shows_where_each_axis_comes_from():
    from shapelang import render

    spec = check(HEAD + "a: Q @ (K -> transpose -2 -1) -> softmax -1\n")
    text = render.trace_text(spec, provenance=True)
    assert "axes from" in text and "[B, H, S, S (keys)]" in text
    steps = render.spec_json(spec, True)["bindings"][-1]["steps"]
    assert steps[-1]["axes"] == ["B", "H", "S", "S (keys)"]


# ------------------------------------------------------------ fixes are proved

REPAIRS = {
    "heads split from tokens": "Qb: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2",
    "merge without moving H back": "o: a @ V -> transpose 1 2 -> reshape [B, S, D]",
    "merge after the wrong transpose": "o: a @ V -> transpose 1 2 -> reshape [B, S, D]",
    "softmax over the queries": "a: Q @ (K -> transpose -2 -1) -> softmax -1",
    "mean over the tokens": "mu: X -> mean -1 keepdim",
    "scale by the model width": "a: Q @ (K -> transpose -2 -1) -> scale 1/sqrt(Dh) -> softmax -1",
}


@pytest.mark.parametrize("name", sorted(REPAIRS))
def test_the_fix_shown_is_the_right_line(name):
    body, code, _ = BUGS[name]
    d = next(d for d in check(HEAD + body).diagnostics if d.code == code)
    assert d.fix is not None and d.fix[2] == REPAIRS[name]
    assert f"write it as `{REPAIRS[name]}`" in d.help


@pytest.mark.parametrize("body,want", [
    # the two helps of the issue that led learners astray
    ("a: Q @ (K -> transpose 1 2)\n", "a: Q @ (K -> transpose -2 -1)"),
    ("Qb: X -> linear D -> transpose 1 2 -> view [B, H, S, Dh]\n",
     "Qb: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2"),
    # `->` binds looser than `@`
    ("a: Q @ K -> transpose -2 -1\n", "a: Q @ (K -> transpose -2 -1)"),
])
def test_error_helps_are_proved_rewrites(body, want):
    spec = check(HEAD + body)
    d = spec.errors()[0]
    assert d.fix is not None and d.fix[2] == want, render_check(spec)
    assert "reshape [B, H, S, Dh]" not in (d.help or "")


def _corpus():
    files = sorted((ROOT / "tests").glob("**/*.shape"))
    return [f for f in files if "golden" in f.parts or "provenance" in f.parts or "cases" in f.parts]


def test_every_fix_the_corpus_suggests_checks_clean():
    texts = [HEAD + body for body, _, _ in BUGS.values()] + [p.read_text() for p in _corpus()]
    applied = 0
    for text in texts:
        spec = check(text)
        for d in spec.diagnostics:
            if d.fix is None:
                continue
            new_source, _ = fixes.apply(text, d.fix[0], d.fix[1])
            again = check(new_source)
            assert not any(x.span.line == d.span.line for x in again.diagnostics), render_check(again)
            assert len(again.errors()) <= len([e for e in spec.errors() if e.span.line != d.span.line])
            applied += 1
    assert applied >= 10


def test_grade_and_check_name_the_same_mixed_values():
    from shapelang.teaching.exercise import make
    from shapelang.teaching.grader import Grader

    sol = HEAD + ("a: Q @ (K -> transpose -2 -1) -> scale 1/sqrt(Dh) -> softmax -1\n"
                  "# ?merge = transpose 1 2 -> reshape [B, S, D]; 2 points\n"
                  "o: a @ V -> transpose 1 2 -> reshape [B, S, D]\n")
    ex, _ = make(sol, "merge.shape")
    wrong = ex.replace("?merge", "contiguous -> reshape [B, S, D]")
    res = Grader(ex, sol).grade_text(wrong)
    blank = next(b for b in res.blanks if b.name == "merge")
    finding = next(d for d in check(wrong).diagnostics if d.code == "W302")
    assert blank.status == "wrong"
    assert finding.message in blank.feedback and "wrong places" in blank.feedback
    assert "transpose 1 2" not in blank.feedback     # the proved fix would give the answer away


def test_every_step_of_the_correct_specs_has_a_known_provenance():
    """Unknown provenance keeps the pass silent; on correct specs it must mean nothing was
    left out (an exception inside a rule would also show up here as unknown)."""
    paths = (sorted((ROOT / "specs").glob("**/*.shape")) + sorted((ROOT / "exercises" / "solutions").glob("*.shape"))
             + sorted((ROOT / "tests" / "provenance" / "clean").glob("*.shape")))
    unknown = []
    for path in paths:
        spec = check(path.read_text(), str(path))
        bindings = list(spec.bindings) + [b for insts in spec.blocks.values() for ir in insts for b in ir.bindings]
        unknown += [f"{path.name}:{s.span.line} {s.text}" for b in bindings for s in b.steps if s.provenance is None]
    assert not unknown, unknown[:10]
