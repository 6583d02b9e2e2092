"""Elementwise `minimum`/`maximum` of two tensors, `clamp` by numbers or tensors, `logical_not`, and
reductions `amin`, `max`, `min` over a dim: the checker's shapes and dtypes are PyTorch's
at several sizes (broadcasting, type promotion), the generated module computes what torch
computes, and what PyTorch refuses is refused with a rewrite that is proved."""
from __future__ import annotations

import pytest
from torch_shapes import module, shape_at

from shapelang import check

torch = pytest.importorskip("torch")

SPEC = """\
dim S, N
example {example}
input a: [S, 1] int
input b: [N]
input h: [S, N] float16
input m: [S, N] bool
input k: [] int
lo: minimum(a, b)
hi: a -> maximum b
mn: min(a, b)
mx: max(m, m)
half: minimum(h, b)
wide: maximum(h, k)
c1: a -> clamp max=3
c2: b -> clamp (-0.5) 0.5
c3: a -> clamp min=0.5
c4: b -> clamp min=a max=b
c5: m -> clamp min=0
r: b -> amin 0
rk: h -> amin -1 keepdim
v, i: lo -> max -1 keepdim
w, j: lo -> min 0
nm: m -> logical_not
na: a -> logical_not
"""


def reference(a, b, h, m, k):
    v, i = torch.minimum(a, b).max(-1, keepdim=True)
    w, j = torch.minimum(a, b).min(0)
    return {"lo": torch.minimum(a, b), "hi": torch.maximum(a, b), "mn": torch.min(a, b),
            "mx": torch.max(m, m), "half": torch.minimum(h, b), "wide": torch.maximum(h, k),
            "c1": torch.clamp(a, max=3), "c2": torch.clamp(b, -0.5, 0.5), "c3": torch.clamp(a, min=0.5),
            "c4": torch.clamp(b, min=a, max=b), "c5": torch.clamp(m, min=0), "r": b.amin(0),
            "rk": h.amin(-1, keepdim=True), "v": v, "i": i, "w": w, "j": j,
            "nm": torch.logical_not(m), "na": torch.logical_not(a)}


SIZES = [{"S": 4, "N": 5}, {"S": 1, "N": 3}, {"S": 6, "N": 1}]
KIND = {torch.bool: "bool", torch.long: "int", torch.float32: "float", torch.float16: "float16"}


def inputs(S, N):
    torch.manual_seed(S * 10 + N)
    return {"a": torch.randint(-3, 4, (S, 1)), "b": torch.randn(N), "h": torch.randn(S, N).half(),
            "m": torch.rand(S, N) > 0.5, "k": torch.tensor(1)}


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(map(str, s.values())))
def test_shapes_and_dtypes_are_pytorchs(sizes):
    example = ", ".join(f"{k}={v}" for k, v in sizes.items())
    spec = check(SPEC.format(example=example))
    assert [(d.code, d.message) for d in spec.diagnostics] == []
    types = {n: t for b in spec.bindings for n, t in zip(b.names, b.types)}
    for name, value in reference(**inputs(**sizes)).items():
        assert shape_at(spec, name, sizes) == tuple(value.shape), name
        assert types[name].dtype == KIND[value.dtype], name


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(map(str, s.values())))
def test_generated_module_computes_what_torch_computes(sizes):
    spec = check(SPEC.format(example="S=4, N=5"))
    model, gen = module(spec, "minmax", **sizes)
    assert "torch.minimum(" in gen.source and "torch.clamp(" in gen.source
    xs = inputs(**sizes)
    got = model(*xs.values())
    for name, value in reference(**xs).items():
        if name in got:
            assert got[name].dtype == value.dtype, name
            torch.testing.assert_close(got[name], value, rtol=0, atol=0, msg=name)


def test_the_trace_shows_the_broadcast_shape_and_the_indices():
    out = check(SPEC.format(example="S=4, N=5"))
    from shapelang import trace
    text = trace(out, width=0)
    line = next(x for x in text.splitlines() if x.startswith("v, i"))
    assert "[S, 1] | [S, 1] int" in line
    assert "[S, N]" in next(x for x in text.splitlines() if x.startswith("lo "))


BASE = "dim S\ninput a: [S] int\ninput f: [S]\ninput m: [S] bool\n"
ERRORS = [
    # (line, code, what the help writes, PyTorch refusing the same)
    ("x: minimum(a, 3)", "E112", "write it as `x: (a -> clamp max=3)`",
     lambda: torch.minimum(torch.arange(3), 3)),
    ("x: a -> maximum 0", "E112", "write it as `x: a -> clamp min=0`",
     lambda: torch.maximum(torch.arange(3), 0)),
    ("x: min(f, 0.5)", "E112", "write it as `x: (f -> clamp max=0.5)`",
     lambda: torch.min(torch.ones(3), 0.5)),
    ("x: m -> clamp max=true", "E120", None, lambda: torch.clamp(torch.ones(3) > 0, max=True)),
    ("x: f -> clamp", "E110", "`clamp min=0`", lambda: torch.clamp(torch.ones(3))),
    ("x: minimum(f, arange(S + 1))", "E102", None, lambda: torch.minimum(torch.ones(3), torch.arange(4))),
]


@pytest.mark.parametrize("line, code, help, torch_call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(line, code, help, torch_call):
    spec = check(BASE + "example S=3\n" + line + "\n")
    [d] = [d for d in spec.diagnostics if d.severity == "error"]
    assert d.code == code and d.span.line == 6, (d.code, d.message)
    if help:
        assert help in d.help
    with pytest.raises((RuntimeError, TypeError)):
        torch_call()


def test_the_proved_clamp_rewrite_checks():
    spec = check(BASE + "x: minimum(a, 3)\n")
    [d] = spec.diagnostics
    _span, text, line = d.fix
    assert (text, line) == ("(a -> clamp max=3)", "x: (a -> clamp max=3)")
    assert check(BASE + line + "\n").ok


DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int", "float16", "bfloat16", "float", "float64"]
TORCH = {"int": "int64", "float": "float32"}


def _torch_dtype(name):
    return getattr(torch, TORCH.get(name, name))


@pytest.mark.parametrize("left", DTYPES)
def test_minimum_promotes_every_pair_of_dtypes_as_torch(left):
    """Every pair of dtypes, with a tensor and a 0-d tensor on either side."""
    for right in DTYPES:
        for rank in ("[S]", "[]"):
            text = f"dim S\nexample S=3\ninput a: [S] {left}\ninput b: {rank} {right}\nm: minimum(a, b)\n" \
                   "n: maximum(b, a)\n"
            spec = check(text)
            a = torch.zeros(3, dtype=_torch_dtype(left))
            b = torch.zeros(3 if rank == "[S]" else (), dtype=_torch_dtype(right))
            types = {n: t for bd in spec.bindings for n, t in zip(bd.names, bd.types)}
            for name, value in (("m", torch.minimum(a, b)), ("n", torch.maximum(b, a))):
                got = types[name].dtype
                assert TORCH.get(got, got) == str(value.dtype).removeprefix("torch."), (left, right, rank)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bound", ["min=0", "max=2.5", "min=-1 max=1"])
def test_clamp_by_numbers_gives_torchs_dtype_or_is_refused_as_torch_refuses(dtype, bound):
    spec = check(f"dim S\nexample S=3\ninput a: [S] {dtype}\nc: a -> clamp {bound}\n")
    kwargs = {k: float(v) if "." in v else int(v) for k, v in (p.split("=") for p in bound.split())}
    x = torch.zeros(3, dtype=_torch_dtype(dtype))
    try:
        want = str(torch.clamp(x, **kwargs).dtype).removeprefix("torch.")
    except RuntimeError:
        assert [d.code for d in spec.diagnostics] == ["E120"], (dtype, bound)
        return
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    got = spec.bindings[-1].types[0].dtype
    assert TORCH.get(got, got) == want, (dtype, bound)


@pytest.mark.parametrize("line, rewritten", [
    ("m: x -> max -1", "m: x -> amax -1"),
    ("m: x -> min 0 keepdim", "m: x -> amin 0 keepdim"),
    ("m: x -> max -1 -> relu", "m: x -> amax -1 -> relu"),
])
def test_max_over_an_axis_named_once_gets_amax(line, rewritten):
    """torch.max(x, dim) gives values and indices: one name for it is an error whose proved
    rewrite is `amax` (the values alone)."""
    text = "dim S, D\nexample S=3, D=4\ninput x: [S, D]\n"
    [d] = check(text + line + "\n").diagnostics
    assert d.code == "E110" and "int indices" in d.help and "torch." in d.help
    assert d.fix is not None and d.fix[2] == rewritten
    assert check(text + rewritten + "\n").ok
    x = torch.randn(3, 4)
    assert len(x.max(-1)) == 2 and torch.equal(x.max(-1).values, x.amax(-1))


@pytest.mark.parametrize("pytorch, shapelang", [
    ("torch.minimum(a, b)", "a -> minimum b"),
    ("torch.maximum(a, b)", "a -> maximum b"),
    ("a.clamp(min=0)", "a -> clamp min=0"),
    ("torch.clamp(a, -0.5, 1)", "a -> clamp min=(-0.5) max=1"),
    ("a.clip(max=b)", "a -> clamp max=b"),
    ("a.amin(-1)", "a -> amin -1"),
    ("(a > 0).logical_not()", "(a > 0) -> logical_not"),
])
def test_pytorch_spellings_are_rewritten(pytorch, shapelang):
    """The PyTorch spelling is named and rewritten, and the rewrite checks."""
    text = "dim S\nexample S=3\ninput a: [S]\ninput b: [S]\n"
    [d] = check(text + f"x: {pytorch}\n").diagnostics
    assert d.code == "E001" and "PyTorch syntax" in d.message
    assert d.fix is not None and d.fix[2] == f"x: {shapelang}"
    assert check(text + f"x: {shapelang}\n").ok
