"""`stack L Layer shared=true`: one layer's weights applied L times (ALBERT's cross-layer
sharing, Perceiver's `weight_tie_layers`): the checker counts its parameters once, and the
generated module holds one layer and applies it L times, equal to the same loop written by
hand in PyTorch."""
from __future__ import annotations

import pytest
from torch_shapes import checked, formatted_module

from shapelang import check
from shapelang.codegen import runner
from shapelang.codegen.generator import generate

torch = pytest.importorskip("torch")

SPEC = """\
dim B, S
dim D = 16
dim L = 5
example B=2, S=3
input x: [B, S, D]
block Layer(h: [B, S, D]):
  f: h -> linear 2*D -> gelu -> linear D
  return h + f -> layernorm
end
{body}
"""


def _spec(body: str):
    return checked(SPEC.format(body=body))


def test_the_parameters_of_a_shared_stack_are_one_layers():
    per_layer = 16 * 32 + 32 + 32 * 16 + 16 + 2 * 16
    shared, separate = _spec("y: x -> stack L Layer shared=true"), _spec("y: x -> stack L Layer")
    assert shared.example_value(shared.total_params) == per_layer
    assert separate.example_value(separate.total_params) == 5 * per_layer
    explicit_false = _spec("y: x -> stack L Layer shared=false")
    assert explicit_false.example_value(explicit_false.total_params) == 5 * per_layer


def test_the_generated_module_applies_one_layer_L_times(tmp_path):
    spec = _spec("y: x -> stack L Layer shared=true")
    gen = generate(spec)
    mod = formatted_module(gen, tmp_path / "shared.py", "shared_stack")     # ruff format clean
    model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)(L=4)).eval()
    assert sum(p.numel() for p in model.parameters()) == spec.example_value(spec.total_params)
    layer = model.y
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        want = x
        for _ in range(4):
            want = layer(want)
        assert torch.allclose(model(x), want, atol=1e-6)
        assert not torch.allclose(layer(x), want, atol=1e-3)      # one application is not four
    torch.jit.script(model)


def test_a_first_layer_of_its_own_then_shared_ones():
    # Perceiver with weight_tie_layers: layer 0 its own weights, layers 1.. one shared set
    spec = _spec("y: x -> stack L Layer first=Layer shared=true")
    gen = generate(spec)
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, {"B": 2, "S": 3, "L": 5}))
    assert len(model.y) == 2
    assert sum(p.numel() for p in model.parameters()) == spec.example_value(spec.total_params)
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        want = model.y[0](x)
        for _ in range(4):
            want = model.y[1](want)
        assert torch.allclose(model(x), want, atol=1e-6)


def test_a_shared_scan_takes_each_layers_slice():
    spec = checked("""\
dim B, S
dim D = 8
dim L = 3
example B=2, S=3
input x: [B, S, D]
input bias: [L, B, S, D]
block Layer(h: [B, S, D], b: [B, S, D]):
  return h + b -> linear D
end
y: x -> stack L Layer(bias) shared=true
""")
    gen = generate(spec)
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, {"B": 2, "S": 3}))
    x, bias = torch.randn(2, 3, 8), torch.randn(3, 2, 3, 8)
    with torch.no_grad():
        want = x
        for i in range(3):
            want = model.y(want, bias[i])
        assert torch.allclose(model(x, bias), want, atol=1e-6)


def test_shared_takes_true_or_false():
    spec = check(SPEC.format(body="y: x -> stack L Layer shared=yes"))
    (err,) = spec.errors()
    assert err.code == "E110" and "`shared=` takes true or false" in err.message
    assert err.span.line == 10 and err.span.column == len("y: x -> stack L Layer ") + 1
