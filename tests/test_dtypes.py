"""dtypes as PyTorch has them: promotion as torch.result_type, refusals where PyTorch
refuses at every size (each with a message naming the dtype), casts, and dtypes shown in
the trace and the JSON.

The property tests write a one-line spec, check it, and run the same operation in torch
on tiny tensors: the checker must give the dtype torch gives, or refuse (E120) exactly
where torch raises.
"""
from __future__ import annotations

import warnings

import pytest
from tiers import examples

from shapelang import check, render_check, to_json, trace
from shapelang.checker import dtypes

hypothesis = pytest.importorskip("hypothesis")
torch = pytest.importorskip("torch")
from hypothesis import given, settings
from hypothesis import strategies as st

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
F = torch.nn.functional
ALL = list(dtypes.ORDER)
SETTINGS = settings(max_examples=examples(250), derandomize=True, deadline=None)


def tdtype(name: str):
    return getattr(torch, dtypes.torch_name(name))


def sample(name: str, shape):
    """A small tensor of that dtype with values every op takes (positive, no zeros)."""
    if name == "bool":
        return torch.ones(shape, dtype=torch.bool)
    return (torch.arange(1, 1 + (shape[0] if shape else 1)).reshape(shape) % 3 + 1).to(tdtype(name))


def torch_dtype_or_error(fn) -> str | None:
    """The shapelang name of the dtype torch gives, or None when torch raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn()
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return None
    name = str(out.dtype).removeprefix("torch.")
    return dtypes.canonical(name)


def checked_dtype(text: str, name: str = "y") -> str | None:
    """The dtype the checker gives `name`, None when it refuses with E120 (anything else fails)."""
    spec = check(text)
    errors = [d for d in spec.diagnostics if d.severity == "error"]
    if errors:
        assert [d.code for d in errors] == ["E120"], render_check(spec)
        assert any(n in errors[0].message for n in ALL), errors[0].message   # names the dtype
        return None
    b = next(b for b in spec.bindings if b.names == (name,))
    return b.types[0].dtype


# ------------------------------------------------------------------ promotion

BINARY = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow", "//": "floordiv", "%": "mod"}
PY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
      "/": lambda a, b: a / b, "**": lambda a, b: a ** b, "//": lambda a, b: a // b,
      "%": lambda a, b: a % b}


@SETTINGS
@given(st.sampled_from(ALL), st.sampled_from(ALL), st.sampled_from(list(BINARY)),
       st.sampled_from(["dims", "0-d"]))
def test_tensor_tensor_promotion_is_torchs(a, b, op, b_rank):
    shape_b = "[N]" if b_rank == "dims" else "[]"
    text = f"dim N\nexample N=3\ninput a: [N] {a}\ninput b: {shape_b} {b}\ny: a {op} b\n"
    want = torch_dtype_or_error(lambda: PY[op](sample(a, [3]), sample(b, [3] if b_rank == "dims" else [])))
    assert checked_dtype(text) == want, (a, op, b, b_rank)


@SETTINGS
@given(st.sampled_from(ALL), st.sampled_from(list(BINARY)), st.sampled_from(["2", "0.5"]),
       st.booleans())
def test_tensor_number_promotion_is_torchs(a, op, number, left):
    expr = f"{number} {op} a" if left else f"a {op} {number}"
    text = f"dim N\nexample N=3\ninput a: [N] {a}\ny: {expr}\n"
    n = int(number) if number == "2" else float(number)
    x = sample(a, [3])
    want = torch_dtype_or_error(lambda: PY[op](n, x) if left else PY[op](x, n))
    assert checked_dtype(text) == want, (expr, a)


@pytest.mark.parametrize("a", ALL)
@pytest.mark.parametrize("b", ALL)
def test_promote_types_table_is_torchs(a, b):
    assert dtypes.promote(a, b) == dtypes.canonical(str(torch.promote_types(tdtype(a), tdtype(b)))
                                                    .removeprefix("torch."))


# ------------------------------------------------------------------ one operation, every dtype

UNARY = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu, "softplus": F.softplus, "tanh": torch.tanh,
         "sigmoid": torch.sigmoid, "exp": torch.exp, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
         "log": torch.log, "abs": torch.abs, "neg": torch.neg, "square": torch.square}
OPS = {
    **{name: (name, fn) for name, fn in UNARY.items()},
    "softmax": ("softmax -1", lambda x: F.softmax(x, -1)),
    "log_softmax": ("log_softmax -1", lambda x: F.log_softmax(x, -1)),
    "softmax dtype": ("softmax -1 dtype=float32", lambda x: F.softmax(x, -1, dtype=torch.float32)),
    "sum": ("sum -1", lambda x: x.sum(-1)),
    "mean": ("mean -1", lambda x: x.mean(-1)),
    "var": ("var -1", lambda x: x.var(-1)),
    "amax": ("amax -1", lambda x: x.amax(-1)),
    "layernorm": ("layernorm", lambda x: torch.nn.LayerNorm(3)(x)),
    "rmsnorm": ("rmsnorm", lambda x: torch.nn.RMSNorm(3)(x)),
    "linear": ("linear N", lambda x: torch.nn.Linear(3, 3)(x)),
    "linear bf16": ("linear N dtype=bfloat16", lambda x: torch.nn.Linear(3, 3, dtype=torch.bfloat16)(x)),
    "dropout": ("dropout 0.1", lambda x: F.dropout(x, 0.1, training=True)),
    "scale": ("scale 0.5", lambda x: x * 0.5),
    "mask": ("mask m", lambda x: x.masked_fill(torch.tensor([True, False, True]), float("-inf"))),
    "embed": ("embed 4 N", lambda x: torch.nn.Embedding(4, 3)(x)),
    "matmul": (None, lambda x: x @ x),
    "einsum float": ('einsum "n,n->n" f', lambda x: torch.einsum("n,n->n", x, torch.ones(3))),
    "einsum contract": ('einsum "n,n->" f', lambda x: torch.einsum("n,n->", x, torch.ones(3))),
    "einsum self": ('einsum "n,m->nm" x', lambda x: torch.einsum("n,m->nm", x, x)),
    "einsum dot": ('einsum "n,n->" x', lambda x: torch.einsum("n,n->", x, x)),
    "einsum sum": ('einsum "n->"', lambda x: torch.einsum("n->", x)),
    "concat float": ("concat 0 f", lambda x: torch.cat([x, torch.ones(3)])),
    "to": ("to float16", lambda x: x.to(torch.float16)),
    "long": ("long", lambda x: x.long()),
}


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", list(OPS))
def test_operation_dtypes_are_torchs(op, dtype):
    spelled, fn = OPS[op]
    pipeline = "x @ x" if spelled is None else f"x -> {spelled}"
    text = (f"dim N\nexample N=3\ninput x: [N] {dtype}\ninput m: [N] bool\ninput f: [N]\n"
            f"y: {pipeline}\n")
    assert checked_dtype(text) == torch_dtype_or_error(lambda: fn(sample(dtype, [3]))), (op, dtype)


# ------------------------------------------------------------------ the reproductions

HEAD = ("dim B, S, D, V\nexample B=2, S=4, D=8, V=10\ninput ids: [B, S] int\ninput pad: [B, S] bool\n"
        "input x: [B, S, D]\n")


@pytest.mark.parametrize("line, words", [
    ("y: 1 - pad", ["bool", "-"]),
    ("y: -pad", ["bool"]),
    ("y: x - (pad -> unsqueeze -1)", ["bool"]),
    ("y: ids -> softmax -1", ["softmax", "int64"]),
    ("y: ids -> mean 1", ["mean", "int64"]),
    ("y: ids -> layernorm", ["layernorm", "int64"]),
    ("y: (ids * 0.5) -> embed V D", ["embed", "float32"]),
    ("y: (ids -> unsqueeze -1) @ (x -> slice 1 0 1)", ["int64", "float32"]),
    ("y: x -> gelu -> to int -> gelu", ["gelu", "int64"]),
])
def test_what_pytorch_refuses_is_refused_naming_the_dtype(line, words):
    spec = check(HEAD + line + "\n")
    errors = [d for d in spec.diagnostics if d.severity == "error"]
    assert [d.code for d in errors] == ["E120"], render_check(spec)
    for w in words:
        assert w in errors[0].message, errors[0].message
    assert errors[0].span.line == 6


def test_the_refusals_are_torchs():
    pad, ids = torch.zeros(2, 4, dtype=torch.bool), torch.zeros(2, 4, dtype=torch.long)
    for fn in (lambda: 1 - pad, lambda: -pad, lambda: F.softmax(ids, -1), lambda: ids.mean(1),
               lambda: F.layer_norm(ids, (4,)), lambda: F.embedding(ids * 0.5, torch.randn(10, 8)),
               lambda: ids.unsqueeze(-1) @ torch.randn(2, 1, 8)):
        with pytest.raises(RuntimeError):
            fn()


def test_the_checked_forms_agree_with_torch():
    """BERT's extended attention mask: the cast makes it float, as in HF's code."""
    spec = check(HEAD + "y: (1.0 - (pad -> to float)) * -10000.0\nz: ids * 0.5\nw: ids // 2\n"
                 "u: pad -> sum -1\n")
    assert spec.ok, render_check(spec)
    got = {b.names[0]: b.types[0].dtype for b in spec.bindings}
    assert got == {"y": "float", "z": "float", "w": "int", "u": "int"}
    pad, ids = torch.zeros(2, 4, dtype=torch.bool), torch.zeros(2, 4, dtype=torch.long)
    assert ((1.0 - pad.float()) * -10000.0).dtype == torch.float32
    assert (ids * 0.5).dtype == torch.float32 and (ids // 2).dtype == torch.long
    assert pad.sum(-1).dtype == torch.long


@pytest.mark.parametrize("cast, want", [("to float", "float"), ("to bfloat16", "bfloat16"),
                                        ("float", "float"), ("half", "float16"), ("long", "int"),
                                        ("to long", "int"), ("to float32", "float"), ("bool", "bool"),
                                        ("double", "float64"), ("to int32", "int32")])
def test_casts(cast, want):
    spec = check(HEAD + f"y: ids -> {cast}\n")
    assert spec.ok, render_check(spec)
    assert spec.bindings[-1].types[0].dtype == want


def test_unknown_dtype_is_named():
    spec = check(HEAD + "y: ids -> to float8\n")
    assert [d.code for d in spec.errors()] == ["E110"]
    assert "float8" in spec.errors()[0].message
    spec = check("dim N\ninput x: [N] complex\n")
    assert "complex" in spec.errors()[0].message


def test_softmax_in_float32_of_half_scores():
    spec = check("dim B, S\nexample B=1, S=4\ninput s: [B, S, S] bfloat16\n"
                 "w: s -> softmax -1 dtype=float32\nv: s -> softmax -1\n")
    assert spec.ok, render_check(spec)
    assert [b.types[0].dtype for b in spec.bindings] == ["float", "bfloat16"]


# ------------------------------------------------------------------ shown in trace and JSON

def test_trace_and_json_show_dtypes_that_are_not_float32():
    spec = check(HEAD + "m: pad -> unsqueeze 1\nh: x -> bfloat16\ny: x -> relu\n")
    text = trace(spec)
    row = lambda name: next(ln for ln in text.splitlines() if ln.startswith(name + " "))
    assert "[B, 1, S] bool" in row("m")
    assert "[B, S, D] bfloat16" in row("h")
    assert "float" not in row("y")
    data = to_json(spec, trace=True)
    by_name = {b["name"]: b for b in data["bindings"]}
    assert by_name["m"]["dtype"] == "bool" and by_name["m"]["steps"][0]["dtype"] == "bool"
    assert by_name["h"]["dtype"] == "bfloat16" and by_name["y"]["dtype"] == "float"
    assert {i["name"]: i["dtype"] for i in data["inputs"]}["ids"] == "int"


def test_block_input_dtype_annotation_is_checked():
    text = ("dim B, S, D, V\nexample B=1, S=2, D=4, V=5\n"
            "block Emb(ids: [B, S] int):\n  return ids -> embed V D\nend\n"
            "input ids: [B, S] int\ninput x: [B, S]\na: ids -> Emb\nb: x -> Emb\n")
    spec = check(text)
    errors = spec.errors()
    assert [(d.code, d.span.line) for d in errors] == [("E113", 9)], render_check(spec)
    assert "int" in errors[0].message and "float" in errors[0].message


def test_params_and_buffers_take_a_dtype_and_run_in_it():
    spec = check("dim B, S, D\nexample B=2, S=3, D=4\ninput x: [B, S, D] bfloat16\n"
                 "param W: [D, D] bfloat16\nparam g: [D] bfloat16\nbuffer pe: [S, D] float16\n"
                 "y: x @ W * g + (pe -> to bfloat16)\nz: x @ (pe -> transpose 0 1)\n")
    assert [(d.code, d.span.line) for d in spec.errors()] == [("E120", 8)], render_check(spec)
    spec = check(spec.source.replace("z: x @ (pe -> transpose 0 1)\n", ""))
    assert spec.ok and spec.bindings[-1].types[0].dtype == "bfloat16"
    from shapelang.codegen import runner
    rep = runner.run_spec(spec, runner.resolve_sizes(spec))
    assert rep.ok, runner.report_text(rep)


def test_a_learned_param_is_floating_point():
    spec = check("dim D\nparam W: [D] int\nbuffer ok: [D] int\n")
    assert [(d.code, d.span.line) for d in spec.errors()] == [("E120", 2)]
    with pytest.raises(RuntimeError):
        torch.nn.Parameter(torch.zeros(3, dtype=torch.long))
