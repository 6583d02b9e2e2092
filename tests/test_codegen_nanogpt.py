"""Generated code to nanoGPT's standard: a config with typed fields, attention as
F.scaled_dot_product_attention (checked against the written-out steps and against a
nanoGPT-style model written here), a nanoGPT state dict loading by name alone,
torch.jit.script and `ruff format --check` on every spec's module.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tiers import checked as shared_check
from tiers import sample
from torch_shapes import example_or_reduced, formatted_module

from shapelang import codegen
from shapelang.checker.checker import check_file, check_text
from shapelang.codegen import runner

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional
torch_compat = pytest.importorskip("shapelang.codegen.torch_compat")

from bench import nanogpt
from bench.nanogpt import GPT

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.shape")) + sorted((ROOT / "specs" / "pytorch").glob("*.shape"))


# ------------------------------------------------------------------ nanoGPT (model.py, with flash attention)

@dataclasses.dataclass
class GPTConfig(nanogpt.GPTConfig):
    block_size: int = 32
    vocab_size: int = 96
    n_embd: int = 32


def randomize(module, seed=3):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.2 if p.dim() > 1 else 0.5))
    return module.eval()


def build(spec_path, attention="sdpa", name=None, **sizes):
    spec = check_file(str(spec_path))
    assert spec.ok
    gen = codegen.generate(spec, attention=attention)
    mod = runner.load_module(gen.source, name or f"nano_{gen.module_name}_{attention}")
    cfg = getattr(mod, gen.config_class)(**sizes)
    return spec, gen, getattr(mod, gen.top_class)(cfg).eval()


SMALL = {"V": 96, "Ctx": 32, "D": 32, "H": 4, "L": 2}


# ------------------------------------------------------------------ the config

def test_the_config_has_typed_fields_and_builds_a_smaller_model():
    spec, gen, _ = build(ROOT / "specs" / "gpt2_small.shape", D=64, H=4, L=2, V=100, Ctx=64)
    mod = runner.load_module(gen.source, "config_fields")
    Config = getattr(mod, gen.config_class)
    fields = {f.name: (f.type, f.default) for f in dataclasses.fields(Config)}
    assert fields["D"] == ("int", 768) and fields["V"] == ("int", 50257) and fields["L"] == ("int", 12)
    assert fields["dropout"] == ("float", 0.1) and fields["eps"] == ("float", 1e-5)
    cfg = Config(D=64, H=4, L=2)                     # the call: no TypeError
    assert (cfg.D, cfg.H, cfg.L, cfg.Dh) == (64, 4, 2, 16)
    model = getattr(mod, gen.top_class)(Config(D=64, H=4, L=2, V=100, Ctx=64))
    sizes = {"D": 64, "H": 4, "L": 2, "V": 100, "Ctx": 64}
    want = runner.value_at(spec.total_params, spec, {**spec.example, **sizes, "Dh": 16})
    assert sum(p.numel() for p in model.parameters()) == want
    assert len(model.hidden) == 2
    assert "self.cfg" not in gen.source and "nn.Dropout(cfg.dropout)" in gen.source
    d = Config(dropout=0.3)
    m = getattr(mod, gen.top_class)(dataclasses.replace(d, D=64, H=4, L=1, V=50, Ctx=16))
    assert m.x_drop.p == 0.3


# ------------------------------------------------------------------ attention

@pytest.mark.parametrize("name", ["gpt2_small.shape", "pytorch/gpt2_bench.shape", "pytorch/nanogpt.shape"])
def test_sdpa_equals_the_written_out_steps(name):
    path = ROOT / "specs" / name
    _spec, gen, fused = build(path, **SMALL)
    assert "scaled_dot_product_attention" in gen.source and "is_causal=True" in gen.source
    assert "causal_mask" not in gen.source and "masked_fill" not in gen.source
    _, gen2, written = build(path, attention="explicit", **SMALL)
    assert "scaled_dot_product_attention" not in gen2.source and "causal_mask(" in gen2.source
    randomize(fused)
    written.load_state_dict(fused.state_dict())
    idx = torch.randint(0, SMALL["V"], (3, 17), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(fused(idx), written(idx), atol=1e-5, rtol=0)


@pytest.mark.parametrize("between", ["", "h2: heads * 2 -> scale 0.5\n", "h2: heads -> relu -> unsqueeze 0 -> squeeze 0\n"])
def test_a_view_after_a_fused_attention_runs_whatever_lies_between(between):
    """F.scaled_dot_product_attention lays out its result as its kernel likes; a `view` the
    checker proved on the written-out layout, directly after the call or after steps that
    keep the layout, must still run (and give the written-out numbers)."""
    merged_from = "h2" if between else "heads"
    text = ("dim B, S, D, H\ndim Dh = D / H\nassume D % H == 0\nexample B=2, S=5, D=16, H=4\n"
            "input x: [B, S, D]\n"
            "q: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2\n"
            "k: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2\n"
            "v: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2\n"
            "scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh) -> softmax -1\n"
            "heads: scores @ v\n" + between
            + f"merged: {merged_from} -> view [B, H * S, Dh]\n")
    spec = check_text(text)
    assert spec.ok, text
    gens = [codegen.generate(spec, attention=a) for a in ("sdpa", "explicit")]
    assert "scaled_dot_product_attention" in gens[0].source
    models = []
    for a, gen in zip(("sdpa", "explicit"), gens):
        mod = runner.load_module(gen.source, f"relaid_{a}_{len(between)}")
        models.append(getattr(mod, gen.top_class)(getattr(mod, gen.config_class)()).eval())
    models[1].load_state_dict(randomize(models[0]).state_dict())
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(models[0](x), models[1](x), atol=1e-5, rtol=0)


def test_sdpa_equals_nanogpt():
    """gpt2_small.shape's module, loaded from a nanoGPT model by shape and role."""
    ref = randomize(GPT(GPTConfig(vocab_size=96, block_size=32, n_layer=2, n_head=4, n_embd=32)))
    _, _gen, model = build(ROOT / "specs" / "gpt2_small.shape", **SMALL)
    report = torch_compat.load_matching(model, ref)
    assert "W_te" in str(report) and "transformer.wte.weight" in str(report)
    idx = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), ref(idx), atol=1e-5, rtol=0)


def test_gqa_passes_the_fewer_heads_and_agrees():
    path = ROOT / "specs" / "grouped_query_attention.shape"
    sizes = {"D": 32, "H": 8, "G": 2}
    _, gen, fused = build(path, **sizes)
    assert "enable_gqa=True" in gen.source and ".repeat_interleave(" not in gen.source
    _, gen2, written = build(path, attention="explicit", **sizes)
    assert ".repeat_interleave(" in gen2.source
    randomize(fused)
    written.load_state_dict(fused.state_dict())
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(fused(x)["out"], written(x)["out"], atol=1e-5, rtol=0)


def test_attention_whose_weights_are_used_twice_is_written_out(tmp_path):
    text = ("dim B, S, D\nexample B=2, S=4, D=8\ninput x: [B, S, D]\n"
            "att: x @ (x -> transpose 1 2) -> scale 1/sqrt(D) -> softmax -1\n"
            "y: att @ x\nz: att -> sum -1\n")
    from shapelang.checker.checker import check_text
    spec = check_text(text, "twice.shape")
    assert spec.ok
    source = codegen.generate(spec).source
    assert "scaled_dot_product_attention" not in source and "F.softmax(att, dim=-1)" in source


# ------------------------------------------------------------------ names: a nanoGPT checkpoint by name

def test_a_nanogpt_state_dict_loads_by_name_alone():
    ref = randomize(GPT(GPTConfig(vocab_size=96, block_size=32, n_layer=2, n_head=4, n_embd=32)))
    _, _gen, model = build(ROOT / "specs" / "pytorch" / "nanogpt.shape", **SMALL)
    state = ref.state_dict()
    assert "transformer.h.0.attn.c_attn.weight" in state and "lm_head.weight" in state
    assert set(model.state_dict()) == set(state)
    model.load_state_dict(state, strict=True)
    idx = torch.randint(0, 96, (2, 24), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), ref(idx), atol=1e-5, rtol=0)


def test_flat_names_keep_double_underscores():
    spec = check_file(str(ROOT / "specs" / "pytorch" / "nanogpt.shape"))
    source = codegen.generate(spec, names="flat").source
    assert "self.transformer__h = nn.ModuleList" in source and "nn.Module()" not in source
    with pytest.raises(codegen.CodegenError, match="names must be"):
        codegen.generate(spec, names="nested")


# ------------------------------------------------------------------ every spec: jit and ruff format

@pytest.mark.parametrize("path", sample(SPECS, ids=lambda p: p.relative_to(ROOT / "specs").as_posix()))
def test_every_spec_scripts_and_is_ruff_formatted(path, tmp_path):
    spec = shared_check(path)
    if not spec.ok:
        pytest.skip(f"{path.name} does not check")
    try:
        gen = codegen.generate(spec)
    except codegen.CodegenError as err:
        pytest.skip(f"codegen does not support {path.name}: {err}")
    mod = formatted_module(gen, tmp_path / f"{gen.module_name}.py", f"scripted_{gen.module_name}")
    sizes = example_or_reduced(spec, path.stem)
    cfg = getattr(mod, gen.config_class)(**{py: sizes[n] for n, py in gen.fields})
    torch.manual_seed(0)
    model = getattr(mod, gen.top_class)(cfg).eval()
    scripted = torch.jit.script(model)
    inputs = runner.make_inputs(spec, gen, sizes)
    with torch.no_grad():
        a, b = model(*inputs), scripted(*inputs)
    a = a if isinstance(a, dict) else {"out": a}
    b = b if isinstance(b, dict) else {"out": b}
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=0, equal_nan=True)


SLICES = """\
dim B, S, H, Dh
assume H >= 2
assume Dh % 2 == 0
example B=2, S=3, H=5, Dh=4
input x: [B, S, H + 2, Dh]
a: x -> slice 2 0 H
b: x -> slice 2 H (H + 1)
c: x -> slice 2 (H + 1) (H + 2)
d: x -> slice 2 1 H
e: x -> slice 3 (Dh / 2) Dh
"""


def test_slices_with_computed_bounds_are_ruff_formatted_and_right(tmp_path):
    # ruff format writes `x[H : H + 1]`: a bound that is more than a name or a number spaces the colon
    spec = check_text(SLICES, "slices.shape")
    assert spec.ok
    gen = codegen.generate(spec)
    assert "[:, :, H : H + 1]" in gen.source and "[:, :, H + 1 : H + 2]" in gen.source
    assert "[:, :, 1:H]" in gen.source and "[:, :, :H]" in gen.source
    mod = formatted_module(gen, tmp_path / f"{gen.module_name}.py", "sliced")
    x = torch.randn(2, 3, 7, 4)
    got = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)()).eval()(x)
    want = {"a": x[:, :, :5], "b": x[:, :, [5]], "c": x[:, :, [-1]], "d": x[:, :, 1:5], "e": x[..., 2:]}
    for k, v in want.items():
        torch.testing.assert_close(got[k], v)


def test_parameterless_blocks_are_functions():
    spec = check_file(str(ROOT / "specs" / "rotary_embedding.shape"))
    source = codegen.generate(spec).source
    assert "def apply_rotary(t: torch.Tensor" in source and "class ApplyRotary" not in source
    # tables computed in forward, in float32, cast to the activations' dtype where they meet them
    assert "q_rot = apply_rotary(q, cos_table.to(q.dtype), sin_table.to(q.dtype))" in source


def test_chains_and_comments_read_like_nanogpt():
    spec = check_file(str(ROOT / "specs" / "gpt2_small.shape"))
    source = codegen.generate(spec).source
    assert "y = y.transpose(1, 2).contiguous().view(B, S, D)" in source
    assert "qh = q.view(B, S, H, Dh).transpose(1, 2)" in source
    assert "# Residual: the sublayer's result is added to the untouched input." in source
    assert max(len(line) for line in source.splitlines() if not line.lstrip().startswith("#")) <= 88
