"""Sizes that depend on the values (`where(M)`, `nonzero`, `masked_select`) are fresh sizes
0 <= N <= numel, one per occurrence (as torch.export's unbacked sizes): the checker never
proves an equality about them that some values break, a size that may be 0 is not taken
for positive, and the generated module computes what torch computes, mask empty or full."""
from __future__ import annotations

import pytest
import sympy as sp
from torch_shapes import checked, module

from shapelang import check

torch = pytest.importorskip("torch")

ROUTE = """\
dim T, D, K, E, F
assume E >= 2
example T=6, D=4, K=2, E=3, F=5
input x: [T, D]
input sel: [T, K] int
input w: [T, K]
hit: sel -> one_hot E -> permute 2 1 0 -> select 0 1
slot, tok: where(hit)
h: x -> index_select 0 tok
y: h -> linear F bias=false -> linear D bias=false
wt: w -> index_select 0 tok -> gather 1 (slot -> unsqueeze -1)
out: zeros([T, D]) -> index_add 0 tok (y * wt)
nz: hit -> nonzero
ms: x -> masked_select (x > 0)
"""


def _route_inputs(s, expert_of):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(s["T"], s["D"], generator=g)
    sel = torch.tensor(expert_of, dtype=torch.long).view(s["T"], s["K"])
    w = torch.rand(s["T"], s["K"], generator=g)
    return x, sel, w


def _route_reference(model, x, sel, w, E):
    lin1, lin2 = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    hit = torch.nn.functional.one_hot(sel, E).permute(2, 1, 0)[1]
    slot, tok = torch.where(hit)
    y = lin2(lin1(x[tok])) * w[tok, slot, None]
    return {"out": torch.zeros_like(x).index_add(0, tok, y), "nz": hit.nonzero(), "ms": x[x > 0]}


@pytest.mark.parametrize("expert_of", [
    [0, 2] * 6,                   # no token routed to expert 1: N = 0
    [1, 0, 2, 1, 1, 2, 0, 1, 1, 0, 2, 1],
    [1, 1] * 6,                   # every slot routed to expert 1: N = T*K
], ids=["none", "some", "all"])
def test_routing_computes_what_torch_computes_empty_or_full(expert_of):
    s = {"T": 6, "D": 4, "K": 2, "E": 3, "F": 5}
    spec = checked(ROUTE)
    assert not spec.diagnostics
    model, gen = module(spec, "route", **s)
    assert "slot, tok = torch.where(hit)" in gen.source
    inputs = _route_inputs(s, expert_of)
    with torch.no_grad():
        got, want = model(*inputs), _route_reference(model, *inputs, s["E"])
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=name)


def test_fresh_sizes_are_named_after_their_binding_and_bounded_by_the_numel():
    spec = checked(ROUTE)
    types = {n: t for b in spec.bindings for n, t in zip(b.names, b.types)}
    n_tok, = types["tok"].shape
    assert str(n_tok) == "N_tok" and types["slot"].shape == (n_tok,)
    assert types["h"].shape[0] == n_tok and types["out"].shape == (spec.prover.user["T"], spec.prover.user["D"])
    assert str(types["nz"].shape[0]) == "N_nz" and types["nz"].shape[1] == 2
    p = spec.prover
    T, K, D = (p.user[n] for n in "TKD")
    assert p.leq(n_tok, T * K).ok                      # at most the mask's entries
    assert not p.leq(n_tok, T).ok                      # not at most T: a token may go to both slots
    assert p.leq(sp.Integer(0), n_tok).ok
    assert p.positive(n_tok).status == "refuted"       # it may be 0
    assert p.equal(n_tok, types["nz"].shape[0]).status == "refuted"
    assert str(types["ms"].shape[0]) == "N_ms" and p.leq(types["ms"].shape[0], T * D).ok


def test_trace_and_run_show_the_fresh_size():
    from shapelang import api
    spec = checked(ROUTE)
    text = api.trace(spec, width=0)
    assert "[N_tok, D]" in text and "[N_tok] int | [N_tok] int" in text
    report = api.run(spec)
    assert report.ok, api.render_run(report) if hasattr(api, "render_run") else report


HEAD = ("dim T, D, K\nexample T=4, D=3, K=2\ninput x: [T, D]\ninput acc: [T, D]\n"
        "input m1: [T, D] bool\ninput m2: [T, D] bool\ninput hit: [K, T] int\n")
WRONG = [
    # two selections: their lengths differ for some masks
    ("a: x -> masked_select m1\nb: x -> masked_select m2\nc: a + b\n", "E102",
     lambda: torch.ones(3)[torch.tensor([True, False, True])] + torch.ones(3)[torch.tensor([True, True, True])]),
    # even of the same mask each occurrence is its own size (as torch.export's)
    ("a: x -> masked_select m1\nb: x -> masked_select m1\nc: a -> concat 0 b -> view [2, T*D]\n", "E103",
     lambda: torch.ones(3).view(2, 3)),
    # rows from one routing added at the indices of another
    ("s1, t1: where(hit)\ns2, t2: where(hit > 0)\ny: x -> index_select 0 t1\nz: acc -> index_add 0 t2 y\n",
     "E105", lambda: torch.zeros(4, 3).index_add(0, torch.tensor([0, 1]), torch.zeros(3, 3))),
    # the size may be 0: topk 1 of nothing
    ("a: x -> masked_select m1\nv, i: a -> topk 1 0\n", "E105",
     lambda: torch.ones(0).topk(1)),
    # or odd
    ("a: x -> masked_select m1 -> view [2, -1]\n", "E104", lambda: torch.ones(3).view(2, -1)),
    # a 2-d index where index_add takes a vector
    ("n: hit -> nonzero\nz: acc -> index_add 0 n x\n", "E110",
     lambda: torch.zeros(4, 3).index_add(0, torch.zeros(4, 2).long(), torch.zeros(4, 3))),
    ("s, t: where(hit)\nz: where(hit) -> view [K]\n", "E110", None),
]


@pytest.mark.parametrize("lines, code, torch_call", WRONG, ids=[w[0].split("\n")[-2] for w in WRONG])
def test_nothing_is_proved_that_some_values_break(lines, code, torch_call):
    spec = check(HEAD + lines)
    assert [d.code for d in spec.diagnostics] == [code], [d.message for d in spec.diagnostics]
    if torch_call is not None:
        with pytest.raises((RuntimeError, IndexError)):
            torch_call()


BLOCK = """\
dim T, D
example T=4, D=3
input x: [T, D]
input m: [T, D] bool
block Pick(y: [T, D], mask: [T, D] bool):
  return y -> masked_select mask
end
a: x -> Pick(m)
b: x -> Pick(m)
c: a + b
"""


def test_each_call_of_a_block_makes_its_own_size():
    spec = check(BLOCK)
    assert [d.code for d in spec.diagnostics] == ["E102"]
    ok = check(BLOCK.replace("c: a + b", "c: a + a"))
    assert ok.ok and not ok.diagnostics
    sizes = {str(b.types[0].shape[0]) for b in ok.bindings if b.names in (("a",), ("b",))}
    assert len(sizes) == 2


def test_a_size_that_may_be_zero_is_allowed_where_pytorch_allows_it():
    # linear, index_select and index_add of no rows are fine in torch; so in the checker
    spec = checked(HEAD + "a: x -> masked_select m1 -> unsqueeze -1 -> linear D -> sum 0\n")
    assert not spec.diagnostics
    assert torch.nn.Linear(1, 3)(torch.ones(0, 1)).sum(0).shape == (3,)


LAYOUT = """\
dim T, D
example T=4, D=6
input x: [T, D]
input m: [T] bool
tok: where(m)
h: x -> index_select 0 tok
r: h -> rearrange "n d -> (n d)"
f: h -> reshape [-1] -> view [-1, D] -> transpose 0 1 -> contiguous -> view [D, -1]
s: h -> softmax 0 -> sum 0
"""


@pytest.mark.parametrize("mask", [[False] * 4, [True, False, True, True], [True] * 4], ids=["empty", "some", "full"])
def test_regrouping_a_data_dependent_axis_infers_it_as_torch_does(mask):
    # the -1 of a view stands for D*N/D = N, which may be 0: PyTorch allows that (the other
    # sizes are known), so the checker does; the generated code writes the size as -1
    spec = checked(LAYOUT)
    assert not spec.diagnostics
    model, gen = module(spec, "layout", T=4, D=6)
    assert "h.view(-1)" in gen.source and "f.view(D, -1)" in gen.source
    x, m = torch.randn(4, 6), torch.tensor(mask)
    h = x[m]
    want = {"r": h.reshape(-1), "f": h.reshape(-1).view(-1, 6).t().contiguous().view(6, -1),
            "s": h.softmax(0).sum(0)}
    got = model(x, m)
    for name, value in want.items():
        torch.testing.assert_close(got[name], value, msg=name)


def test_an_expect_may_name_the_fresh_size_and_is_checked_against_it():
    ok = check(ROUTE + "expect h: [N_tok, D]\nexpect slot: [N_tok]\n")
    assert ok.ok and not ok.diagnostics
    wrong = check(ROUTE + "expect h: [T, D]\n")
    assert [d.code for d in wrong.diagnostics] == ["E107"]
    assert "N_tok=" in " ".join(wrong.diagnostics[0].notes)
    other = check(ROUTE + "expect h: [N_nz, D]\n")   # another selection's size: not the same
    assert [d.code for d in other.diagnostics] == ["E107"]


def test_a_size_made_inside_a_stacked_block_cannot_leave_its_copy():
    # each copy of a stack would select its own rows: the stack refuses it, as the copies'
    # lengths differ in PyTorch (the second layer would get the first's selection)
    text = ("dim T, D\nexample T=4, D=3\ninput x: [T, D]\n"
            "block Keep(y: [T, D]):\n  m: (y -> sum -1) > 0\n  tok: where(m)\n  return y -> index_select 0 tok\nend\n"
            "z: x -> stack 2 Keep\n")
    assert [d.code for d in check(text).diagnostics] == ["E114"]
    spread = text.replace("return y -> index_select 0 tok", "return zeros([T, D]) -> index_add 0 tok (y -> index_select 0 tok)")
    assert check(spread).ok


# Two kinds of sizes that may be 0 in one spec: a declared dim with `assume P >= 0` (an empty
# cache) and a data-dependent one (no token routed). Each stays what it is: P's axis may be
# empty, N's may be, and their sum is a size `-1` may stand for.
BOTH = """\
dim T, D, P
assume P >= 0
example T=4, D=3, P=0
input past: [P, D]
input x: [T, D]
input hit: [T] bool
tok: where(hit)
rows: concat(0, past, x -> index_select 0 tok) -> view [-1, D]
"""


@pytest.mark.parametrize("P, hit", [(0, [0, 0, 0, 0]), (0, [1, 0, 1, 1]), (2, [0, 0, 0, 0]), (3, [1, 1, 1, 1])],
                         ids=["both-empty", "empty-cache", "no-token", "neither"])
def test_a_declared_and_a_data_dependent_size_may_both_be_zero(P, hit):
    spec = checked(BOTH)
    assert not spec.diagnostics
    types = {n: t for b in spec.bindings for n, t in zip(b.names, b.types)}
    assert str(types["rows"].shape[0]) in ("N_tok + P", "P + N_tok")
    model, _ = module(spec, "both_zero", T=4, D=3, P=P)
    past, x = torch.randn(P, 3), torch.randn(4, 3)
    mask = torch.tensor(hit, dtype=torch.bool)
    with torch.no_grad():
        got = model(past, x, mask)
    torch.testing.assert_close(got, torch.cat([past, x[mask.nonzero().squeeze(1)]]).view(-1, 3))


@pytest.mark.parametrize("text, counterexample", [
    (BOTH + "flat: past -> view [P, -1]\n", {"P": 0}),    # -1 beside a size that may be 0
    (BOTH.replace("input past: [P, D]", "input past: [P - 1, D]"), {"P": 1}),
], ids=["minus-one-beside-P", "P-minus-1"])
def test_sizes_that_may_be_zero_are_not_taken_for_positive(text, counterexample):
    err = check(text).errors()[0]
    assert err.code == "E109" and err.counterexample == counterexample
    if "flat" in text:   # as PyTorch refuses it for an empty cache
        with pytest.raises(RuntimeError, match="ambiguous"):
            torch.zeros(0, 3).view(0, -1)
