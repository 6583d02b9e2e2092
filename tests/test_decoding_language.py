"""The language for incremental decoding: a size that may be 0 (`assume P >= 0`, an empty
cache at prefill), a block that returns several tensors, and a stack that hands each layer
its slice of a per-layer input and collects the extra results into [L, ..] tensors."""
from __future__ import annotations

import pytest

from shapelang import api
from shapelang.codegen import runner

torch = pytest.importorskip("torch")

SCAN = """dim B, P, S, D, L
assume P >= 0
example B=2, P=0, S=3, D=4, L=3
input x: [B, S, D]
input past: [L, B, P, D]
block Layer(x: [B, S, D], pk: [B, P, D]):
  k: concat(1, pk, x -> linear D)
  y: x + (k -> slice 1 0 1) -> relu
  return y, k
end
h, ks: x -> stack L Layer(past)
expect ks: [L, B, P + S, D]
"""


def _codes(text):
    return [d.code for d in api.check(text).diagnostics]


def test_a_size_that_may_be_zero_needs_the_assumption():
    assert _codes(SCAN) == []
    assert "E108" in _codes(SCAN.replace("assume P >= 0\n", ""))   # example P=0


def test_empty_axes_are_taken_where_pytorch_takes_them():
    # a view or slice of an empty cache is fine in torch, and checks
    ok = SCAN + "flat: past -> view [L, B, -1]\nsl: past -> slice 2 0 P\ne: ones([S, P])\n"
    assert _codes(ok) == []
    assert torch.zeros(3, 2, 0, 4).view(3, 2, -1).shape == (3, 2, 0)
    # torch cannot infer -1 when the sizes beside it may be 0: refused, with P=0
    spec = api.check(SCAN + "flat: past -> view [P, -1]\n")
    err = spec.errors()[0]
    assert err.code == "E109" and err.counterexample.get("P") == 0
    with pytest.raises(RuntimeError):
        torch.zeros(3, 2, 0, 4).view(0, -1)
    # a size below 0 is still refused
    assert "E109" in _codes(SCAN + "bad: past -> slice 2 P 0\n") + _codes(SCAN + "bad: ones([P - 1])\n")


@pytest.mark.parametrize("sizes", [{"P": 0}, {"P": 5, "S": 1}, {"L": 1, "P": 2}])
def test_the_scan_runs_in_pytorch_with_the_proved_shapes(sizes):
    spec = api.check(SCAN)
    rep = runner.run_spec(spec, runner.resolve_sizes(spec, sizes))
    assert rep.ok, runner.report_text(rep)


def test_the_scan_gives_layer_i_its_slice_and_collects_the_results():
    spec = api.check(SCAN)
    gen = api.codegen(spec)
    assert "for i, layer in enumerate(self.h):" in gen.source
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, {}))
    x, past = torch.randn(2, 3, 4), torch.randn(3, 2, 2, 4)
    with torch.no_grad():
        out = model(x, past)
        h = x
        for i, layer in enumerate(model.h):   # by hand: one layer at a time
            k = torch.cat([past[i], layer.k(h)], dim=1)
            torch.testing.assert_close(out["ks"][i], k)
            h = torch.relu(h + k[:, :1])
    torch.testing.assert_close(out["h"], h)


@pytest.mark.parametrize("edit, code", [
    ("h, ks: x -> stack L Layer(past)", "E110"),                     # two results, one name
    ("h, ks, extra: x -> stack L Layer(past)", "E110"),
    ("return y, k", "E114"),                                          # carry changes shape
    ("input past: [L, B, P, D]", "E113"),                            # not L layers
])
def test_mistakes_in_a_scan_are_errors(edit, code):
    text = {
        "h, ks: x -> stack L Layer(past)": SCAN.replace("h, ks: x", "h: x").replace("expect ks: [L, B, P + S, D]\n", ""),
        "h, ks, extra: x -> stack L Layer(past)": SCAN.replace("h, ks: x", "h, ks, extra: x"),
        "return y, k": SCAN.replace("return y, k", "return k, y"),
        "input past: [L, B, P, D]": SCAN.replace("input past: [L, B, P, D]", "input past: [2*L, B, P, D]"),
    }[edit]
    assert code in _codes(text)


def test_a_block_returning_several_tensors_is_called_with_several_names():
    text = SCAN.replace("h, ks: x -> stack L Layer(past)\nexpect ks: [L, B, P + S, D]\n",
                        "p0: past -> select 0 0\ny, k: x -> Layer(p0)\nexpect k: [B, P + S, D]\n")
    assert _codes(text) == []
    src = api.codegen(api.check(text)).source
    assert "return y, k" in src and "y, k = self.y(x, p0)" in src


def test_fmt_keeps_several_returns():
    from shapelang.fmt import format_text
    assert "  return y, k\n" in format_text(SCAN.replace("return y, k", "return   y ,k"))


def test_the_trace_shows_every_returned_tensor_and_the_collected_ones():
    text = api.trace(api.check(SCAN), width=0)
    ret = next(line for line in text.splitlines() if line.startswith("return"))
    assert "y, k" in ret and "[B, S, D] | [B, P + S, D]" in ret
    stack = next(line for line in text.splitlines() if line.startswith("h, ks"))
    assert "[B, S, D] | [L, B, P + S, D]" in stack and "[2, 3, 4] | [3, 2, 3, 4]" in stack


def test_a_layers_slice_keeps_the_layout_of_the_per_layer_input():
    # past_t[i] of a transposed tensor is not contiguous: torch refuses the view, and so does check
    text = """dim B, P, S, D, L
example B=2, P=2, S=3, D=4, L=3
input x: [B, S, D]
input past: [L, B, P, D]
block Layer(x: [B, S, D], pk: [B, D, P]):
  f: pk -> view [B, D*P]
  return x
end
pt: past -> transpose 2 3
h: x -> stack L Layer(pt)
"""
    assert "E106" in _codes(text)
    with pytest.raises(RuntimeError):
        torch.zeros(3, 2, 2, 4).transpose(2, 3)[0].view(2, 8)
    assert "E106" not in _codes(text.replace("pt: past -> transpose 2 3", "pt: past -> transpose 2 3 -> contiguous"))


def test_hover_on_a_block_names_every_returned_shape(tmp_path):
    pytest.importorskip("pygls", reason="the language server needs the `lsp` extra (pygls)")
    from shapelang.lsp import hover
    from shapelang.lsp.documents import DocumentStore

    path = tmp_path / "scan.shape"
    path.write_text(SCAN, encoding="utf-8")
    store = DocumentStore()
    store.update(path.as_uri(), 1, SCAN)
    line = SCAN.split("\n").index("block Layer(x: [B, S, D], pk: [B, P, D]):")
    text, _range = hover.hover(store.analysis(path.as_uri()), line + 1, len("block La"))   # 1-based
    assert "returns [B, S, D]" in text and "[B, P + S, D]" in text


def test_axis_provenance_is_followed_through_a_scan():
    # a normalisation of the cache whose mean runs over its positions and whose variance over
    # its features, inside the scanned block, is found (W304) as in a plain call of the block
    wrong = SCAN.replace("(k -> slice 1 0 1)", "((k - (k -> mean 1 keepdim)) / (k -> var -1 keepdim -> sqrt) "
                                               "-> slice 1 0 1)")
    assert "W304" in _codes(wrong)
    assert "W304" not in _codes(SCAN.replace("(k -> slice 1 0 1)", "(k -> mean 1 keepdim)"))   # a pooled cache
    spec = api.check(SCAN)
    stack = next(s for b in spec.bindings for s in b.steps if s.op == "stack")
    assert [len(tp.axes) for tp in stack.provenance] == [3, 4]


def test_one_name_for_a_scans_several_results_says_how_to_name_them():
    text = SCAN.replace("h, ks: x", "h: x").replace("expect ks: [L, B, P + S, D]\n", "")
    err = api.check(text).errors()[0]
    assert err.code == "E110" and "gives 2 tensors but 1 name" in err.message
    assert "h, k, v: x -> Layer(past_k, past_v)" in err.help
