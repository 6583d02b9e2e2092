"""Indexing with int tensors (index_select, gather, take_along_dim, topk with a symbolic
k, one_hot): the checker's shapes and dtypes are PyTorch's at several sizes, its errors
are ones PyTorch raises, and the generated module computes what torch computes."""
from __future__ import annotations

import pytest
from torch_shapes import codes, module, shape_at

from shapelang import check

torch = pytest.importorskip("torch")

SPEC = """\
dim B, S, D, E, K, V, N
assume K <= E
example {example}
input x: [B, S, D]
input logits: [B, S, E]
input ids: [B, S] int
input rows: [N] int
input near: [B, 1, K] int
a: x -> index_select 1 rows
w, idx: logits -> topk K -1
g: logits -> gather -1 idx
t: logits -> take_along_dim near -1
h: ids -> one_hot V
"""
SIZES = [{"B": 2, "S": 5, "D": 8, "E": 4, "K": 2, "V": 7, "N": 3}, {"B": 1, "S": 3, "D": 2, "E": 6, "K": 6, "V": 1, "N": 9},
         {"B": 3, "S": 1, "D": 5, "E": 1, "K": 1, "V": 4, "N": 1}]
KIND = {torch.long: "int", torch.float32: "float"}


def _inputs(s):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(s["B"], s["S"], s["D"], generator=g)
    logits = torch.randn(s["B"], s["S"], s["E"], generator=g)
    ids = torch.randint(0, s["V"], (s["B"], s["S"]), generator=g)
    rows = torch.randint(0, s["S"], (s["N"],), generator=g)
    near = torch.randint(0, s["E"], (s["B"], 1, s["K"]), generator=g)
    return x, logits, ids, rows, near


def _reference(x, logits, ids, rows, near, s):
    w, idx = logits.topk(s["K"], dim=-1)
    return {"a": x.index_select(1, rows), "w": w, "idx": idx, "g": torch.gather(logits, -1, idx),
            "t": torch.take_along_dim(logits, near, dim=-1),
            "h": torch.nn.functional.one_hot(ids, s["V"])}


@pytest.mark.parametrize("s", SIZES, ids=lambda s: "-".join(map(str, s.values())))
def test_shapes_dtypes_and_values_are_pytorchs(s):
    spec = check(SPEC.format(example=", ".join(f"{k}={v}" for k, v in s.items())))
    assert spec.ok and not spec.diagnostics
    want = _reference(*_inputs(s), s)
    types = {n: t for b in spec.bindings for n, t in zip(b.names, b.types)}
    for name, value in want.items():
        assert shape_at(spec, name, s) == tuple(value.shape), name
        assert types[name].dtype == KIND[value.dtype], name
    model, _gen = module(spec, "indexing", **s)
    got = model(*_inputs(s))
    for name in got:
        torch.testing.assert_close(got[name], want[name], msg=name)


ERRORS = [
    ("y: logits -> topk 1 -1", "E110", None),
    ("y, z: logits -> topk (E + 1) -1", "E105", lambda: torch.randn(2, 3).topk(4, dim=-1)),
    ("y: logits -> index_select 1 x", "E112", lambda: torch.randn(2, 3).index_select(1, torch.randn(2))),
    ("y: logits -> gather -1 ids", "E110", lambda: torch.gather(torch.randn(2, 3, 4), -1, torch.zeros(2, 3).long())),
    ("y: logits -> gather -1 wide", "E105",
     lambda: torch.gather(torch.randn(2, 3, 4), -1, torch.zeros(2, 5, 4).long())),
    ("y: x -> one_hot E", "E112", lambda: torch.nn.functional.one_hot(torch.randn(3), 4)),
]


@pytest.mark.parametrize("line, code, torch_call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(line, code, torch_call):
    text = ("dim B, S, E, W\nexample B=2, S=3, E=4, W=5\ninput x: [S]\ninput logits: [B, S, E]\n"
            f"input ids: [B, S] int\ninput wide: [B, W, E] int\n{line}\n")
    assert codes(text) == [code]
    if torch_call is not None:
        with pytest.raises(RuntimeError):
            torch_call()
