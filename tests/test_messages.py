"""Golden transcripts of the messages, one per kind of mistake, and their honest reading.

tests/golden/messages/NAME.shape is a spec with one typical mistake; NAME.check.txt is what
`shapelang check NAME.shape` prints for it. Each test checks the printed text against the
file, and what the text claims against the checker's own data: every message says where
(a span, with a label where the cause is elsewhere), why (a note, a label or a message
that names the sizes) and gives a proved fix (the rewritten spec checks clean of it).

To regenerate after an intended change, review the diff afterwards:

    SHAPELANG_UPDATE_GOLDENS=1 python -m pytest tests/test_messages.py
    python -m pytest tests/test_messages.py --update-goldens      (the same)

docs/messages.md shows five of these transcripts; the same switch rewrites them there.
"""
import os
import re
from pathlib import Path

import pytest

from shapelang import render
from shapelang.checker.advice.fixes import apply
from shapelang.checker.checker import check_text

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "tests" / "golden" / "messages"
GOLDEN = sorted(HERE.glob("*.shape"))
DOC = ROOT / "docs" / "messages.md"


def _update(flag: bool) -> bool:
    return flag or os.environ.get("SHAPELANG_UPDATE_GOLDENS") == "1"


def transcript(path: Path) -> str:
    """What `shapelang check NAME.shape` prints, run in the folder of the file."""
    return render.check_text(check_text(path.read_text(), path.name))


def test_enough_message_classes():
    assert len(GOLDEN) >= 12


@pytest.mark.parametrize("spec", GOLDEN, ids=lambda p: p.stem)
def test_transcript(spec, update_goldens):
    want = spec.with_suffix(".check.txt")
    got = transcript(spec)
    if _update(update_goldens) or not want.exists():
        want.write_text(got)
    assert got == want.read_text(), f"{want.name} differs; regenerate (see the top of this file)"


@pytest.mark.parametrize("spec", GOLDEN, ids=lambda p: p.stem)
def test_each_message_names_where_why_and_a_proved_fix(spec):
    source = spec.read_text()
    checked = check_text(source, spec.name)
    assert checked.diagnostics, "a golden holds a mistake"
    lines = source.split("\n")
    for d in checked.diagnostics:
        # where: a span inside the file, and labels inside it too
        assert 0 < d.span.line <= len(lines) and d.span.column >= 1
        for span, text in d.labels:
            assert 0 < span.line <= len(lines) and text
        # why: sizes, a note or a label say more than the code
        assert d.message and (d.notes or d.labels or re.search(r"`[^`]+`", d.message)), d
        # a proved fix: applying it removes this diagnostic and adds no error
        assert d.fix is not None, (d.code, d.message)
        span, text, shown = d.fix
        fixed, _ = apply(source, span, text)
        again = check_text(fixed, spec.name)
        assert not again.errors(), render.check_text(again)
        assert shown in d.help


def test_one_error_per_root_cause():
    """The cascades of the issue: a dim line without commas, a missing assumption in a
    nested block, a dim declared twice: one error each."""
    for name in ("dim_commas", "nested_block", "duplicate_dim", "similar_name"):
        checked = check_text((HERE / f"{name}.shape").read_text(), name)
        assert len(checked.diagnostics) == 1, render.check_text(checked)


def test_nested_block_names_the_callers_dims():
    checked = check_text((HERE / "nested_block.shape").read_text(), "nested")
    (d,) = checked.diagnostics
    assert "T" in d.message and "Sq" not in d.message and "Sq" not in d.help
    assert "has no `return`" not in render.check_text(checked)
    assert [t for _, t in d.labels] == ["`Window` is called here with x: [B, T, D] = [2, 16, 8]",
                                        "`Layer` is called here with x: [B, T, D] = [2, 16, 8]"]


# ------------------------------------------------------------ docs/messages.md

_BLOCK = re.compile(r"(<!-- transcript: (\w+) -->\n)(.*?)(<!-- end transcript -->)", re.DOTALL)


def doc_block(name: str) -> str:
    path = HERE / f"{name}.shape"
    return (f"```shapelang\n{path.read_text()}```\n\n"
            f"```text\n$ shapelang check {path.name}\n{transcript(path)}```\n")


def test_docs_page_shows_the_current_output(update_goldens):
    text = DOC.read_text()
    blocks = _BLOCK.findall(text)
    assert len(blocks) >= 5, "docs/messages.md walks through five mistakes"
    new = _BLOCK.sub(lambda m: m.group(1) + doc_block(m.group(2)) + m.group(4), text)
    if _update(update_goldens):
        DOC.write_text(new)
        text = new
    assert new == text, "docs/messages.md is out of date; regenerate (see the top of this file)"
