"""The diagnostics renderer says what each part of a line is (the severity, the gutter, the
marks and their labels, `note:` and `help:`) as it writes the line, and the colour module
only paints those roles: it never reads the text back, so text that looks like the layout
(a message or a note quoting a diagnostic) is never coloured as layout."""
from __future__ import annotations

import io
import re

import pytest

from shapelang import check, render_check
from shapelang.render.color import STYLES, write
from shapelang.render.text import check_lines, diagnostic_lines
from shapelang.syntax.diagnostics import Diagnostic
from shapelang.syntax.nodes import Span

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SPEC = """dim B, S, D
example B=2, S=3, D=4
input x: [B, S, D]
input w: [D, S]
mu: x -> mean 1
y: x - mu
z: x @ w @ w
"""


def _roles(line):
    return [(line.text[a:b], role) for a, b, role in line.spans]


@pytest.fixture(scope="module")
def lines():
    return check_lines(check(SPEC, "a.shape"))


def test_the_lines_are_the_plain_text(lines):
    assert "\n".join(line.text for line in lines) + "\n" == render_check(check(SPEC, "a.shape"))


def test_roles_as_rustc_lays_a_diagnostic_out(lines):
    by_text = {line.text: line for line in lines}
    head = next(line for line in lines if line.text.startswith("a.shape:6:4:"))
    assert ("error[E102]", "error") in _roles(head)
    text, role = _roles(head)[-1]
    assert (text.strip(), role) == (head.text.split(": ", 2)[2], "summary")
    assert ("5 |", "gutter") in _roles(by_text["5 | mu: x -> mean 1"])
    lost = next(line for line in lines if "------ mu loses axis 1" in line.text)
    assert ("------", "label") in _roles(lost)
    assert (lost.text.split("------ ")[1], "label") in _roles(lost)
    marks = next(line for line in lines if "-^^^--" in line.text)
    assert [r for r in _roles(marks) if r[1] != "gutter"] == [
        ("-", "label"), ("^^^", "error"), ("--", "label"), ("[B, D] = [2, 4]", "label")]
    # the label that hangs below its mark, and the stem that leads to it
    stem = lines[lines.index(marks) + 1]
    assert ("|", "label") in _roles(stem)[1:]
    hanging = lines[lines.index(marks) + 2]
    assert ("[B, S, D] = [2, 3, 4]", "label") in _roles(hanging)
    help_ = next(line for line in lines if "= help:" in line.text)
    assert ("=", "gutter") in _roles(help_) and ("help:", "help") in _roles(help_)
    assert all(role in STYLES for line in lines for _, _, role in line.spans)


def test_every_mark_is_coloured_and_spans_stay_in_their_line(lines):
    for line in lines:
        covered = set()
        for a, b, _ in line.spans:
            assert 0 <= a < b <= len(line.text), (line.text, a, b)
            covered |= set(range(a, b))
        if re.match(r"^\s*\|", line.text):        # a line of marks under the source
            at = line.text.index("|") + 2
            marks = [k for k, ch in enumerate(line.text) if ch in "^-" and k >= at]
            assert set(marks) <= covered, line.text


def test_text_that_looks_like_layout_is_not_coloured_as_layout():
    """A message or note that quotes a diagnostic gets the roles of where it sits, not of
    what it looks like (a renderer that re-read its own output would colour these)."""
    d = Diagnostic("E101", "see b.shape:1:1: error[E102]: here", Span(2, 1, 2, 2),
                   help="write\n  = note: not a note\n3 | not a source line", notes=("  |  ^^^ quoted",))
    out = diagnostic_lines(d, "a.shape", "x\ny\n")
    assert [r for r in _roles(out[0]) if r[1] != "summary"] == [("error[E101]", "error")]
    quoted = [line for line in out if "not a" in line.text or "quoted" in line.text]
    assert [line.text for line in quoted] == ["  = note:   |  ^^^ quoted", "  = note: not a note",
                                              "3 | not a source line"]
    assert _roles(quoted[0]) == [("=", "gutter"), ("note:", "note")]
    assert quoted[1].spans == [] and quoted[2].spans == []


def test_the_colours_written_are_the_roles():
    pytest.importorskip("rich", reason="colour is the optional `color` extra: pip install 'shapelang[color]'")
    lines = check_lines(check(SPEC, "a.shape"))
    stream = io.StringIO()
    write(lines, stream, True)
    out = stream.getvalue()
    assert ANSI.sub("", out) == render_check(check(SPEC, "a.shape"))
    coloured = out.split("\n")
    hanging = next(k for k, line in enumerate(lines) if line.text.endswith("|    [B, S, D] = [2, 3, 4]"))
    blue = "\x1b[1;34m"    # "bold blue": the label's style
    assert re.search(re.escape(blue) + r"\[B, S, D\] = \[2, 3, 4\]", coloured[hanging]), coloured[hanging]
    marks = next(k for k, line in enumerate(lines) if "-^^^--" in line.text)
    red = "\x1b[1;31m"     # "bold red": an error's
    assert re.search(re.escape(red) + r"\^\^\^", coloured[marks]), coloured[marks]
