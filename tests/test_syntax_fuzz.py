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
from tiers import sample

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


@pytest.mark.parametrize("path", SOURCES[::3], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_fast_path_agrees_with_larks_own_lexer_and_parser(path):
    """grammar.run parses through tokens.FastPath and falls back to lark on anything unusual:
    wherever the fast path gives nodes, lark's ordinary path gives the same nodes."""
    import lark

    from shapelang.syntax import grammar

    original = path.read_text(encoding="utf-8")
    rng = random.Random(f"fast/{path.name}")
    fast, slow = grammar.fast_path(), grammar.lark_parser()
    text = grammar.Text(original.replace("\r", "") + "\n")
    grammar._BUILDER.reset(text.source)
    nodes = fast.parse(text.source, text.starts, "start", 0, len(text.source), 0)
    assert nodes is not grammar.MISSING and nodes == slow.parse(text.source, start="start")
    for _ in range(MUTANTS_PER_FILE):
        text = grammar.Text(mutate(original, rng).replace("\r", "") + "\n")
        grammar._BUILDER.reset(text.source)
        try:
            got = fast.parse(text.source, text.starts, "start", 0, len(text.source), 0)
        except ParseFailure:
            got = "E004"
        try:
            want = slow.parse(text.source, start="start")
        except lark.exceptions.UnexpectedInput:
            want = None
        except ParseFailure:
            want = "E004"
        if got is not grammar.MISSING:
            assert got == want, repr(text.source[:200])
        else:
            assert want is None, repr(text.source[:200])
