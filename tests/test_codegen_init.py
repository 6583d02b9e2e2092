"""The documented initialisation of a generated module (docs/codegen.md): linear, embedding and
convolution weights drawn from normal(0, 0.02), biases zero, norms ones and zeros."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn

from shapelang import api
from shapelang.codegen import runner

SPEC = """\
dim B
dim S
dim V
dim D
example B=2, S=5, V=300, D=64

input idx: [B, S] int

tok: idx -> embed V D
h: tok -> layernorm
m: h -> linear 4*D -> gelu -> linear D
"""


def test_generated_layers_follow_the_documented_init():
    spec = api.check(SPEC, "init.shape")
    _m, model = runner.build(api.codegen(spec), dict(spec.example), seed=3)
    layers = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    assert len(layers) == 3
    for layer in layers:
        w = layer.weight.detach()
        assert abs(w.mean().item()) < 0.005 and 0.018 < w.std().item() < 0.022, (type(layer), w.std())
        if getattr(layer, "bias", None) is not None:
            assert not layer.bias.any()
    norm = next(m for m in model.modules() if isinstance(m, nn.LayerNorm))
    assert bool((norm.weight == 1).all()) and not norm.bias.any()
