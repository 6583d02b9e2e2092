"""`&`, `|`, `^`: PyTorch's bitwise operators, on bool masks (HF's sliding-window and padding
masks) and int tensors. Shapes, dtypes and refusals are PyTorch's; so is the precedence, with
a warning (W203) where it reads differently from what a learner means."""
from __future__ import annotations

import itertools

import pytest
from torch_shapes import checked, module

from shapelang import check, render_check

HEAD = "dim B, S\nexample B=2, S=5\n"
DTYPES = {"bool": "bool", "int": "int64", "int32": "int32", "float": "float32", "half": "float16"}
SHAPES = [("[B, S]", (2, 5)), ("[S]", (5,)), ("[B, 1]", (2, 1))]


@pytest.mark.parametrize("op", ["&", "|", "^"])
@pytest.mark.parametrize("left, right", list(itertools.product(DTYPES, repeat=2)))
def test_dtype_and_refusal_are_pytorchs(op, left, right):
    torch = pytest.importorskip("torch")
    make = {"bool": lambda s: torch.rand(s) > 0.5}
    tensors = [make.get(d, lambda s, d=d: torch.randint(0, 9, s).to(getattr(torch, DTYPES[d])))(shape)
               for d, (_, shape) in zip((left, right), SHAPES[:2])]
    try:
        want = getattr(torch, {"&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor"}[op])(*tensors)
    except RuntimeError:
        want = None
    spec = check(HEAD + f"input a: {SHAPES[0][0]} {left}\ninput b: {SHAPES[1][0]} {right}\ny: a {op} b\n")
    if want is None:
        assert [d.code for d in spec.diagnostics] == ["E120"], render_check(spec)
        assert (spec.diagnostics[0].span.line, spec.diagnostics[0].span.column) == (5, 4)
        return
    assert spec.ok and not spec.diagnostics, render_check(spec)
    out = spec.bindings[-1].steps[-1].out
    assert [spec.example_value(d) for d in out.shape] == list(want.shape)
    from shapelang.checker import dtypes
    assert dtypes.torch_name(out.dtype) == str(want.dtype).removeprefix("torch.")


def test_the_generated_module_computes_the_masks_as_pytorch():
    torch = pytest.importorskip("torch")
    spec = checked(HEAD + "dim W\nexample W=3\ninput ids: [B, S] int\ninput pad: [B, S] bool\n"
                   "q: arange(S) -> unsqueeze 1\nk: arange(S) -> unsqueeze 0\n"
                   "seen: (k <= q) & (q - k < W)\nhide: (seen -> logical_not -> unsqueeze 0) | (pad -> unsqueeze 1)\n"
                   "odd: ids & 1\nflip: ids ^ 5\n")
    model, gen = module(spec, "bitwise", B=2, S=5, W=3)
    assert "seen = seen & q_lt" in gen.source or " & " in gen.source
    ids = torch.randint(0, 50, (2, 5))
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    out = model(ids, pad)
    i, j = torch.arange(5)[:, None], torch.arange(5)[None, :]
    seen = (j <= i) & (i - j < 3)
    assert torch.equal(out["hide"], (~seen)[None] | pad[:, None])
    assert torch.equal(out["odd"], ids & 1) and torch.equal(out["flip"], ids ^ 5)


def test_precedence_is_pythons_and_the_surprise_is_warned():
    torch = pytest.importorskip("torch")
    text = HEAD + "dim W\nexample W=3\nq: arange(S) -> unsqueeze 1\nk: arange(S) -> unsqueeze 0\n"
    spec = check(text + "seen: q - k < W & (k <= q)\n")
    (d,) = spec.diagnostics
    assert d.code == "W203" and d.severity == "warning"
    assert d.message == "`q - k < W & (k <= q)` compares `W & (k <= q)`: `&` binds tighter than `<` in Python and PyTorch"
    assert "write `(q - k < W) & (k <= q)`" in d.help
    # the checker reads it as PyTorch does: the same dtype and values in the generated module
    i, j = torch.arange(5)[:, None], torch.arange(5)[None, :]
    model, _gen = module(spec, "precedence", B=2, S=5, W=3)
    got = model()
    assert torch.equal(got if not isinstance(got, dict) else got["seen"], i - j < 3 & (j <= i))
    # parentheses say what is meant, either way: no warning
    assert check(text + "seen: (q - k < W) & (k <= q)\n").diagnostics == []
    assert check(text + "seen: q - k < (W & (k <= q))\n").diagnostics == []


def test_sizes_are_not_combined_bitwise():
    spec = check(HEAD + "y: S & B\n")
    assert [d.code for d in spec.diagnostics] == ["E112"], render_check(spec)
