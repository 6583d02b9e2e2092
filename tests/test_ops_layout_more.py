"""Layout operations (`flip`, `roll` with negative size shifts, `narrow`, `unflatten`, `unbind`,
`swapaxes`/`swapdims`, `expand_as`, `tile`, `pad`, `slice .. step=K`), the tensors made like
another and `eye`: PyTorch's shapes and dtypes for every input dtype, the errors at the
argument that is wrong, and generated modules that compute what torch computes."""
from __future__ import annotations

import pytest
from op_cases import DTYPES, SIZES, against_torch, head, run_module, scripted, tensors

from shapelang import check, render_check, trace

torch = pytest.importorskip("torch")
F = torch.nn.functional
INF = float("inf")
G = SIZES["G"]

CASES = [
    ("r: x -> flip 1 2", lambda x, y, m: x.flip([1, 2])),
    ("r: x -> flip [-1]", lambda x, y, m: x.flip(-1)),
    ("r: x -> roll -G 1", lambda x, y, m: x.roll(-G, 1)),
    ("r: x -> roll [1, G] [0, 2]", lambda x, y, m: x.roll([1, G], [0, 2])),
    ("r: x -> roll 2", lambda x, y, m: x.roll(2)),
    ("r: x -> narrow 1 1 (S - 2)", lambda x, y, m: x.narrow(1, 1, x.shape[1] - 2)),
    ("r: x -> unflatten -1 [2, -1]", lambda x, y, m: x.unflatten(-1, (2, -1))),
    ("r: x -> unflatten 2 [G, D/G]", lambda x, y, m: x.unflatten(2, (G, -1))),
    ("a, b: x -> unflatten -1 [2, -1] -> unbind 2", lambda x, y, m: x.unflatten(-1, (2, -1)).unbind(2)),
    ("a, b: x -> narrow 1 0 2 -> unbind 1", lambda x, y, m: x.narrow(1, 0, 2).unbind(1)),
    ("r: x -> swapaxes 0 2", lambda x, y, m: x.swapaxes(0, 2)),
    ("r: x -> swapdims -1 1", lambda x, y, m: x.swapdims(-1, 1)),
    ("r: y -> expand_as x", lambda x, y, m: y.expand_as(x)),
    ("r: x -> tile [2, 1]", lambda x, y, m: x.tile((2, 1))),
    ("r: y -> tile [2, 1, 1, G]", lambda x, y, m: y.tile((2, 1, 1, G))),
    ("r: x -> pad [1, 2]", lambda x, y, m: F.pad(x, (1, 2))),
    ("r: x -> pad [1, G, -1, 0] value=-inf", lambda x, y, m: F.pad(x, (1, G, -1, 0), value=-INF)),
    ("r: x -> pad [0, 1] value=0.5", lambda x, y, m: F.pad(x, (0, 1), value=0.5)),
    ("r: x -> slice 1 0 S step=2", lambda x, y, m: x[:, 0:x.shape[1]:2]),
    ("r: x -> slice 2 1 D step=G", lambda x, y, m: x[:, :, 1::G]),
    ("r: x -> zeros_like", lambda x, y, m: torch.zeros_like(x)),
    ("r: x -> ones_like dtype=int", lambda x, y, m: torch.ones_like(x, dtype=torch.long)),
    ("r: x -> full_like -inf", lambda x, y, m: torch.full_like(x, -INF)),
    ("r: x -> full_like 2 dtype=float64", lambda x, y, m: torch.full_like(x, 2, dtype=torch.float64)),
    ("r: eye(S)", lambda x, y, m: torch.eye(x.shape[1])),
    ("r: eye(S, D, dtype=bool)", lambda x, y, m: torch.eye(x.shape[1], x.shape[2], dtype=torch.bool)),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("line, fn", CASES, ids=[c[0] for c in CASES])
def test_shape_dtype_and_refusals_are_pytorchs(line, fn, dtype):
    against_torch(line, fn, dtype)


def test_at_other_sizes_too():
    sizes = {"B": 1, "S": 7, "D": 4, "G": 2}
    global G
    saved, G = G, sizes["G"]
    try:
        for line, fn in CASES:
            against_torch(line, fn, "float", sizes)
    finally:
        G = saved


def test_a_step_slice_is_ceil_of_the_length_and_exact_with_the_assumption():
    spec = check(head("float") + "r: x -> slice 1 0 S step=2\n")
    assert [d.code for d in spec.diagnostics] == ["W202"]
    assert "assume S % 2 == 0" in spec.diagnostics[0].help
    spec = check(head("float") + "r: x -> slice 2 0 D step=2\nexpect r: [B, S, D/2]\n")
    assert spec.ok and not spec.diagnostics, render_check(spec)


@pytest.mark.parametrize("line, code, column", [
    ("r: x -> narrow 1 1 S", "E105", 9),
    ("r: x -> unflatten -1 [4, -1]", "E104", 22),
    ("r: x -> unflatten 1 [2, 2]", "E103", 21),
    ("a, b: x -> unbind 1", "E110", 12),
    ("r: x -> expand_as y", "E102", 9),
    ("r: x -> pad [1]", "E110", 13),
    ("r: x -> pad [1, 1] mode=\"reflect\"", "E110", 20),
    ("r: x -> pad [-S, 0, 0, 0]", "E109", 13),
    ("r: x -> roll [1, 2] [0]", "E110", 9),
    ("r: x -> flip 1 1", "E110", 9),
    ("r: x -> slice 1 0 S step=0", "E109", 21),
])
def test_errors_point_at_the_argument(line, code, column):
    spec = check(head("float") + line + "\n")
    errs = spec.errors()
    assert errs and errs[0].code == code, render_check(spec)
    assert (errs[0].span.line, errs[0].span.column) == (9, column), render_check(spec)


def test_unbind_of_a_symbolic_axis_says_why():
    spec = check(head("float") + "a, b: x -> unbind 1\n")
    assert "is not a fixed number" in spec.errors()[0].message


def test_swapaxes_is_transpose_in_the_trace_and_the_code():
    spec = check(head("float") + "r: x -> swapaxes 1 2\n")
    assert spec.bindings[-1].steps[-1].op == "transpose"
    assert "swapaxes 1 2" in trace(spec, width=0)


def test_negated_names_parse_among_operation_arguments():
    spec = check(head("float") + "r: x -> roll -S 1 -> clamp min=-inf max=inf\nc: x -> clamp -inf 0\n")
    assert spec.ok, render_check(spec)


SPEC = head("float") + """\
a: x -> flip 1
b: x -> roll -G 1
c: x -> narrow 1 1 (S - 2)
d: x -> unflatten -1 [G, -1]
p, q: x -> unflatten -1 [2, -1] -> unbind -2
e: x -> swapdims 0 2
f: y -> expand_as x
g: x -> tile [2, 1]
h: x -> pad [1, G, 0, 1] value=-inf
k: x -> slice 2 1 D step=2
n: x -> full_like 0.5 -> masked_fill m 0
t: eye(S)
"""


def _reference(x, y, m):
    p, q = x.unflatten(-1, (2, -1)).unbind(-2)
    return {"a": x.flip(1), "b": x.roll(-G, 1), "c": x.narrow(1, 1, x.shape[1] - 2),
            "d": x.unflatten(-1, (G, -1)), "p": p, "q": q, "e": x.swapdims(0, 2), "f": y.expand_as(x),
            "g": x.tile((2, 1)), "h": F.pad(x, (1, G, 0, 1), value=-INF), "k": x[:, :, 1::2],
            "n": torch.full_like(x, 0.5).masked_fill(m, 0), "t": torch.eye(x.shape[1])}


def test_generated_module_computes_what_torch_computes_and_scripts(tmp_path):
    ins = tensors("float")
    _model, gen = run_module(SPEC, "layout", _reference(**ins), ins)
    assert "x.roll(-G, 1)" in gen.source and "x[:, :, 1:D:2]" in gen.source
    got = scripted(gen, tmp_path, "layout")(*ins.values())
    for name, want in _reference(**ins).items():
        torch.testing.assert_close(got[name], want, msg=name)
