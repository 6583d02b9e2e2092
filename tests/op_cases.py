"""Helpers for the tests that hold an operation against PyTorch: the checker's verdict, shape
and dtype for an input of each dtype compared with what torch does with a tensor of that
dtype at the example sizes, and a spec's generated module run against torch expressions."""
from __future__ import annotations

import pytest
from torch_shapes import module, shape_at

from shapelang import check, render_check

torch = pytest.importorskip("torch")

DTYPES = {"float": torch.float32, "int": torch.int64, "bool": torch.bool, "float16": torch.float16}
KIND = {v: k for k, v in DTYPES.items()}
KIND[torch.float64] = "float64"
KIND[torch.int32] = "int32"
SIZES = {"B": 2, "S": 5, "D": 6, "G": 3}


def head(dtype: str, sizes=None) -> str:
    sizes = sizes or SIZES
    return ("dim B, S, D, G\nassume D % 2 == 0\nassume D % G == 0\nassume S >= 3\n"
            f"example {', '.join(f'{k}={v}' for k, v in sizes.items())}\n"
            f"input x: [B, S, D] {dtype}\ninput y: [B, 1, D] {dtype}\ninput m: [B, S, 1] bool\n")


def tensors(dtype: str, sizes=None, seed: int = 0) -> dict:
    s = sizes or SIZES
    g = torch.Generator().manual_seed(seed)
    shape, small = (s["B"], s["S"], s["D"]), (s["B"], 1, s["D"])

    def make(shape):
        if dtype == "bool":
            return torch.rand(shape, generator=g) > 0.5
        if dtype == "int":
            return torch.randint(-4, 5, shape, generator=g)
        return torch.randn(shape, generator=g).to(DTYPES[dtype])
    return {"x": make(shape), "y": make(small), "m": torch.rand(s["B"], s["S"], 1, generator=g) > 0.5}


def first(value):
    return value[0] if isinstance(value, (tuple, list)) or hasattr(value, "indices") else value


def against_torch(line: str, fn, dtype: str, sizes=None) -> None:
    """`y: x -> ...` checks exactly when torch computes fn(x, y, m) for inputs of `dtype`, and
    then with torch's shape and dtype (of every output)."""
    spec = check(head(dtype, sizes) + line + "\n")
    ins = tensors(dtype, sizes)
    try:
        want = fn(**ins)
    except (RuntimeError, NotImplementedError, TypeError) as err:
        assert not spec.ok, f"{line} on {dtype}: torch refuses ({err}), the checker accepts"
        assert spec.errors()[0].code in ("E120", "E110", "E104", "E112"), render_check(spec)
        return
    assert spec.ok, f"{line} on {dtype}: torch gives {want}, the checker refuses:\n{render_check(spec)}"
    names = line.split(":")[0].replace(" ", "").split(",")
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    b = spec.bindings[-1]
    for name, w, t in zip(names, wants, b.types):
        assert shape_at(spec, name, sizes or SIZES) == tuple(w.shape), (line, dtype, name)
        assert t.dtype == KIND[w.dtype], (line, dtype, name, t.dtype, w.dtype)


def run_module(text: str, tag: str, reference: dict, inputs: dict, atol=1e-5):
    """The generated module of `text` computes the torch `reference` values (same dtype)."""
    spec = check(text)
    assert spec.ok, render_check(spec)
    model, gen = module(spec, tag, **{k: v for k, v in SIZES.items()})
    got = model(*inputs.values())
    for name, want in reference.items():
        assert got[name].dtype == want.dtype, name
        torch.testing.assert_close(got[name], want, rtol=1e-5, atol=atol, equal_nan=True, msg=name)
    return model, gen


def scripted(gen, tmp_path, tag: str):
    """The generated module written to a file (`ruff format` clean), built and TorchScript-compiled."""
    from torch_shapes import formatted_module
    mod = formatted_module(gen, tmp_path / f"{tag}.py", f"scripted_{tag}")
    cfg = getattr(mod, gen.config_class)(**{py: SIZES[n] for n, py in gen.fields if n in SIZES})
    return torch.jit.script(getattr(mod, gen.top_class)(cfg).eval())
