"""The server's features on every spec of the repository, in process (the stdio
session is tests/test_lsp.py): quick fixes give the proved rewrite and clear the
finding, diagnostics carry check's codes and messages, and no position of any
spec makes a feature fail."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("lsprotocol", reason="the language server needs the `lsp` extra")
from lsprotocol import types as t
from tiers import sample

import shapelang
from shapelang.lsp import completion, findings, hover, navigation
from shapelang.lsp.documents import DocumentStore

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.shape")) + sorted((ROOT / "tests" / "cases").glob("*.shape"))
BUGS = sorted((ROOT / "tests" / "provenance" / "bugs").glob("*.shape"))
EVERYTHING = t.Range(t.Position(0, 0), t.Position(10**6, 0))


def _analysis(path: Path):
    store = DocumentStore()
    store.update(path.as_uri(), 1, path.read_text(encoding="utf-8"))
    return store.analysis(path.as_uri())


def _apply(text: str, edit: t.TextEdit) -> str:
    """An editor's application of a TextEdit: positions in UTF-16 code units."""
    lines = text.split("\n")

    def offset(p: t.Position) -> int:
        before = "\n".join(lines[:p.line])
        units = lines[p.line].encode("utf-16-le")[:2 * p.character].decode("utf-16-le")
        return len(before) + (1 if p.line else 0) + len(units)
    return text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]


def test_every_proved_fix_is_a_quick_fix_that_clears_its_finding():
    docs = findings.CodeDocs()
    applied = 0
    for path in BUGS:
        an = _analysis(path)
        actions = findings.code_actions(an, EVERYTHING, docs)
        proved = [d for d in an.spec.diagnostics if d.fix is not None]
        assert len(actions) == len(proved), path.name
        for action, d in zip(actions, proved):
            (edit,) = action.edit.changes[an.uri]
            new_text = _apply(an.text, edit)
            line = new_text.split("\n")[d.span.line - 1]
            assert d.fix[2] in line, path.name
            again = shapelang.check(new_text)
            assert (d.code, d.span.line) not in {(x.code, x.span.line) for x in again.diagnostics}
            assert again.ok or not an.spec.ok, path.name
            applied += 1
    assert applied >= 5


# the default tier: four specs of different kinds and every 25th of the others
@pytest.mark.parametrize("path", sample(SPECS + BUGS[:8], every=25, ids=lambda p: p.name, always={
    "mha_self_attention", "llama2_7b_step", "layout", "w301_cross_keys_reshape"}))
def test_features_answer_at_every_position(path):
    an = _analysis(path)
    got = findings.diagnostics(an, findings.CodeDocs())
    assert [(d.code, d.message) for d in got] == [(d.code, d.message) for d in an.spec.diagnostics]
    hovered = 0
    for k, line in enumerate(an.text.split("\n"), 1):
        # every column of the code, and the first of a comment (the rest of a comment is
        # the same text to every feature: the long headers of the model specs cost minutes)
        code = line.split("#", 1)[0] if '"' not in line else line
        for col in range(1, len(code) + 2 + (len(code) < len(line))):
            if hover.hover(an, k, col) is not None:
                hovered += 1
            span = navigation.definition(an, k, col)
            if span is not None:
                assert span in navigation.references(an, k, col)
            completion.complete(an, k, col)
            completion.signature(an, k, col)
    assert hovered > 0


def test_hover_over_a_bool_mask_shows_bool():
    text = ("dim S\nexample S=4\ninput ids: [S] int\nmask: ids > 0\nh: ids -> to float16\n"
            "block Keep(m: [S] bool):\n  return m -> logical_not\nend\nk: mask -> Keep\n")
    store = DocumentStore()
    store.update("file:///mask.shape", 1, text)
    an = store.analysis("file:///mask.shape")
    assert an.spec.ok
    shown = hover.hover(an, 4, 1)[0]
    assert "mask: [S] bool" in shown
    assert "input ids: [S] int" in hover.hover(an, 3, 7)[0]
    assert "[S] float16" in hover.hover(an, 5, 1)[0]
    assert "`m: [S] bool`" in hover.hover(an, 7, 10)[0]


@pytest.mark.parametrize("name", ["mha_self_attention", "gpt2_small", "llama2_7b_step"])
def test_hover_answers_for_exactly_the_columns_of_each_name(name):
    """Every occurrence of a name is hovered from its first column to its last, and the
    hover names that occurrence's span; the column before it, where that is a space, is not
    that occurrence. An off-by-one in positions fails here on every spec."""
    an = _analysis(ROOT / "specs" / f"{name}.shape")
    lines = an.text.split("\n")
    checked = 0
    for occ in an.index.occurrences:
        sp = occ.span
        if sp.line != sp.end_line or an.index.resolve(occ) is None:   # a keyword: the step's hover
            continue
        for col in (sp.column, sp.end_column - 1):
            got = hover.hover(an, sp.line, col)
            assert got is not None and got[1] == sp, (name, sp, col, got and got[1])
        if sp.column > 1 and lines[sp.line - 1][sp.column - 2] == " ":
            got = hover.hover(an, sp.line, sp.column - 1)
            assert got is None or got[1] != sp, (name, sp)
        checked += 1
    assert checked > 20


def test_hover_markdown_closes_its_code_block_in_commonmark():
    """VS Code renders hovers with markdown-it: a closing fence with text after it does not
    close the block. The example sizes follow the fence as their own paragraph."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py renders the hover as VS Code does")
    md = markdown_it.MarkdownIt("commonmark")
    an = _analysis(ROOT / "specs" / "mha_self_attention.shape")
    shown = 0
    for occ in an.index.occurrences:
        got = hover.hover(an, occ.span.line, occ.span.column)
        if got is None or "```" not in got[0]:
            continue
        tokens = md.parse(got[0])
        fences = [tk for tk in tokens if tk.type == "fence"]
        assert fences and all(tk.info == "shapelang" for tk in fences), got[0]
        html = md.render(got[0])
        assert "```" not in html, html          # no stray backticks: every fence closed
        assert html.count("<pre>") == len(fences)
        if "example:" in got[0]:
            assert "example:" not in fences[0].content and "example:" in html
            shown += 1
    assert shown > 5
