"""The spec library: every spec checks, shows the articles' shapes, and counts
parameters the way PyTorch does."""
from pathlib import Path

import pytest

from shapelang import render
from shapelang.checker.checker import check_file

SPECS = Path(__file__).resolve().parent.parent / "specs"


def example_shapes(path):
    out = render.spec_json(check_file(str(path)), True)
    shapes = [s["example"] for b in out["bindings"] for s in b["steps"]]
    shapes += [d["example"] for d in out["inputs"]]
    shapes += [s["example"] for blk in out["blocks"] for b in blk["bindings"] for s in b["steps"]]
    return shapes, out


@pytest.mark.parametrize("path", sorted(SPECS.glob("*.shape")), ids=lambda p: p.stem)
def test_spec_checks_with_an_example(path):
    spec = check_file(str(path))
    assert spec.ok, render.check_text(spec)
    assert spec.example, "every spec has an example line"
    assert spec.bindings


@pytest.mark.parametrize("name, total", [("gpt2_small", 124_439_808), ("bert_base", 109_482_240)])
def test_parameter_totals_match_pytorch_reference(name, total):
    spec = check_file(str(SPECS / f"{name}.shape"))
    assert spec.example_value(spec.total_params) == total


@pytest.mark.parametrize("name, shape", [
    ("mha_self_attention", [1, 8, 4, 64]),      # heads split
    ("mha_self_attention", [1, 8, 4, 4]),       # scores
    ("decoder_text_generator", [1, 8, 4, 96]),  # 8 heads of 96
    ("decoder_text_generator", [1, 4, 9735]),   # language-model head
    ("cross_attention", [1, 8, 6, 4]),          # target 6 attends to context 4
    ("original_encoder", [3, 1, 1, 6]),         # padding mask broadcast shape
])
def test_article_shapes_appear_in_the_trace(name, shape):
    shapes, _ = example_shapes(SPECS / f"{name}.shape")
    assert shape in shapes
