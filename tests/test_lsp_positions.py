"""Positions between the language (1-based lines and columns in characters) and LSP
(0-based lines, UTF-16 code units), and the document symbol index, without a server."""
from __future__ import annotations

import pytest
import tiers
from hypothesis import given, settings
from hypothesis import strategies as st

from shapelang.lsp.positions import LineMap, normalise
from shapelang.lsp.symbols import build
from shapelang.syntax.nodes import Span


def test_astral_characters_count_two_units():
    m = LineMap("a😀b\nπ = 3\n")
    assert m.to_lsp(1, 2) == (0, 1)        # before the emoji
    assert m.to_lsp(1, 3) == (0, 3)        # after it: two units
    assert m.to_lsp(2, 2) == (1, 1)        # π is one unit
    assert m.from_lsp(0, 3) == (1, 3)
    assert m.from_lsp(0, 2) == (1, 2)      # inside the surrogate pair: the emoji itself
    assert m.span_range(Span(1, 2, 1, 3)) == ((0, 1), (0, 3))


def test_out_of_range_positions_are_clamped():
    m = LineMap("ab\ncd")
    assert m.to_lsp(9, 9) == (1, 2)
    assert m.from_lsp(7, 40) == (2, 3)
    assert m.from_lsp(-1, -5) == (1, 1)


def test_crlf_text_has_the_lines_of_the_file_as_check_reads_it():
    assert normalise("a\r\nb\rc\n") == "a\nb\nc\n"
    assert LineMap("x: y\r\nzz").to_lsp(2, 3) == (1, 2)


CODEC = {"utf-16": ("utf-16-le", 2), "utf-8": ("utf-8", 1), "utf-32": ("utf-32-le", 4)}


@pytest.mark.parametrize("encoding", CODEC)
@settings(max_examples=tiers.examples(300), deadline=None)
@given(lines=st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
                              max_size=12), min_size=1, max_size=4))
def test_round_trip_on_any_text(encoding, lines):
    """Characters in the units of each position encoding, as Python's codecs count them."""
    codec, width = CODEC[encoding]
    m = LineMap("\n".join(lines), encoding)
    for i, line in enumerate(lines, 1):
        for col in range(1, len(line) + 2):
            l0, units = m.to_lsp(i, col)
            assert units == len(line[:col - 1].encode(codec)) // width
            assert m.from_lsp(l0, units) == (i, col)


def test_a_position_inside_a_character_finds_the_character():
    m = LineMap("a😀b", "utf-8")
    assert [m.from_lsp(0, k) for k in range(7)] == [(1, 1), (1, 2), (1, 2), (1, 2), (1, 2), (1, 3), (1, 4)]


def test_index_scopes_and_definitions():
    text = ("dim B, D\nexample B=2, D=4\ninput x: [B, D]\nblock F(x: [B, D]):\n  param W: [D, D]\n"
            "  y: x @ W\n  return y\nend\nout: x -> F\n")
    ix = build(text)
    kinds = {(s.scope, s.name): s.kind for s in ix.symbols.values()}
    assert kinds == {(None, "B"): "dim", (None, "D"): "dim", (None, "x"): "input", (None, "F"): "block",
                     ("F", "x"): "input", ("F", "W"): "param", ("F", "y"): "tensor", (None, "out"): "tensor"}
    inner = ix.at(6, 6)                     # the x of `y: x @ W`
    assert ix.resolve(inner).scope == "F"
    outer = ix.at(9, 6)                     # the x of `out: x -> F`
    assert ix.resolve(outer).scope is None
    assert ix.resolve(ix.at(9, 11)).kind == "block"


def test_index_of_a_broken_document_keeps_the_statements_that_parse():
    ix = build("dim B\ninput x: [B, 3]\ny: x -> ) oops\nz: x -> relu\n")
    assert {s.name for s in ix.symbols.values()} >= {"B", "x", "z"}


def test_lsp_without_the_extra_says_what_to_install(monkeypatch, capsys):
    import sys

    from shapelang.cli import main

    monkeypatch.setitem(sys.modules, "pygls", None)   # as if pygls were not installed
    assert main(["lsp"]) == 2
    assert "pip install 'shapelang[lsp]'" in capsys.readouterr().err
