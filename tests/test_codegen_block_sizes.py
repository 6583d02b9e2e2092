"""Codegen of blocks with size parameters: one nn.Module class that takes the size as a
constructor argument (`Mlp(cfg, F)`), built at each call's size, its parameter shapes
following it; the generated module agrees with the checker and with hand-written PyTorch
at two sets of sizes."""
from __future__ import annotations

import re
import warnings

import pytest

from shapelang import check
from shapelang.codegen import runner
from shapelang.codegen.generator import generate

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

SPEC = """dim B, S
dim D = 64
dim E = 24
dim L = 2
assume F % 2 == 0
example B=2, S=8

input x: [B, S, D]

block Mlp(h: [B, S, D], dim F):
  m: h -> linear F -> gelu
  expect m: [B, S, F]
  return m -> view [B, S, 2, F/2] -> flatten 2 -> linear D
end

block Layer(h: [B, S, D], dim F):
  return h + (h -> layernorm -> Mlp F=F)
end

y: Mlp(x, F=4*D)
z: y -> Mlp F=E
w: z -> stack L Layer(F=2*E)
"""

SIZES = [{"B": 2, "S": 8, "D": 64, "E": 24, "L": 2}, {"B": 3, "S": 5, "D": 16, "E": 6, "L": 3}]


@pytest.fixture(scope="module")
def gen():
    spec = check(SPEC, "mlp_sizes.shape")
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    return spec, generate(spec)


def test_one_class_takes_the_size_as_a_constructor_argument(gen):
    _spec, g = gen
    src = g.source
    assert len(re.findall(r"^class Mlp(_\d+)?\(nn.Module\)", src, re.MULTILINE)) == 1
    assert "def __init__(self, cfg: MlpSizesConfig, F: int):" in src
    assert "self.y = Mlp(cfg, 4 * cfg.D)" in src and "self.z = Mlp(cfg, cfg.E)" in src
    assert "nn.ModuleList([Layer(cfg, 2 * cfg.E) for _ in range(cfg.L)])" in src
    assert "self.out_mlp = Mlp(cfg, F)" in src                 # Layer passes its own F on
    assert "nn.Linear(cfg.D, F)" in src and "F // 2" in src
    assert 'assert F % 2 == 0, "assume F % 2 == 0"' in src     # the block's assumption, per call
    assert not re.search(r"^\s+F: int", src, re.MULTILINE)             # F is no config field


@pytest.mark.parametrize("sizes", SIZES)
def test_generated_module_matches_the_checker_and_pytorch(gen, sizes):
    torch = pytest.importorskip("torch")
    spec, g = gen
    _mod, model = runner.build(g, sizes)
    D, E, L = sizes["D"], sizes["E"], sizes["L"]
    assert tuple(model.y.m.weight.shape) == (4 * D, D)
    assert tuple(model.z.m.weight.shape) == (E, D)
    assert [tuple(layer.out_mlp.m.weight.shape) for layer in model.w] == [(2 * E, D)] * L
    env = {spec.prover.user[k]: v for k, v in sizes.items()}
    assert sum(p.numel() for p in model.parameters()) == int(spec.total_params.subs(env))

    # a hand-written reference of the same layers, loaded with the same weights by name
    class Mlp(torch.nn.Module):
        def __init__(self, d, f):
            super().__init__()
            self.m, self.out_linear = torch.nn.Linear(d, f), torch.nn.Linear(f, d)

        def forward(self, h):
            return self.out_linear(torch.nn.functional.gelu(self.m(h)))

    class Layer(torch.nn.Module):
        def __init__(self, d, f):
            super().__init__()
            self.out_ln, self.out_mlp = torch.nn.LayerNorm(d), Mlp(d, f)

        def forward(self, h):
            return h + self.out_mlp(self.out_ln(h))

    class Ref(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.y, self.z = Mlp(D, 4 * D), Mlp(D, E)
            self.w = torch.nn.ModuleList([Layer(D, 2 * E) for _ in range(L)])

        def forward(self, x):
            x = self.z(self.y(x))
            for layer in self.w:
                x = layer(x)
            return x

    ref = Ref().eval()
    ref.load_state_dict(model.state_dict())      # the same keys: fails on any difference
    x = torch.randn(sizes["B"], sizes["S"], D)
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sizes", SIZES)
def test_run_agrees_with_the_checker_at_each_size_set(gen, sizes):
    pytest.importorskip("torch")
    spec, _g = gen
    resolved = runner.resolve_sizes(spec, sizes)
    report = runner.run_spec(spec, resolved)
    assert report.ok, (report.error, [r for r in report.rows if not r.ok])
    # each call's steps ran at its own hidden width
    got = {tuple(r.expected[0]) for r in report.rows if r.op == "linear F"}
    D, E = sizes["D"], sizes["E"]
    assert {(sizes["B"], sizes["S"], 4 * D), (sizes["B"], sizes["S"], E),
            (sizes["B"], sizes["S"], 2 * E)} <= got


def test_a_block_that_needs_its_call_sizes_gets_a_class_per_size():
    """Without `assume F % 2 == 0` the block checks only at the sizes given (4*D is even):
    each call then has a class of its own, and still takes F."""
    torch = pytest.importorskip("torch")
    text = SPEC.replace("assume F % 2 == 0\n", "").replace("z: y -> Mlp F=E\n", "z: y -> Mlp F=2*E\n")
    text = text[:text.index("block Layer")] + "y: Mlp(x, F=4*D)\nz: y -> Mlp F=2*E\n"
    spec = check(text, "odd.shape")
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    assert spec.generic_blocks["Mlp"] is None
    g = generate(spec)
    _mod, model = runner.build(g, SIZES[1])
    x = torch.randn(3, 5, 16)
    assert tuple(model(x).shape) == (3, 5, 16)
    assert tuple(model.y.m.weight.shape) == (64, 16) and tuple(model.z.m.weight.shape) == (12, 16)


def test_run_with_sizes_on_the_command_line(tmp_path, capsys):
    pytest.importorskip("torch")
    from shapelang.cli import main
    path = tmp_path / "mlp_sizes.shape"
    path.write_text(SPEC)
    assert main(["run", str(path), "--sizes", "B=3,S=5,D=16,E=6,L=3"]) == 0
    out = capsys.readouterr().out
    assert "Mlp(x, F=4*D)" in out and "[3, 5, 64]" in out and "[3, 5, 12]" in out


CASES = {
    # the size parameter in an input's shape: the call's tensor must have it
    "in_input": ("dim B, S\ndim D = 8\nexample B=2, S=3\ninput x: [B, S, D]\n"
                 "block Up(h: [B, S, F], dim F):\n  return h -> linear D\nend\n"
                 "y: x -> Up F=D\nw: Up(y, F=D)\n"),
    # a number, a dim read from the input, a split that needs the block's assumption
    "numbers": ("dim B, S\ndim D = 8\nexample B=2, S=3\ninput x: [B, S, D]\n"
                "block M(h: [B, S, D], dim F):\n  return h -> view [B, S, 2, D/2] -> linear F -> flatten 2 "
                "-> linear D\nend\nassume D % 2 == 0\ny: x -> M F=3\nw: M(y, F=D)\n"),
    # two sizes, one block input besides the piped one, a stack
    "two_sizes": ("dim B, S\ndim D = 8\ndim L = 2\nexample B=2, S=3\ninput x: [B, S, D]\ninput c: [B, S, D]\n"
                  "block Two(h: [B, S, D], k: [B, S, D], dim F, dim G):\n"
                  "  return h + (k -> linear F -> linear G -> linear D)\nend\n"
                  "y: x -> Two(c, G=2*D, F=D + 1)\nw: y -> stack L Two(c, F=3, G=D)\n"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_run_and_the_generated_module_agree_at_two_size_sets(name):
    pytest.importorskip("torch")
    spec = check(CASES[name], f"{name}.shape")
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    for sizes in ({}, {"B": 1, "S": 2, "D": 4}):
        report = runner.run_spec(spec, runner.resolve_sizes(spec, sizes))
        assert report.ok, (sizes, report.error, [r for r in report.rows if not r.ok])


# A block with no size parameter, called at two widths (and passed on by a block that is
# itself called at two widths): one class, the width a constructor argument.
WIDTHS = """dim B, S, C
dim D = 16
example B=2, S=3

input x: [B, S, D]

block Mlp(h: [B, S, C]):
  return h -> linear 4*C -> gelu -> linear C
end

block Layer(h: [B, S, C]):
  return h + (h -> layernorm -> Mlp)
end

a: x -> Mlp
b: concat(-1, a, a) -> Mlp
c: b -> Layer -> linear 3*D
d: c -> Layer
"""


def test_a_block_called_at_several_widths_is_one_class_that_takes_the_width():
    torch = pytest.importorskip("torch")
    spec = check(WIDTHS, "widths.shape")
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    assert len(spec.blocks["Mlp"]) > 1          # the checker made one instance per width
    g = generate(spec)
    src = g.source
    assert re.findall(r"^class (\w+)\(nn.Module\)", src, re.MULTILINE) == ["Mlp", "Layer", "Widths"]
    assert "def __init__(self, cfg: WidthsConfig, C: int):" in src
    assert "nn.Linear(C, 4 * C)" in src and "self.out_mlp = Mlp(cfg, C)" in src
    assert "Mlp(cfg, cfg.D)" in src and "Mlp(cfg, 2 * cfg.D)" in src and "Layer(cfg, 2 * cfg.D)" in src
    assert "Layer(cfg, 3 * cfg.D)" in src
    assert not re.search(r"^\s+C: int", src, re.MULTILINE)          # C is no config field

    for D in (16, 6):
        _mod, model = runner.build(g, {"B": 2, "S": 3, "D": D})

        # the same computation by hand, from the module's own weights
        def reference(model, x):
            lin = torch.nn.functional.linear
            gelu, ln = torch.nn.functional.gelu, torch.nn.functional.layer_norm

            def mlp(m, h):
                (w1, b1), (w2, b2) = [(p.weight, p.bias) for p in m.children()]
                return lin(gelu(lin(h, w1, b1)), w2, b2)

            def layer(m, h):
                norm, inner = m.children()
                return h + mlp(inner, ln(h, h.shape[-1:], norm.weight, norm.bias))

            a = mlp(model.a, x)
            b = mlp(model.b, torch.cat([a, a], dim=-1))
            c = lin(layer(model.c, b), model.c_linear.weight, model.c_linear.bias)
            return layer(model.d, c)

        assert tuple(model.c.out_mlp.out_linear1.weight.shape) == (8 * D, 2 * D)
        x = torch.randn(2, 3, D)
        with torch.no_grad():
            torch.testing.assert_close(model(x), reference(model, x), rtol=1e-5, atol=1e-5)
    # the module of `run`, one class per call, agrees step by step with the proved shapes
    report = runner.run_spec(spec, runner.resolve_sizes(spec, {"B": 2, "S": 3, "D": 6}))
    assert report.ok and report.clean_same, report.error


def test_swin_tiny_has_one_class_per_block_definition():
    """Seven WindowAttention classes that differed only in width were one per call site."""
    import tiers

    spec = tiers.checked(next(p for p in tiers.LIBRARY if p.name == "swin_tiny.shape"))
    src = generate(spec).source
    classes = re.findall(r"^class (\w+)\(nn.Module\)", src, re.MULTILINE)
    assert sorted(classes) == sorted(list(spec.blocks) + ["SwinTiny"])
    assert "self.qkv = nn.Linear(C, 3 * C)" in src
    assert "SwinPair(cfg, 2 * cfg.Nh, 2 * cfg.D)" in src and "PatchMerging(cfg, 4 * cfg.D)" in src


def test_t5_small_has_one_attention_class():
    """T5Attention, T5Attention_2 and _3 were the same code at three pairs of lengths."""
    import tiers

    spec = tiers.checked(tiers.ROOT / "specs" / "t5_small.shape")
    classes = re.findall(r"^class (\w+)\(nn.Module\)", generate(spec).source, re.MULTILINE)
    assert classes.count("T5Attention") == 1 and not [c for c in classes if c.startswith("T5Attention_")]
