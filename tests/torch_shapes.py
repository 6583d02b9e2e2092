"""Helpers for tests that compare the checker's shapes with PyTorch's: the shape of a
binding at given sizes, and a spec's generated module built with its config."""
from __future__ import annotations

from shapelang import check, codegen
from shapelang.checker import dims as dimlib
from shapelang.codegen import runner


def shape_at(spec, name: str, sizes: dict) -> tuple:
    """The proved shape of binding `name`, evaluated at `sizes` (dim name -> int)."""
    env = spec.prover.user_env(sizes)
    assert env is not None, sizes
    for b in spec.bindings:
        if name in b.names:
            t = b.types[b.names.index(name)]
            return tuple(int(dimlib.evaluate(d, env)) for d in t.shape)
    raise KeyError(name)


def total_at(spec, **sizes) -> int:
    """The spec's parameter total at other sizes (Qwen2-1.5B from Qwen2-0.5B's spec)."""
    from shapelang.codegen import runner

    values = runner.resolve_sizes(spec, sizes)
    env = {spec.prover.user[n]: v for n, v in values.items()}
    return int(spec.total_params.subs(env))


def checked(text: str, path: str = "<test>"):
    spec = check(text, path)
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    return spec


def codes(text: str) -> list[str]:
    return [d.code for d in check(text).diagnostics]


def module(spec, tag: str, **sizes):
    """The generated top module of `spec`, built with the config sizes given."""
    gen = codegen.generate(spec)
    mod = runner.load_module(gen.source, f"generated_{tag}")
    config = getattr(mod, gen.config_class)
    fields = {py: sizes[n] for n, py in gen.fields if n in sizes}
    return getattr(mod, gen.top_class)(config(**fields)).eval(), gen


# Whole models at their published sizes (billions of parameters) are more than `run`
# builds; the tests that build every spec build these at reduced sizes instead.
REDUCED = {
    "llama2_7b": [{"V": 97, "D": 32, "H": 4, "G": 4, "F": 88, "L": 2, "B": 2, "S": 5},
                  {"V": 61, "D": 48, "H": 6, "G": 2, "F": 72, "L": 1, "B": 1, "S": 3}],
    "falcon_7b": [{"V": 53, "D": 32, "H": 4, "L": 2, "B": 2, "S": 5},
                  {"V": 40, "D": 48, "H": 3, "L": 1, "B": 1, "S": 3}],
    "perceiver": [{"C": 3, "Nb": 3, "Fmax": 6, "L": 2, "Nl": 8, "D": 32, "Hc": 1, "Hl": 4, "Dh": 8,
                   "K": 10, "Sp": 2, "B": 2, "Hi": 6, "Wi": 5},
                  {"C": 2, "Nb": 2, "Fmax": 10, "L": 3, "Nl": 5, "D": 24, "Hc": 2, "Hl": 3, "Dh": 6,
                   "K": 7, "Sp": 1, "B": 1, "Hi": 4, "Wi": 7}],
    "mixtral_8x7b": [{"V": 53, "D": 32, "H": 4, "G": 2, "F": 24, "E": 8, "K": 2, "L": 2, "B": 1, "S": 3},
                     {"V": 61, "D": 48, "H": 6, "G": 3, "F": 40, "E": 4, "K": 2, "L": 1, "B": 2, "S": 9}],
    "deepseek_v2_lite": [{"V": 97, "D": 32, "H": 4, "C": 16, "Dn": 8, "Dr": 8, "Dv": 12, "F": 40,
                          "Fm": 12, "E": 8, "Es": 2, "K": 3, "L": 3, "B": 2, "S": 7},
                         {"V": 61, "D": 24, "H": 2, "C": 12, "Dn": 6, "Dr": 16, "Dv": 6, "F": 20,
                          "Fm": 8, "E": 4, "Es": 1, "K": 2, "L": 2, "B": 1, "S": 5}],
    "mistral_7b": [{"V": 97, "D": 32, "H": 4, "G": 2, "F": 40, "L": 2, "W": 3, "B": 2, "S": 5},
                   {"V": 61, "D": 48, "H": 6, "G": 3, "F": 56, "L": 1, "W": 5, "B": 1, "S": 3}],
    "mistral_7b_step": [{"V": 97, "D": 32, "H": 4, "G": 2, "F": 40, "L": 2, "W": 3, "B": 2, "P": 2, "S": 2},
                        {"V": 61, "D": 48, "H": 6, "G": 3, "F": 56, "L": 1, "W": 5, "B": 1, "P": 0, "S": 3}],
    "qwen2_0_5b": [{"V": 97, "D": 48, "H": 6, "G": 2, "F": 40, "L": 2, "B": 2, "S": 5},
                   {"V": 61, "D": 56, "H": 14, "G": 2, "F": 24, "L": 1, "B": 1, "S": 3}],
    "gemma_2b": [{"V": 97, "D": 32, "H": 4, "G": 1, "Dh": 16, "F": 64, "L": 2, "B": 2, "S": 5},
                 {"V": 61, "D": 48, "H": 4, "G": 4, "Dh": 8, "F": 96, "L": 1, "B": 1, "S": 3}],
    "pythia_160m": [{"V": 97, "D": 64, "H": 4, "L": 2, "B": 2, "S": 5},
                    {"V": 61, "D": 48, "H": 2, "L": 1, "B": 1, "S": 3}],
    "bloom_560m": [{"V": 97, "D": 32, "H": 4, "L": 2, "B": 2, "S": 5},
                   {"V": 61, "D": 64, "H": 8, "L": 1, "B": 1, "S": 3}],
    "falcon_7b_step": [{"V": 53, "D": 32, "H": 4, "L": 2, "B": 2, "P": 3, "S": 2},
                       {"V": 40, "D": 48, "H": 3, "L": 1, "B": 1, "P": 0, "S": 3}],
    "llama2_7b_step": [{"V": 97, "D": 32, "H": 4, "G": 4, "F": 88, "L": 2, "B": 2, "P": 3, "S": 2},
                       {"V": 61, "D": 48, "H": 6, "G": 2, "F": 72, "L": 1, "B": 1, "P": 0, "S": 3}],
    "mixtral_8x7b_step": [{"V": 53, "D": 32, "H": 4, "G": 2, "F": 24, "E": 8, "K": 2, "L": 2, "B": 2, "P": 3,
                           "S": 2},
                          {"V": 61, "D": 48, "H": 6, "G": 3, "F": 40, "E": 4, "K": 2, "L": 1, "B": 1, "P": 0,
                           "S": 3}],
    "deepseek_v2_lite_step": [{"V": 97, "D": 32, "H": 4, "C": 16, "Dn": 8, "Dr": 8, "Dv": 12, "F": 40,
                               "Fm": 12, "E": 8, "Es": 2, "K": 3, "L": 3, "B": 2, "P": 3, "S": 2},
                              {"V": 61, "D": 24, "H": 2, "C": 12, "Dn": 6, "Dr": 16, "Dv": 6, "F": 20,
                               "Fm": 8, "E": 4, "Es": 1, "K": 2, "L": 2, "B": 1, "P": 0, "S": 5}],
    "swin_tiny": [{"Cin": 3, "Img": 32, "P": 2, "D": 8, "Nh": 2, "W": 2, "Sh": 1, "L1": 2, "L2": 2,
                   "L3": 2, "L4": 2, "K": 10, "B": 2},
                  {"Cin": 2, "Img": 48, "P": 2, "D": 6, "Nh": 1, "W": 3, "Sh": 1, "L1": 2, "L2": 2,
                   "L3": 4, "L4": 1, "K": 7, "B": 1}],
    "resnet50": [{"Cin": 3, "Img": 32, "D": 4, "L1": 2, "L2": 2, "L3": 3, "L4": 2, "K": 10, "B": 2},
                 {"Cin": 1, "Img": 64, "D": 2, "L1": 3, "L2": 2, "L3": 2, "L4": 3, "K": 7, "B": 1}],
}


def example_or_reduced(spec, stem: str) -> dict:
    """The spec's example sizes, or its first reduced sizes when it is a whole large model."""
    return runner.resolve_sizes(spec, REDUCED[stem][0] if stem in REDUCED else None)


def published_total(path) -> int:
    """The parameter total the checker computes for a model spec at its example sizes
    (the spec must check without a finding)."""
    from pathlib import Path

    spec = checked(Path(path).read_text(), str(path))
    assert [d.code for d in spec.diagnostics] == []
    return int(spec.example_value(spec.total_params))


def same_random_weights(pairs, seed: int = 0) -> None:
    """Fill each (generated, reference) pair of parameters with the same random values
    (norm weights around 1, so that they matter without blowing up)."""
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        for p, q in pairs:
            q.copy_(torch.randn_like(q) * 0.2 + (1.0 if q.dim() == 1 else 0.0))
            p.copy_(q)


def outputs_match(model, ref, ids, shape: tuple, tolerance: float = 1e-5):
    """The generated `model` and the reference `ref` on the same `ids`: outputs of `shape`,
    at most `tolerance` apart. Returns both outputs."""
    import torch

    with torch.no_grad():
        out, expected = model(ids), ref(ids)
    assert out.shape == shape, (tuple(out.shape), shape)
    diff = (out - expected).abs().max().item()
    print(f"max difference {diff:.2e}")
    assert diff <= tolerance, diff
    return out, expected


def renamed(name: str, rules) -> str:
    """A reference model's parameter name as the spec's module names it: `rules` are
    (regex, replacement) pairs applied in order."""
    import re

    for pattern, repl in rules:
        name = re.sub(pattern, repl, name)
    return name


def import_file(path, name: str):
    """Import a module from a file (torch.jit.script reads the source of what it compiles)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def formatted_module(gen, path, name: str):
    """Write the generated source to `path`, require `ruff format --check` to pass on it (skip
    without ruff) and import it from the file."""
    import shutil
    import subprocess

    import pytest

    path.write_text(gen.source)
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    done = subprocess.run([ruff, "format", "--isolated", "--check", "--diff", str(path)],
                          check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return import_file(path, name)
