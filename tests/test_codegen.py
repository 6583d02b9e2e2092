"""codegen and run: every spec that checks becomes ruff-clean PyTorch code that
imports and runs with the checker's shape at every step, at the example sizes
and at two other valid sizes; the CLI refuses bad specs and never clobbers.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp
from tiers import checked as tiers_checked
from tiers import sample, sweep
from torch_shapes import REDUCED

from shapelang import codegen, render
from shapelang.checker import ops
from shapelang.checker.checker import check_file, check_text
from shapelang.cli import main
from shapelang.codegen import runner

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.shape")) + sorted((ROOT / "specs" / "pytorch").glob("*.shape"))

# Every operation of the language, with the hazards codegen must survive: a dim
# named F (the usual alias of torch.nn.functional), `I` (ambiguous to linters),
# Python keywords, nested blocks, dead bindings in a block, anonymous inputs.
ALL_OPS = """\
dim B, S, T, D, H, F, I, V, in
dim Dh = D / H
dim G = 2
assume D % H == 0
assume H % G == 0
assume 1 <= S <= 64
example B=2, S=5, T=3, D=8, H=4, F=6, I=3, V=11, in=2
input x: [B, S, D]
input y: [B, T, D]
input ids: [B, S] int
input m: [B, 1, T] float
input lambda: [B, S, F]
param W_e: [V, D]
param gamma: [D]
buffer pos: [1, S] int
p1: x -> permute 0 2 1 -> flatten 1 -> unsqueeze 0 -> squeeze 0 -> reshape [B, D, S]
mv: x -> movedim 2 0 -> movedim 0 -1 -> view [B, S, D]
p2: x -> unsqueeze 1 -> expand [B, H, S, D] -> repeat_interleave 2 1 -> log_softmax -1 -> sum 1 keepdim -> squeeze 1
p3: x -> layernorm bias=false -> rmsnorm -> mean -1 keepdim -> var 1 -> amax -1 keepdim
e1: ids -> embed W_e
e2: pos -> slice 1 0 S -> embed S D -> expand [B, S, D]
c1: x -> concat -1 e1 e2
c2: concat(1, x, y)
a, b, c: c1 -> split [D, D, D] -1
s1: x -> select 1 0 -> slice 1 1 D
s2: x -> einsum "bsd,btd->bst" y
r1: x -> rearrange "b s (h d) -> b h s d" h=H
r2: x -> rearrange "... (g e) -> ... e g" g=G
r3: x -> transpose 1 2 -> rearrange "b (h d) s -> b s h d" h=H
r4: x -> rearrange "b s d -> b (d s)"
k1: 2 - x * 3 / D + (x ** 2) // 2 % 3
k2: -x -> exp -> sqrt -> rsqrt -> log -> abs -> softplus -> square -> neg -> tanh -> sigmoid -> silu -> relu -> gelu
att: x @ (y -> transpose 1 2) -> mask m -> softmax -1 -> dropout 0.1
cz: x @ (x -> transpose 1 2) -> mask causal -> softmax -1
ct: x -> transpose 1 2 -> contiguous -> view [B, D * S]
anon: [B, S, F] -> linear D bias=false
al: anon
lam: lambda -> linear I -> view [B, S, I]
kw: x -> linear in -> view [B, S, in] -> scale 1/sqrt(in)
gm: x * gamma -> scale 0.5 -> scale sqrt(D) -> view [B, S, F * 0 + D]
ty: ids -> to float -> half -> float -> double -> bfloat16 -> float -> long -> bool -> to int
tyas: ids -> type_as x
kwo: x -> layernorm eps=1e-12 elementwise_affine=false -> rmsnorm eps=1e-6 -> gelu approximate="tanh"
  -> softmax dim=-1 dtype=float32 -> var -1 correction=0
mk: x -> mean 1 keepdim -> mask (ids -> bool -> unsqueeze -1)
fa: x -> attention y y attn_mask=m dropout_p=0.1 scale=1/sqrt(D)
fb: x -> attention x x is_causal=true
tp: arange(S) -> unsqueeze 1
tq: arange(1, S + 1) < arange(0.0, 2*S, 2) + linspace(0, 1, S)
tm: where(tp >= arange(S), zeros([S, S]), ones([1, S])) * full([S, 1], 2)
tn: tp -> tril -1 -> triu (in - 1) -> sin -> cos -> pow 2
tz: arange(S) > 2 -> where arange(S) 0 -> outer arange(T)
tr: outer(arange(D), arange(I)) != 0
tmin: minimum(arange(S), full([S], 2)) + (arange(S) -> maximum full([1], 1)) -> clamp 0 max=3
tmv, tmi: arange(S) -> clamp min=full([S], 1) -> max 0 keepdim
tmw, tmj: arange(S) -> min -1
tma: arange(S) -> amin 0
tln: arange(S) > 1 -> logical_not
mg1, mg2: meshgrid(linspace(-1.0, 1.0, S), arange(0.0, D))
mg3: mg1 -> stack_tensors -1 mg2 -> flatten 0 1 -> unsqueeze 0 -> expand [B, -1, -1]
mg4: stack_tensors(0, x, x) * pi
mg5, mg6: arange(S) -> meshgrid arange(T)
rp1: x -> repeat "b s d -> b s r d" r=2 -> rearrange "b ... d -> b (...) d"
cv: x -> transpose 1 2 -> conv1d F 3 padding=1 -> conv1d D 2 stride=2 padding=1 dilation=2 bias=false
cg: x -> transpose 1 2 -> conv1d D 1 groups=H
ix1, ix2: x -> topk G -1
ix3: x -> gather -1 ix2 -> take_along_dim ix2 -1 -> index_select 0 arange(B)
ix4: ids -> one_hot V
ix5: x -> index_add 1 arange(S) x alpha=0.5 -> scatter_add -1 ix2 (ix1 * 2.0)
ix6: x -> scatter -1 ix2 0.5 -> scatter -1 ix2 x
nzb, nzs: where(ids > 2)
nz2: ids -> nonzero -> sum 0
ms1: x -> masked_select (x > 0) -> unsqueeze -1 -> linear 2
nzt: x -> index_add 1 nzs (x -> index_select 1 nzs)
cw: x -> unsqueeze 1 -> conv2d 2 [1, 2] stride=[1, 2] padding="valid"
fc: x * 3 -> floor -> ceil -> clamp -1 1 -> clamp min=0 -> clamp max=(D - 1)
rd1: x -> std -1 keepdim -> prod 1 -> logsumexp -1
rd2: x -> argmax -1 keepdim -> argmin -> any -> all
rd3: x -> norm -1 p=1 -> nansum 1 -> nanmean 0
rd4: x -> median 1 -> kthvalue 1 -1
rd5: x -> cumsum 1 -> cumprod 0 -> cummax 2 -> cummin 1 -> logcumsumexp -1 -> softmin -1
rd6, rd7: x -> sort 1 descending=true
rd8: x -> argsort -1
pw1: x -> masked_fill (x > 0) -inf -> leaky_relu -> elu -> selu -> celu -> mish -> hardswish
pw2: x -> hardsigmoid -> relu6 -> logsigmoid -> glu -> erf -> sign -> reciprocal -> log1p
pw3: x -> expm1 -> log2 -> trunc -> round -> clamp_min 0 -> clamp_max 1 -> nan_to_num
pw4: x -> isnan -> logical_and (x -> isinf) -> logical_or (x -> isfinite) -> logical_xor (x > 0)
pw5: x -> normalize -1 -> cosine_similarity x -1
ly1: x -> flip 1 -> roll -G 1 -> narrow 1 0 1 -> swapaxes 1 2 -> swapdims 1 2 -> expand_as y
ly2: x -> unflatten -1 [H, Dh] -> tile [1, 2, 1, 1] -> pad [1, 1] value=-inf -> slice 1 0 (2*S) step=2
ly3, ly4: x -> unflatten -1 [2, -1] -> unbind 2
ly5: x -> zeros_like -> ones_like dtype=int -> full_like 2
ly6: eye(S) @ (x -> select 0 0)
nm1: x -> transpose 1 2 -> groupnorm G -> batchnorm
pl1: x -> transpose 1 2 -> max_pool1d 2 stride=1 padding=1 -> avg_pool1d 3 stride=2 padding=1 ceil_mode=true -> adaptive_avg_pool1d 2 -> adaptive_max_pool1d 1
pl2: x -> unsqueeze 1 -> max_pool2d [1, 2] stride=1 padding=[0, 1] -> avg_pool2d 1 count_include_pad=false -> interpolate scale_factor=2 mode="bilinear" align_corners=true -> adaptive_avg_pool2d [2, 3] -> adaptive_max_pool2d 1 -> interpolate size=[S, D]
block Inner(z: [B, T, D]):
  dead: z -> relu
  u, w: z -> chunk 2 -1
  q: z -> view [B, T, H, Dh]
  return z
end
block Outer(z: [B, T, D], mm: [B, 1, T] float):
  i: z -> Inner -> linear D
  j: i -> view [B, T, H, Dh] -> transpose 1 2 -> reshape [B, T, D]
  return j + (z -> Inner)
end
o1: y -> Outer(m)
o2: y -> stack 2 Outer([B, 1, T])
"""

# a block called at two lengths: one class, its own dim names in forward
RENAMED = """\
dim B, S, T, D, H
dim Dh = D / H
assume D % H == 0
example B=2, S=3, T=5, D=8, H=2
input x: [B, S, D]
input y: [B, T, D]
block Attention(a: [B, S, D]):
  q: a -> linear D -> view [B, S, H, Dh] -> transpose 1 2
  s: q @ (q -> transpose -2 -1) -> mask causal -> softmax -1
  return s @ q -> transpose 1 2 -> reshape [B, S, D]
end
u: x -> Attention
w: y -> Attention
"""

BROKEN = """\
dim B, S, D
input x: [B, S, D]
param W: [S, D]
y: x @ W
"""


def checked(path: str):
    return tiers_checked(path)


def checked_or_skip(path: Path):
    spec = checked(str(path))
    if not spec.ok:
        pytest.skip(f"{path.name} does not check (being written?)")
    return spec


def spec_from_text(tmp_path: Path, name: str, text: str):
    path = tmp_path / f"{name}.shape"
    path.write_text(text)
    spec = tiers_checked(path)
    assert spec.ok, render.check_text(spec)
    return spec


def ruff_check(path: Path) -> None:
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed")
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", str(path)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def import_file(path: Path):
    spec = importlib.util.spec_from_file_location(f"generated_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def size_assignments(spec) -> list[dict]:
    """The example (when the spec has one) and two more valid assignments, deterministically."""
    stem = Path(spec.path).stem
    if stem in REDUCED:      # billions of parameters at the example: reduced sizes instead
        return [runner.resolve_sizes(spec, sizes) for sizes in REDUCED[stem]]
    out = [runner.resolve_sizes(spec)] if spec.example else []
    for seed in (1, 2):
        sizes = runner.random_sizes(spec, seed)
        assert sizes is not None, f"no valid sizes found for {spec.path}"
        out.append(sizes)
    return out


def assert_runs(spec) -> None:
    cache: dict = {}
    for sizes in size_assignments(spec):
        rep = runner.run_spec(spec, sizes, cache=cache)
        assert rep.params_got == rep.params_expected, runner.report_text(rep)
        assert rep.ok, runner.report_text(rep)


# ------------------------------------------------------------------ every spec

@pytest.mark.parametrize("path", sample(SPECS, ids=lambda p: p.relative_to(ROOT / "specs").as_posix()))
def test_generated_code_passes_ruff_and_imports(path, tmp_path):
    spec = checked_or_skip(path)
    out = tmp_path / f"{path.stem}.py"
    out.write_text(codegen.generate(spec).source)
    ruff_check(out)
    pytest.importorskip("torch")
    mod = import_file(out)
    gen = codegen.generate(spec)
    assert hasattr(mod, gen.top_class) and hasattr(mod, gen.config_class)


@pytest.mark.parametrize("path", sample(SPECS, ids=lambda p: p.relative_to(ROOT / "specs").as_posix()))
def test_runs_with_the_proved_shapes(path):
    pytest.importorskip("torch")
    assert_runs(checked_or_skip(path))


def test_the_spec_folders_are_not_empty():
    assert len(SPECS) >= 7
    assert any(p.parent.name == "pytorch" for p in SPECS)


# ------------------------------------------------------------------ every operation

def _all_ops(ir_bindings, seen=None) -> set:
    seen = set() if seen is None else seen
    out = set()
    for b in ir_bindings:
        for s in b.steps:
            out.add(s.op)
            if s.op == "mask":
                out.add(f"mask {s.detail['kind']}")
            if s.block is not None and id(s.block) not in seen:
                seen.add(id(s.block))
                out |= _all_ops(s.block.bindings, seen)
    return out


def every_operation() -> str:
    """ALL_OPS, plus one line for each operation of the table it does not name: the entry's
    example (OpDef.use), its inputs and outputs renamed so that they meet nothing above."""
    named = set(re.findall(r"[a-z_0-9]+", ALL_OPS))
    extra = []
    for name, d in ops.TABLE.items():
        if d.rule is None or name == "opaque" or name in named:
            continue
        outs, _, use = d.use.rpartition(":")
        use = re.sub(r"\b(x|ids|m)\b", r"ex_\1", use.strip())
        outs = ", ".join(f"ex_{name}_{o.strip()}" for o in outs.split(",")) if outs else f"ex_{name}"
        extra.append(f"{outs}: {use}\n")
    inputs = "input ex_x: [B, S, D]\ninput ex_ids: [B, S] int\ninput ex_m: [B, 1, S] bool\n"
    return ALL_OPS.replace("buffer pos: [1, S] int\n", "buffer pos: [1, S] int\n" + inputs) + "".join(extra)


def test_every_operation(tmp_path):
    spec = spec_from_text(tmp_path, "all_ops", every_operation())
    used = _all_ops(spec.bindings)
    # `opaque` stands for code shapelang cannot write: codegen refuses it (tests/test_import_opaque.py)
    wanted = ({ops.TABLE[n].ir_name for n in ops.RULES} - {"opaque"}) | {"matmul", "add", "sub", "mul", "div", "neg", "pow", "floordiv", "mod",
                               "concat", "einsum", "block", "stack", "input", "mask causal",
                               "mask tensor"}
    assert wanted <= used, f"the test spec misses {sorted(wanted - used)}"
    source = codegen.generate(spec).source
    out = tmp_path / "all_ops.py"
    out.write_text(source)
    ruff_check(out)
    assert "import torch.nn.functional as F\n" in source   # F is a config size only here
    assert "I_: int = 3" in source and "in_: int = 2" in source and "lambda_: torch.Tensor" in source
    assert "_dead = F.relu(z)" in source and "_u, _w = z.chunk(2, dim=-1)" in source
    assert 'masked_fill(m != 0, float("-inf"))' in source
    pytest.importorskip("torch")
    assert_runs(spec)


def test_functional_alias_gives_way_to_a_local_named_F(tmp_path):
    spec = spec_from_text(tmp_path, "named_f", "dim B, F\nexample B=2, F=3\ninput x: [B, F]\n"
                                               "y: x -> view [B, F] -> softmax -1 -> gelu\n")
    source = codegen.generate(spec).source
    assert "import torch.nn.functional as nnf" in source and "nnf.gelu(y)" in source
    assert "B, F = x.shape" in source
    out = tmp_path / "named_f.py"
    out.write_text(source)
    ruff_check(out)


def test_a_block_called_at_two_lengths_is_one_class(tmp_path):
    spec = spec_from_text(tmp_path, "renamed", RENAMED)
    source = codegen.generate(spec).source
    assert source.count("class Attention(nn.Module)") == 1
    assert "B, S, D = a.shape" in source and "is_causal=True" in source
    explicit = codegen.generate(spec, attention="explicit").source
    assert "causal_mask(S, S, s.device)" in explicit
    block = source.split("class Attention(nn.Module)")[1].split("class Renamed")[0]
    assert "T," not in block and ", T)" not in block
    pytest.importorskip("torch")
    assert_runs(spec)


def test_layout_decides_view_or_copy(tmp_path):
    spec = spec_from_text(tmp_path, "layout", RENAMED)
    source = codegen.generate(spec).source
    # reshape after a transpose copies: written the nanoGPT way
    assert "return out.transpose(1, 2).contiguous().view(B, S, D)" in source
    assert ".reshape(" not in source


def test_hyper_parameters_and_runtime_sizes():
    spec = checked_or_skip(ROOT / "specs" / "mha_self_attention.shape")
    source = codegen.generate(spec).source
    config = source.split("class MhaSelfAttentionConfig")[1].split("\n\n\n")[0]
    assert "D: int = 512" in config and "H: int = 8" in config
    assert "B:" not in config and "S:" not in config          # read from the input
    assert "def Dh(self) -> int:\n        return self.D // self.H" in config
    assert "if self.D % self.H != 0:" in config and "D % H == 0 is needed" in config
    assert "B, S, D = X.shape" in source
    assert "Qh = Q.view(B, S, H, Dh).transpose(1, 2)  # (B, H, S, Dh)" in source
    assert "self.cfg" not in source and "H, Dh = self.H, self.Dh" in source


def test_fixed_sizes_are_fields_with_their_value_as_default():
    spec = checked_or_skip(ROOT / "specs" / "gpt2_small.shape")
    source = codegen.generate(spec).source
    assert "    V: int = 50257\n" in source and "    L: int = 12\n" in source
    assert "    dropout: float = 0.1\n" in source and "    eps: float = 1e-05\n" in source
    assert "nn.ModuleList([" in source


def test_printer():
    D, H, S, Dk = (sp.Symbol(n, positive=True, integer=True) for n in ("D", "H", "S", "Dk"))
    p = codegen.Printer(str)
    assert p(D / H) == "D // H"
    assert p(D / 2 + S / 2) == "(D + S) // 2"
    assert p(3 * D) == "3 * D"
    assert p(S - 1) == "S - 1"
    assert p(sp.Mod(D, H)) == "D % H"
    assert codegen.Printer(str, real=True)(1 / sp.sqrt(Dk)) == "1 / math.sqrt(Dk)"
    assert codegen.Printer(str, real=True)(sp.Float(1e-5)) == "1e-05"
    assert codegen.Printer(str, compact=True)(D / H) == "D/H"


# ------------------------------------------------------------------ the command line

def test_codegen_writes_the_same_bytes_every_time(tmp_path, capsys):
    path = ROOT / "specs" / "pytorch" / "decoder_layer.shape"
    checked_or_skip(path)
    out = tmp_path / "model.py"
    assert main(["codegen", str(path), "-o", str(out)]) == 0
    assert main(["codegen", str(path)]) == 0
    stdout = capsys.readouterr().out
    assert stdout == out.read_text()
    env = dict(os.environ, PYTHONHASHSEED="12345")
    other = subprocess.run([sys.executable, "-m", "shapelang", "codegen", str(path)], capture_output=True,
                           env=env, check=True).stdout
    assert other == out.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["model.py"]   # no temporary files left


@pytest.mark.parametrize("every", sweep(1, 8))
def test_every_spec_gives_the_same_bytes_under_any_hash_seed(every):
    script = ("import sys\nfrom shapelang.checker.checker import check_file\nfrom shapelang.codegen.generator import generate\n"
              "for p in sys.argv[1:]:\n    s = check_file(p)\n"
              "    if s.ok:\n        sys.stdout.write(generate(s).source)\n")
    specs = SPECS[::every]   # the default tier: every eighth spec
    runs = [subprocess.run([sys.executable, "-c", script, *map(str, specs)], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONHASHSEED=seed), check=True).stdout
            for seed in ("1", "2")]
    here = "".join(codegen.generate(checked(str(p))).source for p in specs if checked(str(p)).ok)
    assert runs[0] == runs[1] == here


def test_codegen_refuses_a_spec_that_does_not_check(tmp_path, capsys):
    bad = tmp_path / "bad.shape"
    bad.write_text(BROKEN)
    out = tmp_path / "bad.py"
    assert main(["codegen", str(bad), "-o", str(out)]) == 1
    assert not out.exists()
    err = capsys.readouterr().err
    assert render.check_text(check_text(BROKEN, str(bad))) in err
    assert "E101" in err


def test_codegen_never_overwrites_without_force(tmp_path, capsys):
    path = ROOT / "specs" / "pytorch" / "multihead_attention.shape"
    checked_or_skip(path)
    out = tmp_path / "model.py"
    out.write_text("keep me\n")
    assert main(["codegen", str(path), "-o", str(out)]) == 2
    assert out.read_text() == "keep me\n"
    assert "--force" in capsys.readouterr().err
    assert main(["codegen", str(path), "-o", str(out), "--force"]) == 0
    assert out.read_text() == codegen.generate(checked(str(path))).source
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py"]


def test_codegen_io_errors(tmp_path):
    assert main(["codegen", str(tmp_path / "missing.shape")]) == 2
    path = ROOT / "specs" / "pytorch" / "multihead_attention.shape"
    assert main(["codegen", str(path), "-o", str(tmp_path / "no" / "such" / "dir.py")]) == 2


def test_codegen_explains_what_it_cannot_write(tmp_path, capsys):
    path = tmp_path / "anon.shape"
    path.write_text("dim B, D\nexample B=2, D=3\ninput x: [B, D]\n"
                    "block A(a: [B, D]):\n  return a + [B, D]\nend\ny: x -> A\n")
    assert check_file(str(path)).ok
    assert main(["codegen", str(path)]) == 1
    err = capsys.readouterr().err
    assert "line 5" in err and "declare it as an input of the block" in err and "Traceback" not in err


def test_run_cli(capsys):
    pytest.importorskip("torch")
    path = ROOT / "specs" / "pytorch" / "multihead_attention_causal.shape"
    checked_or_skip(path)
    assert main(["run", str(path), "--sizes", "B=3,S=2"]) == 0
    text = capsys.readouterr().out
    assert "at B=3, S=2, D=16, H=4, Dh=4" in text and "MISMATCH" not in text
    assert "[3, 4, 2, 2]" in text          # the attention weights at these sizes
    assert main(["run", str(path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["params"]["expected"] == report["params"]["got"] == 1088
    assert all(step["ok"] for step in report["steps"])


@pytest.mark.parametrize("sizes, message", [
    ("D=10,H=3", "assume D % H == 0"),
    ("Q=2", "not a dim"),
    ("B=0", "positive"),
    ("Dh=3", "derived"),
    ("B2", "NAME=NUMBER"),
])
def test_run_rejects_bad_sizes(sizes, message, capsys):
    path = ROOT / "specs" / "pytorch" / "multihead_attention.shape"
    checked_or_skip(path)
    assert main(["run", str(path), "--sizes", sizes]) == 2
    assert message in capsys.readouterr().err


def test_run_refuses_a_spec_that_does_not_check(tmp_path, capsys):
    bad = tmp_path / "bad.shape"
    bad.write_text(BROKEN)
    assert main(["run", str(bad)]) == 1
    assert "E101" in capsys.readouterr().out


def test_run_reports_a_mismatch(monkeypatch, capsys):
    pytest.importorskip("torch")
    path = ROOT / "specs" / "pytorch" / "multihead_attention.shape"
    checked_or_skip(path)
    rows = runner._rows

    def wrong(spec, sizes):
        out = rows(spec, sizes)
        out[3].expected = [[1, 2, 3]]
        return out

    monkeypatch.setattr(runner, "_rows", wrong)
    assert main(["run", str(path)]) == 1
    text = capsys.readouterr().out
    assert "MISMATCH" in text and "1 of 17 steps differ" in text


def test_run_reports_a_crash(monkeypatch, capsys):
    pytest.importorskip("torch")
    path = ROOT / "specs" / "pytorch" / "multihead_attention.shape"
    checked_or_skip(path)
    real = runner.generate

    def broken(spec, *, instrument=False):
        gen = real(spec, instrument=instrument)
        gen.source = gen.source.replace("qh.transpose(1, 2)", "qh.transpose(1, 3)")
        return gen

    monkeypatch.setattr(runner, "generate", broken)
    assert main(["run", str(path)]) == 1
    text = capsys.readouterr().out
    assert "forward failed" in text and "not run" in text
