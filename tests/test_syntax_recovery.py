"""Syntax error recovery: what is reported, and what is kept, for broken statements and blocks."""
from __future__ import annotations

import random
import re
import time

import pytest

from shapelang.checker.checker import check_text
from shapelang.syntax.nodes import Block
from shapelang.syntax.parser import parse, parse_recovering
from shapelang.syntax.recovery import MAX_NOTES

H = "dim B, S, D\nexample B=1, S=2, D=4\ninput x: [B, S, D]\n"
BROKEN = ["y{i}: x -> linear D +", "y{i}: x ->", "y{i}: x -> view [B, S", "y{i} x -> relu",
          "dim = {i}", "y{i}: x -> 'q'", "y{i}: x -> ) {i}", "input : [B]", "y{i}: x -> relu ]"]


def blanked(text: str, lines) -> str:
    out = text.split("\n")
    for n in lines:
        out[n - 1] = ""
    return "\n".join(out)


@pytest.mark.parametrize("seed", range(8))
def test_recovered_statements_are_those_of_the_file_without_the_broken_lines(seed):
    rng = random.Random(seed)
    body, bad = [], []
    for i in range(rng.randint(5, 60)):
        if rng.random() < 0.3:
            body.append(rng.choice(BROKEN).format(i=i))
            bad.append(4 + len(body) - 1)
        else:
            body.append(f"y{i}: x -> relu -> linear {i + 1}*D")
    text = H + "\n".join(body) + "\n"
    spec, diagnostics, skipped = parse_recovering(text)
    reported = sorted({d.span.line for d in diagnostics})
    if len(bad) <= MAX_NOTES:
        assert reported == bad
    assert spec.statements == parse(blanked(text, bad)).statements
    lines = text.split("\n")
    assert {lines[n - 1].split(":")[0] for n in bad if re.match(r"y\d+:", lines[n - 1])} <= skipped


def test_a_broken_statement_inside_a_block_leaves_the_rest_of_the_block():
    text = H + ("block F(z: [B, S, D]):\n  h: z -> linear D +\n  return z -> relu\nend\n"
                "y: x -> F\nexpect y: [B, S, D]\n")
    spec, diagnostics, _ = parse_recovering(text)
    assert [(d.span.line, d.message) for d in diagnostics] == [(5, "unexpected `+`")]
    (block,) = [s for s in spec.statements if isinstance(s, Block)]
    assert [block] == [s for s in parse(blanked(text, [5])).statements if isinstance(s, Block)]
    assert [d.code for d in check_text(text).diagnostics] == ["E001"]


def test_a_block_with_a_broken_first_line_is_left_out_whole():
    text = H + "block F(z: [B, S, D]:\n  return z -> relu\nend\ny: x -> F\nw: x -> transpose 0 9\n"
    spec = check_text(text)
    assert [(d.span.line, d.code) for d in spec.diagnostics] == [(4, "E001"), (8, "E105")]


def test_a_block_without_end_before_the_next_block_is_named():
    text = H + ("block F(z: [B, S, D]):\n  return z -> relu\n"
                "block G(z: [B, S, D]):\n  return z\nend\ny: x -> G\nw: x -> transpose 0 9\n")
    spec = check_text(text)
    assert [(d.span.line, d.code) for d in spec.diagnostics] == [(4, "E001"), (10, "E105")]
    assert "no `end`" in spec.diagnostics[0].message and "end" in spec.diagnostics[0].help


def test_a_block_without_end_at_the_end_of_the_file():
    (d,) = check_text(H + "block F(z: [B, S, D]):\n  return z -> relu\n\n\n").diagnostics
    assert d.code == "E001" and d.span.line == 5 and "end" in d.help


def test_text_after_end_is_reported_and_the_block_left_out():
    spec, diagnostics, skipped = parse_recovering(H + "block F(z: [B]):\n  return z\nend now\n")
    assert [(d.span.line, d.message) for d in diagnostics] == [(6, "unexpected `now`")]
    assert not any(isinstance(s, Block) for s in spec.statements) and "F" in skipped


@pytest.mark.parametrize("unit", [
    "block F(x: [B]):\n  return x\n",            # blocks never closed
    "block F(x: [B]):\n  return x +\nend\n",     # a broken statement in every block
    "y: x\n  -> relu +\n",                       # broken continuation lines
    "y: x -> ) (\n",                             # broken one-liners
])
def test_thousands_of_broken_statements_are_bounded(unit):
    text = H + unit * (4_000 // unit.count("\n"))        # under the 5,000-line limit
    t0 = time.process_time()
    spec, diagnostics, _ = parse_recovering(text)
    assert time.process_time() - t0 < 2.0          # CPU seconds
    assert len(diagnostics) == MAX_NOTES + 1 and diagnostics[-1].message.startswith("and ")
    assert spec is not None
