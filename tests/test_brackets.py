"""The one bracket-and-quote scanner behind the checker's habit rewrites and the code
generator's layout: pieces at top-level separators, the closing bracket, the last opening."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shapelang.syntax import brackets


def test_pieces_cut_only_at_the_top_level():
    text = 'x -> view [B, S, H, D/H] -> f("a->b", (1, 2)) -> g'
    assert [text[a:b].strip() for a, b in brackets.pieces(text, ("->",))] == \
        ["x", "view [B, S, H, D/H]", 'f("a->b", (1, 2))', "g"]
    python = "a, 'b,\\'c', (d, e)"
    assert [python[a:b].strip() for a, b in brackets.pieces(python, (",",), "\"'", escapes=True)] == \
        ["a", "'b,\\'c'", "(d, e)"]


def test_closing_and_last_opening():
    assert brackets.closing('f(a, (b), "c)") + 1', 1) == 14
    assert brackets.closing("f(a, (b)", 1) == -1
    stmt = "y = self.f(a, g(b), 'x)')"
    assert brackets.last_opening(stmt, "\"'", escapes=True) == 10
    assert brackets.last_opening("no brackets") is None


@given(st.text(alphabet="ab,()[]\"' ", max_size=40))
def test_the_pieces_and_separators_make_the_text_again(text):
    cuts = brackets.pieces(text, (",",), "\"'", escapes=True)
    assert ",".join(text[a:b] for a, b in cuts) == text
    depth = 0
    for k, c, d, quoted in brackets.scan(text, "\"'", escapes=True):
        if not quoted and c in "([{":
            depth += 1
        elif not quoted and c in ")]}":
            depth -= 1
        if not quoted and c == "," and d == 0:
            assert any(b == k for _a, b in cuts)
