"""`shapelang import` on generated modules: hypothesis draws small nn.Modules (sequences of
Linear, LayerNorm, Embedding, activations, residual adds, view/transpose/reshape,
nn.MultiheadAttention, dropout); each is imported, checked clean, regenerated, loaded
with the original's weights by the mapping and compared with the original to 1e-5, with
equal parameter totals (the round trip of test_import_roundtrip, by the public API)."""
from __future__ import annotations

import pytest
from tiers import examples

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_import_roundtrip import round_trip
from torch import nn

V, H, F = 37, 4, 56          # distinct sizes: the importer names sizes by value
KINDS = ["linear", "widen", "layernorm", "gelu", "relu", "silu", "tanh", "residual", "heads",
         "transpose", "mha", "dropout", "scale"]


class Drawn(nn.Module):
    """x (or embedded ids) through the drawn steps, in order."""

    def __init__(self, kinds: list, d: int, embed: bool, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.kinds = list(kinds)
        self.num_heads = H      # names H (and Dh = D / H) in the imported spec, as a config would
        self.embed = nn.Embedding(V, d) if embed else None
        for k, kind in enumerate(self.kinds):
            if kind in ("linear", "residual"):
                setattr(self, f"l{k}", nn.Linear(d, d))
            elif kind == "widen":
                setattr(self, f"l{k}", nn.Sequential(nn.Linear(d, F), nn.GELU(), nn.Linear(F, d)))
            elif kind == "layernorm":
                setattr(self, f"l{k}", nn.LayerNorm(d))
            elif kind == "mha":
                setattr(self, f"l{k}", nn.MultiheadAttention(d, H, batch_first=True))
            elif kind == "dropout":
                setattr(self, f"l{k}", nn.Dropout(0.1))
        for p in self.parameters():       # not the default init: every weight must matter
            nn.init.normal_(p, 0.0, 0.3)

    def forward(self, x):
        if self.embed is not None:
            x = self.embed(x)
        for k, kind in enumerate(self.kinds):
            layer = getattr(self, f"l{k}", None)
            if kind in ("linear", "widen", "layernorm", "dropout"):
                x = layer(x)
            elif kind == "residual":
                x = x + layer(x)
            elif kind == "mha":
                x = layer(x, x, x, need_weights=False)[0]
            elif kind == "heads":
                B, S, D = x.shape
                x = x.view(B, S, H, D // H).transpose(1, 2).transpose(1, 2).reshape(B, S, D)
            elif kind == "transpose":
                x = (x.transpose(1, 2) * 2.0).transpose(1, 2)
            elif kind == "scale":
                x = x * 0.5
            else:
                x = getattr(torch.nn.functional, kind)(x) if kind != "tanh" else torch.tanh(x)
        return x


@settings(max_examples=examples(8), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=5),
       d=st.sampled_from([24, 40]), embed=st.booleans(), seed=st.integers(0, 3))
@example(kinds=["mha", "residual", "heads", "widen"], d=40, embed=True, seed=1)
@example(kinds=["layernorm", "mha", "gelu", "silu", "tanh", "transpose", "dropout"], d=24, embed=False, seed=2)
def test_drawn_modules_round_trip(tmp_path_factory, kinds, d, embed, seed):
    kinds = kinds + ["linear"]        # at least one weight the mapping must place
    module = Drawn(kinds, d, embed, seed).eval()
    if embed:
        def make(b, s, seed=0):
            return [torch.randint(0, V, (b, s), generator=torch.Generator().manual_seed(seed))]
        inputs = ["x=2x7:int"]
    else:
        def make(b, s, seed=0):
            return [torch.randn(b, s, d, generator=torch.Generator().manual_seed(seed))]
        inputs = [f"x=2x7x{d}"]
    tmp = tmp_path_factory.mktemp("drawn")
    text = round_trip(tmp, module, inputs, make, sizes_list=((2, 7), (3, 5)))
    assert "opaque" not in text
    if "mha" in kinds:     # nn.MultiheadAttention is read as attention, not as its kernel
        assert "softmax -1" in text
