"""`stack E Expert(x, hit)` with `hit: [E, T]` where the block declares `mine: [T]`: E copies
of a block, each with its own weights, copy e given hit[e] (a mixture of experts as Hugging
Face writes it: a ModuleList of experts and a loop that gives each its slice of the routing).
It is the stack's one way of handing out slices, the one a scan over layer caches uses too.
The generated loop computes what the hand-written one does; a slice whose leading axis is not
the count, the `each=` marker of earlier versions and `first=` beside a sliced input are refused."""
from __future__ import annotations

import pytest
from torch_shapes import checked, codes, module

from shapelang import check

torch = pytest.importorskip("torch")

SPEC = """\
dim T, D, E, F
example T=5, D=3, E=4, F=6
input x: [T, D]
input hit: [E, T] bool
block Expert(acc: [T, D], h: [T, D], mine: [T] bool):
  tok: where(mine)
  y: h -> index_select 0 tok -> linear F bias=false -> relu -> linear D bias=false
  return acc -> index_add 0 tok y
end
experts: zeros([T, D]) -> stack E Expert(x, hit)
"""


@pytest.mark.parametrize("pattern", ["one", "none", "all"])
def test_each_copy_gets_its_slice_and_its_own_weights(pattern):
    spec = checked(SPEC)
    assert not spec.diagnostics
    assert spec.example_value(spec.total_params) == 4 * 2 * 3 * 6
    model, gen = module(spec, "stack_each", T=5, D=3, E=4, F=6)
    assert "for i, layer in enumerate(self.experts):" in gen.source
    assert "experts = layer(experts, x, hit[i])" in gen.source
    assert "nn.ModuleList([Expert(cfg) for _ in range(cfg.E)])" in gen.source
    torch.manual_seed(0)
    x = torch.randn(5, 3)
    hit = {"one": torch.eye(4, 5, dtype=torch.bool), "none": torch.zeros(4, 5, dtype=torch.bool),
           "all": torch.ones(4, 5, dtype=torch.bool)}[pattern]
    want = torch.zeros(5, 3)
    for e, expert in enumerate(model.experts):
        lin1, lin2 = [m for m in expert.modules() if isinstance(m, torch.nn.Linear)]
        tok = hit[e].nonzero().squeeze(1)
        want.index_add_(0, tok, lin2(torch.relu(lin1(x[tok]))))
    with torch.no_grad():
        torch.testing.assert_close(model(x, hit), want.detach())


FIRST = SPEC.replace("block Expert", """block Dense(acc: [T, D], h: [T, D], mine: [T] bool):
  return acc + h
end
block Expert""")


@pytest.mark.parametrize("spec, change, code", [
    (SPEC, ("input hit: [E, T] bool", "input hit: [F, T] bool"), "E113"),   # first axis is not the count
    (SPEC, ("Expert(x, hit)", "Expert(x, hit) each=hit"), "E110"),          # no such keyword any more
    (FIRST, ("Expert(x, hit)", "Expert(x, hit) first=Dense"), "E110"),      # slices and another layer 0
], ids=["count", "each-keyword", "first"])
def test_wrong_slicing_is_refused(spec, change, code):
    got = codes(spec.replace(*change))
    assert got and got[0] == code, got


def test_first_beside_a_sliced_input_says_why():
    err = check(FIRST.replace("Expert(x, hit)", "Expert(x, hit) first=Dense")).errors()[0]
    assert "`first=`" in err.message and "`mine`" in err.message
