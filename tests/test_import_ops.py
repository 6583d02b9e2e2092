"""`shapelang import`, the elementwise matrix: every elementwise torch operation the importer
translates, applied to one tensor inside one module, imported and round-tripped (checked
clean, generated, the weights copied, the outputs equal to PyTorch's to 1e-5); each is then
looked for in the spec as the operation it should read as, never as an `opaque` step.

Also: a size that merely equals D/H is not written D/H; an operation with no spec form is
kept `opaque` with its shape and the spec still checks; a module that cannot be traced is
one clear message."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F
from import_kit import floats, round_trip
from torch import nn

from shapelang.checker.checker import check_text
from shapelang.importer import import_module

ROOT = Path(__file__).resolve().parent.parent

def _values_and_indices(h, found):
    return h - found.values + found.indices


# (torch code on h, what the spec says for it)
OPS = {
    "rsqrt": (lambda h, w: torch.rsqrt(h.abs() + 1), "-> rsqrt"),
    "pow 3": (lambda h, w: h.pow(3), " ** 3"),
    "square": (lambda h, w: h ** 2, "-> square"),
    "mean": (lambda h, w: h - h.mean(-1, keepdim=True), "-> mean -1 keepdim"),
    "mul by a parameter": (lambda h, w: h * w, " * weight"),
    "neg": (lambda h, w: -h, "-> neg"),
    "cat of halves": (lambda h, w: torch.cat((-h[..., 8:], h[..., :8]), dim=-1), "slice 2 0 D/2"),
    "sigmoid": (lambda h, w: torch.sigmoid(h), "-> sigmoid"),
    "silu": (lambda h, w: F.silu(h), "-> silu"),
    "exp": (lambda h, w: torch.exp(h.clamp(max=3.0)), "-> exp"),
    "tanh": (lambda h, w: torch.tanh(h), "-> tanh"),
    "relu": (lambda h, w: F.relu(h), "-> relu"),
    "gelu": (lambda h, w: F.gelu(h), "-> gelu"),
    "gelu tanh": (lambda h, w: F.gelu(h, approximate="tanh"), 'gelu approximate="tanh"'),
    "softplus": (lambda h, w: F.softplus(h), "-> softplus"),
    "sin": (lambda h, w: torch.sin(h), "-> sin"),
    "cos": (lambda h, w: torch.cos(h), "-> cos"),
    "log": (lambda h, w: torch.log(h.abs() + 1), "-> log"),
    "sqrt": (lambda h, w: torch.sqrt(h.abs()), "-> sqrt"),
    "abs": (lambda h, w: h.abs(), "-> abs"),
    "floor": (lambda h, w: h.floor(), "-> floor"),
    "ceil": (lambda h, w: h.ceil(), "-> ceil"),
    "reciprocal": (lambda h, w: torch.reciprocal(h.abs() + 1), "-> reciprocal"),
    "where": (lambda h, w: torch.where(h > 0, h, 0.1 * h), "where("),
    "masked_fill": (lambda h, w: h.masked_fill(h < -1, 0.0), " 0.0\n"),
    "minimum": (lambda h, w: torch.minimum(h, w), "minimum("),
    "clamp": (lambda h, w: h.clamp(min=-1.0, max=1.0), "clamp min=(-1.0) max=1.0"),
    "softmax": (lambda h, w: F.softmax(h, -1), "-> softmax -1"),
    "var": (lambda h, w: h * h.var(-1, keepdim=True, unbiased=False), "var -1 keepdim correction=0"),
    "sub a number": (lambda h, w: 1 - h, "1 - "),
    "positions": (lambda h, w: h + torch.arange(h.shape[1])[None, :, None], "arange(S)"),
    # functions of one tensor, with their keywords
    "erf": (lambda h, w: torch.erf(h), "-> erf"),
    "log1p": (lambda h, w: torch.log1p(h.abs()), "-> log1p"),
    "expm1": (lambda h, w: torch.expm1(h.clamp(max=2.0)), "-> expm1"),
    "log2": (lambda h, w: torch.log2(h.abs() + 1), "-> log2"),
    "sign": (lambda h, w: torch.sign(h), "-> sign"),
    "trunc": (lambda h, w: torch.trunc(3 * h), "-> trunc"),
    "round": (lambda h, w: torch.round(3 * h), "-> round\n"),
    "round decimals": (lambda h, w: torch.round(h, decimals=2), "-> round decimals=2"),
    "leaky_relu": (lambda h, w: F.leaky_relu(h, 0.2), "-> leaky_relu negative_slope=0.2"),
    "leaky_relu default": (lambda h, w: F.leaky_relu(-h), "-> leaky_relu\n"),
    "elu": (lambda h, w: F.elu(h, 0.5), "-> elu alpha=0.5"),
    "selu": (lambda h, w: F.selu(h), "-> selu"),
    "celu": (lambda h, w: F.celu(h, 0.7), "-> celu alpha=0.7"),
    "mish": (lambda h, w: F.mish(h), "-> mish"),
    "hardswish": (lambda h, w: F.hardswish(h), "-> hardswish"),
    "hardsigmoid": (lambda h, w: F.hardsigmoid(h), "-> hardsigmoid"),
    "relu6": (lambda h, w: F.relu6(4 * h), "-> relu6"),
    "nn.ReLU6 (hardtanh 0 6)": (lambda h, w: nn.ReLU6()(3 * h), "3 -> relu6"),
    "hardtanh": (lambda h, w: F.hardtanh(h, -0.5, 0.5), "-> clamp min=(-0.5) max=0.5"),
    "logsigmoid": (lambda h, w: F.logsigmoid(h), "-> logsigmoid"),
    "glu": (lambda h, w: torch.cat([F.glu(h, -1), h[..., 8:]], -1), "-> glu -1"),
    "nan_to_num": (lambda h, w: torch.nan_to_num(h.log(), posinf=1.0), "-> nan_to_num posinf=1.0"),
    "isnan, isinf": (lambda h, w: h.masked_fill(torch.isnan(h.log()) | torch.isinf(h), 1.0), "-> isnan"),
    # running operations and reductions, over one axis or several
    "cumsum": (lambda h, w: h.cumsum(1), "-> cumsum 1"),
    "cumsum in float64": (lambda h, w: h.cumsum(-1, dtype=torch.float64).float(), "cumsum -1 dtype=float64"),
    "cumprod": (lambda h, w: torch.tanh(h).cumprod(-1), "-> cumprod -1"),
    "cummax": (lambda h, w: h.cummax(1).values, "-> cummax 1"),
    "std": (lambda h, w: h - h.std(-1, keepdim=True), "-> std -1 keepdim\n"),
    "std biased": (lambda h, w: h * h.std(-1, keepdim=True, unbiased=False), "std -1 keepdim correction=0"),
    "prod": (lambda h, w: h + torch.tanh(h).prod(-1, keepdim=True), "-> prod -1 keepdim"),
    "argmax": (lambda h, w: h + h.argmax(-1, keepdim=True), "-> argmax -1 keepdim"),
    "argmin": (lambda h, w: h + torch.argmin(h, 1)[:, None], "-> argmin 1"),
    "logsumexp": (lambda h, w: h - h.logsumexp(-1, keepdim=True), "-> logsumexp -1 keepdim"),
    "norm": (lambda h, w: h / h.norm(dim=-1, keepdim=True), "-> norm -1 keepdim\n"),
    "norm p=1": (lambda h, w: h / torch.linalg.vector_norm(h, 1, -1, keepdim=True), "-> norm -1 keepdim p=1"),
    "normalize": (lambda h, w: F.normalize(h, dim=-1), "-> norm -1 keepdim -> clamp min=1e-12"),
    "any": (lambda h, w: h * (h > 0).any(-1, keepdim=True), "-> any -1 keepdim"),
    "all": (lambda h, w: h * (h > -2).all(1, keepdim=True), "-> all 1 keepdim"),
    "max and its indices": (lambda h, w: _values_and_indices(h, h.max(-1, keepdim=True)), "-> max -1 keepdim"),
    "max values": (lambda h, w: h - h.max(1, keepdim=True).values, "-> amax 1 keepdim"),
    "min indices": (lambda h, w: h + h.min(-1).indices[..., None], "-> argmin -1 ->"),
    "sum over several axes": (lambda h, w: h - h.sum((0, 1)), "-> sum 1 -> sum 0"),
    "mean over several axes": (lambda h, w: h - h.mean((1, 2), keepdim=True), "-> mean 2 keepdim -> mean 1 keepdim"),
    "max of every element": (lambda h, w: h / h.abs().max(), "-> amax 2 -> amax 1 -> amax 0"),
    # layout
    "flip": (lambda h, w: h.flip(-1), "-> flip 2"),
    "roll": (lambda h, w: h.roll(2, 1), "-> roll 2 1"),
    "roll on two axes": (lambda h, w: h.roll((1, -2), (1, 2)), "-> roll [1, -2] [1, 2]"),
    "narrow": (lambda h, w: torch.cat([h.narrow(-1, 2, 4), h[..., 4:]], -1), "-> narrow 2 2 4"),
    "pad": (lambda h, w: F.pad(h[..., 3:], (1, 2)), "-> pad [1, 2]\n"),
    "pad with a value": (lambda h, w: F.pad(h[..., 3:], (2, 1), value=3.0), "-> pad [2, 1] value=3.0"),
    "slice with a step": (lambda h, w: torch.cat([h[..., ::2], h[..., 1::2]], -1), "-> slice 2 1 D step=2"),
    "tile": (lambda h, w: h[..., :8].tile((1, 2)), "-> tile [1, 2]"),
    # masks
    "masked_fill of a number": (lambda h, w: h.masked_fill(h > 1, 2.5), " 2.5\n"),
    "logical_and": (lambda h, w: h * torch.logical_and(h > 0, h < 1), "-> logical_and "),
    "logical_or": (lambda h, w: h * torch.logical_or(h > 1, h < -1), "-> logical_or "),
    "logical_xor": (lambda h, w: h * torch.logical_xor(h > 0, h < 0.5), "-> logical_xor "),
    "& | ~": (lambda h, w: h * (((h <= 0.5) & (h > -0.5)) | ~(h < 1)), " | "),
    "^": (lambda h, w: h * ((h > 0) ^ (w < 0)), " ^ "),
    "& of ints": (lambda h, w: h * ((h > 0).long() & 1), " & 1"),
}


class Elementwise(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.lin = nn.Linear(16, 16)
        self.weight = nn.Parameter(torch.randn(16))
        self.out = nn.Linear(16 * len(OPS), 12)

    def forward(self, x):
        h = self.lin(x)
        return self.out(torch.cat([f(h, self.weight) for f, _ in OPS.values()], -1))


@pytest.fixture(scope="module")
def ops_text(tmp_path_factory):
    return round_trip(tmp_path_factory.mktemp("ops"), Elementwise(), ["x=2x8x16"],
                      floats(lambda b, s: [(b, s, 16)]))


def test_the_elementwise_module_round_trips_without_opaque_steps(ops_text):
    assert "opaque" not in ops_text


@pytest.mark.parametrize("op", list(OPS))
def test_each_elementwise_operation_reads_as_itself(ops_text, op):
    assert OPS[op][1] in ops_text, ops_text


class Heads(nn.Module):
    """n_embd 64 and n_head 4, and a projection to 16 (= D/H by coincidence, no heads)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(8)
        self.n_embd, self.n_head = 64, 4
        self.down = nn.Linear(64, 16)

    def forward(self, x):
        return self.down(x)


def test_a_size_that_happens_to_equal_d_over_h_is_not_written_so(tmp_path):
    text = round_trip(tmp_path, Heads(), ["x=2x8x64"], floats(lambda b, s: [(b, s, 64)]))
    assert "down: x -> linear F" in text and "D/H" not in text and "Dh" not in text


class Unmodelled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(18, 16)

    def forward(self, x):
        return self.lin(F.pad(torch.lgamma(x.abs() + 1), (1, 1), mode="reflect"))


def test_an_operation_or_an_argument_with_no_spec_form_stays_opaque_and_the_spec_checks():
    imported = import_module(Unmodelled(), ["x=2x8x16"])
    assert imported.opaque == 2 and imported.verified is None
    assert '# opaque: aten.lgamma.default (no shapelang operation does this)' in imported.text
    assert '# opaque: aten.pad.default (a pad with mode "reflect")' in imported.text
    assert 'opaque "aten.pad.default" [B, S, 18]' in imported.text, imported.text
    assert check_text(imported.text, "unmodelled.shape").ok


def test_a_module_that_cannot_be_traced_is_one_clear_message(tmp_path):
    (tmp_path / "untraceable.py").write_text(textwrap.dedent('''
        import torch
        from torch import nn

        class Untraceable(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(8, 8)

            def forward(self, x):
                return self.lin(x[x > 0].reshape(-1, 8))
    '''))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "shapelang", "import", "untraceable:Untraceable", "--input",
                        "x=2x4x8", "-o", "out.shape"], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=300, check=False)
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr + r.stdout
    lines = [line for line in r.stderr.splitlines() if line.startswith("shapelang:")]
    assert len(lines) == 1 and not (tmp_path / "out.shape").exists(), r.stderr


class Norms(nn.Module):
    """Layer norms with another eps and without weights, an RMS norm with its eps."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(9)
        self.lin = nn.Linear(16, 16)
        self.ln = nn.LayerNorm(16, eps=1e-6)
        self.plain = nn.LayerNorm(16, elementwise_affine=False)
        self.rms = nn.RMSNorm(16, eps=1e-5)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)
            self.rms.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        return self.rms(self.plain(self.ln(self.lin(x) * 1e-3)))


def test_layer_norms_with_their_eps_round_trip(tmp_path):
    text = round_trip(tmp_path, Norms(), ["x=2x8x16"], floats(lambda b, s: [(b, s, 16)]))
    assert "ln: prod -> layernorm eps=1e-06 -> layernorm elementwise_affine=false\n" in text, text
    assert "rms: ln -> rmsnorm eps=1e-05" in text, text


class ConvNet(nn.Module):
    """A small conv net: GroupNorm, then BatchNorm2d with running statistics of its own."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(10)
        self.conv1 = nn.Conv2d(5, 16, 3, padding=1)
        self.gn = nn.GroupNorm(4, 16, eps=1e-6)
        self.conv2 = nn.Conv2d(16, 24, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(24, momentum=0.2)
        self.head = nn.Linear(24, 7)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)
            self.gn.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        h = F.relu(self.gn(self.conv1(x)))
        h = F.relu(self.bn(self.conv2(h)))
        return self.head(h.mean((2, 3)))


def test_a_conv_net_with_group_and_batch_norms_round_trips_with_its_statistics(tmp_path):
    net = ConvNet()
    text = round_trip(tmp_path, net, ["x=2x5x8x8"], floats(lambda b, s: [(b, 5, s, s)]), sizes_list=((2, 8), (3, 6)))
    assert "gn: conv1 -> groupnorm 4 eps=1e-06 -> relu" in text, text
    assert "bn: conv2 -> batchnorm momentum=0.2 -> relu" in text, text
    assert "-> mean 3 -> mean 2" in text and "opaque" not in text, text
    mapping = json.loads((tmp_path / "imported.weights.json").read_text())
    kinds = {step["kind"]: step["tensors"] for step in mapping["steps"]}
    assert kinds["groupnorm"] == {"weight": "gn.weight", "bias": "gn.bias"}
    assert kinds["batchnorm"] == {"weight": "bn.weight", "bias": "bn.bias", "running_mean": "bn.running_mean",
                                  "running_var": "bn.running_var", "num_batches_tracked": "bn.num_batches_tracked"}


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.lin = nn.Linear(16, 16)

    def forward(self, a, b):
        c, d = self.lin(a), self.lin(b)
        keep = ((a <= b) & (c < d)) | ~(d > 1)
        return c.masked_fill(keep, 0.0)


def test_a_mask_built_with_and_or_not_round_trips(tmp_path):
    text = round_trip(tmp_path, Masked(), ["a=2x8x16", "b=2x8x16"], floats(lambda b, s: [(b, s, 16), (b, s, 16)]))
    assert "le: a <= b\n" in text and " & lt" in text and "-> logical_not" in text and " | " in text, text
