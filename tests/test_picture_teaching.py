"""What a learner reads in the pictures: sizes from fixed dims and `--example`, errors whole in
the HTML and the SVG, the causal triangle, the softmax axis, the merge bar, split/merge words
for a window partition, the text trace's formulas, a legend of dims, the same colour for an
axis in the HTML and the SVG, and the dataflow overview."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from tiers import checked as shared_check
from tiers import sample

import shapelang
from shapelang.notebook.cell import Session, run_cell
from shapelang.render.html import trace_html, trace_svg
from shapelang.render.table import trace_text

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.shape"))
SVG = "{http://www.w3.org/2000/svg}"

FIXED = "dim B, S\ndim D = 64\ndim H = 4\ndim Dh = D / H\ninput X: [B, S, D]\nQ: X -> linear D -> view [B, S, H, Dh]\n"


def _step(page: str, ref: str) -> str:
    start = page.index(f'data-step="{ref}"')
    end = page.find('<div class="step"', start + 1)
    return page[start:end if end > 0 else len(page)]


def _ref(spec, name: str, k: int = -1) -> str:
    return next(b for b in spec.bindings if ", ".join(b.names) == name).steps[k].ref


def test_fixed_dims_give_the_sizes_without_an_example():
    spec = shapelang.check(FIXED)
    view = _step(trace_html(spec), _ref(spec, "Q"))
    heads, width = torch.empty(1, 1, 64).view(1, 1, 4, -1).shape[2:]     # what PyTorch makes of D=64, H=4
    assert f"H={heads} slices of Dh={width}" in view
    assert re.findall(r'class="ex">([^<]*)<', view) == ["?", "?", str(heads), str(width)]   # B, S stay free
    assert "fixed sizes: D=64, H=4, Dh=16" in trace_html(spec)


def test_the_notebooks_example_sizes_reach_the_boxes_and_the_error_text():
    bad = FIXED.replace("linear D", "linear 2*D")
    shown = run_cell("--example B=2,S=5", bad, Session())
    assert shown.failed
    assert "= [2, 5, 4, 16]" in shown.plain and "at the example sizes" in shown.plain
    assert "= [2, 5, 4, 16]" in shown.html
    good = run_cell("--example B=2,S=5", FIXED, Session())
    assert re.findall(r'class="ex">([^<]*)<', _step(good.html, _ref(good.spec, "Q"))) == ["2", "5", "4", "16"]


def test_an_error_is_whole_in_the_svg_wrapped_to_the_figure_with_its_help():
    spec = shapelang.check(FIXED.replace("linear D", "linear 2*D"), "bad.shape")
    svg = trace_svg(spec)
    root = ET.fromstring(svg)
    width = float(root.get("width"))
    lines = [t.text or "" for t in root.iter(f"{SVG}text") if t.get("font-family") == "monospace"]
    d = spec.diagnostics[0]
    flat = " ".join(" ".join(lines).split())
    assert " ".join(d.message.split()) in flat and " ".join(d.help.split()) in flat
    # each line fits the figure (monospace 12 px: at most 7.4 px a character)
    assert max(len(ln) for ln in lines) * 7.4 <= width
    assert width < 1000


def test_the_causal_mask_is_a_triangle_and_softmax_marks_its_axis():
    spec = shared_check(ROOT / "specs" / "gpt2_small.shape")
    page = trace_html(spec)
    block = next(iter(spec.blocks["GPT2Block"]))
    att = next(b for b in block.bindings if b.names == ("att",))
    mask = next(s for s in att.steps if s.op == "mask")
    soft = next(s for s in att.steps if s.op == "softmax")
    masked = _step(page, mask.ref)
    n = spec.example["S"]
    hidden = torch.ones(n, n).triu(1).sum().item()          # PyTorch's causal mask: keys after the query
    assert masked.count('class="masked"') == hidden
    assert f"({int(hidden)} of {n * n} shown)" in masked
    soft_fig = _step(page, soft.ref)
    marks = re.findall(r'<g data-axis="([^"]*)" data-tag="[^"]*">(?:(?!<g data-axis).)*data-mark=', soft_fig)
    assert marks == ["S"]                                  # the last axis: the keys
    assert "each query row sums to 1 over the keys" in soft_fig


def test_merging_the_heads_has_its_bar():
    spec = shared_check(ROOT / "specs" / "mha_self_attention.shape")
    merged = _step(trace_html(spec), _ref(spec, "merged"))
    assert 'data-bar="merge"' in merged and "H × Dh merged into D" in merged
    assert "H=8 slices of Dh=64" in merged


def test_a_window_partition_is_split_not_new_and_formulas_read_as_the_text_trace():
    spec = shared_check(ROOT / "specs" / "swin_tiny.shape")
    page = trace_html(spec)
    words = re.findall(r'<div class="changed-names">([^<]*)</div>', page)
    partition = [w for w in words if w.startswith("split: G/W; split: W")]
    assert partition and all("new" not in w for w in partition)
    assert "**" not in page
    # counts by the text trace's printer: textbook products and powers, its very formulas
    text = trace_text(spec)
    formulas = [f.split(" = ")[0] for f in re.findall(r"params per instance ([^<]*)</span>", page)]
    assert formulas and not any("*" in f for f in formulas)
    assert any(f"parameters: {f} = " in text for f in formulas)


@pytest.mark.parametrize("path", sample(SPECS, every=12))
def test_legend_lists_dims_and_html_and_svg_agree_on_colours(path):
    spec = shared_check(path)
    page, svg = trace_html(spec), trace_svg(spec)
    legend = re.search(r'<div class="legend">(.*?)</div>', page).group(1)
    names = re.findall(r'<span class="dim" style="--h:(\d+)">([^<]*)</span>', legend)
    assert names and all(n.isidentifier() for _, n in names)
    # each figure the same in both outputs: the same axes in the same colours
    def hues(fig):
        return re.findall(r'<g data-axis="([^"]*)"[^>]*>(?:<title>[^<]*</title>)?<rect[^>]*?(?:style="--h:(\d+)")?/>', fig)

    figures = [[hues(f) for f in re.findall(r'<svg [^>]*class="fig".*?</svg>', out)] for out in (page, svg)]
    assert figures[0] == figures[1] and len(figures[0]) >= len(spec.decls)
    # the SVG draws every step the HTML draws, and its header and legend
    assert set(re.findall(r'data-step="([^"]*)"', page)) <= set(re.findall(r'data-step="([^"]*)"', svg))
    assert f"trace of {spec.path}" in svg and "axes:" in svg


@pytest.mark.parametrize("path", sample(SPECS, every=12))
def test_the_overview_shows_every_binding_for_specs_with_more_than_three(path):
    spec = shared_check(path)
    page = trace_html(spec)
    nodes = re.findall(r'<a href="#([^"]*)" data-node="([^"]*)"', page)
    if len(spec.bindings) <= 3:
        assert not nodes
        return
    names = [", ".join(b.names) for b in spec.bindings]
    assert set(names) <= {n for _, n in nodes}
    for target, _ in nodes:          # each node links to its binding on the page
        assert f'id="{target}"' in page


def test_the_overview_branches_q_k_v_and_meets_in_the_scores():
    spec = shared_check(ROOT / "specs" / "mha_self_attention.shape")
    edges = set(re.findall(r'data-edge="([^"]*)->([^"]*)"', trace_html(spec)))
    assert {("X", "Q"), ("X", "K"), ("X", "V")} <= edges
    assert ("Qh", "scores") in edges and ("Kt", "scores") in edges and ("Vh", "heads") in edges


def test_the_failing_step_is_drawn_with_its_operands_and_later_bindings_are_not_checked():
    text = ("dim B, S, D\nexample B=2, S=5, D=16\ninput X: [B, S, D]\nQ: X -> linear D\nK: X -> linear D\n"
            "scores: Q @ K -> softmax -1\nout: scores @ X\n")
    spec = shapelang.check(text, "clash.shape")
    page = trace_html(spec)
    failing = page[page.index('data-binding="scores"'):page.index('data-binding="out"')]
    assert 'data-unfinished="E101"' in failing and "stopped by error[E101]" in failing
    # the operands side by side, the inner axes PyTorch refuses to contract marked
    q, k = torch.empty(2, 5, 16), torch.empty(2, 5, 16)
    with pytest.raises(RuntimeError):
        q @ k
    assert "left operand <b>Q</b>" in failing and "right operand <b>K</b>" in failing
    clashes = re.findall(r'<g data-axis="([^"]*)" data-tag="clash">', failing)
    assert clashes == ["D", "S"]             # the left's last axis, the right's second to last
    assert 'data-diagnostic="E101"' in failing
    later = page[page.index('data-binding="out"'):]
    assert "not checked" in later.split("</details>")[0]
    # a binding stopped after some steps keeps the steps that checked
    spec = shapelang.check(FIXED.replace("linear D", "linear 2*D"))
    page = trace_html(spec)
    stopped = page[page.index('data-binding="Q"'):]
    assert 'data-op="linear"' in stopped and "stopped by error[E103] after 1 step" in stopped
