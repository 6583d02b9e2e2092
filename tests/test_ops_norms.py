"""Channel norms: `groupnorm G` (C proved divisible by G, else the assumption that makes it
so) and `batchnorm` (eval mode: running statistics as buffers). Parameter counts are
torch's modules', and the generated module, given the reference's weights and running
statistics, computes what nn.GroupNorm and nn.BatchNorm1d/2d compute."""
from __future__ import annotations

import pytest
from op_cases import scripted

from shapelang import check, render_check
from shapelang.checker.ops import TABLE

torch = pytest.importorskip("torch")
nn = torch.nn

HEAD = ("dim B, C, L, H, W, G\nassume C % G == 0\nexample B=2, C=6, L=5, H=3, W=4, G=3\n"
        "input x: [B, C, L]\ninput img: [B, C, H, W]\ninput v: [B, C]\n")
SIZES = {"B": 2, "C": 6, "L": 5, "H": 3, "W": 4, "G": 3}


def _params(spec) -> list[int]:
    return [int(spec.example_value(sum((s.params for s in b.steps), 0) or 0)) for b in spec.bindings]


def test_parameter_counts_are_torchs():
    spec = check(HEAD + "a: x -> groupnorm G\nb: img -> groupnorm G affine=false\nc: x -> batchnorm\n"
                 "d: img -> batchnorm affine=false\ne: v -> batchnorm eps=1e-3\n")
    assert spec.ok, render_check(spec)
    refs = [nn.GroupNorm(3, 6), nn.GroupNorm(3, 6, affine=False), nn.BatchNorm1d(6),
            nn.BatchNorm2d(6, affine=False), nn.BatchNorm1d(6, eps=1e-3)]
    assert _params(spec) == [sum(p.numel() for p in r.parameters()) for r in refs]


def test_groups_that_may_not_divide_the_channels_suggest_the_assumption():
    spec = check(HEAD.replace("assume C % G == 0\n", "") + "a: x -> groupnorm G\n")
    [err] = spec.errors()
    assert err.code == "E104" and "each of the G groups would hold C/G channels" in err.message, render_check(spec)
    assert "assume C % G == 0" in err.help
    with pytest.raises(RuntimeError):
        torch.nn.functional.group_norm(torch.ones(2, 6, 5), 4)


@pytest.mark.parametrize("line, code", [
    ("a: x -> transpose 0 1 -> flatten 0 -> batchnorm", "E110"),     # a 1-d input
    ("a: x -> to int -> groupnorm G", "E120"),
    ("a: x -> batchnorm momentum=2", "E110"),
])
def test_refusals(line, code):
    spec = check(HEAD + line + "\n")
    assert [e.code for e in spec.errors()] == [code], render_check(spec)


@pytest.mark.parametrize("dtype", ["float", "float16", "bfloat16", "float64", "int"])
@pytest.mark.parametrize("line, ref", [
    ("a: img -> groupnorm G", lambda: nn.GroupNorm(3, 6)),
    ("a: img -> groupnorm G affine=false", lambda: nn.GroupNorm(3, 6, affine=False)),
    ("a: img -> batchnorm", lambda: nn.BatchNorm2d(6).eval()),
    ("a: v -> batchnorm", lambda: nn.BatchNorm1d(6).eval()),
])
def test_shapes_dtypes_and_refusals_are_torchs(line, ref, dtype):
    spec = check(HEAD + line.replace("a: img", f"a: img -> to {dtype}").replace("a: v", f"a: v -> to {dtype}") + "\n")
    inp = torch.randn(2, 6, 3, 4) if "img" in line else torch.randn(2, 6)
    inp = inp.to({"float": torch.float32, "int": torch.long}.get(dtype) or getattr(torch, dtype))
    try:
        want = ref()(inp)
    except (RuntimeError, NotImplementedError):
        assert [e.code for e in spec.errors()] == ["E120"], render_check(spec)
        return
    assert spec.ok, render_check(spec)
    t = spec.bindings[-1].types[0]
    assert tuple(int(spec.example_value(d)) for d in t.shape) == tuple(want.shape)
    assert t.dtype == {torch.float32: "float"}.get(want.dtype, str(want.dtype).removeprefix("torch."))


SPEC = HEAD + """\
a: x -> groupnorm G eps=1e-6
b: img -> batchnorm eps=1e-3 momentum=0.2
c: v -> batchnorm
"""


def test_generated_module_computes_what_torch_modules_compute(tmp_path):
    spec = check(SPEC)
    assert spec.ok, render_check(spec)
    from torch_shapes import module
    model, gen = module(spec, "norms", **SIZES)
    assert "nn.GroupNorm(cfg.G, cfg.C, eps=cfg.eps)" in gen.source
    assert "nn.BatchNorm2d(cfg.C, eps=cfg.eps_2, momentum=cfg.momentum)" in gen.source
    refs = [nn.GroupNorm(3, 6, eps=1e-6), nn.BatchNorm2d(6, eps=1e-3, momentum=0.2), nn.BatchNorm1d(6)]
    torch.manual_seed(0)
    with torch.no_grad():
        for ref in refs:
            for t in list(ref.parameters()) + [b for b in ref.buffers() if b.is_floating_point()]:
                t.copy_(torch.rand_like(t) + 0.5)
        want_state = {}
        for attr, ref in zip(("a", "b", "c"), refs):
            want_state.update({f"{attr}.{k}": v for k, v in ref.state_dict().items()})
    model.load_state_dict(want_state)
    x, img, v = torch.randn(2, 6, 5), torch.randn(2, 6, 3, 4), torch.randn(2, 6)
    got = model(x, img, v)
    for name, ref, inp in zip("abc", refs, (x, img, v)):
        torch.testing.assert_close(got[name], ref.eval()(inp), msg=name)
    script = scripted(gen, tmp_path, "norms")
    script.load_state_dict(want_state)
    torch.testing.assert_close(script(x, img, v)["b"], refs[1](img))


def test_every_new_operation_is_one_table_entry_with_flags():
    reductions = {n for n, d in TABLE.items() if d.reduces}
    assert {"std", "argmax", "logsumexp", "norm", "any", "median", "kthvalue"} <= reductions
    assert TABLE["swapaxes"].ir_name == TABLE["swapdims"].ir_name == "transpose"
