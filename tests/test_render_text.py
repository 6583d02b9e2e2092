"""The text renderer on long lines: a message shows the part of the line around the caret."""
from __future__ import annotations

from shapelang import check, render_check


def test_a_200_kb_line_gives_a_short_message_with_the_caret_in_place():
    text = "dim B\ninput a: [B]\nx: " + "a " * 100_000 + "\n"
    out = render_check(check(text))
    assert len(out) < 2_000
    assert "line 3 is longer" in out


def test_the_caret_stays_under_the_cut_line():
    body = "y: a -> " + " -> ".join(["relu"] * 60) + " -> softmax 3"
    out = render_check(check("dim B\ninput a: [B]\n" + body + "\n"))
    lines = out.split("\n")
    source = next(ln for ln in lines if ln.startswith("3 | "))
    caret = lines[lines.index(source) + 1]
    assert source.startswith("3 | …") and len(source) < 200
    k = caret.index("^")
    assert source[k:k + len("softmax 3")] == "softmax 3" or source[k] == "3"


def test_short_lines_are_shown_whole():
    out = render_check(check("dim B\ninput a: [B]\ny: a -> softmax 3\n"))
    assert "3 | y: a -> softmax 3" in out
