"""Tables and masks computed in the spec (arange, linspace, zeros/ones/full, comparisons,
where, outer, triu/tril, sin/cos, pow): the checker's shapes and dtypes are PyTorch's at
several sizes, the generated module computes the values a hand-written torch
reference computes, and the rotary spec's tables are computed, not zero buffers."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import checked, codes, module, shape_at

from shapelang import check

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent

TABLES = """\
dim B, S, D, P
example {example}
input x: [B, S, D]
pos: arange(S)
shifted: arange(P, P + S)
half: arange(0, D, 2)
third: arange(0.0, D, 3)
grid: linspace(-1, 1, D)
z: zeros([S, D]) + ones([1, D])
keep: full([S, P + S], true) -> tril P
hide: full([S, S], true) -> triu 1
neg: full([S, S], -inf) -> triu (P + 1)
later: pos > (pos -> unsqueeze 1)
same: (pos -> unsqueeze 1) == pos
small: pos <= 2
fill: where(hide, -1e9, 0.0)
pick: where(later, x -> select 0 0 -> slice 1 0 1, 0.5)
ints: where(small, pos, 7)
freqs: outer(pos, grid)
waves: freqs -> sin -> pow 2
waves2: freqs -> cos
sq: pos -> pow 2
"""


def reference(x, S, D, P, **_):
    """The same tables, by hand in PyTorch."""
    pos = torch.arange(S)
    grid = torch.linspace(-1, 1, D)
    hide = torch.ones(S, S, dtype=torch.bool).triu(1)
    later = pos > pos[:, None]
    small = pos <= 2
    freqs = torch.outer(pos, grid)
    return {
        "pos": pos, "shifted": torch.arange(P, P + S), "half": torch.arange(0, D, 2),
        "third": torch.arange(0.0, D, 3), "grid": grid,
        "z": torch.zeros(S, D) + torch.ones(1, D),
        "keep": torch.ones(S, P + S, dtype=torch.bool).tril(P), "hide": hide,
        "neg": torch.full((S, S), float("-inf")).triu(P + 1),
        "later": later, "same": pos[:, None] == pos, "small": small,
        "fill": torch.where(hide, -1e9, 0.0), "pick": torch.where(later, x[0, :, :1], 0.5),
        "ints": torch.where(small, pos, 7), "freqs": freqs, "waves": freqs.sin() ** 2,
        "waves2": freqs.cos(), "sq": pos ** 2,
    }


SIZES = [{"B": 2, "S": 5, "D": 8, "P": 2}, {"B": 1, "S": 3, "D": 7, "P": 1}, {"B": 1, "S": 9, "D": 9, "P": 4}]
KIND = {torch.bool: "bool", torch.long: "int", torch.float32: "float"}


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(map(str, s.values())))
def test_shapes_and_dtypes_are_pytorchs(sizes):
    example = ", ".join(f"{k}={v}" for k, v in sizes.items())
    spec = check(TABLES.format(example=example))
    assert [d.code for d in spec.diagnostics if d.severity == "error"] == []
    x = torch.randn(sizes["B"], sizes["S"], sizes["D"])
    want = reference(x, **sizes)
    types = {n: t for b in spec.bindings for n, t in zip(b.names, b.types)}
    for name, value in want.items():
        assert shape_at(spec, name, sizes) == tuple(value.shape), name
        assert types[name].dtype == KIND[value.dtype], name


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(map(str, s.values())))
def test_generated_module_computes_the_tables(sizes):
    spec = check(TABLES.format(example="B=2, S=5, D=8, P=2"))
    model, gen = module(spec, "tables", **sizes)
    assert all("persistent=False" in ln for ln in gen.source.splitlines() if "register_buffer(" in ln)
    x = torch.randn(sizes["B"], sizes["S"], sizes["D"])
    got = model(x)
    for name, value in reference(x, **sizes).items():
        if name in got:
            torch.testing.assert_close(got[name], value, msg=name)


def test_a_step_that_does_not_divide_rounds_up_and_names_the_assumption():
    text = "dim D\nexample D=7\ninput x: [D]\nh: arange(0, D, 2)\n"
    spec = check(text)
    [d] = spec.diagnostics
    assert d.code == "W202" and d.severity == "warning" and "assume D % 2 == 0" in d.help
    for n in (1, 2, 7, 10):   # ceil(D / 2), as PyTorch
        assert shape_at(spec, "h", {"D": n}) == tuple(torch.arange(0, n, 2).shape)
    spec = checked(text.replace("example D=7", "assume D % 2 == 0\nexample D=8"))
    assert str(spec.bindings[0].types[0].shape[0]) == "D/2"


ERRORS = [
    # (binding, code, PyTorch doing the same, or None)
    ("w: where(pos, pos, 0)", "E112", lambda: torch.where(torch.arange(3), torch.arange(3), 0)),
    ("o: outer(m, pos)", "E110", lambda: torch.outer(torch.ones(3, 3), torch.arange(3))),
    ("t: pos -> triu 1", "E110", lambda: torch.arange(3).triu(1)),
    ("c: S < D", "E112", None),
    ("a: m -> arange", "E110", None),
    ("a: arange(0, S, 0)", "E110", lambda: torch.arange(0, 3, 0)),
    ("a: arange(0, 1, 0.1)", "E110", None),
    ("f: full([S, S])", "E110", None),
    ("c: pos < m", "E102", lambda: torch.arange(3) < torch.ones(3, 4)),
]


@pytest.mark.parametrize("line, code, torch_call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(line, code, torch_call):
    text = f"dim S, D\nexample S=3, D=4\ninput m: [S, D]\npos: arange(S)\n{line}\n"
    assert codes(text) == [code]
    if torch_call is not None:
        with pytest.raises(RuntimeError):
            torch_call()


# ------------------------------------------------------------------ rotary embeddings

def _rope_reference(model, x, H):
    """LLaMA-style RoPE attention (HF's rotate_half form), written by hand."""
    B, S, D = x.shape
    Dh = D // H
    inv_freq = 1.0 / (10000 ** (torch.arange(0, Dh, 2).float() / Dh))
    freqs = torch.outer(torch.arange(S).float(), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(t):
        t1, t2 = t[..., : Dh // 2], t[..., Dh // 2:]
        return torch.cat([-t2, t1], dim=-1)

    def heads(w):
        return (x @ w.T).view(B, S, H, Dh).transpose(1, 2)

    sd = model.state_dict()
    q, k, v = heads(sd["q.weight"]), heads(sd["k.weight"]), heads(sd["v.weight"])
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(Dh)
    scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, S, D)
    return out @ sd["out.weight"].T


@pytest.mark.parametrize("sizes", [{"B": 2, "S": 6, "D": 32, "H": 4}, {"B": 1, "S": 11, "D": 24, "H": 2}])
def test_rotary_spec_computes_its_tables_and_matches_a_hand_written_rope(sizes):
    spec = checked((ROOT / "specs" / "rotary_embedding.shape").read_text(), "rotary_embedding.shape")
    assert not [d for d in spec.decls if d.kind == "buffer"]
    model, gen = module(spec, "rotary", H=sizes["H"], D=sizes["D"])
    assert all("persistent=False" in ln for ln in gen.source.splitlines() if "register_buffer(" in ln) and "torch.outer" in gen.source
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape) * 0.2)
    x = torch.randn(sizes["B"], sizes["S"], sizes["D"])
    torch.testing.assert_close(model(x), _rope_reference(model, x, sizes["H"]), atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ floor, ceil, clamp

ROUNDING = """\
dim S, D
example S=5, D=8
input x: [S, D]
pos: arange(S)
down: x * 3 -> floor
up: x * 3 -> ceil
ints: pos -> floor
unit: x -> clamp 0 1
low: x -> clamp min=-0.5
high: pos -> clamp max=(S - 2)
both: pos -> clamp 1 (D - 6)
frac: pos -> clamp 0.5
flags: pos > 2 -> clamp 0 1
scalar: D * (full([], 20.0) -> log) -> floor -> clamp max=(D - 1)
"""


def _rounding_reference(x, S, D):
    pos = torch.arange(S)
    return {"down": (x * 3).floor(), "up": (x * 3).ceil(), "ints": pos.floor(),
            "unit": x.clamp(0, 1), "low": x.clamp(min=-0.5), "high": pos.clamp(max=S - 2),
            "both": pos.clamp(1, D - 6), "frac": pos.clamp(0.5), "flags": (pos > 2).clamp(0, 1),
            "scalar": (D * torch.full((), 20.0).log()).floor().clamp(max=D - 1)}


@pytest.mark.parametrize("sizes", [{"S": 5, "D": 8}, {"S": 3, "D": 9}])
def test_floor_ceil_clamp_have_pytorchs_shapes_dtypes_and_values(sizes):
    spec = checked(ROUNDING)
    types = {n: t for b in spec.bindings for n, t in zip(b.names, b.types)}
    x = torch.randn(sizes["S"], sizes["D"])
    want = _rounding_reference(x, **sizes)
    for name, value in want.items():
        assert shape_at(spec, name, sizes) == tuple(value.shape), name
        assert types[name].dtype == KIND[value.dtype], name
    model, gen = module(spec, "rounding", **sizes)
    assert "torch.clamp(" in gen.source and "torch.floor(" in gen.source
    got = model(x)
    for name, value in want.items():
        if name in got:
            torch.testing.assert_close(got[name], value, msg=name)


ROUNDING_ERRORS = [
    ("r: flags -> floor", "E120", lambda: torch.ones(2, dtype=torch.bool).floor()),
    ("r: flags -> ceil", "E120", lambda: torch.ones(2, dtype=torch.bool).ceil()),
    ("r: m -> clamp", "E110", lambda: torch.clamp(torch.ones(2))),
    ("r: m -> clamp 0 min=1", "E110", None),
    ("r: m -> clamp true", "E110", None),
    ("r: m -> clamp 0 1 2", "E110", None),
]


@pytest.mark.parametrize("line, code, torch_call", ROUNDING_ERRORS, ids=[e[0] for e in ROUNDING_ERRORS])
def test_floor_ceil_clamp_errors(line, code, torch_call):
    text = f"dim S, D\nexample S=3, D=4\ninput m: [S, D]\nflags: m > 0\n{line}\n"
    assert codes(text) == [code]
    if torch_call is not None:
        with pytest.raises(RuntimeError):
            torch_call()


NEGATIVE = """\
dim S, D
example S=3, D=4
input x: [S, D]
a: x -> clamp -0.5 0.5
b: x -> clamp min=-1e4 max=-2.5e-1
c: x * -1.5 - 2.5
d: x -> scale -0.5
e: x -1.5
g: x > 0 -> where x -0.5
"""


def test_a_negative_decimal_is_an_operation_argument_and_a_keyword_value():
    # `clamp -0.5 0.5` and `clamp min=-1e4` were "unexpected `-`"; in an expression a
    # negative decimal is still a subtraction or a negation
    from shapelang import fmt

    spec = checked(NEGATIVE)
    assert fmt.format_text(NEGATIVE) == NEGATIVE
    model, _gen = module(spec, "negative")
    x = torch.randn(3, 4) * 3
    got = model(x)
    want = {"a": x.clamp(-0.5, 0.5), "b": x.clamp(min=-1e4, max=-2.5e-1), "c": x * -1.5 - 2.5,
            "d": x * -0.5, "e": x - 1.5, "g": torch.where(x > 0, x, -0.5)}
    for name, value in want.items():
        torch.testing.assert_close(got[name], value, msg=name)


@pytest.mark.parametrize("S", [3, 6])
def test_a_size_as_a_fill_value_is_an_int_as_in_pytorch(S):
    # `full([S], S - 2)` is torch.full((S,), S - 2): a Python int fills an int64 tensor
    torch = pytest.importorskip("torch")
    spec = checked("dim S\nexample S=4\nf: full([S], S - 2)\nw: where(arange(S) > 1, S - 1, 0)\n"
                   "c: arange(S) -> clamp max=(S - 2)\nh: full([S], S / 2)\n")
    want = {"f": torch.full((S,), S - 2), "w": torch.where(torch.arange(S) > 1, S - 1, 0),
            "c": torch.arange(S).clamp(max=S - 2), "h": torch.full((S,), S / 2)}
    types = {b.names[0]: b.types[0] for b in spec.bindings}
    kind = {torch.int64: "int", torch.float32: "float"}
    for name, value in want.items():
        assert types[name].dtype == kind[value.dtype], name
    model, _ = module(spec, f"fill_{S}", S=S)
    with torch.no_grad():
        got = model()
    for name, value in want.items():
        assert got[name].dtype == value.dtype and torch.equal(got[name], value), name
