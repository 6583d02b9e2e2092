"""Tables a module computes from sizes fixed when it is built are buffers made once in
`__init__` (shapelang/codegen/tables.py): `forward` does not rebuild them, they stay out of
the state dict, and the outputs are unchanged. Tables that need a size read from the inputs
(the sequence length) are still computed in `forward`, from those buffers."""
from __future__ import annotations

import warnings

import pytest
import tiers
from torch_shapes import REDUCED

from shapelang import check
from shapelang.codegen import runner
from shapelang.codegen.generator import generate

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

# a relative-position index over a window of W (fixed: a config size) and rotary tables
# whose frequencies need Dh (fixed) and whose angles need S (read from the input)
SPEC = """dim B, S
dim D = 32
dim H = 4
dim Dh = D / H
dim W = 3
dim N = W*W
assume D % H == 0
assume Dh % 2 == 0
example B=2, S=5

input x: [B, S, D]
input g: [B, N, H]

param table: [(2*W - 1)**2, H]

ax: arange(W)
cy, cx: meshgrid(ax, ax)
coords: stack_tensors(0, cy, cx) -> flatten 1
rel: (coords -> unsqueeze 2) - (coords -> unsqueeze 1) -> permute 1 2 0
shifted: rel + (W - 1)
index: (shifted -> select -1 0) * (2*W - 1) + (shifted -> select -1 1) -> flatten
bias: table -> index_select 0 index -> view [N, N, H]
gb: g @ (bias -> select 1 0 -> transpose 0 1)

inv_freq: 1 / 10000.0 ** (arange(0.0, Dh, 2) / Dh)
freqs: outer(arange(S), inv_freq)
angles: concat(-1, freqs, freqs)
q: x -> linear D -> view [B, S, H, Dh]
rot: q * (angles -> cos -> unsqueeze 1) + q * (angles -> sin -> unsqueeze 1)
"""


class Calls:
    """Counts calls of torch functions while installed."""

    def __init__(self, monkeypatch, *names):
        self.counts = dict.fromkeys(names, 0)
        for name in names:
            real = getattr(torch, name)

            def counted(*args, _real=real, _name=name, **kwargs):
                self.counts[_name] += 1
                return _real(*args, **kwargs)
            monkeypatch.setattr(torch, name, counted)


@pytest.fixture(scope="module")
def tables():
    spec = check(SPEC, "tables.shape")
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    return spec, generate(spec)


def test_fixed_tables_are_buffers_built_once(tables, monkeypatch):
    spec, gen = tables
    _mod, model = runner.build(gen, dict(spec.example))
    buffers = dict(model.named_buffers())
    assert set(buffers) == {"index", "inv_freq"}
    assert not set(buffers) & set(model.state_dict())          # checkpoints are unchanged
    # the values PyTorch gives for the same formulas
    ys, xs = torch.meshgrid(torch.arange(3), torch.arange(3), indexing="ij")
    coords = torch.stack([ys, xs]).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + 2
    assert torch.equal(buffers["index"], (rel[..., 0] * 5 + rel[..., 1]).flatten())
    torch.testing.assert_close(buffers["inv_freq"], 1.0 / 10000.0 ** (torch.arange(0, 8, 2).float() / 8))

    inputs = runner.make_inputs(spec, gen, dict(spec.example))
    calls = Calls(monkeypatch, "arange", "meshgrid", "stack")
    with torch.no_grad():
        model(*inputs)
    # only the positions 0..S-1 are made in forward: S is read from the input
    assert calls.counts == {"arange": 1, "meshgrid": 0, "stack": 0}


def test_the_module_computes_what_it_did_in_forward(tables):
    """`run` writes every table out in forward (it records each step) and compares."""
    spec, _gen = tables
    for sizes in ({}, {"B": 1, "S": 7, "D": 48, "H": 2, "W": 2}):
        report = runner.run_spec(spec, runner.resolve_sizes(spec, sizes))
        assert report.ok and report.clean_same, report.error


def test_buffers_follow_the_module_to_bfloat16(tables):
    spec, gen = tables
    _mod, model = runner.build(gen, dict(spec.example))
    model = model.to(torch.bfloat16)
    assert model.index.dtype == torch.long and model.inv_freq.dtype == torch.bfloat16
    x, g = runner.make_inputs(spec, gen, dict(spec.example))
    with torch.no_grad():
        out = model(x.to(torch.bfloat16), g.to(torch.bfloat16))
    assert all(t.dtype == torch.bfloat16 for t in out.values())


def test_swin_builds_its_relative_position_index_once(monkeypatch):
    spec = tiers.checked(tiers.ROOT / "specs" / "swin_tiny.shape")
    gen = generate(spec)
    assert "self.register_buffer(\"flat_index\", flat_index, persistent=False)" in gen.source
    sizes = REDUCED["swin_tiny"][0]
    _mod, model = runner.build(gen, sizes)
    attention = [m for m in model.modules() if type(m).__name__ == "WindowAttention"]
    assert attention and all(not m.flat_index.is_meta for m in attention)
    assert not any(k.endswith("flat_index") for k in model.state_dict())
    calls = Calls(monkeypatch, "meshgrid")
    with torch.no_grad():
        model(*runner.make_inputs(spec, gen, sizes))
    assert calls.counts["meshgrid"] == 0
