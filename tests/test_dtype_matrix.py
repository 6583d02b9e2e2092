"""Every operation of the table on every dtype, against PyTorch.

For each operation, a valid use of it (test_keywords.USAGE, which every entry of the table
must have, or a use below that applies it to one input) is checked with its input declared
bool, int64, bfloat16, float16, float32 and float64. PyTorch's verdict comes from running the
operation itself: the module generated from the use at its declared dtype, called with an
input of the other dtype. The checker must refuse (with a message naming a dtype) exactly
where PyTorch raises, and otherwise give the dtype PyTorch gives. Operations with two tensor
operands are run with the second of another dtype too (PyTorch's promotion, or its refusal).
"""
from __future__ import annotations

import re
import warnings

import pytest
import tiers
from test_keywords import USAGE

from shapelang import check, render_check
from shapelang.checker import dtypes
from shapelang.checker.ops import TABLE
from shapelang.codegen import runner
from shapelang.codegen.generator import generate

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

DTYPES = ("bool", "int", "bfloat16", "float16", "float", "float64")
HEAD = "dim B, S, D, F, V\nexample B=2, S=5, D=8, F=16, V=11\n"
INPUTS = {"x": "[B, S, D]", "w": "[B, S, D]", "ids": "[B, S]", "m": "[B, 1, S]"}
DECLARED = {"x": "float", "w": "float", "ids": "int", "m": "bool"}

# operations whose use in USAGE does not apply them to an input: a use that does
OWN = {
    "where": "x -> where w 0.5",
    "logical_not": "x -> logical_not", "logical_and": "x -> logical_and (x < 1)",
    "outer": "x -> select 0 0 -> select 0 0 -> outer (w -> select 0 0 -> select 0 0)",
    "minimum": "x -> minimum w", "maximum": "x -> maximum w",
    "meshgrid": "gy, gx: x -> select 0 0 -> select 0 0 -> meshgrid (w -> select 0 0 -> select 0 0)",
}
# operations with no tensor input: their dtype comes from their arguments
NO_INPUT = {name: "makes a tensor from sizes and numbers; its dtypes: tests/test_ops_tables.py"
            for name in ("arange", "linspace", "zeros", "ones", "full", "eye")}
SKIPPED = {**NO_INPUT,
           "opaque": "stands for code shapelang cannot write: code generation refuses it"}
# the second tensor operand, for the mixed-dtype runs: `w` where the use repeats `x`
MIXED = ("attention", "concat", "stack_tensors", "minimum", "maximum", "index_add", "scatter_add",
         "cosine_similarity", "type_as", "scatter", "where", "outer", "meshgrid")
MIXED_USE = {"scatter": "y: x -> scatter -1 (ids -> unsqueeze -1) w",
             "where": "y: ids > 0 -> unsqueeze -1 -> where x w"}


def use(name: str) -> str:
    line = OWN.get(name, USAGE[name])
    return line if ":" in line else f"y: {line}"


def varied(line: str) -> str:
    """The input the operation is applied to: the first input the use names."""
    return re.search(r"\b(x|ids|m)\b", line.split(":", 1)[1]).group(1)


def spec_text(line: str, dtype_of: dict) -> str:
    decls = "".join(f"input {n}: {INPUTS[n]} {dtype_of.get(n, DECLARED[n])}\n" for n in INPUTS)
    return HEAD + decls + line + "\n"


def checker_verdict(text: str):
    """The dtypes of the last binding, or None when the checker refuses for a dtype."""
    spec = check(text)
    errors = spec.errors()
    if errors:
        assert errors[0].code in ("E120", "E112"), render_check(spec)
        assert any(d in errors[0].message for d in dtypes.ORDER), errors[0].message   # names the dtype
        return None
    return [t.dtype for t in spec.bindings[-1].types]


class Built:
    """The module generated from a use at its declared dtypes, and its inputs."""

    def __init__(self, line: str):
        """Built at the declared dtypes, or with the operation's input bool or int where the
        operation takes those (the condition of `where`)."""
        v = varied(line)
        for base in (DECLARED[v], "bool", "int"):
            spec = check(spec_text(line, {v: base}))
            if spec.ok:
                break
        assert spec.ok, render_check(spec)
        gen = generate(spec)
        # plain PyTorch: no cast of a float32 table to the activations' dtype (shapelang.codegen.precision)
        assert ".dtype)" not in gen.source, line
        sizes = runner.resolve_sizes(spec)
        _mod, model = runner.build(gen, sizes)
        self.model = model.train()       # dropout refuses what it refuses while training
        self.names = [ref for _py, _t, ref in gen.args]
        self.inputs = dict(zip(self.names, runner.make_inputs(spec, gen, sizes)))

    def verdict(self, dtype_of: dict):
        """PyTorch's: the output dtypes, or None when it raises."""
        args = []
        for n in self.names:
            t = self.inputs[n]
            if n in dtype_of:
                t = t.to(getattr(torch, dtypes.torch_name(dtype_of[n])))
            args.append(t)
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = self.model(*args)
        except (RuntimeError, TypeError, ValueError, NotImplementedError, IndexError):
            return None
        outs = list(out.values()) if isinstance(out, dict) else list(out) if isinstance(out, (tuple, list)) else [out]
        return [dtypes.canonical(str(o.dtype).removeprefix("torch.")) for o in outs]


def _compare(name, line, built, dtype_of):
    want = built.verdict(dtype_of)
    got = checker_verdict(spec_text(line, dtype_of))
    if want is None or got is None:
        assert got == want, (f"{line} with {dtype_of}: PyTorch "
                             f"{'raises' if want is None else 'gives ' + str(want)}, the checker "
                             f"{'refuses' if got is None else 'gives ' + str(got)}")
    else:
        assert got[-len(want):] == want if len(got) >= len(want) else got == want, (line, dtype_of, got, want)


OPS = [n for n, d in TABLE.items() if d.rule is not None]


def test_every_operation_is_run_or_skipped_with_a_reason():
    assert set(SKIPPED) <= set(TABLE)
    assert set(OPS) - set(SKIPPED) == {n for n in OPS if n not in SKIPPED}
    assert all(n in USAGE or n in OWN for n in OPS)


ALWAYS = {"attention", "conv1d", "conv2d", "sin", "cos", "pow", "type_as", "softmax", "linear",
          "layernorm", "embed", "mask", "sum", "mean", "to", "relu", "gelu", "where", "minimum"}


@pytest.mark.parametrize("name", tiers.sample([n for n in OPS if n not in SKIPPED], every=6, always=ALWAYS))
def test_operation_on_every_dtype_is_pytorchs(name):
    line = use(name)
    built = Built(line)
    v = varied(line)
    for dtype in DTYPES:
        _compare(name, line, built, {v: dtype})


MIXED_PAIRS = [(a, b) for a in DTYPES for b in DTYPES if a != b]


@pytest.mark.parametrize("name", tiers.sample(MIXED, every=3, always={"attention", "concat", "type_as"}))
def test_mixed_dtype_operands_get_pytorchs_rule(name):
    """The second operand (`w`) of another dtype than the first (`x`): promoted where PyTorch
    promotes, refused where it refuses."""
    line = use(name)
    if name in MIXED_USE:
        line = MIXED_USE[name]
    elif "w" not in re.findall(r"\w+", line):
        head, _, rest = line.partition("->")
        line = head + "->" + re.sub(r"\bx\b", "w", rest)
    built = Built(line)
    pairs = MIXED_PAIRS if tiers.exhaustive() else MIXED_PAIRS[::4]
    for a, b in pairs:
        _compare(name, line, built, {varied(line): a, "w": b})


# ------------------------------------------------------------------ the reproductions, by name

LAYERS = ("dim B, H, S, E, C, L\nexample B=2, H=2, S=4, E=8, C=3, L=6\nassume L >= 3\n"
          "input q: [B, H, S, E] {d}\ninput k: [B, H, S, E] {dk}\ninput v: [B, H, S, E] {dv}\n"
          "input s: [B, C, L] {d}\ninput p: [B, C, L, L] {d}\n")


@pytest.mark.parametrize("d", ["bfloat16", "float16", "float64"])
def test_attention_and_convolutions_take_every_float_dtype(d):
    t = getattr(torch, dtypes.torch_name(d))
    spec = check(LAYERS.format(d=d, dk=d, dv=d) + f"a: q -> attention k v\nb: s -> conv1d 4 3 dtype={d}\n"
                 f"c: p -> conv2d 4 3 dtype={d}\nr: s -> sin\nu: s -> cos\nw: s -> pow 0.5\n")
    assert spec.ok, render_check(spec)
    q = torch.randn(2, 2, 4, 8, dtype=t)
    want = {"a": torch.nn.functional.scaled_dot_product_attention(q, q, q).dtype,
            "b": torch.nn.Conv1d(3, 4, 3, dtype=t)(torch.randn(2, 3, 6, dtype=t)).dtype,
            "c": torch.nn.Conv2d(3, 4, 3, dtype=t)(torch.randn(2, 3, 6, 6, dtype=t)).dtype,
            "r": torch.sin(q).dtype, "u": torch.cos(q).dtype, "w": torch.pow(q, 0.5).dtype}
    got = {b.names[0]: b.types[0].dtype for b in spec.bindings}
    assert got == {n: dtypes.canonical(str(w).removeprefix("torch.")) for n, w in want.items()}


def test_mixed_query_key_value_dtypes_get_pytorchs_refusal():
    spec = check(LAYERS.format(d="float", dk="float", dv="bfloat16") + "a: q -> attention k v\n")
    errors = spec.errors()
    assert [(e.code, e.span.line) for e in errors] == [("E120", 9)], render_check(spec)
    assert "query, key and value must have the same dtype" in errors[0].message
    assert "bfloat16" in errors[0].message and "float32" in errors[0].message
    q = torch.randn(2, 2, 4, 8)
    with pytest.raises(RuntimeError, match="query, key, and value to have the same dtype"):
        torch.nn.functional.scaled_dot_product_attention(q, q, q.bfloat16())


def test_a_convolution_of_bfloat16_with_float32_weights_is_refused_as_pytorch_does():
    spec = check(LAYERS.format(d="bfloat16", dk="bfloat16", dv="bfloat16") + "b: s -> conv1d 4 3\n")
    errors = spec.errors()
    assert [e.code for e in errors] == ["E120"] and "weights" in errors[0].message, render_check(spec)
    with pytest.raises(RuntimeError, match="should be the same"):
        torch.nn.Conv1d(3, 4, 3)(torch.randn(2, 3, 6, dtype=torch.bfloat16))


def test_type_as_casts_to_another_tensors_dtype_as_pytorch():
    text = ("dim S, D\nexample S=3, D=4\ninput x: [S, D] bfloat16\n"
            "c: arange(S) -> outer arange(0.0, D, 1) -> cos\ny: c -> type_as x\nz: x * y\n")
    spec = check(text)
    assert spec.ok, render_check(spec)
    assert [b.types[0].dtype for b in spec.bindings] == ["float", "bfloat16", "bfloat16"]
    source = generate(spec).source
    assert "c.type_as(x)" in source
    rep = runner.run_spec(spec, runner.resolve_sizes(spec))
    assert rep.ok, runner.report_text(rep)
