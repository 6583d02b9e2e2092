"""Keyword arguments are honoured end to end (check, trace, codegen, run, grading) or
refused with an error naming the keyword and the ones the operation takes.

The generated modules are compared with hand-written PyTorch references of the same
layers, with the same weights: Llama's RMSNorm with eps=1e-6, BERT's LayerNorm with
eps=1e-12 and GPT-2's tanh GELU, and parameter counts with torch's modules.
"""
from __future__ import annotations

import warnings

import pytest

import shapelang
from shapelang import check, render_check, trace
from shapelang.checker.ops import TABLE, tables
from shapelang.codegen import runner
from shapelang.codegen.generator import generate

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

HEAD = ("dim B, S, D, F, V\nexample B=2, S=5, D=8, F=16, V=11\ninput x: [B, S, D]\n"
        "input ids: [B, S] int\ninput m: [B, 1, S] bool\n")

# a valid use of every operation on `x` ([B, S, D]), `ids` or `m`: its table entry's example
USAGE = {name: d.use for name, d in TABLE.items() if d.rule is not None}


def test_every_example_uses_its_operation():
    import re

    for name, line in USAGE.items():
        assert re.search(rf"\b{name}\b", line), (name, line)


@pytest.mark.parametrize("name", sorted(USAGE))
def test_an_unknown_keyword_is_refused_naming_it_and_the_accepted_ones(name):
    line = USAGE[name] if ":" in USAGE[name] else f"y: {USAGE[name]}"   # `v, y: ..` for two outputs
    assert check(HEAD + line + "\n").ok, line
    spec = check(HEAD + f"{line} zzz=1\n")
    errors = spec.errors()
    if TABLE[name].rule is tables.call_only:    # `arange(S)`: written as a call, no keywords after it
        assert errors and errors[0].span.line == 6, render_check(spec)
        return
    assert [d.code for d in errors] == ["E110"], render_check(spec)
    if name in ("rearrange", "repeat"):     # its keywords are the sizes of the pattern's axes
        assert errors[0].message == "`zzz=` names an axis that is not in the pattern"
        return
    assert "`zzz=`" in errors[0].message and f"`{name}`" in errors[0].message
    accepted = TABLE[name].positional + TABLE[name].kwargs
    for k in accepted:
        assert f"`{k}=`" in errors[0].help
    if not accepted:
        assert "no keyword" in errors[0].help
    assert (errors[0].span.line, errors[0].span.column) == (6, len(line) + 2)


@pytest.mark.parametrize("line, message", [
    ("y: x -> gelu approximate=\"erf\"", '`approximate=` takes "none" or "tanh"'),
    ("y: x -> layernorm eps=0", "`eps=` takes a number above 0"),
    ("y: x -> rmsnorm eps=\"small\"", "`eps=` takes a number above 0"),
    ("y: x -> linear D bias=0", "`bias=` takes true or false"),
    ("y: x -> softmax -1 dim=-1", "gets `dim` twice"),
    ("y: x -> slice 1 end=S", "needs the arguments before it too"),
    ("y: x -> var -1 correction=0.5", "`correction=` takes a whole number"),
    ("y: x -> softmax -1 dtype=fp8", "unknown dtype `fp8`"),
    ("y: ids -> embed x padding_idx=0", "belong to an embedding that owns its table"),
])
def test_bad_keyword_values_are_refused(line, message):
    spec = check(HEAD + "input W: [V, D]\n" + line.replace("embed x", "embed W") + "\n")
    assert not spec.ok
    assert message in spec.errors()[0].message, render_check(spec)


def test_a_block_call_takes_no_keywords():
    text = HEAD + "block Blk(z: [B, S, D]):\n  return z -> relu\nend\ny: x -> Blk eps=1\nw: x -> stack 2 Blk p=1\n"
    spec = check(text)
    assert [(d.code, d.span.line) for d in spec.errors()] == [("E110", 9), ("E110", 10)]


def test_a_comma_between_keywords_and_a_comma_in_a_call():
    spec = check(HEAD + 'input z: [B, S, 8]\na: z -> rearrange "b s (h d) -> b h s d" h=2, d=4\n'
                 "c: concat(-1, x -> linear D bias=false, x)\n")
    assert spec.ok, render_check(spec)
    assert spec.bindings[-1].types[0].shape[-1] == 2 * spec.prover.user["D"]


# ------------------------------------------------------------------ trace and parameters

def test_keywords_show_in_the_trace_and_change_parameter_counts():
    torch = pytest.importorskip("torch")
    spec = check(HEAD + "a: x -> linear F bias=false\nb: x -> layernorm bias=false\n"
                 "c: x -> layernorm elementwise_affine=false\nd: x -> rmsnorm eps=1e-6\n"
                 "e: ids -> embed V D padding_idx=0\n")
    assert spec.ok, render_check(spec)
    text = trace(spec)
    assert "linear F bias=false" in text and "rmsnorm eps=1e-6" in text
    torch_counts = [torch.nn.Linear(8, 16, bias=False), torch.nn.LayerNorm(8, bias=False),
                    torch.nn.LayerNorm(8, elementwise_affine=False), torch.nn.RMSNorm(8, eps=1e-6),
                    torch.nn.Embedding(11, 8, padding_idx=0)]
    for b, module in zip(spec.bindings, torch_counts):
        got = spec.example_value(sum((s.params for s in b.steps), 0) or 0)
        assert int(got) == sum(p.numel() for p in module.parameters()), b.names


# ------------------------------------------------------------------ generated modules against torch

def _generated(text: str, sizes=None):
    spec = check(text)
    assert spec.ok, render_check(spec)
    gen = generate(spec)
    _mod, model = runner.build(gen, runner.resolve_sizes(spec, sizes))
    return spec, gen, model


def _copy_weights(model, reference):
    got, want = list(model.parameters()), list(reference.parameters())
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    torch = pytest.importorskip("torch")
    with torch.no_grad():
        for p, q in zip(got, want):
            q.copy_(torch.randn_like(q))
            p.copy_(q)


def _out(value):
    return value if not isinstance(value, dict) else next(iter(value.values()))


LLAMA = """\
dim B, S, D, F
example B=2, S=7, D=16, F=40
input x: [B, S, D]
h: x -> rmsnorm eps=1e-6
gate: h -> linear F bias=false -> silu
up: h -> linear F bias=false
y: x + (gate * up -> linear D bias=false)
"""


def test_llama_mlp_with_rmsnorm_eps_matches_the_reference():
    torch = pytest.importorskip("torch")
    _spec, gen, model = _generated(LLAMA)
    assert "nn.RMSNorm(cfg.D, eps=cfg.eps)" in gen.source and "eps: float = 1e-06" in gen.source
    assert "bias=False" in gen.source

    class Reference(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.RMSNorm(16, eps=1e-6)
            self.gate = torch.nn.Linear(16, 40, bias=False)
            self.up = torch.nn.Linear(16, 40, bias=False)
            self.down = torch.nn.Linear(40, 16, bias=False)

        def forward(self, x):
            h = self.norm(x)
            return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))

    ref = Reference().eval()
    _copy_weights(model, ref)
    x = torch.randn(2, 7, 16) * 1e-3     # small activations: eps matters
    with torch.no_grad():
        got, want = _out(model(x)), ref(x)
        assert torch.allclose(got, want, rtol=0, atol=1e-6), (got - want).abs().max()
        ref.norm.eps = None             # the default eps gives another result
        assert not torch.allclose(got, ref(x), rtol=0, atol=1e-6)


BERT = """\
dim B, S, D, F
example B=2, S=5, D=12, F=48
input x: [B, S, D]
y: x + (x -> linear F -> gelu -> linear D) -> layernorm eps=1e-12
"""


def test_bert_layernorm_eps_matches_the_reference():
    torch = pytest.importorskip("torch")
    _spec, gen, model = _generated(BERT)
    assert "nn.LayerNorm(cfg.D, eps=cfg.eps)" in gen.source and "eps: float = 1e-12" in gen.source
    seq = torch.nn.Sequential(torch.nn.Linear(12, 48), torch.nn.GELU(), torch.nn.Linear(48, 12))
    ln = torch.nn.LayerNorm(12, eps=1e-12)
    ref = torch.nn.ModuleList([seq, ln]).eval()
    _copy_weights(model, ref)
    x = torch.randn(2, 5, 12)
    with torch.no_grad():
        assert torch.allclose(_out(model(x)), ln(x + seq(x)), rtol=0, atol=1e-5)
    assert [m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)] == [1e-12]


GPT2 = """\
dim B, S, D
example B=2, S=5, D=8
input x: [B, S, D]
y: x -> linear 4*D -> gelu approximate="tanh" -> linear D -> dropout p=0.1
"""


def test_gpt2_tanh_gelu_matches_the_reference():
    torch = pytest.importorskip("torch")
    _spec, gen, model = _generated(GPT2)
    assert 'F.gelu(y, approximate="tanh")' in gen.source and "nn.Dropout(cfg.dropout)" in gen.source
    assert "dropout: float = 0.1" in gen.source
    ref = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(approximate="tanh"),
                              torch.nn.Linear(32, 8)).eval()
    _copy_weights(model, ref)
    x = torch.randn(2, 5, 8) * 3
    with torch.no_grad():
        got = _out(model(x))
        assert torch.allclose(got, ref(x), rtol=0, atol=1e-6)
        ref[1].approximate = "none"
        assert not torch.allclose(got, ref(x), rtol=0, atol=1e-6)
    assert any(isinstance(m, torch.nn.Dropout) and m.p == 0.1 for m in model.modules())


def test_run_honours_keywords_and_dtypes():
    pytest.importorskip("torch")
    text = HEAD + ('a: x -> layernorm eps=1e-12 elementwise_affine=false -> gelu approximate="tanh"\n'
                   "b: x -> bfloat16 -> linear F dtype=bfloat16 bias=false -> float -> softmax -1 dtype=float32\n"
                   "c: ids -> embed V D padding_idx=0 -> var -1 correction=0\n"
                   "d: (1 - (m -> to float)) * -10000.0\n")
    spec = check(text)
    assert spec.ok, render_check(spec)
    rep = shapelang.run(spec)
    assert rep.ok, runner.report_text(rep)


# ------------------------------------------------------------------ grading

def test_grading_tells_a_dropped_keyword_apart():
    from shapelang.teaching.exercise import make
    from shapelang.teaching.grader import Grader

    solution = ("dim B, S, D\nexample B=2, S=3, D=8\ninput x: [B, S, D]\n"
                "# ?norm = rmsnorm eps=1e-6\n# ?act = gelu approximate=\"tanh\"\n"
                "y: x -> rmsnorm eps=1e-6 -> gelu approximate=\"tanh\"\n")
    exercise, _ = make(solution, "solution.shape")
    grader = Grader(exercise, solution, "exercise.shape", "solution.shape")

    def score(norm, act):
        return grader.grade_text(exercise.replace("?norm", norm).replace("?act", act)).score

    assert score("rmsnorm eps=1e-6", 'gelu approximate="tanh"') == 2
    assert score("rmsnorm eps=0.000001", "gelu approximate=tanh") == 2
    assert score("rmsnorm", 'gelu approximate="tanh"') == 1
    assert score("rmsnorm eps=1e-6", "gelu") == 1


def test_dropout_written_as_an_integer_is_a_float_field_that_scripts(tmp_path):
    """`dropout 0` (ALBERT's hidden_dropout_prob) types the field float, as nn.Dropout needs."""
    torch = pytest.importorskip("torch")
    from torch_shapes import formatted_module

    _spec, gen, _model = _generated(GPT2.replace("dropout p=0.1", "dropout 0"))
    assert "    dropout: float = 0.0\n" in gen.source
    mod = formatted_module(gen, tmp_path / f"{gen.module_name}.py", f"kw_{gen.module_name}")
    cfg = getattr(mod, gen.config_class)(**{py: {"B": 2, "S": 5, "D": 8}[n] for n, py in gen.fields})
    model = getattr(mod, gen.top_class)(cfg).eval()
    scripted = torch.jit.script(model)
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        torch.testing.assert_close(_out(scripted(x)), _out(model(x)))
