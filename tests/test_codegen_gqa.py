"""Grouped-query attention written with the fused `attention` step after `repeat_interleave`
(Llama's repeat_kv): the generated call passes the grouped heads with sdpa's `enable_gqa=True`
and copies nothing, and computes what the written-out copies compute."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tiers import ROOT

from shapelang import api
from shapelang.codegen import runner

SIZES = {"B": 2, "S": 6, "V": 50, "D": 32, "H": 4, "F": 40, "L": 2}


@pytest.mark.parametrize("groups", [4, 2, 1])       # Nrep = 1, 2, 4
def test_repeat_kv_becomes_enable_gqa(groups):
    spec = api.check_file(str(ROOT / "specs" / "llama2_7b.shape"))
    fused, explicit = api.codegen(spec), api.codegen(spec, attention="explicit")
    assert "enable_gqa=True" in fused.source and "repeat_interleave" not in fused.source
    assert "repeat_interleave" in explicit.source
    sizes = dict(spec.example) | SIZES | {"G": groups}
    _m, a = runner.build(fused, sizes, seed=0)
    _m, b = runner.build(explicit, sizes, seed=0)
    b.load_state_dict(a.state_dict())
    ids = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(a(ids), b(ids), atol=1e-5, rtol=1e-5)
