"""Mutated shipped specs through the parser: diagnostics, never an exception or a hang.

A seeded generator (the same mutants on every run) inserts, deletes and duplicates
characters and lines of the specs in specs/ and exercises/, and adds the things a
careless or hostile upload brings: huge numbers, deep brackets, a byte-order mark,
NUL bytes, CRLF line ends, stray keywords. For every mutant, `parse_recovering`
returns in bounded time, every diagnostic points inside the file, and it agrees
with `parse`: no diagnostics exactly when `parse` succeeds, with the same nodes.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples, sample

from shapelang.syntax.nodes import Span
from shapelang.syntax.parser import MAX_DEPTH, ParseFailure, parse, parse_recovering
from shapelang.syntax.recovery import MAX_NOTES

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for d in ("specs", "specs/pytorch", "exercises", "exercises/solutions")
                 for p in (ROOT / d).glob("*.shape"))
MUTANTS_PER_FILE = 25
SNIPPETS = ["(", ")", "[", "]", ",", ":", "->", "**", "*", "/", "-", "=", "==", "?", "?x", "\"",
            "'", "#", "\n", "\r\n", "\x00", "\ufeff", "\t", "block", "end", "return", "dim",
            "9" * 40, "-" + "9" * 25, "1e999", "0.5", "é", "\u202e", "{", "}", "@", "%", "//"]


def mutate(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(9)
        if kind == 0 and text:                                   # insert a snippet
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(SNIPPETS) + text[i:]
        elif kind == 1 and text:                                 # delete a few characters
            i = rng.randrange(len(text))
            text = text[:i] + text[i + rng.randint(1, 5):]
        elif kind == 2 and text:                                 # duplicate a stretch
            i = rng.randrange(len(text))
            text = text[:i] + text[i:i + rng.randint(1, 30)] * rng.randint(2, 4) + text[i:]
        elif kind == 3:                                          # delete or duplicate lines
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            if rng.random() < 0.5:
                del lines[i:i + rng.randint(1, 3)]
            else:
                lines[i:i] = lines[i:i + rng.randint(1, 3)] * rng.randint(1, 3)
            text = "\n".join(lines)
        elif kind == 4:                                          # deep brackets
            d = rng.choice([MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 500])
            text += f"\nz: X -> linear {'(' * d}D{')' * d}\n"
        elif kind == 5:                                          # CRLF, or a lone CR
            text = text.replace("\n", rng.choice(["\r\n", "\r", "\n\r"]))
        elif kind == 6:                                          # byte-order marks
            text = "\ufeff" + text if rng.random() < 0.7 else text.replace("\n", "\n\ufeff", 1)
        elif kind == 7:                                          # a huge or odd number
            num = rng.choice(["9" * 19, "1" + "0" * 300, "0" * 50 + "7", "-0", "1e400", "1.5"])
            text = text.replace(rng.choice(["512", "8", "4", "1", "2"]), num, 1)
        else:                                                    # swap two lines
            lines = text.split("\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    return text


def spans_of(node):
    """Every Span in a node tree."""
    if isinstance(node, Span):
        yield node
    elif isinstance(node, (list, tuple)):
        for x in node:
            yield from spans_of(x)
    elif hasattr(node, "__dataclass_fields__"):
        for name in node.__dataclass_fields__:
            yield from spans_of(getattr(node, name))


def inside(span: Span, lines: list[str]) -> bool:
    if not 1 <= span.line <= span.end_line <= max(1, len(lines)):
        return False
    if span.line == span.end_line and span.end_column < span.column:
        return False
    return 1 <= span.column <= len(lines[span.line - 1]) + 2


@pytest.mark.parametrize("path", sample(SOURCES, every=4, ids=lambda p: f"{p.parent.name}/{p.stem}"))
def test_mutated_specs_give_diagnostics_inside_the_file_and_agree_with_parse(path):
    original = path.read_text(encoding="utf-8")
    rng = random.Random(f"{path.parent.name}/{path.name}")
    for _ in range(MUTANTS_PER_FILE):
        text = mutate(original, rng)
        # the work of a parse is bounded by its recoveries (at most MAX_NOTES, asserted below)
        spec, diagnostics, _ = parse_recovering(text, "mutant.shape")
        shown = text.removeprefix("\ufeff")
        lines = shown.split("\n")
        for d in diagnostics:
            assert d.code in ("E001", "E004"), d
            assert inside(d.span, lines), (d, repr(text[:200]))
        assert len([d for d in diagnostics if d.code == "E001"]) <= MAX_NOTES + 1
        if spec is not None:
            for stmt in spec.statements:
                for s in spans_of(stmt):
                    assert inside(s, lines), (s, stmt)
        try:
            whole = parse(text, "mutant.shape")
        except ParseFailure as failure:
            assert diagnostics, repr(text[:200])
            assert failure.diagnostic in diagnostics or failure.diagnostic.code == "E004"
        else:
            assert not diagnostics and spec == whole, repr(text[:200])


def fast_and_lark(fast, source: str):
    """What the fast path and lark's ordinary path make of `source`: nodes, the E004
    diagnostic of a limit, or MISSING (fast path) / None (lark) for a syntax error."""
    import lark

    from shapelang.syntax import grammar

    text = grammar.Text(source.replace("\r", "") + "\n")
    grammar._BUILDER.reset(text.source, text.starts)
    try:
        got = fast.parse(text.source, text.starts, "start", 0, len(text.source), 0)
    except ParseFailure as failure:
        got = failure.diagnostic
    try:
        want = grammar.lark_parser().parse(text.source, start="start")
    except lark.exceptions.UnexpectedInput:
        want = None
    except ParseFailure as failure:
        want = failure.diagnostic
    return got, want


def assert_same(fast, source: str) -> None:
    from shapelang.syntax import grammar

    got, want = fast_and_lark(fast, source)
    if got is grammar.MISSING:
        assert want is None, repr(source[:300])
    else:
        assert got == want, repr(source[:300])


def test_the_fast_path_lexes_every_parser_state_with_larks_own_regex_and_keywords():
    """The fast path builds each state's alternation itself (so a fresh process compiles it
    once); it is exactly the one lark's scanner compiles, with the same keyword rules."""
    from shapelang.syntax import grammar, tokens

    for state, lexer in grammar.lark_parser().parser.lexer.lexers.items():
        pattern, callbacks = tokens._alternation(lexer)
        assert pattern == lexer.scanner._mres[0].pattern, state
        assert {k: tokens._keywords(c) for k, c in callbacks.items()} == \
            {k: tokens._keywords(c) for k, c in lexer.callback.items()}, state


def test_every_shipped_spec_parses_to_the_same_nodes_through_the_fast_path():
    """Every spec in specs/, exercises/ and tests/cases, as written: the fast path gives
    nodes, and exactly lark's (fields, spans and texts)."""
    from shapelang.syntax import grammar

    fast = grammar.fast_path()
    paths = SOURCES + sorted((ROOT / "tests" / "cases").glob("*.shape"))
    for path in paths:
        got, want = fast_and_lark(fast, path.read_text(encoding="utf-8"))
        assert got is not grammar.MISSING and got == want, path.name


@pytest.mark.parametrize("path", sample(SOURCES, every=3, ids=lambda p: f"{p.parent.name}/{p.stem}"))
def test_the_fast_path_agrees_with_larks_own_lexer_and_parser(path):
    """grammar.run parses through tokens.FastPath and falls back to lark on anything unusual:
    wherever the fast path gives nodes, lark's ordinary path gives the same nodes."""
    from shapelang.syntax import grammar

    original = path.read_text(encoding="utf-8")
    rng = random.Random(f"fast/{path.name}")
    fast = grammar.fast_path()
    assert_same(fast, original)
    for _ in range(MUTANTS_PER_FILE):
        assert_same(fast, mutate(original, rng))


# ---- generated specs: statements of every kind, in odd spacing, with comments, blocks and
# continuation lines, sometimes with a stray character; names repeat with new numbers, as in
# an unrolled model, so that the fast path replays what it remembered from other statements

_NAMES = st.sampled_from(["x", "h", "q", "W_te", "att", "B", "S", "D", "H", "Dh", "linear"] * 5
                         + ["end", "dim", "frozen", "input"])           # keywords: seldom
_NAME = st.builds(lambda n, i: n if i is None else f"{n}_{i}", _NAMES,
                  st.none() | st.integers(0, 120))
_GAP = st.sampled_from([" ", " ", "  ", "\t"])
_NUM = st.sampled_from(["0", "1", "2", "-1", "-2", "3", "0.5", "-0.5", "1e4", "64"] * 3 + ["9" * 20])


@st.composite
def _expr(draw, depth=0):
    kind = draw(st.integers(0, 5 if depth < 2 else 1))
    if kind == 0:
        return draw(_NAME)
    if kind == 1:
        return draw(_NUM).lstrip("-")
    if kind == 2:
        op = draw(st.sampled_from(["+", "-", "*", "/", "//", "%", "@", "**"]))
        return f"{draw(_expr(depth + 1))} {op} {draw(_expr(depth + 1))}"
    if kind == 3:
        return f"({draw(_pipeline(depth + 1))})"
    if kind == 4:
        args = draw(st.lists(_expr(depth + 1), max_size=3))
        return f"{draw(_NAME)}({', '.join(args)})"
    return f"[{', '.join(draw(st.lists(_expr(depth + 1), max_size=4)))}]"


@st.composite
def _op(draw, depth=0):
    name = draw(st.sampled_from(["linear", "view", "transpose", "softmax", "scale", "mask",
                                 "chunk", "Mlp", "?", "clamp", "einsum"]))
    args = draw(st.lists(st.one_of(_NUM, _NAME, st.sampled_from(["3*D", "1/sqrt(Dh)", "D**2",
                                                                   "-inf", "\"b s d -> b d s\""]),
                                   st.builds(lambda e: f"[{e}]", _expr(depth + 1)),
                                   st.builds(lambda n, v: f"{n}={v}", _NAME, _NUM)),
                         max_size=3))
    if draw(st.booleans()) and not args:
        return "Mlp(x_1, F=4*D)"
    return " ".join([name, *args])


@st.composite
def _pipeline(draw, depth=0):
    ops = draw(st.lists(_op(depth), max_size=3 if depth == 0 else 1))
    gap = draw(_GAP)
    if depth == 0 and draw(st.integers(0, 3)) == 0:      # bitwise operators and comparisons
        head = f"{draw(_expr(1))} {draw(st.sampled_from(['&', '|', '^', '<', '==']))} {draw(_NAME)}"
        return f"{head}{gap}->{gap}{draw(_op(depth))}"
    joiner = draw(st.sampled_from([f"{gap}->{gap}", f"\n{gap}-> ", "\n  # note\n  -> "]))
    return joiner.join([draw(_expr(depth)), *ops]) if ops else draw(_expr(depth))


@st.composite
def _statement(draw):
    kind = draw(st.integers(0, 8))
    n = draw(_NAME)
    if kind == 0:
        return f"dim {n}, {draw(_NAME)} = {draw(_expr())}"
    if kind == 1:
        return f"assume {draw(_expr())} {draw(st.sampled_from(['==', '<=', '!=', '>']))} {draw(_expr())}"
    if kind == 2:
        return f"example {n}={draw(st.sampled_from(['1', '8', '512']))}, {draw(_NAME)}=8"
    if kind == 3:
        decl = draw(st.sampled_from(["input", "param", "buffer"]))
        tail = draw(st.sampled_from(["", " int"] + [" frozen", " bool frozen"] * (decl == "param")))
        return f"{decl} {n}: [{draw(_expr())}, D]{tail}"
    if kind == 4:
        return f"expect {n}: {draw(st.sampled_from(['[B, S, D]', '?', '?shape', '[S, S] bool']))}"
    if kind == 5:
        body = draw(st.lists(_statement(), max_size=3))
        lines = [f"block {draw(_NAME)}(x: [B, S, D], dim F):", *("  " + b for b in body),
                 f"  return {draw(_pipeline())}", "end"]
        return "\n".join(lines)
    names = ", ".join([n, *draw(st.lists(_NAME, max_size=2))])
    return f"{names}:{draw(_GAP)}{draw(_pipeline())}"


@st.composite
def _spec(draw):
    lines = []
    for stmt in draw(st.lists(_statement(), min_size=1, max_size=8)):
        lines.append(stmt + draw(st.sampled_from(["", "", "  # why", " #"])))
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(["", "# a comment", "   "])))
    text = "\n".join(lines)
    if draw(st.integers(0, 6)) == 0:                      # a stray character somewhere
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(list("(),:=-[]'{}!?\t") + ["->", "\n"])) + text[i:]
    return text


@settings(max_examples=examples(600), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_spec())
def test_the_fast_path_gives_larks_nodes_on_generated_specs(source):
    """Whatever the fast path remembered from earlier texts, it gives exactly lark's nodes (or
    the same E004), and leaves to lark only what lark refuses too."""
    from shapelang.syntax import grammar

    assert_same(grammar.fast_path(), source)


def test_remembered_parser_moves_are_bounded_and_forgetting_them_changes_nothing(monkeypatch):
    """A long-lived process (the editor server) parses many texts: the stacks the fast path
    remembers stay under MAX_STEPS, and a parse that starts afresh gives the same nodes."""
    from shapelang.syntax import grammar, tokens

    monkeypatch.setattr(tokens, "MAX_STEPS", 40)
    monkeypatch.setattr(tokens, "MAX_STACKED", 300)
    fast = tokens.FastPath(tokens.describe(grammar.lark_parser(), grammar._BUILDER), grammar._BUILDER)
    deep = "y: x -> linear " + "(" * 60 + "D" + ")" * 60 + "\n"
    for source in [deep] + [path.read_text(encoding="utf-8") for path in SOURCES[:12]]:
        assert_same(fast, source)
        assert len(fast.steps) <= 40
        assert sum(len(stack) for stack in fast.steps) <= 300 + 2 * MAX_DEPTH


def test_nodes_made_by_the_fast_path_are_those_their_classes_make():
    """The parser makes common nodes without their dataclass __init__: each one equals, hashes
    and prints as the node its class makes from the same fields."""
    import dataclasses

    from shapelang.syntax import grammar

    spec = parse((ROOT / "specs" / "gpt2_small.shape").read_text(encoding="utf-8"))
    seen = set()

    def walk(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif dataclasses.is_dataclass(x):
            fields = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
            again = type(x)(**fields)
            assert (x == again, hash(x) == hash(again), repr(x) == repr(again)) == (True,) * 3
            assert vars(x) == vars(again)
            seen.add(type(x).__name__)
            for value in fields.values():
                walk(value)

    walk(spec.statements)
    assert {"Span", "Name", "Num", "Op", "Pipeline", "Binding", "ShapeLit"} <= seen
    assert grammar.MISSING is not None
