"""An operation written as a function call (`softmax(x, -1)`, `attention(q, k, v)`): PyTorch's
functional habit. The checker says the tensor is piped into an operation, and proposes the
piped form, proved by re-checking; inside a larger expression the proposal is bracketed."""
from __future__ import annotations

import pytest

from shapelang import check, render_check

HEAD = "dim B, S, D\nassume D % 2 == 0\nexample B=1, S=2, D=4\ninput x: [B, S, D]\n"


@pytest.mark.parametrize("line, fixed", [
    ("a: softmax(x, -1)", "a: x -> softmax -1"),
    ("a: transpose(x, 1, 2)", "a: x -> transpose 1 2"),
    ("a: attention(x, x, x)", "a: x -> attention x x"),
    ("a: x + softmax(x, dim=-1)", "a: x + (x -> softmax dim=-1)"),
    ("a: view(x, [B, S, 2, D/2])", "a: x -> view [B, S, 2, D/2]"),
    ("a: layernorm(x)  # a comment", "a: x -> layernorm  # a comment"),
])
def test_the_piped_form_is_proposed_and_proved(line, fixed):
    spec = check(HEAD + line + "\n")
    (err,) = spec.errors()
    assert err.code == "E002" and "is an operation, not a function" in err.message
    assert (err.span.line, err.span.column) == (5, line.index("(") - len(line.split("(")[0].split()[-1]) + 1)
    assert err.fix is not None and err.fix[2] == fixed.split("  #")[0], err     # shown without the comment
    assert check(HEAD + fixed + "\n").ok
    assert "pipe the tensor into it" in render_check(spec)


def test_a_proposal_that_does_not_check_is_not_shown_as_a_fix():
    spec = check("dim B, S, D\nexample B=1, S=2, D=4\ninput x: [B, S, D]\na: view(x, [B, S, 2, D/2])\n")
    err = next(d for d in spec.errors() if d.code == "E002")
    assert err.fix is None and err.help == "write `x -> view [B, S, 2, D/2]`"


def test_an_unknown_function_still_gets_its_suggestion():
    spec = check("dim B, S, D\nexample B=1, S=2, D=4\ninput x: [B, S, D]\na: softmx(x, -1)\n")
    (err,) = spec.errors()
    assert err.code == "E002" and "unknown function or block `softmx`" in err.message
