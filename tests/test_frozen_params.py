"""Frozen parameters (`param P: [..] frozen`): counted in the total as model.parameters()
counts them, with the frozen part named in the trace and the JSON (through blocks and
stacks, shared or not), emitted as nn.Parameter(.., requires_grad=False) so that the state
dict holds them under their names and an optimizer step leaves them unchanged."""
from __future__ import annotations

import pytest
from torch_shapes import module

from shapelang import check, render_check, to_json, trace

SPEC = """\
dim B, N, D
example B=2, N=4, D=8
input x: [B, N, D]
param pos_embed: [1, N, D] frozen
param scale: [D] bfloat16 frozen
block Layer(z: [B, N, D]):
  param table: [N, D] frozen
  return z + table -> linear D
end
h: x + pos_embed -> stack 3 Layer -> stack 2 Layer shared=true
y: h * (scale -> float)
"""


def test_frozen_parameters_are_counted_and_their_part_is_named():
    spec = check(SPEC)
    assert spec.ok, render_check(spec)
    frozen = 4 * 8 + 8 + (3 + 1) * 4 * 8          # pos_embed, scale, 3 tables + 1 shared table
    layers = (3 + 1) * (8 * 8 + 8 + 4 * 8)          # each distinct layer: linear and its table
    assert spec.example_value(spec.frozen_params) == frozen
    assert spec.example_value(spec.total_params) == layers + 4 * 8 + 8
    text = trace(spec, width=0)
    assert "of which frozen (not trained): " in text and text.rstrip().count(f"= {frozen}") == 1
    assert "param bfloat16 frozen" in text
    out = to_json(spec, trace=True)
    assert out["total"]["frozen_params_example"] == frozen
    assert [d.get("frozen", False) for d in out["inputs"]] == [False, True, True]


def test_a_spec_without_frozen_parameters_says_nothing_of_them():
    spec = check(SPEC.replace(" frozen", ""))
    assert spec.frozen_params == 0 and "frozen" not in trace(spec)
    assert "frozen_params" not in to_json(spec, trace=True)["total"]


@pytest.mark.parametrize("line", ["input x: [B, N, D] frozen", "buffer t: [N] frozen"])
def test_only_a_param_is_frozen(line):
    spec = check("dim B, N, D\n" + line + "\n")
    [err] = spec.errors()
    assert err.code == "E001" and (err.span.line, err.span.column) == (2, line.index("frozen") + 1)
    assert "only a `param` is `frozen`" in err.help


def test_the_module_keeps_frozen_parameters_and_never_trains_them():
    torch = pytest.importorskip("torch")
    spec = check(SPEC)
    model, gen = module(spec, "frozen", B=2, N=4, D=8)
    assert "requires_grad=False" in gen.source
    params = dict(model.named_parameters())
    frozen = {n for n, p in params.items() if not p.requires_grad}
    assert {"pos_embed", "scale"} <= frozen and len(frozen) == 2 + 3 + 1
    assert frozen <= set(model.state_dict())
    assert sum(p.numel() for p in model.parameters()) == spec.example_value(spec.total_params)
    assert sum(params[n].numel() for n in frozen) == spec.example_value(spec.frozen_params)
    before = {n: p.detach().clone() for n, p in params.items()}
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model.train()
    model(torch.randn(2, 4, 8)).square().sum().backward()
    opt.step()
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]) == (n in frozen), n
