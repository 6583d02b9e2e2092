"""The checker against expectations written beside their causes (`# E: CODE`)."""
import re
from pathlib import Path

import pytest

from shapelang.checker.checker import check_text

CASES = sorted((Path(__file__).parent / "cases").glob("*.shape"))
EXPECT = re.compile(r"#\s*E:\s*([A-Z]\d+)")


def expected(text):
    out = set()
    for n, line in enumerate(text.splitlines(), 1):
        for code in EXPECT.findall(line):
            out.add((n, code))
    return out


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_inline_expectations(path):
    text = path.read_text()
    spec = check_text(text, str(path))
    got = {(d.span.line, d.code) for d in spec.diagnostics if d.severity == "error"}
    assert got == expected(text), "\n".join(d.message for d in spec.diagnostics)


def diag(text, code):
    spec = check_text(text)
    found = [d for d in spec.diagnostics if d.code == code]
    assert found, [f"{d.code} {d.message}" for d in spec.diagnostics]
    return found[0]


HEADER = "dim B, S, D, H\nexample B=1, S=4, D=512, H=8\ninput X: [B, S, D]\n"


def test_view_without_divisibility_has_counterexample_and_fix():
    d = diag(HEADER + "Q: X -> view [B, S, H, D/H]\n", "E104")
    assert (d.span.line, d.span.column) == (4, 24)
    cex = d.counterexample
    assert cex and cex["D"] % cex["H"] != 0
    assert "assume D % H == 0" in d.help


def test_matmul_without_transpose_suggests_it():
    text = HEADER + "assume D % H == 0\nQ: X -> view [B, S, H, D/H] -> transpose 1 2\n" \
                    "K: X -> view [B, S, H, D/H] -> transpose 1 2\nscores: Q @ K\n"
    d = diag(text, "E101")
    assert d.span.line == 7
    assert "K -> transpose -2 -1" in d.help
    assert d.counterexample is not None


def test_residual_of_different_widths_has_counterexample():
    d = diag("dim B, S, D, E\ninput X: [B, S, D]\ninput Y: [B, S, E]\nr: X + Y\n", "E102")
    assert d.span.line == 4
    assert d.counterexample["D"] != d.counterexample["E"]


def test_heads_times_value_width_need_not_equal_d_model():
    # PyTorch allows H*Dv != D when W_O maps H*Dv back to D
    text = ("dim B, S, D, H, Dv\nexample B=1, S=4, D=2560, H=32, Dv=128\n"
            "input heads: [B, S, H*Dv]\nparam W_o: [H*Dv, D]\nout: heads @ W_o\nexpect out: [B, S, D]\n")
    assert check_text(text).ok
    d = diag(text.replace("param W_o: [H*Dv, D]", "param W_o: [D, D]"), "E101")
    assert d.counterexample is not None
    cex = d.counterexample
    assert cex["H"] * cex["Dv"] != cex["D"]


def test_example_breaking_divisibility_offers_alternatives():
    text = "dim B, S, D, H\nassume D % H == 0\nexample B=1, S=4, D=1024, H=12\n"
    d = diag(text, "E108")
    assert "1024 mod 12 = 4" in d.message
    assert "{8, 16, 32}" in d.help


def test_example_breaking_a_bound_is_reported():
    d = diag("dim S, Ctx\nassume S <= Ctx\nexample S=2048, Ctx=1024\n", "E108")
    assert "2048 <= 1024" in d.message


def test_assumption_makes_the_proof_go_through():
    text = HEADER + "assume D % H == 0\nQ: X -> view [B, S, H, D/H] -> transpose 1 2\n" \
                    "scores: Q @ (Q -> transpose -2 -1) -> scale 1/sqrt(D/H) -> softmax -1\n" \
                    "expect scores: [B, H, S, S]\n"
    spec = check_text(text)
    assert spec.ok, [d.message for d in spec.diagnostics]
    assert [spec.example_value(d) for d in spec.bindings[-1].types[0].shape] == [1, 8, 4, 4]


def test_derivation_instead_of_assumption():
    text = "dim B, S, H, Dk\ndim D = H * Dk\ninput X: [B, S, D]\nQ: X -> view [B, S, H, D/H]\n"
    assert check_text(text).ok


@pytest.mark.parametrize("name", ["S", "N", "E", "I", "Q", "lambda", "pi", "oo", "beta", "gamma"])
def test_sympy_names_are_ordinary_dims(name):
    text = f"dim B, {name}\nexample B=2, {name}=3\ninput X: [B, {name}]\ny: X -> transpose 0 1\n" \
           f"expect y: [{name}, B]\n"
    spec = check_text(text)
    assert spec.ok, [d.message for d in spec.diagnostics]
    assert [spec.example_value(d) for d in spec.bindings[0].types[0].shape] == [3, 2]


def test_every_independent_error_is_reported():
    text = HEADER + "a: X -> transpose 0 5\nb: X -> linear D\nc: X -> frobnicate\nd: b @ X\n"
    codes = [d.code for d in check_text(text).diagnostics]
    assert codes == ["E105", "E111", "E101"]


def test_error_in_one_binding_does_not_cascade():
    text = HEADER + "a: X -> transpose 0 5\nb: a -> linear D\nc: b -> softmax -1\n"
    assert [d.code for d in check_text(text).diagnostics] == ["E105"]


def test_unknown_name_suggests_the_close_one():
    d = diag(HEADER + "y: Xs -> relu\n", "E002")
    assert "`X`" in d.help


def test_parse_error_has_position_and_no_traceback():
    spec = check_text("dim B, S\ninput X: [B, S\ny: X\n")
    (d,) = spec.diagnostics
    assert d.code == "E001" and d.span.line == 2


def test_pipeline_may_continue_on_lines_starting_with_arrow():
    text = HEADER + "assume D % H == 0\nQ: X\n  -> linear D   # project\n  # split\n" \
                    "  -> view [B, S, H, D/H]\nexpect Q: [B, S, H, D/H]\n"
    assert check_text(text).ok


def test_block_dims_bind_at_each_call():
    text = ("dim B, S, T, D\nexample B=1, S=4, T=6, D=8\ninput enc: [B, S, D]\ninput dec: [B, T, D]\n"
            "block Proj(x: [B, S, D]):\n  return x -> linear D\nend\n"
            "a: enc -> Proj\nb: dec -> Proj\nexpect b: [B, T, D]\n")
    spec = check_text(text)
    assert spec.ok, [d.message for d in spec.diagnostics]
    assert spec.total_params.subs({s: 8 for s in spec.total_params.free_symbols}) == 2 * (64 + 8)


def test_stack_multiplies_parameters_and_needs_same_shape():
    text = ("dim B, S, D, L\nexample B=1, S=4, D=8, L=6\ninput x: [B, S, D]\n"
            "block Layer(x: [B, S, D]):\n  return x -> linear D\nend\ny: x -> stack L Layer\n")
    spec = check_text(text)
    assert spec.ok
    assert spec.example_value(spec.total_params) == 6 * (64 + 8)
    bad = text.replace("return x -> linear D", "return x -> linear 2*D")
    assert "E114" in [d.code for d in check_text(bad).diagnostics]


def test_every_syntax_error_is_reported_without_cascades():
    text = ("dim B, S, D\nexample B=1, S=2, D=4\ninput X: [B, S, D]\na: X -> linear D +\n"
            "b: a -> relu\nc: X\n  -> transpose 0 1\n  -> ===\nd: c -> relu\ne: X -> transpose 0 9\n")
    got = [(d.span.line, d.code) for d in check_text(text).diagnostics]
    assert got == [(4, "E001"), (8, "E001"), (10, "E105")]


@pytest.mark.parametrize("text, words", [
    ("dim B, S\nassume B = S\n", "=="),
    ("dim B\ninput X: [B]\nblock F(x: [B]):\n  return x\n", "end"),
    ("dim B\ninput X: [B]\ny: X ->\n", "operation after `->`"),
    ("dim B\ninput X: [B]\ny: X -> rearrange 'b -> b'\n", "double quotes"),
    ("dim B, S\ninput X: [B, S]\ny: X -> linear S + 1\n", "parentheses"),
])
def test_typical_syntax_mistakes_get_a_specific_help(text, words):
    (d,) = check_text(text).diagnostics
    assert d.code == "E001" and words in d.help


def test_every_code_is_documented():
    from shapelang.syntax.diagnostics import CODES
    doc = (Path(__file__).resolve().parent.parent / "docs" / "diagnostics.md").read_text()
    for code in CODES:
        assert f"| {code} |" in doc, code


def test_nested_blocks_keep_their_own_dim_names():
    text = ("dim B, S, T, D\nexample B=1, S=2, T=3, D=4\ninput x: [B, S, D]\n"
            "block Inner(z: [B, T, D]):\n  return z -> view [B, T, D]\nend\n"
            "block Outer(z: [B, T, D]):\n  return z -> Inner\nend\no: x -> Outer\nexpect o: [B, S, D]\n")
    spec = check_text(text)
    assert spec.ok, [d.message for d in spec.diagnostics]
