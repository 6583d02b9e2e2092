"""`D**-0.5`, the scale HF writes (`self.scale = head_dim ** -0.5`), is a scalar: a half
exponent is exact (sqrt), in a scale, a product or a division, and the generated module
computes it as PyTorch does. Sizes keep whole exponents."""
from __future__ import annotations

import pytest
from torch_shapes import checked, module

from shapelang import check, render_check

HEAD = "dim B, S, Dh\nexample B=2, S=3, Dh=16\ninput q: [B, S, Dh]\ninput k: [B, S, Dh]\n"


@pytest.mark.parametrize("scalar, value", [
    ("scale Dh**-0.5", lambda dh: dh ** -0.5),
    ("scale Dh**0.5", lambda dh: dh ** 0.5),
    ("scale Dh**-1", lambda dh: 1 / dh),
    ("scale 2**-1.5", lambda dh: 2 ** -1.5),
])
def test_a_half_exponent_scales_as_pytorch_does(scalar, value):
    torch = pytest.importorskip("torch")
    spec = checked(HEAD + f"s: q @ (k -> transpose -2 -1) -> {scalar}\n")
    model, _gen = module(spec, "powers", B=2, S=3, Dh=16)
    q, k = torch.randn(2, 3, 16), torch.randn(2, 3, 16)
    with torch.no_grad():
        out = model(q, k)
    got = out["s"] if isinstance(out, dict) else out
    torch.testing.assert_close(got, (q @ k.transpose(-2, -1)) * value(16))


def test_division_by_a_power_is_the_same_as_by_sqrt():
    a = checked(HEAD + "s: q @ (k -> transpose -2 -1) / Dh**0.5\n")
    b = checked(HEAD + "s: q @ (k -> transpose -2 -1) / sqrt(Dh)\n")
    assert [str(s.out.shape) for s in a.bindings[-1].steps] == [str(s.out.shape) for s in b.bindings[-1].steps]


@pytest.mark.parametrize("line, message", [
    ("y: q -> linear Dh**0.5\n", "`0.5` is not a whole number"),
    ("y: q -> view [B, S, Dh**0.5, Dh**0.5]\n", "`0.5` is not a whole number"),
    ("y: q -> view [B, S, Dh**-1, Dh]\n", "exponent `-1` is not allowed here"),
    ("y: q -> scale Dh**0.3\n", "exponent `0.3` is not allowed here"),
    ("y: q -> scale Dh**40\n", "exponent `40` is not allowed here"),
])
def test_sizes_keep_whole_exponents_and_scalars_half_ones(line, message):
    spec = check(HEAD + line)
    errors = [d for d in spec.diagnostics if d.severity == "error"]
    assert len(errors) == 1 and errors[0].message == message, render_check(spec)
    assert errors[0].span.line == 5
