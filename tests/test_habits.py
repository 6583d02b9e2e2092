"""Python habits answered: a line written the PyTorch way gets a message naming the habit,
the shapelang spelling, and the whole line rewritten once the rewrite is proved.

Each case is a transcript: the line as a learner wrote it, and what `check` answers.
The first six are the reproductions of issue 11 ("Python habits get bare parse errors").
"""
from __future__ import annotations

import pytest
from work import bounded

from shapelang import check, render_check

HEAD = """dim B, S, H, Dh
dim D = H * Dh
example B=2, S=5, H=4, Dh=8
input X: [B, S, D]
input Q: [B, H, S, Dh]
input K: [B, H, S, Dh]
input mask: [B, 1, 1, S] bool
input A: [B, S, D]
"""


def only(spec_text: str, code: str = "E001"):
    spec = check(spec_text, "habit.shape")
    found = [d for d in spec.diagnostics if d.severity == "error"]
    assert [d.code for d in found] == [code], render_check(spec)
    return found[0], render_check(spec)


CASES = [
    # (line as written, the habit named, its shapelang spelling, the proved line)
    ("scores: Q @ K.T", "K.T", "K -> transpose -2 -1", "scores: Q @ (K -> transpose -2 -1)"),
    ("y: X.transpose(1, 2)", "X.transpose(1, 2)", "X -> transpose 1 2", "y: X -> transpose 1 2"),
    ("w: Q @ (K -> transpose -2 -1) -> softmax(dim=-1)", "softmax(dim=-1)", "softmax -1",
     "w: Q @ (K -> transpose -2 -1) -> softmax -1"),
    ("y: X -> transpose 1, 2", "transpose 1, 2", "transpose 1 2", "y: X -> transpose 1 2"),
    ("scores: torch.matmul(Q, K.transpose(-2, -1))", "torch.matmul(Q, K.transpose(-2, -1))",
     "Q @ (K -> transpose -2 -1)", "scores: Q @ (K -> transpose -2 -1)"),
    # other instances of the same habits
    ("h: X.view(B, S, H, Dh).transpose(1, 2)", "X.view(B, S, H, Dh).transpose(1, 2)",
     "X -> view [B, S, H, Dh] -> transpose 1 2", "h: X -> view [B, S, H, Dh] -> transpose 1 2"),
    ("m: Q.transpose(1, 2).reshape(B, S, -1)", "Q.transpose(1, 2).reshape(B, S, -1)",
     "Q -> transpose 1 2 -> reshape [B, S, -1]", "m: Q -> transpose 1 2 -> reshape [B, S, -1]"),
    ("w: F.softmax(Q @ K.mT, dim=-1)", "F.softmax(Q @ K.mT, dim=-1)",
     "Q @ (K -> transpose -2 -1) -> softmax -1", "w: Q @ (K -> transpose -2 -1) -> softmax -1"),
    ("w: (Q @ K.transpose(-2, -1)).softmax(-1)", "K.transpose(-2, -1)", "K -> transpose -2 -1",
     "w: Q @ (K -> transpose -2 -1) -> softmax -1"),
    ("mu: X.mean(dim=-1, keepdim=True)", "X.mean(dim=-1, keepdim=True)", "X -> mean -1 keepdim",
     "mu: X -> mean -1 keepdim"),
    ("mu: X -> mean(-1, keepdim=True)", "mean(-1, keepdim=True)", "mean -1 keepdim",
     "mu: X -> mean -1 keepdim"),
    ("p: Q.permute(0, 2, 1, 3).contiguous()", "Q.permute(0, 2, 1, 3).contiguous()",
     "Q -> permute 0 2 1 3 -> contiguous", "p: Q -> permute 0 2 1 3 -> contiguous"),
    ("c: torch.cat([X, A], dim=-1)", "torch.cat([X, A], dim=-1)", "concat(-1, X, A)",
     "c: concat(-1, X, A)"),
    ("s: Q @ K.transpose(-2, -1) -> scale 1/math.sqrt(Dh)", "K.transpose(-2, -1)",
     "K -> transpose -2 -1", "s: Q @ (K -> transpose -2 -1) -> scale 1/sqrt(Dh)"),
    ("s: (Q @ (K -> transpose -2 -1)).masked_fill(mask, float('-inf'))",
     "(Q @ (K -> transpose -2 -1)).masked_fill(mask, float('-inf'))",
     "Q @ (K -> transpose -2 -1) -> mask mask", "s: Q @ (K -> transpose -2 -1) -> mask mask"),
    # indexing: `None`, an integer, `a:b`, `...`
    ("s: Q @ (K -> transpose -2 -1)[..., :S]", "(K -> transpose -2 -1)[..., :S]",
     "K -> transpose -2 -1 -> slice -1 0 S", "s: Q @ (K -> transpose -2 -1 -> slice -1 0 S)"),
    ("last: X[:, -1]", "X[:, -1]", "X -> select 1 -1", "last: X -> select 1 -1"),
    ("m: mask[:, 0, 0]", "mask[:, 0, 0]", "mask -> select 1 0 -> select 1 0",
     "m: mask -> select 1 0 -> select 1 0"),
    ("y: X[:, None, :, :Dh]", "X[:, None, :, :Dh]", "X -> unsqueeze 1 -> slice 3 0 Dh",
     "y: X -> unsqueeze 1 -> slice 3 0 Dh"),
    ("y: Q[:, 0, ..., -1]", "Q[:, 0, ..., -1]", "Q -> select 1 0 -> select -1 -1",
     "y: Q -> select 1 0 -> select -1 -1"),
    ("y: Q[..., None, :Dh]", "Q[..., None, :Dh]", "Q -> slice -1 0 Dh -> unsqueeze -2",
     "y: Q -> slice -1 0 Dh -> unsqueeze -2"),
    ("y: X + X[:, :1]", "X[:, :1]", "X -> slice 1 0 1", "y: X + (X -> slice 1 0 1)"),
    # a module where its operation goes
    ("Y: X -> nn.Linear(D, 4*D, bias=False)", "nn.Linear(D, 4*D, bias=False)", "linear 4*D bias=false",
     "Y: X -> linear 4*D bias=false"),
    ("N: nn.LayerNorm(D, eps=1e-6)(X)", "nn.LayerNorm(D, eps=1e-6)(X)", "X -> layernorm eps=1e-6",
     "N: X -> layernorm eps=1e-6"),
    ("W: X -> torch.nn.Softmax(dim=-1)", "torch.nn.Softmax(dim=-1)", "softmax -1", "W: X -> softmax -1"),
    ('G: X -> nn.GELU(approximate="tanh") -> nn.Dropout()', 'nn.GELU(approximate="tanh")',
     'gelu approximate="tanh"', 'G: X -> gelu approximate="tanh" -> dropout 0.5'),
    ("y: X -> nn.Linear(D)", None, None, None),                  # no out-features: no guess
    ("y: X -> nn.MultiheadAttention(D, H)", None, None, None),   # not one operation
    ("y: X[:, S - 1]", None, None, None),       # an index that is not a number: a tensor?
    ("y: X[:, [-1]]", None, None, None),        # a list: advanced indexing
    ("y: X[:, ::2]", None, None, None),         # a step
    ("y: X[:, 1:]", None, None, None),          # an open end: the axis' size is not known here
    ("g: F.gelu(X @ torch.ones(D, D))", None, None, None),
    ("y: X -> transpose(1, 2) -> softmax(dim=-1)  # keep this comment", "softmax(dim=-1)",
     "softmax -1", "y: X -> transpose(1, 2) -> softmax -1"),
]


@pytest.mark.parametrize("line, habit, spelling, rewritten", CASES, ids=[c[0] for c in CASES])
def test_pytorch_spellings_get_the_shapelang_line(line, habit, spelling, rewritten):
    d, text = only(HEAD + line + "\n")
    if habit is None:   # not recognised: the parser's own message stays, nothing is made up
        assert "PyTorch" not in d.message and d.fix is None, text
        return
    assert d.message == f"`{habit}` is PyTorch syntax, not shapelang", text
    assert d.help.startswith(f"in shapelang this is `{spelling}`"), text
    assert d.fix is not None and d.fix[2] == rewritten, text
    assert f"write it as `{rewritten}`" in text
    # the caret is under the habit, and the rewritten line checks clean
    lines = (HEAD + line).split("\n")
    assert lines[d.span.line - 1][d.span.column - 1:d.span.end_column - 1] == habit
    fixed = check(HEAD + rewritten + "\n")
    assert fixed.ok and not fixed.diagnostics, render_check(fixed)


def test_a_continuation_line_and_a_block_return_are_rewritten_in_place():
    text = HEAD + "w: Q @ (K -> transpose -2 -1)\n  -> softmax(dim=-1)\n" \
        "block Norm(x: [B, S, D]):\n  return x.transpose(1, 2)\nend\nn: X -> Norm\n"
    spec = check(text)
    fixes = sorted(d.fix[2] for d in spec.diagnostics if d.code == "E001")
    assert fixes == ["-> softmax -1", "return x -> transpose 1 2"], render_check(spec)


def test_the_spelling_is_named_but_no_line_is_proposed_when_the_line_would_not_check():
    # Q @ K without the transpose: the translation is right, the rewritten line is an E101
    d, text = only(HEAD + "s: torch.matmul(Q, K)\n")
    assert d.help == "in shapelang this is `Q @ K`" and d.fix is None, text
    assert "write it as" not in text


MODULES = [   # the learner's module, and the same built by PyTorch at HEAD's example sizes
    ("Y: X -> nn.Linear(D, 4*D, bias=False)", lambda nn: nn.Linear(32, 128, bias=False)),
    ("N: nn.LayerNorm(D, eps=1e-6)(X)", lambda nn: nn.LayerNorm(32, eps=1e-6)),
    ('G: X -> nn.GELU(approximate="tanh") -> nn.Dropout()', lambda nn: nn.GELU(approximate="tanh")),
    ("C: X -> transpose 1 2 -> nn.Conv1d(D, 2*D, 3, padding=1)",
     lambda nn: nn.Sequential(nn.Identity(), nn.Conv1d(32, 64, 3, padding=1))),
]


@pytest.mark.parametrize("line, build", MODULES, ids=[m[0] for m in MODULES])
def test_modules_become_operations_with_pytorchs_shapes_and_parameters(line, build):
    torch = pytest.importorskip("torch")
    d, text = only(HEAD + line + "\n")
    assert d.fix is not None, text
    fixed = check(HEAD + d.fix[2] + "\n")
    assert fixed.ok, render_check(fixed)
    module = build(torch.nn)
    x = torch.randn(2, 5, 32)
    if "transpose" in line:
        x = x.transpose(1, 2)
    got = fixed.bindings[-1].steps[-1].out.shape
    assert [fixed.example_value(n) for n in got] == list(module(x).shape), text
    assert fixed.example_value(fixed.total_params) == sum(p.numel() for p in module.parameters())


def test_python_assignment_is_a_binding_with_a_colon():
    text = HEAD + "P = X -> linear D\nT = X.transpose(1, 2)\nblock F(x: [B, S, D]):\n  y = x -> relu\n" \
        "  return y\nend\n"
    spec = check(text)
    found = [d for d in spec.diagnostics if d.code == "E001"]
    assert [d.message for d in found] == ["a binding is written `P: ...`, not `P = ...`",
                                          "a binding is written `T: ...`, not `T = ...`",
                                          "a binding is written `y: ...`, not `y = ...`"], render_check(spec)
    assert [d.fix[2] for d in found] == ["P: X -> linear D", "T: X -> transpose 1 2", "y: x -> relu"]
    fixed = text.replace("P =", "P:").replace("T = X.transpose(1, 2)", "T: X -> transpose 1 2") \
        .replace("y =", "y:")
    assert check(fixed).ok
    # `==` and keywords are not assignments
    assert "binding is written" not in render_check(check(HEAD + "assume D == 4*H\ny: X -> layernorm eps = 1e-5\n"))


def test_an_index_past_what_the_sizes_allow_is_spelled_but_not_proposed():
    # `[..., :4]` keeps 4 positions of an axis of S; S = 3 is allowed, where PyTorch would
    # quietly keep 3 and shapelang's slice refuses: the spelling, and no line to copy
    d, text = only(HEAD + "s: Q @ (K -> transpose -2 -1)[..., :4]\n")
    assert d.help == "in shapelang this is `K -> transpose -2 -1 -> slice -1 0 4`", text
    assert d.fix is None and "write it as" not in text
    assert "`x[:, None]` is `x -> unsqueeze 1`" in text


def test_a_translation_that_is_not_shapelang_is_not_shown():
    d, text = only(HEAD + "y: X.frobnicate(1)\n")
    assert "PyTorch" not in d.message and d.help is None or "frobnicate" not in (d.help or ""), text


STAR = HEAD + "kt: K -> transpose -2 -1\n"


def test_an_elementwise_product_that_only_a_matmul_fits_asks_for_at():
    d, text = only(STAR + "scores: Q * kt -> softmax -1\n", "E102")
    assert d.help.startswith("did you mean `@`?"), text
    assert d.fix[2] == "scores: Q @ kt -> softmax -1"


@pytest.mark.parametrize("line", ["scores: X + Q * kt", "scores: Q * (Q -> transpose 1 2)",
                                  "scores: Q / kt"])
def test_no_at_where_at_would_not_check_either(line):
    d, text = only(STAR + line + "\n", "E102")
    assert "did you mean" not in text and d.fix is None, text


def test_a_correct_elementwise_product_is_left_alone():
    spec = check(HEAD + "g: X * A\n")
    assert spec.ok and not spec.diagnostics


def test_habits_agree_with_pytorch_on_the_shape():
    """The rewritten line has the shape PyTorch gives the learner's expression."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    sizes = {"B": 2, "S": 5, "H": 4, "Dh": 8, "D": 32}
    env = {"torch": torch, "F": F, "nn": torch.nn, "math": __import__("math"), **sizes,
           "X": torch.randn(2, 5, 32), "A": torch.randn(2, 5, 32),
           "Q": torch.randn(2, 4, 5, 8), "K": torch.randn(2, 4, 5, 8),
           "mask": torch.ones(2, 1, 1, 5, dtype=torch.bool)}
    for line, habit, _, rewritten in CASES:
        if rewritten is None or "->" in line.split(":", 1)[1]:
            continue
        _name, expr = line.split(":", 1)
        # `.T` of a 4-d tensor reverses all its axes in PyTorch (deprecated); `.mT` is what a
        # learner means in `Q @ K.T`, and what the habit is translated to
        expr = expr.replace(".T", ".mT")
        want = list(eval(expr, env).shape)   # the test's own PyTorch expressions
        spec = check(HEAD + rewritten + "\n")
        got = spec.bindings[-1].steps[-1].out.shape
        assert [spec.example_value(x) for x in got] == want, line


def test_hostile_lines_are_bounded():
    long_line = "y: " + ".T".join(["X"] * 4000) + "\n"
    deep = "y: " + "(" * 200 + "X.T" + ")" * 200 + "\n"
    for text in (long_line, deep, "y: X" + ".transpose(1, 2)" * 300 + "\n"):
        spec = bounded(lambda t=text: check(HEAD + t), 20_000_000)   # calls, not seconds
        assert not spec.ok


MORE = [  # the other rows of docs/language.md's table of PyTorch habits
    ("p: Q.matmul(K.mT)", "p: Q @ (K -> transpose -2 -1)"),
    ("p: torch.bmm(X, A.mT)", "p: X @ (A -> transpose -2 -1)"),
    ("g: F.gelu(X)", "g: X -> gelu"),
    ("g: X.relu()", "g: X -> relu"),
    ("s: (Q @ K.mT).masked_fill(mask, float(\"-inf\"))", "s: Q @ (K -> transpose -2 -1) -> mask mask"),
    ("h: X.view(B, S, H, Dh).transpose(1, 2).contiguous()",
     "h: X -> view [B, S, H, Dh] -> transpose 1 2 -> contiguous"),
    ("s: Q @ K.transpose(-2, -1) * 0.5", "s: Q @ (K -> transpose -2 -1) * 0.5"),
    ("s: -K.mT @ Q", "s: -(K -> transpose -2 -1) @ Q"),
    ("s: (X + A).reshape(B, S, H, Dh)", "s: X + A -> reshape [B, S, H, Dh]"),
    # casts and keywords
    ("m: mask.float()", "m: mask -> float"),
    ("m: 1 - mask.float()", "m: 1 - (mask -> float)"),
    ("h: X.to(torch.bfloat16)", "h: X -> to bfloat16"),
    ("w: F.softmax(Q @ K.mT, dim=-1, dtype=torch.float32)",
     "w: Q @ (K -> transpose -2 -1) -> softmax -1 dtype=float32"),
    ('g: F.gelu(X, approximate="tanh")', 'g: X -> gelu approximate="tanh"'),
]


@pytest.mark.parametrize("line, rewritten", MORE, ids=[m[0] for m in MORE])
def test_more_pytorch_spellings(line, rewritten):
    d, text = only(HEAD + line + "\n")
    assert d.fix is not None and d.fix[2] == rewritten, text


ACCEPTED = [  # docs/language.md: accepted alternatives, each the same as its shapelang form
    ("y: X -> transpose(1, 2)", "y: X -> transpose 1 2"),
    ("y: Q -> permute(0, 2, 1, 3)", "y: Q -> permute 0 2 1 3"),
    ("y: X -> mean -1 keepdim=True", "y: X -> mean -1 keepdim"),
    ("y: X -> sum -1 keepdim=False", "y: X -> sum -1"),
    ("y: X -> linear D bias=False", "y: X -> linear D bias=false"),
    ("y: concat(-1, X, A)", "y: X -> concat -1 A"),
    # positional arguments by their PyTorch keyword
    ("mu: X -> mean dim=-1 keepdim=True", "mu: X -> mean -1 keepdim"),
    ("w: Q @ (K -> transpose -2 -1) -> softmax dim=-1", "w: Q @ (K -> transpose -2 -1) -> softmax -1"),
    ("y: X -> transpose dim0=1 dim1=2", "y: X -> transpose 1 2"),
    ("y: X -> slice 1 start=0 end=S", "y: X -> slice 1 0 S"),
    ("y: X -> dropout p=0.1", "y: X -> dropout 0.1"),
]


@pytest.mark.parametrize("line, plain", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_accepted_alternatives_mean_the_same(line, plain):
    a, b = check(HEAD + line + "\n"), check(HEAD + plain + "\n")
    assert a.ok and not a.diagnostics, render_check(a)
    assert a.bindings[-1].steps[-1].out.shape == b.bindings[-1].steps[-1].out.shape
    assert a.total_params == b.total_params
