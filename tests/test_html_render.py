"""The trace as a picture: `shapelang trace --format html|svg` and `CheckedSpec._repr_html_`."""
from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from tiers import checked as shared_check

import shapelang
from shapelang.render.html import trace_fragment, trace_html, trace_svg
from shapelang.render.table import trace_text

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.shape"))


def _names(spec) -> set:
    names = {d.name for d in spec.decls} | {", ".join(b.names) for b in spec.bindings}
    for insts in spec.blocks.values():
        for ir in insts:
            names |= {d.name for d in ir.params + ir.buffers} | {", ".join(b.names) for b in ir.bindings}
    return names


def _step(page: str, ref: str) -> str:
    start = page.index(f'data-step="{ref}"')
    end = page.find('<div class="step"', start + 1)
    return page[start:end if end > 0 else len(page)]


@pytest.fixture(scope="module")
def mha():
    spec = shapelang.check_file(str(ROOT / "specs" / "mha_self_attention.shape"))
    return spec, trace_html(spec)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_spec_draws_every_binding_and_fetches_nothing(path):
    spec = shared_check(path)
    page = trace_html(spec)
    drawn = set(re.findall(r'data-binding="([^"]*)"', page))
    assert _names(spec) <= drawn
    steps = {s.ref for b in spec.bindings for s in b.steps}
    assert steps <= set(re.findall(r'data-step="([^"]*)"', page))
    # self-contained: nothing to load from anywhere
    # (a link within the page, `#binding-x` or `url(#arrow)`, fetches nothing)
    assert not re.search(r"\b(src|href)\s*=\s*\"(?!#)|@import|url\((?!#)|@font-face", page)
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * page.count("xmlns=")


def test_heads_split_moved_and_scores(mha):
    spec, page = mha
    qh = next(b for b in spec.bindings if b.names == ("Qh",))
    view, swap = (_step(page, s.ref) for s in qh.steps)
    assert re.findall(r'data-axis="([^"]*)" data-tag="split"', view) == ["H", "Dh"]
    assert "D split into H × Dh" in view and "H=8 slices of Dh=64" in view
    assert re.findall(r'data-axis="([^"]*)" data-tag="moved"', swap) == ["H", "S"]
    assert "before" in swap and "after" in swap
    scores = next(b for b in spec.bindings if b.names == ("scores",))
    product = _step(page, scores.steps[0].ref)
    assert "scores: query × key" in product and 'data-rows="S" data-cols="S"' in product
    assert 'data-tag="contracted"' in product and "contracted: Dh" in product
    merged = next(b for b in spec.bindings if b.names == ("merged",))
    assert re.findall(r'data-axis="([^"]*)" data-tag="merged"', _step(page, merged.steps[-1].ref)) == ["D"]
    weights = next(b for b in spec.bindings if b.names == ("weights",))
    assert 'data-tag="' + '"' in _step(page, weights.steps[0].ref)      # softmax changes no axis
    assert not re.search(r'data-tag="[a-z]', _step(page, weights.steps[0].ref))
    # counts in the text trace's notation, never Python's
    assert "FLOPs B·S·D² = 1,048,576" in page and "params D² = 262,144" in page
    total = next(ln for ln in trace_text(spec).splitlines() if ln.startswith("total parameters: "))
    assert total in page and "**" not in page


def test_one_logical_axis_keeps_one_colour(mha):
    _, page = mha
    fills = {}
    for axis, fill in re.findall(r'data-axis="([^"]*)" data-tag="[a-z ]*"><title>[^<]*</title><rect[^>]*'
                                 r'fill="([^"]*)"', page):
        fills.setdefault(axis, set()).add(fill)
    assert all(len(f) == 1 for f in fills.values()), fills
    hue = {a: next(iter(f)).split(",")[0] for a, f in fills.items()}
    assert hue["H"] == hue["Dh"] == hue["D"] != hue["S"]     # the heads are pieces of D


def test_broadcast_reduced_and_blocks_collapse():
    spec = shapelang.check_file(str(ROOT / "specs" / "gpt2_small.shape"))
    page = trace_html(spec)
    x = next(b for b in spec.bindings if b.names == ("x",))
    assert re.findall(r'data-axis="([^"]*)" data-tag="broadcast"', _step(page, x.steps[0].ref)) == ["B"]
    assert '<details class="block" data-block="GPT2Block">' in page       # closed until opened
    assert "× L" in page
    text = "dim B\ndim S\nexample B=2, S=3\ninput X: [B, S, 4]\nY: X -> sum -1\n"
    reduced = trace_html(shapelang.check(text))
    assert re.findall(r'data-axis="([^"]*)" data-tag="reduced"', reduced) == ["4"]


def test_errors_sit_on_their_line_and_the_steps_that_checked_are_drawn():
    text = ("dim B\ndim S\ndim D\nexample B=2, S=3, D=8\ninput X: [B, S, D]\n"
            "Y: X -> linear 16\nZ: Y -> view [B, S, 3, D]\nW: Y -> gelu\n")
    spec = shapelang.check(text, "bad.shape")
    page = trace_html(spec)
    assert 'data-binding="Y"' in page and 'data-binding="W"' in page
    diag = re.search(r'<div class="diag error" data-diagnostic="(E\d+)" data-line="7"><pre>(.*?)</pre>',
                     page, re.DOTALL)
    assert diag and "7 | Z: Y -&gt; view [B, S, 3, D]" in diag.group(2) and "^" in diag.group(2)
    assert page.index('data-binding="Y"') < diag.start() < page.index('data-binding="W"')
    assert 'data-status="error"' in page


def test_spec_text_is_escaped():
    evil = "<script>alert(1)</script>"
    text = f"# {evil}\ndim B\ninput X: [B, 4]\nY: X -> linear 5 # {evil}\nZ: X -> view [B, 3]\n"
    spec = shapelang.check(text, f"{evil}.shape")
    for out in (trace_html(spec), trace_fragment(spec), trace_svg(spec), spec._repr_html_()):
        assert evil not in out and "<img" not in out
    page = trace_html(spec)
    assert page.count("<script>") == 1 and "script-src 'sha256-" in page


def test_svg_is_one_wellformed_figure(mha):
    spec, _ = mha
    svg = trace_svg(spec)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    heads = [t for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "head"]
    refs = {s.ref for b in spec.bindings for s in b.steps}
    steps = [t.text for t in heads if t.get("data-step") in refs]
    assert len(steps) == sum(len(s.outputs) for b in spec.bindings for s in b.steps)
    assert steps[0].startswith("Q: X @ W_q")
    assert {t.get("data-step") for t in heads} >= {d.name for d in spec.decls}


def test_repr_html_is_the_picture():
    spec = shapelang.check("dim B\nexample B=3\ninput X: [B, 4]\nY: X -> linear 5\n")
    html = spec._repr_html_()
    assert html.startswith('<div class="shapelang-trace">') and 'data-binding="Y"' in html
    assert 'data-axis="5" data-tag="new"' in html


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "shapelang", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)


def test_cli_writes_html_and_svg(tmp_path):
    out = tmp_path / "mha.html"
    r = _cli("trace", "--format", "html", "specs/mha_self_attention.shape", "-o", str(out))
    assert r.returncode == 0 and r.stdout == "" and out.read_text().startswith("<!DOCTYPE html>")
    r = _cli("trace", "--format", "svg", "specs/cross_attention.shape")
    assert r.returncode == 0 and r.stdout.startswith("<svg")
    bad = tmp_path / "bad.shape"
    bad.write_text("dim B\ninput X: [B, 4]\nY: X -> view [B, 3]\n")
    r = _cli("trace", "--format", "html", str(bad), "-o", str(tmp_path / "bad.html"))
    assert r.returncode == 1 and 'data-line="3"' in (tmp_path / "bad.html").read_text()
    r = _cli("trace", "--format", "html", str(bad), "specs/mha_self_attention.shape", "-o", "x.html")
    assert r.returncode == 2 and "one FILE" in r.stderr


def _tags(page: str, spec, binding: str) -> list:
    b = next(b for b in spec.bindings if ", ".join(b.names) == binding)
    return [re.findall(r'data-axis="([^"]*)" data-tag="([a-z ]+)"', _step(page, s.ref)) for s in b.steps]


@pytest.mark.parametrize("name, binding, want", [
    # grouped-query attention: kv heads repeated, a new axis, broadcast, merged back
    ("grouped_query_attention", "k_rep", [[("G·Nrep", "repeated")]]),
    ("grouped_query_attention", "scores", [[("Dh", "moved"), ("S", "moved")], [("Dh", "contracted")], [],
                                           [], []]),
    ("grouped_query_attention", "heads", [[("S", "contracted")]]),
    ("layernorm_projections", "mu", [[("D", "reduced")]]),
    ("layernorm_projections", "x_hat", [[("D", "broadcast")], [], [], [("D", "broadcast")]]),
])
def test_what_a_step_changes_is_named(name, binding, want):
    spec = shapelang.check_file(str(ROOT / "specs" / f"{name}.shape"))
    page = trace_html(spec)
    got = _tags(page, spec, binding)
    assert got[: len(want)] == want


def test_patches_regrouped_by_rearrange_are_named_merged():
    # ViT's patches without a convolution: (h p1) (w p2) regrouped into tokens × patch features
    text = ("dim B, C, Himg, Wimg, P\ndim Nh = Himg / P\ndim Nw = Wimg / P\nassume Himg % P == 0\n"
            "assume Wimg % P == 0\nexample B=1, C=3, Himg=32, Wimg=32, P=16\ninput img: [B, C, Himg, Wimg]\n"
            'patches: img -> rearrange "b c (h p1) (w p2) -> b (h w) (p1 p2 c)" p1=P, p2=P\n')
    spec = shapelang.check(text)
    assert _tags(trace_html(spec), spec, "patches")[:1] == [[("Nh·Nw", "merged"), ("P·P·C", "merged")]]


def test_a_learned_map_makes_new_features_and_a_new_axis_is_not_a_split():
    text = ("dim B\ndim S\ndim D\nexample B=2, S=3, D=8\ninput X: [B, S, D]\n"
            "Y: X -> linear D\nZ: X -> unsqueeze 1\nq, k, v: X -> linear 3*D -> chunk 3 -1\n")
    spec = shapelang.check(text)
    page = trace_html(spec)
    assert _tags(page, spec, "Y") == [[("D", "new"), ("D", "contracted")]]
    z = _step(page, next(b for b in spec.bindings if b.names == ("Z",)).steps[0].ref)
    assert re.findall(r'data-tag="([a-z ]+)"', z) == ["new"] and "split into" not in z
    assert _tags(page, spec, "q, k, v")[1] == [("D", "split")] * 3


def test_blocks_called_many_times_are_drawn_once():
    # each block calls the next twice: drawing every call would double the page per level
    levels = 12
    lines = ["dim B", "dim D", "example B=2, D=4", "block L0(x: [B, D]):", "  return x -> relu", "end"]
    for k in range(1, levels):
        lines += [f"block L{k}(x: [B, D]):", f"  a: L{k - 1}(x)", f"  return L{k - 1}(a)", "end"]
    lines += ["input X: [B, D]", f"Y: L{levels - 1}(X)", f"Z: L{levels - 1}(Y)"]
    spec = shapelang.check("\n".join(lines) + "\n")
    assert spec.ok, shapelang.render_check(spec)
    page = trace_html(spec)
    assert len(page) < 200_000
    for k in range(levels):
        assert page.count(f'data-block="L{k}"') == 1


def test_a_step_names_its_operands_with_the_operator_as_the_table_does():
    spec = shapelang.check("dim B, S, D\nexample B=1, S=4, D=8\ninput x: [B, S, D]\n"
                           "h: x -> linear D\ny: x + h\nz: x @ (h -> transpose 1 2)\n")
    page = trace_html(spec)
    assert "from [B, S, D] + [B, S, D]" in page
    assert "from [B, S, D] @ [B, D, S]" in page
    assert "from [B, S, D]; " not in page


def test_a_dtype_other_than_float32_is_labelled_on_the_steps_boxes():
    """A bool mask, int ids and float16 values carry their dtype on the figure and after the
    shape; float32, the default, carries none (as in the text trace)."""
    text = ("dim S\nexample S=3\ninput ids: [S] int\ninput h: [S] float16\nmask: ids > 0\n"
            "f: ids -> to float\ng: h * 2\nv, i: f -> topk 1 0\n")
    spec = shapelang.check(text)
    page = trace_html(spec)
    steps = {b.names[0]: b.steps[-1].ref for b in spec.bindings}
    mask = _step(page, steps["mask"])
    assert 'data-dtype="bool"' in mask and ">bool</text>" in mask and "[S] bool</div>" in mask
    assert "data-dtype" not in _step(page, steps["f"])
    assert 'data-dtype="float16"' in _step(page, steps["g"])
    topk = _step(page, steps["v"])
    assert topk.count('data-dtype="int"') == 1 and "output 2: [1] int</div>" in topk
    decl = page[page.index('data-binding="ids"'):page.index('data-binding="h"')]
    assert 'data-dtype="int"' in decl
    svg = trace_svg(spec)
    ET.fromstring(svg)
    assert svg.count('data-dtype="bool"') == 1
    assert svg.count('data-dtype="float16"') == page.count('data-dtype="float16"') == 2    # input and step
