"""`shapelang import`, the elementwise matrix: every elementwise torch operation the importer
translates, applied to one tensor inside one module, imported and round-tripped (checked
clean, generated, the weights copied, the outputs equal to PyTorch's to 1e-5); each is then
looked for in the spec as the operation it should read as, never as an `opaque` step.

Also: a size that merely equals D/H is not written D/H; an operation with no spec form is
kept `opaque` with its shape and the spec still checks; a module that cannot be traced is
one clear message."""
from __future__ import annotations

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
    "reciprocal": (lambda h, w: torch.reciprocal(h.abs() + 1), "1 / "),
    "where": (lambda h, w: torch.where(h > 0, h, 0.1 * h), "where("),
    "masked_fill": (lambda h, w: h.masked_fill(h < -1, 0.0), ", 0.0, "),
    "minimum": (lambda h, w: torch.minimum(h, w), "minimum("),
    "clamp": (lambda h, w: h.clamp(min=-1.0, max=1.0), "clamp min=(-1.0) max=1.0"),
    "softmax": (lambda h, w: F.softmax(h, -1), "-> softmax -1"),
    "var": (lambda h, w: h * h.var(-1, keepdim=True, unbiased=False), "var -1 keepdim correction=0"),
    "sub a number": (lambda h, w: 1 - h, "1 - "),
    "positions": (lambda h, w: h + torch.arange(h.shape[1])[None, :, None], "arange(S)"),
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


class Cumulative(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(torch.erf(x).cumsum(1))


def test_an_operation_with_no_spec_form_stays_opaque_and_the_spec_checks():
    imported = import_module(Cumulative(), ["x=2x8x16"])
    assert imported.opaque == 2 and imported.verified is None
    assert '# opaque: aten.erf.default' in imported.text
    assert 'opaque "aten.cumsum.default" [B, S, D]' in imported.text
    assert check_text(imported.text, "cumulative.shape").ok


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
