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
