"""Hostile and careless input to the syntax stage (issue 16, items 17, 18 and 23).

Each reproduction of the issue is a test here, with its neighbours of the same
class: big files of many statements, long lines, files with many lines that do
not parse, a byte-order mark, trailing blank lines, `**` in operation arguments.
The guards bound the work (the calls the checker makes, tests/work.py), not
seconds, which a busy machine stretches; the timings are in bench/
(`python -m bench.hostile_inputs`).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from work import bounded, linear

from shapelang.checker.checker import check_text
from shapelang.syntax.nodes import Binding
from shapelang.syntax.parser import (
    MAX_LINE_CHARS,
    MAX_LINES,
    ParseFailure,
    parse,
    parse_recovering,
)
from shapelang.syntax.recovery import MAX_NOTES

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = (ROOT / "exercises" / "solutions" / "02_split_heads.shape").read_text()
# calls of one check of a hostile file: the worst case here makes about 2.1 million (160 KB of
# long pipelines); a blow-up (a quadratic recovery, an exponential proof) makes far more
BOUND_CALLS = 5_000_000


def bounded_check(text):
    return bounded(lambda: check_text(text, "upload.shape"), BOUND_CALLS)


def syntax_errors(spec):
    return [d for d in spec.diagnostics if d.code == "E001"]


# ---------------------------------------------------------------- item 17: slow files

def mixed_file(good: int, bad: int, seed: int = 0) -> tuple[str, list[int]]:
    """The solution, then `good` statements and `bad` lines that do not parse, interleaved.

    Returns the text and the line numbers of the bad lines."""
    import random

    rng = random.Random(seed)
    lines = SOLUTION.rstrip("\n").split("\n")
    extra = [f"y{i}: Q -> view [B, S, H, Dh] -> transpose 1 2 -> relu" for i in range(good)]
    broken = [rng.choice([f"z{i}: Q -> ) ( {i}", f"z{i}: Q -> view [B, S", "}}}} what",
                          f"z{i}: Q ->", f"dim = {i}", "input : [B]", "'quoted'"])
              for i in range(bad)]
    slots = sorted(rng.sample(range(good + bad), bad))
    bad_lines, body, b = [], [], 0
    for k in range(good + bad):
        if b < bad and k == slots[b]:
            body.append(broken[b])
            bad_lines.append(len(lines) + len(body))
            b += 1
        else:
            body.append(extra[k - b])
    return "\n".join(lines + body) + "\n", bad_lines


def test_a_16kb_file_with_60_broken_lines_is_checked_quickly_and_reported_in_bounds():
    text, bad_lines = mixed_file(400, 60)
    assert len(text.encode()) > 16_000
    text += "last: Q -> transpose 0 9\n"          # a checker error after all the broken lines
    spec = bounded_check(text)
    errors = syntax_errors(spec)
    assert len(errors) == MAX_NOTES + 1
    assert [d.span.line for d in errors[:MAX_NOTES]] == bad_lines[:MAX_NOTES]
    assert errors[-1].message == f"and {60 - MAX_NOTES} more syntax errors"
    assert errors[-1].span.line == bad_lines[MAX_NOTES]
    # the statements that parse are still checked, to the end of the file
    assert any(d.code == "E105" and d.span.line == text.count("\n") for d in spec.diagnostics)


@pytest.mark.parametrize("bad", [1, 2, MAX_NOTES, MAX_NOTES + 1, 300])
def test_every_broken_line_counts_and_only_the_first_ones_are_listed(bad):
    text, bad_lines = mixed_file(50, bad, seed=bad)
    spec, diagnostics, _ = parse_recovering(text)
    listed = [d.span.line for d in diagnostics]
    if bad <= MAX_NOTES:
        assert listed == bad_lines
    else:
        assert listed == bad_lines[:MAX_NOTES] + [bad_lines[MAX_NOTES]]
        assert diagnostics[-1].message.startswith(f"and {bad - MAX_NOTES} more syntax error")
    # every statement that parses is kept: the solution's and the 50 extra bindings
    names = {n for s in spec.statements for n in getattr(s, "names", ())}
    assert {f"y{i}" for i in range(50)} <= names and {"Q", "Qh", "one_head"} <= names


def test_160kb_of_long_pipelines_is_checked_within_bounds():
    line = "Qh: Q -> " + " ".join(["a"] * 60) + "\n"
    text = SOLUTION + line * (160 * 1024 // len(line))
    spec = bounded_check(text)
    n = SOLUTION.count("\n") + 1
    assert (spec.diagnostics[0].span.line, spec.diagnostics[0].code) == (n, "E003")   # Qh again


def test_many_short_statements_up_to_the_line_limit_parse_in_linear_time():
    def make(n):
        return "dim B\ninput X: [B]\n" + "".join(f"x{i}: X -> relu\n" for i in range(n))
    half = (MAX_LINES - 20) // 2
    spec = linear(make, parse, half)
    assert len(spec.statements) == 2 * half + 2


@pytest.mark.parametrize("line", [
    "Qh: Q -> " + " ".join(["a"] * 100_000),                          # one op, 100k arguments
    "Qh: Q -> view [" + ", ".join(["B"] * 67_000) + "]",              # one huge shape
    "Qh: " + " -> ".join(["relu"] * 30_000),                          # a huge pipeline
    "# " + "x" * 200_000,                                             # a huge comment
])
def test_one_200kb_line_is_refused_quickly_and_the_rest_is_checked(line):
    text = SOLUTION + line + "\nlast: Q -> transpose 0 9\n"
    assert len(text) > 200_000
    n = SOLUTION.count("\n") + 1
    spec = bounded_check(text)
    (refusal,) = [d for d in spec.diagnostics if d.code == "E004"]
    assert refusal.span.line == n and f"longer than {MAX_LINE_CHARS}" in refusal.message
    assert [d.code for d in spec.diagnostics if d.span.line == n + 1] == ["E105"]
    with pytest.raises(ParseFailure) as err:
        parse(text)
    assert err.value.diagnostic.code == "E004" and err.value.diagnostic.span.line == n


def test_a_line_just_under_the_limit_is_parsed():
    args = " ".join(["D"] * ((MAX_LINE_CHARS - 40) // 2))
    text = "dim B, D\ninput X: [B, D]\ny: X -> f " + args + "\n"
    assert max(len(x) for x in text.split("\n")) <= MAX_LINE_CHARS
    (stmt,) = [s for s in parse(text).statements if getattr(s, "names", None) == ("y",)]
    assert len(stmt.value.ops[0].args) == (MAX_LINE_CHARS - 40) // 2


# ---------------------------------------------------------------- item 18: messages

def test_a_utf8_byte_order_mark_is_accepted_and_columns_are_as_shown():
    plain = check_text(SOLUTION)
    marked = check_text("\ufeff" + SOLUTION)
    assert plain.ok and marked.ok
    broken = "\ufeffdim B\ninput X: [B\n"
    (d,) = check_text(broken).diagnostics
    assert (d.span.line, d.span.column) == (2, 12)
    # on the first line too: the mark takes no column
    (d,) = check_text("\ufeffdim B = = 2\n").diagnostics
    assert (d.span.line, d.span.column) == (1, 9)


@pytest.mark.parametrize("tail", ["\n" * 5001, "\r\n" * 5001, "   \n" * 5001, "# note\n" * 5001])
def test_blank_and_comment_lines_do_not_count_against_the_line_limit(tail):
    spec = check_text(SOLUTION + tail)
    assert spec.ok, [d.message for d in spec.diagnostics]


def test_more_than_the_line_limit_of_statements_is_refused_at_the_first_line_over():
    text = "dim B\n\n" + "".join(f"dim d{i}\n" for i in range(MAX_LINES))
    spec = check_text(text)
    (d,) = spec.diagnostics
    assert d.code == "E004" and d.span.line == MAX_LINES + 2


def test_thousands_of_junk_lines_give_a_bounded_number_of_notes():
    text = SOLUTION + "".join(f"junk {i} !!\n" for i in range(4900))
    spec = bounded_check(text)
    assert len(spec.diagnostics) == MAX_NOTES + 1
    assert spec.diagnostics[-1].message == f"and {4900 - MAX_NOTES} more syntax errors"


def test_one_junk_byte_string_gives_a_bounded_report():
    text = "".join(chr(c) for c in range(32, 127)) * 100
    spec, diagnostics, _ = parse_recovering(text.replace("~", "\n"))
    assert spec is not None and 1 <= len(diagnostics) <= MAX_NOTES + 1


# ---------------------------------------------------------------- item 23: `**` in arguments

POW_HEADER = "dim B, D\nexample B=2, D=3\ninput X: [B, D]\n"


@pytest.mark.parametrize("op, out", [
    ("linear D**2", lambda D: D ** 2),
    ("linear 2*D**2", lambda D: 2 * D ** 2),        # ** binds tighter than *
    ("linear D**2/D", lambda D: D),
    ("linear 3**2", lambda D: 9),
    ("linear (D + 1)**2", lambda D: (D + 1) ** 2),
    ("linear D**1**2", lambda D: D),                # right-associative
])
def test_power_inside_an_operation_argument(op, out):
    torch = pytest.importorskip("torch")
    spec = check_text(POW_HEADER + f"y: X -> {op}\n")
    assert spec.ok, [d.message for d in spec.diagnostics]
    B, D = 2, 3
    want = torch.nn.Linear(D, out(D))(torch.zeros(B, D)).shape
    got = [spec.example_value(d) for d in spec.bindings[0].types[0].shape]
    assert got == list(want)


def test_power_in_a_scale_and_a_keyword_argument_parse():
    text = POW_HEADER + "y: X -> scale 1/sqrt(D**1)\nz: X -> scale D**-1\n"
    spec = parse(text)
    ops = [s.value.ops[0] for s in spec.statements if isinstance(s, Binding)]
    assert [o.text for o in ops] == ["scale 1/sqrt(D**1)", "scale D**-1"]
    assert ops[0].args[0].op == "/" and ops[1].args[0].op == "**"
