"""Adding and writing at int indices (index_add, scatter_add, scatter): the checker's shapes
and dtypes are PyTorch's at several sizes, its errors are ones PyTorch raises, and the
generated module computes what torch computes."""
from __future__ import annotations

import pytest
from torch_shapes import codes, module, shape_at

from shapelang import check

torch = pytest.importorskip("torch")

SPEC = """\
dim T, D, N, K
assume K <= D
assume N <= T
example {example}
input acc: [T, D]
input src: [N, D]
input rows: [N] int
input cols: [T, K] int
input part: [N, K] int
a: acc -> index_add 0 rows src
b: acc -> index_add 0 rows src alpha=0.5
c: acc -> scatter_add 1 cols (acc -> slice 1 0 K)
d: acc -> scatter 1 cols 2.5
e: acc -> scatter_add 1 part src
f: acc -> scatter 1 part src
"""
SIZES = [{"T": 6, "D": 4, "N": 3, "K": 2}, {"T": 1, "D": 1, "N": 1, "K": 1}, {"T": 5, "D": 7, "N": 5, "K": 7}]


def _inputs(s):
    g = torch.Generator().manual_seed(1)
    acc = torch.randn(s["T"], s["D"], generator=g)
    src = torch.randn(s["N"], s["D"], generator=g)
    rows = torch.randint(0, s["T"], (s["N"],), generator=g)   # repeated rows add up
    cols = torch.randint(0, s["D"], (s["T"], s["K"]), generator=g)
    part = torch.randint(0, s["D"], (s["N"], s["K"]), generator=g)
    return acc, src, rows, cols, part


def _reference(acc, src, rows, cols, part, s):
    return {"a": acc.index_add(0, rows, src), "b": acc.index_add(0, rows, src, alpha=0.5),
            "c": acc.scatter_add(1, cols, acc[:, :s["K"]]), "d": acc.scatter(1, cols, 2.5),
            "e": acc.scatter_add(1, part, src), "f": acc.scatter(1, part, src)}


@pytest.mark.parametrize("s", SIZES, ids=lambda s: "-".join(map(str, s.values())))
def test_shapes_dtypes_and_values_are_pytorchs(s):
    spec = check(SPEC.format(example=", ".join(f"{k}={v}" for k, v in s.items())))
    assert spec.ok and not spec.diagnostics, [d.message for d in spec.diagnostics]
    want = _reference(*_inputs(s), s)
    types = {n: t for b in spec.bindings for n, t in zip(b.names, b.types)}
    for name, value in want.items():
        assert shape_at(spec, name, s) == tuple(value.shape), name
        assert types[name].dtype == "float", name
    model, gen = module(spec, "scatter", **s)
    assert ".index_add(0, rows, src, alpha=0.5)" in gen.source
    got = model(*_inputs(s))
    for name in want:
        # scatter with repeated indices keeps one of the writes (unspecified which) in torch
        # too; the same call on the same inputs is deterministic on CPU
        torch.testing.assert_close(got[name], want[name], msg=name)


HEAD = ("dim T, D, N, M\nexample T=4, D=3, N=2, M=5\ninput acc: [T, D]\ninput src: [N, D]\n"
        "input rows: [N] int\ninput other: [M] int\ninput wide: [T, M] int\ninput fidx: [N] float\n"
        "input isrc: [N, D] int\n")
ERRORS = [
    # the source has N rows but M indices
    ("y: acc -> index_add 0 other src", "E105",
     lambda: torch.zeros(4, 3).index_add(0, torch.zeros(5).long(), torch.zeros(2, 3))),
    # the source's other axis must be the input's
    ("y: acc -> index_add 1 rows src", "E105",
     lambda: torch.zeros(4, 3).index_add(1, torch.zeros(2).long(), torch.zeros(2, 3))),
    ("y: acc -> index_add 0 fidx src", "E112",
     lambda: torch.zeros(4, 3).index_add(0, torch.zeros(2), torch.zeros(2, 3))),
    ("y: acc -> index_add 0 rows isrc", "E112",
     lambda: torch.zeros(4, 3).index_add(0, torch.zeros(2).long(), torch.zeros(2, 3).long())),
    ("y: acc -> index_add 0 rows (src -> sum -1)", "E110",
     lambda: torch.zeros(4, 3).index_add(0, torch.zeros(2).long(), torch.zeros(2))),
    # indices wider than the source
    ("y: acc -> scatter_add 1 wide acc", "E105",
     lambda: torch.zeros(4, 3).scatter_add(1, torch.zeros(4, 5).long(), torch.zeros(4, 3))),
    ("y: acc -> scatter_add 0 rows src", "E110",
     lambda: torch.zeros(4, 3).scatter_add(0, torch.zeros(2).long(), torch.zeros(2, 3))),
    ("y: acc -> scatter 0 wide 1.0", "E105",
     lambda: torch.zeros(4, 3).scatter(0, torch.zeros(4, 5).long(), 1.0)),
]


@pytest.mark.parametrize("line, code, torch_call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_pytorchs(line, code, torch_call):
    assert codes(HEAD + line + "\n") == [code]
    with pytest.raises(RuntimeError):
        torch_call()
