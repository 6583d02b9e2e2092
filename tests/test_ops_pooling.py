"""Pooling and resizing against PyTorch: max/avg pools (1d, 2d, with padding, dilation and
ceil_mode), the adaptive pools and `interpolate` (nearest, bilinear, by size or by
scale_factor). The checker's shape, evaluated at random sizes, is torch's output shape;
where torch refuses (a window larger than the padded input, a padding over half the
kernel, a dtype without a kernel) the checker refuses too; the generated module computes
what torch.nn.functional computes."""
from __future__ import annotations

import pytest
import tiers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_shapes import module, shape_at

from shapelang import check, render_check
from shapelang.checker.ops import TABLE, pooling

torch = pytest.importorskip("torch")
F = torch.nn.functional
HYP = settings(max_examples=tiers.examples(300), deadline=None, suppress_health_check=list(HealthCheck))

DTYPES = {"bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16,
          "int32": torch.int32, "int": torch.long, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float": torch.float32, "float64": torch.float64}


def _written(values) -> str:
    return str(values[0]) if len(set(values)) == 1 else "[" + ", ".join(map(str, values)) + "]"


@st.composite
def window_pools(draw):
    """A window pool and its keywords as shapelang writes them and as F takes them."""
    kind = draw(st.sampled_from(["max", "avg"]))
    n = draw(st.sampled_from([1, 2]))
    kernel = [draw(st.integers(1, 5)) for _ in range(n)]
    stride = [draw(st.integers(1, 4)) for _ in range(n)] if draw(st.booleans()) else None
    padding = [draw(st.integers(0, 3)) for _ in range(n)] if draw(st.booleans()) else None
    dilation = [draw(st.integers(1, 3)) for _ in range(n)] if kind == "max" and draw(st.booleans()) else None
    ceil_mode = draw(st.booleans())
    op, kw = f"{kind}_pool{n}d {_written(kernel)}", {}
    for name, v in (("stride", stride), ("padding", padding), ("dilation", dilation)):
        if v is not None:
            op += f" {name}={_written(v)}"
            kw[name] = tuple(v)
    if ceil_mode:
        op += " ceil_mode=true"
        kw["ceil_mode"] = True
    call = getattr(F, f"{kind}_pool{n}d")
    return op, n, (lambda x: call(x, tuple(kernel), **kw)), kernel, stride or kernel, padding or [0] * n, \
        dilation or [1] * n


def _torch_shape(fn, shape):
    try:
        return tuple(fn(torch.randn(shape)).shape)
    except (RuntimeError, ValueError):
        return None


@given(window_pools(), st.lists(st.integers(1, 12), min_size=2, max_size=2), st.booleans())
@HYP
def test_window_pools_at_fixed_sizes_are_torchs_or_refused_as_torch_refuses(pool, sizes, batched):
    op, n, fn, *_ = pool
    shape = ([2] if batched else []) + [3] + sizes[:n]
    spec = check(f"input x: {shape}\ny: x -> {op}\n")
    want = _torch_shape(fn, shape)
    if want is None:
        assert [d.code for d in spec.errors()] in (["E105"], ["E110"]), (op, shape, render_check(spec))
        return
    if not spec.ok:   # ceil_mode where the last window may start in the padding: not modelled
        [err] = spec.errors()
        assert err.code == "E110" and "ceil_mode" in err.message, (op, shape, render_check(spec))
        return
    assert shape_at(spec, "y", {}) == want, op


@given(window_pools(), st.lists(st.integers(0, 40), min_size=4, max_size=4))
@HYP
def test_window_pools_for_all_sizes_are_torchs_at_every_size(pool, extra):
    """The symbolic size, proved once for every length the assumptions allow, is torch's at each."""
    op, n, fn, kernel, stride, padding, dilation = pool
    if any(2 * p > k for p, k in zip(padding, kernel)):
        return   # refused at every size (the test above)
    names = ["L"] if n == 1 else ["H", "W"]
    least = [max(1, d * (k - 1) + 1 - 2 * p) for k, p, d in zip(kernel, padding, dilation)]
    head = f"dim B, C, {', '.join(names)}\n" + "".join(f"assume {m} >= {lo}\n" for m, lo in zip(names, least))
    spec = check(head + f"input x: [B, C, {', '.join(names)}]\ny: x -> {op}\n")
    if not spec.ok:
        [err] = spec.errors()
        assert err.code == "E110" and "ceil_mode" in err.message, render_check(spec)
        assert any(p + s > d * (k - 1) + 1 for k, s, p, d in zip(kernel, stride, padding, dilation))
        return
    for k in range(2):
        sizes = {m: lo + e for m, lo, e in zip(names, least, extra[2 * k:])}
        shape = [2, 3] + list(sizes.values())
        assert shape_at(spec, "y", {"B": 2, "C": 3, **sizes}) == _torch_shape(fn, shape), (op, sizes)


@given(st.sampled_from(["avg", "max"]), st.sampled_from([1, 2]), st.lists(st.integers(1, 9), min_size=4,
                                                                           max_size=4))
@HYP
def test_adaptive_pools_give_the_size_asked_for(kind, n, sizes):
    out, inp = sizes[:n], sizes[2:2 + n]
    spec = check(f"dim B, C, {', '.join('I' + str(k) for k in range(n))}\n"
                 f"input x: [B, C, {', '.join('I' + str(k) for k in range(n))}]\n"
                 f"y: x -> adaptive_{kind}_pool{n}d {_written(out)}\n")
    assert spec.ok, render_check(spec)
    got = getattr(F, f"adaptive_{kind}_pool{n}d")(torch.randn([2, 3] + inp), tuple(out))
    assert shape_at(spec, "y", {"B": 2, "C": 3, **{f"I{k}": v for k, v in enumerate(inp)}}) == tuple(got.shape)


@st.composite
def resizes(draw):
    n = draw(st.sampled_from([1, 2]))
    mode = "nearest" if n == 1 else draw(st.sampled_from(["nearest", "bilinear"]))
    if draw(st.booleans()):
        size = [draw(st.integers(1, 9)) for _ in range(n)]
        return n, f"interpolate size={_written(size)}", {"size": tuple(size)}, mode
    factors = [draw(st.sampled_from(["0.25", "0.5", "0.75", "1", "1.25", "1.5", "2", "3"])) for _ in range(n)]
    return n, f"interpolate scale_factor={_written(factors)}", \
        {"scale_factor": tuple(float(f) for f in factors)}, mode


@given(resizes(), st.lists(st.integers(1, 50), min_size=2, max_size=2))
@HYP
def test_interpolate_sizes_are_torchs_for_all_sizes(resize, sizes):
    n, op, kw, mode = resize
    names = ["L"] if n == 1 else ["H", "W"]
    op += f' mode="{mode}"' if mode != "nearest" else ""
    spec = check(f"dim B, C, {', '.join(names)}\ninput x: [B, C, {', '.join(names)}]\ny: x -> {op}\n")
    shape = [2, 3] + sizes[:n]
    want = _torch_shape(lambda x: F.interpolate(x, mode=mode, **kw), shape)
    if not spec.ok:   # a factor below 1 rounds a small size down to 0: torch refuses that size only
        assert [d.code for d in spec.errors()] == ["E105"], render_check(spec)
        assert any(float(f) < 1 for f in kw.get("scale_factor", ()))
        return
    assert want is not None
    assert shape_at(spec, "y", {"B": 2, "C": 3, **dict(zip(names, sizes))}) == want, op


@pytest.mark.parametrize("line, code, call", [
    ("y: x -> max_pool1d 3 padding=2", "E105", lambda: F.max_pool1d(torch.randn(1, 2, 9), 3, padding=2)),
    ("y: x -> avg_pool1d 20", "E105", lambda: F.avg_pool1d(torch.randn(1, 2, 9), 20)),
    ("y: img -> max_pool1d 2", "E110", lambda: F.max_pool1d(torch.randn(1, 2, 3, 4), 2)),
    ('y: x -> interpolate scale_factor=2 mode="bilinear"', "E110",
     lambda: F.interpolate(torch.randn(1, 2, 9), scale_factor=2, mode="bilinear")),
    ("y: img -> interpolate size=[3, 3] align_corners=true", "E110",
     lambda: F.interpolate(torch.randn(1, 2, 3, 4), size=(3, 3), align_corners=True)),
    ("y: img -> interpolate size=[3, 3] scale_factor=2", "E110",
     lambda: F.interpolate(torch.randn(1, 2, 3, 4), size=(3, 3), scale_factor=2.0)),
    ("y: img -> interpolate", "E110", lambda: F.interpolate(torch.randn(1, 2, 3, 4))),
    ("y: v -> interpolate scale_factor=0.29", "E110", None),
    ("y: x -> interpolate scale_factor=0.1", "E105", lambda: F.interpolate(torch.randn(1, 2, 9), scale_factor=0.1)),
])
def test_refusals_are_torchs(line, code, call):
    spec = check("dim L\ninput x: [1, 2, 9]\ninput img: [1, 2, 3, 4]\ninput v: [1, 2, L]\n" + line + "\n")
    assert [d.code for d in spec.errors()] == [code], render_check(spec)
    if call is not None:
        with pytest.raises((RuntimeError, ValueError)):
            call()


def test_a_factor_that_floating_point_rounds_gives_torchs_size_at_a_written_size():
    """Why `scale_factor=0.29` is refused for a size that varies: torch's size is not the exact
    floor at 100; at a size written as a number the checker computes torch's."""
    assert F.interpolate(torch.randn(1, 1, 100), scale_factor=0.29).shape[-1] == 28 != 100 * 29 // 100
    for length in (100, 7, 57):
        for factor in ("0.29", "0.3", "1.1", "2.7"):
            spec = check(f"input x: [1, 1, {length}]\ny: x -> interpolate scale_factor={factor}\n")
            want = F.interpolate(torch.randn(1, 1, length), scale_factor=float(factor)).shape
            assert spec.ok and shape_at(spec, "y", {}) == tuple(want), render_check(spec)


CALLS = {"max_pool1d": lambda x: F.max_pool1d(x, 2), "max_pool2d": lambda x: F.max_pool2d(x, 2),
         "avg_pool1d": lambda x: F.avg_pool1d(x, 2), "avg_pool2d": lambda x: F.avg_pool2d(x, 2),
         "adaptive_avg_pool1d": lambda x: F.adaptive_avg_pool1d(x, 2),
         "adaptive_avg_pool2d": lambda x: F.adaptive_avg_pool2d(x, 2),
         "adaptive_max_pool1d": lambda x: F.adaptive_max_pool1d(x, 2),
         "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x, 2),
         "interpolate": lambda x: F.interpolate(x, scale_factor=2)}


def test_every_pooling_entry_is_in_the_dtype_matrix():
    assert set(CALLS) == {d.name for d in pooling.ENTRIES} and all(TABLE[n].family == "pooling" for n in CALLS)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CALLS))
def test_dtypes_are_torchs(name, dtype):
    n = 1 if name.endswith("1d") else 2
    shape = [2, 3, 4] if n == 1 else [2, 3, 4, 4]
    arg = "2" if name != "interpolate" else "scale_factor=2"
    spec = check(f"input x: {shape} {dtype}\ny: x -> {name} {arg}\n")
    try:
        want = CALLS[name]((torch.randn(shape) * 3).to(DTYPES[dtype])).dtype
    except (RuntimeError, NotImplementedError):
        assert [d.code for d in spec.errors()] == ["E120"], render_check(spec)
        return
    assert spec.ok, render_check(spec)
    assert DTYPES[spec.bindings[-1].types[0].dtype] == want


SPEC = """\
dim B, C, H, W
assume H % 4 == 0
assume W % 4 == 0
example B=2, C=3, H=8, W=12
input img: [B, C, H, W]
a: img -> max_pool2d 3 stride=2 padding=1
b: img -> avg_pool2d [2, 3] stride=[2, 1] padding=[1, 1] count_include_pad=false ceil_mode=true
c: img -> adaptive_avg_pool2d [3, 5]
d: img -> adaptive_max_pool2d 1 -> flatten 1
e: img -> interpolate scale_factor=[2, 0.5] mode="bilinear" align_corners=true
f: img -> interpolate size=[5, 7]
g: img -> flatten 2 -> max_pool1d 3 dilation=2 -> avg_pool1d 2 -> adaptive_max_pool1d 4
"""


def test_generated_module_computes_what_functional_computes():
    spec = check(SPEC)
    assert spec.ok, render_check(spec)
    model, _gen = module(spec, "pooling", B=2, C=3, H=8, W=12)
    img = torch.randn(2, 3, 8, 12)
    got = model(img)
    want = {
        "a": F.max_pool2d(img, 3, stride=2, padding=1),
        "b": F.avg_pool2d(img, (2, 3), stride=(2, 1), padding=(1, 1), count_include_pad=False, ceil_mode=True),
        "c": F.adaptive_avg_pool2d(img, (3, 5)),
        "d": F.adaptive_max_pool2d(img, 1).flatten(1),
        "e": F.interpolate(img, scale_factor=(2.0, 0.5), mode="bilinear", align_corners=True),
        "f": F.interpolate(img, size=(5, 7)),
        "g": F.adaptive_max_pool1d(F.avg_pool1d(F.max_pool1d(img.flatten(2), 3, dilation=2), 2), 4),
    }
    for name, w in want.items():
        torch.testing.assert_close(got[name], w, msg=name)
        assert got[name].shape == shape_at(spec, name, {"B": 2, "C": 3, "H": 8, "W": 12})
