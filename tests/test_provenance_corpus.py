"""The provenance corpus: attention, normalisation and scaling mistakes whose
shapes are all valid, next to correct specs written in the many equivalent forms.

tests/provenance/bugs/NAME.shape holds one realistic mistake, its line marked
`# W: W3xx` (the finding expected there); NAME.fixed.shape is its correct twin
(same inputs and weights, that line fixed). Correct specs that must stay free of
W3xx findings: tests/provenance/clean/ (the many equivalent forms),
tests/provenance/lookalike/ (correct specs that look like one of the mistakes,
each with its evidence) and tests/provenance/public/ (written from public model
code, each naming its source). References: this file and refs_new_kinds.py,
refs_more.py, refs_public.py beside the corpus.

What is checked:
- every spec's shapes are valid (no error), and the corpus is well formed;
- values: each bug really scrambles numbers (the generated module of the bug
  and of its twin, given the same weights and inputs, disagree at two valid
  size sets), and each twin computes what a hand-written PyTorch reference
  computes (F.scaled_dot_product_attention, F.layer_norm, F.rms_norm, ...);
- expectations: `check` reports exactly the marked findings, at their lines,
  and none for the clean specs and the twins.
"""
from __future__ import annotations

import functools
import math
import re
import sys
from pathlib import Path

import pytest
from tiers import sample

from shapelang import check
from shapelang.cli import main

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "provenance"
BUGS = sorted(p for p in (CORPUS / "bugs").glob("*.shape") if not p.name.endswith(".fixed.shape"))
CLEAN = sorted((CORPUS / "clean").glob("*.shape"))
LOOKALIKE = sorted((CORPUS / "lookalike").glob("*.shape"))
PUBLIC = sorted((CORPUS / "public").glob("*.shape"))
CORRECT = CLEAN + LOOKALIKE + PUBLIC
CODES = [f"W3{i:02d}" for i in range(1, 14)]

sys.path.insert(0, str(CORPUS))   # the references share tests/provenance/refs_common.py
from refs_common import _F, _heads, _merge, _sdpa

MARK = re.compile(r"#\s*W:\s*(\S+)")


def twin_of(bug: Path) -> Path:
    return bug.with_name(bug.stem + ".fixed.shape")


TWINS = [twin_of(p) for p in BUGS]


def rel(p: Path) -> str:
    return p.relative_to(CORPUS).as_posix()


@functools.cache
def checked(path: Path):
    return check(path.read_text(), str(path))


def marked(path: Path) -> set[tuple[str, int]]:
    """The (code, line) pairs the file expects, from its `# W: CODE` comments."""
    return {(m.group(1), n) for n, line in enumerate(path.read_text().splitlines(), 1)
            for m in [MARK.search(line)] if m}


def code_lines(path: Path) -> list[str]:
    """The statements of a spec without whole-line comments and blank lines."""
    return [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


# ------------------------------------------------------------------ the corpus itself

def test_corpus_size_and_coverage():
    assert len(BUGS) >= 80 and len(CORRECT) >= 80 and len(PUBLIC) >= 30
    codes = [code for p in BUGS for code, _line in marked(p)]
    for code in CODES:
        assert codes.count(code) >= 4, f"{code} is exercised by {codes.count(code)} bug specs, want 4 or more"
    assert set(codes) <= set(CODES)
    looks = [p.stem.split("_")[0].upper() for p in LOOKALIKE]
    for code in CODES:
        assert looks.count(code) >= 4, f"{code} has {looks.count(code)} look-alike correct specs, want 4 or more"


@pytest.mark.parametrize("bug", BUGS, ids=rel)
def test_bug_has_one_marked_line_and_a_twin_that_fixes_only_it(bug):
    marks = marked(bug)
    assert len(marks) == 1, f"{bug.name}: one `# W:` line expected, found {sorted(marks)}"
    assert bug.read_text().startswith("#"), "a bug spec starts with a comment saying what the mistake is"
    twin = twin_of(bug)
    assert twin.exists(), f"{twin.name} is missing"
    ours, theirs = code_lines(bug), code_lines(twin)
    assert len(ours) == len(theirs)
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert len(differ) == 1 and MARK.search(ours[differ[0]]), \
        f"{bug.name} and its twin must differ at the marked line only, they differ at {differ}"


@pytest.mark.parametrize("path", BUGS + TWINS + CORRECT, ids=rel)
def test_shapes_are_valid(path):
    spec = checked(path)
    errors = [f"{d.code} line {d.span.line}: {d.message}" for d in spec.diagnostics if d.severity == "error"]
    assert not errors, errors


@pytest.mark.parametrize("path", TWINS + CORRECT, ids=rel)
def test_correct_specs_carry_no_markers(path):
    assert not marked(path)


# ------------------------------------------------------------------ expectations

def provenance_findings(path: Path) -> set[tuple[str, int]]:
    return {(d.code, d.span.line) for d in checked(path).diagnostics if d.code.startswith("W3")}


# Bugs of these classes that the contracts do not reach yet: each is a strict xfail, so that
# the day one is found the test says so. They stay in the corpus: it measures classes.
KNOWN_MISSES = {
    "bugs/w302_b_rearrange_merge_order.shape": "einops groups merged in another order than they "
                                               "were split (`(d h)` after `(h d)`) are not compared",
    "bugs/w307_b_retention_decay_transposed.shape": "a table computed in the spec and used transposed: "
                                                    "its two axes count the same positions",
    "bugs/w308_b_alibi_einsum_attn_mask.shape": "a float bias given as attention's attn_mask is not "
                                                "followed into the scores",
    "bugs/w308_b_keys_first_bias_unsqueeze1.shape": "scores laid out keys-first: the bias check "
                                                    "reads the key axis from the product's right operand",
    "bugs/w310_rotate_full_width_view_halves.shape": "halves made by a view and stacked back are not "
                                                     "followed as the halves of one axis",
}


def _known(paths):
    return [pytest.param(p, id=rel(p), marks=pytest.mark.xfail(reason=KNOWN_MISSES[rel(p)], strict=True))
            if rel(p) in KNOWN_MISSES else pytest.param(p, id=rel(p)) for p in paths]


@pytest.mark.parametrize("path", _known(BUGS + TWINS + CORRECT))
def test_check_reports_exactly_the_marked_findings(path):
    assert provenance_findings(path) == marked(path)
    assert all(d.severity == "warning" for d in checked(path).diagnostics if d.code.startswith("W3"))


@pytest.mark.parametrize("bug", _known(BUGS[::4]) + [pytest.param(b, id=rel(b), marks=pytest.mark.exhaustive)
                                                     for b in BUGS if b not in BUGS[::4] and rel(b) not in KNOWN_MISSES])
def test_findings_are_warnings_exit_0_unless_strict(bug, capsys):
    assert main(["check", str(bug)]) == 0
    assert main(["check", "--strict", str(bug)]) == 1
    capsys.readouterr()


# ------------------------------------------------------------------ values

def generic_sizes(spec, runner) -> list[dict[str, int]]:
    """The example sizes and one other valid set whose sizes are all at least 2:
    a size of 1 hides most of these mistakes (one head, one token)."""
    example = runner.resolve_sizes(spec)
    fixed = {n for n, e in spec.definitions.items() if not e.free_symbols}   # `dim H = 1`
    for seed in range(300):
        sizes = runner.random_sizes(spec, seed, high=5)
        if sizes and sizes != example and all(v >= 2 for n, v in sizes.items() if n not in fixed):
            return [example, sizes]
    raise AssertionError(f"no second valid size set for {spec.path}")


def run_specs(paths: list[Path], sizes: dict[str, int]):
    """Outputs of the generated modules of `paths` at `sizes`, all given the
    weights of the first and the same random inputs (float64)."""
    torch = pytest.importorskip("torch")
    from shapelang.codegen import generate, runner

    specs = [checked(p) for p in paths]
    gens = [generate(s) for s in specs]
    for g in gens[1:]:
        assert [a[0] for a in g.args] == [a[0] for a in gens[0].args], "the twin must take the same inputs"
    models = [runner.build(g, sizes, seed=0)[1].double() for g in gens]
    g = torch.Generator().manual_seed(1)
    held = set(models[0].state_dict())
    for name, table in models[0].named_buffers():   # fixed tables (RoPE cos/sin) start at zero
        # (a table the module builds itself, a buffer outside the state dict, keeps its values)
        if table.is_floating_point() and name in held:
            table.copy_(torch.randn(table.shape, generator=g, dtype=table.dtype))
            if name.endswith("running_var"):        # a variance is positive
                table.abs_().add_(0.1)
    # parameters that start constant (a gain of ones, a bias of zeros) would let a reference
    # that ignores them agree: every one of them is drawn at random, where all the specs
    # compared give it the same shape
    shapes = [{n: t.shape for n, t in m.named_parameters()} for m in models]
    with torch.no_grad():
        for name, p in models[0].named_parameters():
            if all(sh.get(name) == p.shape for sh in shapes) and p.numel() and bool((p == p.flatten()[0]).all()):
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    state = models[0].state_dict()
    for m in models[1:]:
        own = m.state_dict()
        assert state.keys() == own.keys(), "the twin must have the same weights"
        for name, value in state.items():
            if value.shape != own[name].shape:
                # a norm moved to another axis has a gain (bias) of another length: both
                # are still at their identity start, ones (zeros), so the affine maps agree
                for t in (value, own[name]):
                    assert t.dim() == 1 and bool((t == t[0]).all()) and float(t[0]) in (0.0, 1.0), name
        m.load_state_dict({n: v for n, v in state.items() if v.shape == own[n].shape}, strict=False)
    inputs = [t.double() if t.is_floating_point() else t for t in runner.make_inputs(specs[0], gens[0], sizes, seed=2)]
    with torch.no_grad():
        outs = [m(*inputs) for m in models]
    named_inputs = {a[0]: t for a, t in zip(gens[0].args, inputs)}
    return outs, named_inputs, dict(state)


# values: every third pair by default (the corpus, not the checker, is what they test), all exhaustively
@pytest.mark.parametrize("bug", sample(BUGS, every=3, always=(), ids=rel))
def test_bug_scrambles_values_and_twin_matches_pytorch(bug):
    torch = pytest.importorskip("torch", reason="comparing values needs torch")
    from shapelang.codegen import runner

    reference, options = REFERENCES[bug.stem]
    for sizes in generic_sizes(checked(bug), runner):
        (wrong, right), inputs, weights = run_specs([bug, twin_of(bug)], sizes)
        assert wrong.shape == right.shape
        assert not torch.allclose(wrong, right, rtol=1e-5, atol=1e-7), \
            f"{bug.name}: the bug gives the same values as its twin at {sizes}"
        expected = reference(inputs, weights, sizes, **options)
        assert torch.allclose(right, expected, rtol=1e-6, atol=1e-8), \
            f"{twin_of(bug).name} differs from the PyTorch reference at {sizes}"


# ------------------------------------------------------------------ PyTorch references

def ref_mha(i, w, sz, causal=False):
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(x @ w[n], h) for n in ("W_q", "W_k", "W_v"))
    return _merge(_sdpa(q, k, v, causal)) @ w["W_o"]


def ref_mha_fused(i, w, sz):
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(t, h) for t in (x @ w["W_qkv"]).chunk(3, -1))
    return _merge(_sdpa(q, k, v)) @ w["W_o"]


def ref_gqa(i, w, sz):
    x = i["x"]
    q, k, v = _heads(x @ w["W_q"], sz["H"]), _heads(x @ w["W_k"], sz["G"]), _heads(x @ w["W_v"], sz["G"])
    return _merge(_sdpa(q, k, v, True, enable_gqa=True)) @ w["W_o"]


def ref_gqa_kv(i, w, sz):
    x, g = i["x"], sz["G"]
    k, v = _heads(x @ w["W_kv"], g).chunk(2, -1)   # each group's key and value side by side
    return _merge(_sdpa(_heads(x @ w["W_q"], sz["H"]), k, v, True, enable_gqa=True)) @ w["W_o"]


def ref_rope(i, w, sz):
    import torch

    x, h, cos, sin = i["x"], sz["H"], w["cos_table"], w["sin_table"]

    def rotate(t):
        half = t.shape[-1] // 2
        return t * cos + torch.cat([-t[..., half:], t[..., :half]], -1) * sin

    q, k, v = (_heads(x @ w[n], h) for n in ("W_q", "W_k", "W_v"))
    return _merge(_sdpa(rotate(q), rotate(k), v, True)) @ w["W_o"]


def ref_cross(i, w, sz, queries="target", keys="memory"):
    h = sz["H"]
    q = _heads(i[queries] @ w["W_q"], h)
    k, v = (_heads(i[keys] @ w[n], h) for n in ("W_k", "W_v"))
    return _merge(_sdpa(q, k, v)) @ w["W_o"]


def ref_perceiver(i, w, sz):
    latents = w["latents"].expand(i["tokens"].shape[0], -1, -1)
    return ref_cross({"lat": latents, "tokens": i["tokens"]}, w, sz, "lat", "tokens")


def ref_single_head(i, w, sz, queries="x", keys="x"):
    q, k, v = i[queries] @ w["W_q"], i[keys] @ w["W_k"], i[keys] @ w["W_v"]
    return _sdpa(q, k, v)


def ref_per_head(i, w, sz):
    x = i["x"]
    out = 0
    for j in range(sz["H"]):   # one head at a time, each with its own [D, Dh] matrices
        q, k, v = (x @ w[n][j] for n in ("W_q", "W_k", "W_v"))
        out = out + _sdpa(q, k, v) @ w["W_o"][j]
    return out


def ref_layernorm(i, w, sz):
    x = i["x"]
    return _F().layer_norm(x, x.shape[-1:], eps=1e-5)


def ref_layernorm_unbiased(i, w, sz):
    x = i["x"]   # torch.var's default (unbiased) variance, as `var -1 keepdim` computes it
    return (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + 1e-5).sqrt()


def ref_rmsnorm(i, w, sz, gamma=False):
    x = i["x"]
    return _F().rms_norm(x, x.shape[-1:], w["gamma"] if gamma else None, eps=1e-6)


def ref_axial(i, w, sz):
    x = i["x"]
    cols = x.transpose(1, 2)             # attention down each column of the grid
    return x + _sdpa(cols, cols, cols).transpose(1, 2)


def ref_mixer(i, w, sz):
    F = _F()
    x = i["x"]
    g, b = w["mixed_ln.weight"], w["mixed_ln.bias"]   # the bug's gain: drawn when its length is D's too
    t = F.layer_norm(x, x.shape[-1:], *((g, b) if g.shape == x.shape[-1:] else ())).transpose(1, 2)
    t = F.linear(F.gelu(F.linear(t, w["mixed_linear1.weight"], w["mixed_linear1.bias"])),
                 w["mixed_linear2.weight"], w["mixed_linear2.bias"])
    return x + t.transpose(1, 2)


def _weights(q, k):
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)


def ref_differential(i, w, sz):
    x, h = i["x"], sz["H"]
    q1, k1, q2, k2, v = (_heads(x @ w[n], h) for n in ("W_q1", "W_k1", "W_q2", "W_k2", "W_v"))
    return _merge(0.5 * (_weights(q1, k1) - _weights(q2, k2)) @ v)


def ref_gated(i, w, sz):
    x, h = i["x"], sz["H"]
    q, k, v = (_heads(x @ w[n], h) for n in ("W_q", "W_k", "W_v"))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return _merge((scores.softmax(-1) * scores.sigmoid()) @ v) @ w["W_o"]


def ref_mha_bias(i, w, sz, bias="alibi"):
    """Multi-head attention with a float bias on the scores laid out along the keys: ALiBi
    slopes times the key position, a padding bias [B, S], or a learned key bias [H, S]."""
    import torch

    x, h, s = i["x"], sz["H"], sz["S"]
    q, k, v = (_heads(x @ w[n], h) for n in ("W_q", "W_k", "W_v"))
    if bias == "alibi":
        slopes = 2.0 ** (-8.0 * torch.arange(1, h + 1, dtype=x.dtype) / h)
        mask = (slopes[:, None] * torch.arange(s, dtype=x.dtype))[:, None, :]
    elif bias == "padding":
        mask = i["pad_bias"][:, None, None, :]
    else:
        mask = -w["key_bias"][:, None, :]
    return _merge(_sdpa(q, k, v, attn_mask=mask)) @ w["W_o"]


CAUSAL = {"causal": True}
CROSS_SINGLE = {"queries": "dec", "keys": "enc"}
REFERENCES = {
    "w301_split_heads_block_view": (ref_mha, {}),
    "w301_cross_keys_reshape": (ref_cross, {}),
    "w301_fused_qkv_view": (ref_mha_fused, {}),
    "w301_gqa_kv_view": (ref_gqa_kv, {}),
    "w301_rope_halves_view": (ref_rope, {}),
    "w301_transpose_then_reshape_heads": (ref_mha, CAUSAL),
    "w302_merge_reshape_without_transpose": (ref_mha, {}),
    "w302_merge_after_wrong_transpose": (ref_mha, CAUSAL),
    "w302_cross_merge_contiguous_view": (ref_cross, {}),
    "w302_gqa_merge_negative_transpose": (ref_gqa, {}),
    "w302_rope_merge_flatten": (ref_rope, {}),
    "w303_softmax_over_queries": (ref_mha, {}),
    "w303_softmax_over_heads": (ref_mha, CAUSAL),
    "w303_cross_softmax_over_targets": (ref_cross, {}),
    "w303_single_head_einsum_softmax": (ref_single_head, {}),
    "w304_layernorm_mean_over_tokens": (ref_layernorm, {}),
    "w304_layernorm_var_over_tokens": (ref_layernorm_unbiased, {}),
    "w304_rmsnorm_negative_axis": (ref_rmsnorm, {}),
    "w304_norm_stats_after_transpose": (ref_layernorm, {}),
    "w304_mixer_layernorm_after_transpose": (ref_mixer, {}),
    "w305_cross_attention_causal": (ref_cross, {}),
    "w305_single_head_cross_einsum": (ref_single_head, CROSS_SINGLE),
    "w305_perceiver_latents_causal": (ref_perceiver, {}),
    "w305_cross_rearrange_causal": (ref_cross, {}),
    "w306_scale_by_model_width": (ref_mha, {}),
    "w306_scale_by_heads": (ref_mha, CAUSAL),
    "w306_cross_scale_by_context_length": (ref_cross, {}),
    "w306_per_head_weights_scale_by_d": (ref_per_head, {}),
    "w307_axial_residual_not_transposed": (ref_axial, {}),
    "w307_differential_attention_transposed": (ref_differential, {}),
    "w307_gate_from_transposed_scores": (ref_gated, {}),
    "w307_weights_plus_transpose": (ref_single_head, {}),
    "w307_gqa_values_tiled": (ref_gqa, {}),
    "w308_alibi_along_queries": (ref_mha_bias, {}),
    "w308_padding_bias_on_queries": (ref_mha_bias, {"bias": "padding"}),
    "w308_key_bias_unsqueezed_last": (ref_mha_bias, {"bias": "key"}),
}


def _more_references():
    import importlib.util

    out = {}
    for name in ("refs_new_kinds", "refs_more", "refs_public"):
        spec = importlib.util.spec_from_file_location(f"provenance_{name}", CORPUS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out[name] = mod
    return out


_MORE = _more_references()
REFERENCES.update(_MORE["refs_new_kinds"].BUG_REFERENCES)
REFERENCES.update(_MORE["refs_more"].BUG_REFERENCES)


def test_every_bug_has_a_reference():
    assert sorted(REFERENCES) == sorted(p.stem for p in BUGS)


# clean specs whose weights follow the same names: their values are checked too
CLEAN_REFERENCES = {
    "mha_view_transpose_causal": (ref_mha, CAUSAL),
    "mha_reshape_permute": (ref_mha, {}),
    "mha_einsum": (ref_mha, {}),
    "mha_flatten_merge_softmax_3": (ref_mha, {}),
    "mha_negative_axes": (ref_mha, CAUSAL),
    "mha_transpose_2_1": (ref_mha, {}),
    "mha_movedim": (ref_mha, {}),
    "scale_written_as_expression": (ref_mha, {}),
    "scores_keys_first_einsum": (ref_mha, {}),
    "one_head_scale_by_model_width": (ref_mha, CAUSAL),
    "per_head_weights_einsum": (ref_per_head, {}),
    "differential_attention": (ref_differential, {}),
    "layernorm_stats_on_features_first": (ref_layernorm, {}),
    "rmsnorm_by_hand": (ref_rmsnorm, {"gamma": True}),
}


CORRECT_REFERENCES = {f"clean/{n}": r for n, r in CLEAN_REFERENCES.items()}
CORRECT_REFERENCES.update({f"lookalike/{n}": r for n, r in _MORE["refs_more"].LOOKALIKE_REFERENCES.items()})
CORRECT_REFERENCES.update({f"public/{n}": r for n, r in _MORE["refs_public"].PUBLIC_REFERENCES.items()})


def test_every_lookalike_and_public_spec_has_a_reference():
    assert {rel(p)[:-len(".shape")] for p in LOOKALIKE + PUBLIC} <= set(CORRECT_REFERENCES)
    assert all((CORPUS / f"{n}.shape").exists() for n in CORRECT_REFERENCES)


@pytest.mark.parametrize("name", sample(sorted(CORRECT_REFERENCES), every=3, always=(), ids=str))
def test_clean_spec_matches_pytorch(name):
    torch = pytest.importorskip("torch", reason="comparing values needs torch")
    from shapelang.codegen import runner

    path = CORPUS / f"{name}.shape"
    reference, options = CORRECT_REFERENCES[name]
    for sizes in generic_sizes(checked(path), runner):
        (got,), inputs, weights = run_specs([path], sizes)
        assert torch.allclose(got, reference(inputs, weights, sizes, **options), rtol=1e-6, atol=1e-8), \
            f"{path.name} differs from the PyTorch reference at {sizes}"


# ------------------------------------------------------------------ helps, applied

def _helped(bug: Path):
    """The bug with every proved help of its W3xx findings applied, one after another."""
    from shapelang.checker.advice import fixes

    text = bug.read_text()
    applied = 0
    for _ in range(4):
        spec = check(text, str(bug))
        d = next((d for d in spec.diagnostics if d.code.startswith("W3") and d.fix is not None), None)
        if d is None:
            break
        span, new_text, _shown = d.fix
        text = fixes.apply(text, span, new_text)[0]
        applied += 1
    return text, applied


HELPED = [b for b in BUGS if any(d.fix is not None for d in checked(b).diagnostics if d.code.startswith("W3"))]


def test_most_bugs_get_a_help_that_proposes_code():
    assert len(HELPED) >= len(BUGS) // 3, f"{len(HELPED)} of {len(BUGS)} bugs get a rewrite"


@pytest.mark.parametrize("bug", HELPED, ids=rel)
def test_a_help_applied_gives_the_intended_program(bug, tmp_path):
    """Every help the corpus shows, applied: the rewritten spec checks with no finding at all,
    and computes what the twin's PyTorch reference computes (the program the author meant)."""
    torch = pytest.importorskip("torch", reason="comparing values needs torch")
    from shapelang.codegen import runner

    text, applied = _helped(bug)
    assert applied >= 1
    fixed = tmp_path / bug.name
    fixed.write_text(text)
    spec = check(text, str(fixed))
    assert not [d for d in spec.diagnostics if d.code.startswith("W3") or d.severity == "error"], \
        render_check_text(spec)
    reference, options = REFERENCES[bug.stem]
    for sizes in generic_sizes(spec, runner):
        (got,), inputs, weights = run_specs([fixed], sizes)
        assert torch.allclose(got, reference(inputs, weights, sizes, **options), rtol=1e-6, atol=1e-8), \
            f"the help of {bug.name} gives other values than the intended program at {sizes}"


def render_check_text(spec) -> str:
    from shapelang import render_check

    return render_check(spec)
