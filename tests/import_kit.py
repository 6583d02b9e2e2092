"""Shared by the `shapelang import` tests: the round trip done by hand with the public API.

`round_trip` imports a module, checks the spec clean (no warning either), generates its
module, copies the original's weights by the mapping the importer wrote, and compares
the outputs (to 1e-5) and the parameter totals (the checker's, the generated module's and
the original's), independently of the importer's own verification.
"""
from __future__ import annotations

import json

import torch

from shapelang import api
from shapelang.codegen import runner
from shapelang.importer import copy_weights, import_module


def round_trip(tmp_path, module, inputs, make, *, call_kwargs=None, sizes_list=((2, 8), (3, 5)), dims=None):
    """Import, check, codegen, copy weights by the mapping, compare. Returns the spec text."""
    module.eval()
    imported = import_module(module, inputs, call_kwargs=call_kwargs, dims=dims)
    path = tmp_path / "imported.shape"
    path.write_text(imported.text)
    (tmp_path / "imported.weights.json").write_text(json.dumps(imported.mapping))
    spec = api.check_file(str(path))
    assert spec.ok and not spec.diagnostics, api.render_check(spec)
    assert "total parameters" in api.trace(spec)
    gen = api.codegen(spec)
    example = dict(spec.example)
    _mod, model = runner.build(gen, example)
    mapping = json.loads((tmp_path / "imported.weights.json").read_text())
    pairs = copy_weights(model, module, mapping)
    assert set(pairs) >= {n for n, _ in model.named_parameters()}
    # the parameter totals: the checker's count, the generated module's and the original's
    original = sum(p.numel() for p in module.parameters())
    assert runner.value_at(spec.total_params, spec, example) == original
    assert sum(p.numel() for p in model.parameters()) == original
    for k, sizes in enumerate(sizes_list):
        args = make(*sizes, seed=k)
        with torch.no_grad():
            want = module(*args, **(call_kwargs or {}))
            got = model(*args)
        want = want[0] if isinstance(want, tuple) else want
        got = next(iter(got.values())) if isinstance(got, dict) else got
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    return imported.text


def floats(shape_of):
    """Random float inputs, one per shape that `shape_of(b, s)` gives."""
    def make(b, s, seed=0):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(shape, generator=g) for shape in shape_of(b, s)]
    return make


def ids(vocab: int):
    """Random token ids [b, s] below `vocab`."""
    def make(b, s, seed=0):
        return [torch.randint(0, vocab, (b, s), generator=torch.Generator().manual_seed(seed))]
    return make
