"""`shapelang import` of the idioms real code writes (issue 27): cross-attention whose key is its
value (PyTorch projects k and v with one packed linear), and verification that proves something
(constant parameters randomised first; a constant output never claimed faithful)."""
from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
from import_kit import floats, round_trip
from torch import nn

from shapelang.importer import import_module


def _blocks(text: str) -> dict:
    """{block name: its body}."""
    return {m[0]: m[1] for m in re.findall(r"^block (\w+)\(.*?\):\n(.*?)^end", text, re.DOTALL | re.MULTILINE)}


def test_cross_attention_whose_key_is_its_value_is_three_linears(tmp_path):
    """nn.TransformerDecoderLayer's cross-attention reads memory as key and value: its k and v
    come from one packed linear of in_proj_weight's last two row blocks."""
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(32, 4, 48, dropout=0.0, batch_first=True)
    text = round_trip(tmp_path, layer, ["tgt=2x7x32", "memory=2x10x32"],
                      floats(lambda b, s: [(b, s, 32), (b, s + 3, 32)]), sizes_list=((2, 7), (3, 4)))
    cross = [body for body in _blocks(text).values() if "linear 3*D" not in body]
    assert len(cross) == 1
    assert re.findall(r"-> linear (\S+)", cross[0]) == ["D"] * 4       # q, k, v, out_proj
    assert "opaque" not in text and "split" not in cross[0] and "dim N" not in text
    assert re.search(r"k: y -> linear D\n\s+v: y -> linear D", cross[0])


def test_the_cross_attention_holds_at_a_width_the_import_did_not_use(tmp_path):
    """The spec names D and H, so the generated module built at another width computes what
    PyTorch's layer of that width computes (a spec written with `dim N = 192` could not)."""
    from shapelang import api
    from shapelang.codegen import runner
    from shapelang.importer import copy_weights

    layer = nn.TransformerDecoderLayer(32, 4, 48, dropout=0.0, batch_first=True).eval()
    imported = import_module(layer, ["tgt=2x7x32", "memory=2x10x32"], sizes={"F": 48})
    spec = api.check(imported.text, "dec.shape")
    assert spec.ok and not spec.diagnostics
    torch.manual_seed(1)
    other = nn.TransformerDecoderLayer(24, 3, 40, dropout=0.0, batch_first=True).eval()
    _m, model = runner.build(api.codegen(spec), dict(spec.example) | {"D": 24, "H": 3, "F": 40})
    mapping = imported.mapping | {"inputs": [{**i, "shape": i["shape"][:2] + [24]} for i in imported.mapping["inputs"]]}
    copy_weights(model, other, mapping)
    tgt, memory = torch.randn(3, 5, 24), torch.randn(3, 6, 24)
    with torch.no_grad():
        torch.testing.assert_close(model(tgt, memory), other(tgt, memory), atol=1e-5, rtol=1e-5)


class ZeroHead(nn.Module):
    """torchvision's ViT zero-initialises its head: the output is zero whatever the weights
    before it, so comparing outputs as they are would prove nothing."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 5)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x):
        return self.head(torch.relu(self.norm(self.body(x))))


def test_constant_parameters_are_randomised_before_the_comparison():
    module = ZeroHead()
    imported = import_module(module, ["x=2x6x8"])
    v = imported.verified
    assert v.randomised == 4          # the head's weight and bias, the norm's ones and zeros
    assert not v.constant
    assert not module.head.weight.any() and not module.head.bias.any()   # the user's module untouched


def test_the_randomised_comparison_catches_a_wrong_spec():
    """A spec with gelu where the module has relu matches the zero-headed module at any
    weights before the head, but not once the head is random."""
    from shapelang.importer.load import ImportFailure, parse_input
    from shapelang.importer.verify import verify

    module = ZeroHead().eval()
    imported = import_module(module, ["x=2x6x8"])
    assert "-> relu" in imported.text
    wrong = imported.text.replace("-> relu", "-> gelu")
    specs = [parse_input("x=2x6x8", 0, ["x"])]
    specs[0].axes = ["B", "S", None]
    with pytest.raises(ImportFailure, match="differs"):
        verify(wrong, "w.shape", module, specs, {}, imported.mapping, ["B", "S"], 2)


class Constant(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return self.proj(x) * 0.0


def test_a_constant_output_is_not_claimed_faithful(tmp_path):
    from cli_kit import run_cli

    (tmp_path / "const.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Constant(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.proj = nn.Linear(8, 8)\n\n"
        "    def forward(self, x):\n        return self.proj(x) * 0.0\n")
    imported = import_module(Constant(), ["x=2x6x8"])     # the same class, written below as a file
    assert imported.verified.constant
    result = run_cli("import", "const.py:Constant", "--input", "x=2x6x8", "-o", "c.shape", cwd=tmp_path)
    assert result.returncode == 1 and "not proved faithful" in result.stderr and "constant" in result.stderr
    assert (tmp_path / "c.shape").exists()


def test_an_opaque_step_inside_a_block_is_written_and_marked(tmp_path):
    """Issue 27's fourth failure: an opaque step inside a submodule's block was not counted, so
    the import went on to generate the module, failed, and wrote nothing."""
    from cli_kit import run_cli

    (tmp_path / "special.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Special(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.proj = nn.Linear(8, 8)\n\n"
        "    def forward(self, x):\n        return torch.lgamma(self.proj(x).abs() + 1)\n\n\n"
        "class Outer(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.inner = Special()\n        self.head = nn.Linear(8, 4)\n\n"
        "    def forward(self, x):\n        return self.head(self.inner(x))\n")
    result = run_cli("import", "special.py:Outer", "--input", "x=2x6x8", "-o", "s.shape", cwd=tmp_path)
    text = (tmp_path / "s.shape").read_text()
    assert result.returncode == 1 and "1 opaque step" in result.stderr, result.stderr
    assert "block Special(" in text
    lines = text.splitlines()
    k = next(i for i, line in enumerate(lines) if 'opaque "aten.lgamma.default"' in line)
    assert lines[k - 1].strip().startswith("# opaque: aten.lgamma.default")


def test_equal_sizes_are_told_apart_by_role_and_by_size():
    """Issue 27's sixth failure: timm's vit_tiny has 3 heads and 3 channels, and the import
    stopped, accepting neither --size H=3 nor --size C=3."""
    from test_import_vit import ViT

    from shapelang.importer.sizes import Sizes

    for sizes in (None, {"H": 3}, {"C": 3}):
        imported = import_module(ViT(num_heads=3, in_chans=3, embed_dim=48), ["x=2x3x24x24"], sizes=sizes)
        text = imported.text
        assert "input x: [B, C, Img, Img]" in text and "reshape [B, N, 3, H, Dh]" in text, text
        assert imported.verified is not None
    named = Sizes({"D": 8}, {"F": 8})          # no role between them: the name given wins
    assert named.named(8) == ["F"]
