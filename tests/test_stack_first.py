"""`stack L Moe first=Dense`: a stack whose first layer is another block, one module list
(`layers.0` the dense layer, `layers.1..` the others, as Hugging Face's DeepSeek-V2 and
Perceiver name them)."""
from __future__ import annotations

import warnings

import pytest

from shapelang import check, trace
from shapelang.codegen import runner
from shapelang.codegen.generator import generate

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

SPEC = """dim B, S
dim D = 16
dim L = 4
example B=2, S=5
input x: [B, S, D]

block Dense(h: [B, S, D]):
  return h + (h -> rmsnorm -> linear 4*D -> silu -> linear D)
end

block Moe(h: [B, S, D], dim F):
  return h + (h -> rmsnorm -> linear F -> silu -> linear D)
end

layers: x -> stack L Moe(F=2*D) first=Dense
out: layers -> rmsnorm
"""


def _params(d, f):
    return d + (d * f + f) + (f * d + d)      # rmsnorm, linear D->F, linear F->D


def test_checks_with_the_parameters_of_one_dense_and_L_minus_1_other_layers():
    spec = check(SPEC)
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    env = {spec.prover.user["D"]: 16, spec.prover.user["L"]: 4}
    assert spec.total_params.subs(env) == _params(16, 64) + 3 * _params(16, 32) + 16
    text = trace(spec, width=0)
    assert "block Dense(h: [B, S, D]), called on line 15" in text
    assert "block Moe(h: [B, S, D], F = 2*D (32)), called on line 15" in text
    assert "first=Dense" in text                         # the first layer's own row
    assert "total parameters: L·(" in text                # totals grouped by the stack's count


def test_one_layer_is_the_first_block_alone():
    spec = check(SPEC.replace("dim L = 4", "dim L = 1"))
    assert spec.ok
    assert spec.total_params.subs({spec.prover.user["D"]: 16, spec.prover.user["L"]: 1}) == _params(16, 64) + 16


@pytest.mark.parametrize("change, code, where", [
    ("return h + (h -> rmsnorm -> linear 4*D -> silu -> linear D)",  # the first layer widens
     "E114", (15, 33)),
])
def test_the_first_block_must_return_the_shape_it_takes(change, code, where):
    bad = SPEC.replace(change, "return h -> linear 2*D")
    d = next(d for d in check(bad).diagnostics if d.code == code)
    assert (d.span.line, d.span.column) == where and "first layer `Dense`" in d.message


def test_first_must_be_a_block():
    d = next(d for d in check(SPEC.replace("first=Dense", "first=Dens")).diagnostics)
    assert d.code == "E111" and "did you mean `Dense`" in d.help


def test_the_first_block_takes_its_own_sizes():
    text = SPEC.replace("first=Dense", "first=Moe(F=4*D)")
    spec = check(text)
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    assert spec.total_params.subs({spec.prover.user["D"]: 16, spec.prover.user["L"]: 4}) == \
        _params(16, 64) + 3 * _params(16, 32) + 16
    assert "Moe(cfg, 4 * cfg.D)] + [Moe(cfg, 2 * cfg.D)" in generate(spec).source


@pytest.mark.parametrize("sizes", [{"B": 2, "S": 5, "D": 16, "L": 4}, {"B": 1, "S": 3, "D": 8, "L": 2}])
def test_generated_module_is_one_list_that_loads_a_reference_state_dict_by_name(sizes):
    torch = pytest.importorskip("torch")
    spec = check(SPEC)
    g = generate(spec)
    assert "self.layers = nn.ModuleList(" in g.source and "for layer in self.layers[1:]:" in g.source
    _mod, model = runner.build(g, sizes)
    D, L = sizes["D"], sizes["L"]

    class MLP(torch.nn.Module):
        def __init__(self, f):
            super().__init__()
            self.out_norm = torch.nn.RMSNorm(D)
            self.out_linear1, self.out_linear2 = torch.nn.Linear(D, f), torch.nn.Linear(f, D)

        def forward(self, h):
            return h + self.out_linear2(torch.nn.functional.silu(self.out_linear1(self.out_norm(h))))

    class Ref(torch.nn.Module):          # DeepSeek-V2's layout: layers.0 dense, the rest MoE
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([MLP(4 * D)] + [MLP(2 * D) for _ in range(L - 1)])
            self.out = torch.nn.RMSNorm(D)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.out(x)

    ref = Ref().eval()
    state = ref.state_dict()
    assert "layers.0.out_linear1.weight" in state and f"layers.{L - 1}.out_linear1.weight" in state
    model.load_state_dict(state)                 # strict: every key by name
    x = torch.randn(sizes["B"], sizes["S"], D)
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref(x), rtol=1e-5, atol=1e-5)
    report = runner.run_spec(spec, runner.resolve_sizes(spec, sizes))
    assert report.ok, report.error


PERCEIVER = """dim B, M, N
dim C = 8
dim D = 16
dim L = 3
example B=2, M=7, N=4
input data: [B, M, C]
input lat: [B, N, D]

block Cross(x: [B, N, D], d: [B, M, C]):
  kv: d -> linear D
  a: (x -> linear D) @ (kv -> transpose 1 2) -> softmax -1
  return x + (a @ kv)
end

block Latent(x: [B, N, D]):
  return x + (x -> layernorm -> linear D)
end

layers: lat -> stack L Latent first=Cross(data)
"""


def test_the_first_layer_may_take_inputs_of_its_own():
    """Perceiver: the first layer cross-attends to the data, the others only to the latents."""
    torch = pytest.importorskip("torch")
    spec = check(PERCEIVER)
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    g = generate(spec)
    assert "self.layers[0](lat, data)" in g.source
    _mod, model = runner.build(g, {"B": 2, "M": 7, "N": 4, "C": 8, "D": 16, "L": 3})
    keys = set(model.state_dict())
    assert {"layers.0.kv.weight", "layers.1.out_linear.weight", "layers.2.out_ln.weight"} <= keys
    assert not any(k.startswith("layers.3") for k in keys)
    out = model(torch.randn(2, 7, 8), torch.randn(2, 4, 16))
    assert tuple(out.shape) == (2, 4, 16)
    assert runner.run_spec(spec, runner.resolve_sizes(spec, {})).ok


def test_first_with_a_scan_is_refused_with_how_to_write_it_apart():
    """A stack's slices and collected results count its copies; with another layer 0 they
    would not line up, so `first=` beside a scan is E110, which says how to write it."""
    several = SPEC.replace("  return h + (h -> rmsnorm -> linear F -> silu -> linear D)",
                           "  y: h + (h -> rmsnorm -> linear F -> silu -> linear D)\n  return y, y -> sum -1") \
        .replace("layers: x", "layers, sums: x")
    per_layer = SPEC.replace("block Moe(h: [B, S, D], dim F)", "block Moe(h: [B, S, D], g: [D], dim F)") \
        .replace("input x: [B, S, D]", "input x: [B, S, D]\ninput gains: [L, D]") \
        .replace("Moe(F=2*D)", "Moe(gains, F=2*D)")
    assert check(several.replace(" first=Dense", "")).ok and check(per_layer.replace(" first=Dense", "")).ok
    for text in (several, per_layer):
        err = check(text).errors()[0]
        assert err.code == "E110" and "`first=`" in err.message, err
        assert "stack (L - 1)" in err.help
