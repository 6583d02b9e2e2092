"""Position grids computed in the spec: `meshgrid` (torch.meshgrid, indexing="ij"),
`stack_tensors` (torch.stack along a new axis; `stack N Block` repeats a block), the
constant `pi` in scalars, einops' `(...)` on the right of a rearrange (the pixels of
an image flattened to tokens, `b ... d -> b (...) d`) and einops' `repeat` (latents
repeated over the batch, `n d -> b n d`). The checker's shapes and dtypes are PyTorch's at several
sizes, the generated module computes what a hand-written torch reference computes, and
what PyTorch refuses is refused."""
from __future__ import annotations

import math

import pytest
from torch_shapes import checked, codes, module, shape_at

from shapelang import check, trace

torch = pytest.importorskip("torch")

GRIDS = """\
dim B, H, W, T
example {example}
input x: [B, H, W, 2]
ys: linspace(-1.0, 1.0, H)
xs: linspace(-1.0, 1.0, W)
gy, gx: meshgrid(ys, xs)
pos: stack_tensors(-1, gy, gx)
first: stack_tensors(0, gy, gx, gy)
mid: gy -> stack_tensors 1 gx
g3a, g3b, g3c: arange(H) -> meshgrid arange(W) arange(T)
ints: stack_tensors(-1, g3a, g3b, g3c)
lone: meshgrid(xs)
mixed: stack_tensors(0, arange(W), xs)
flat: gy -> reshape [H*W]
scaled: x * pos * pi
waves: (pos -> unsqueeze -1) * linspace(1.0, 5.0, T) * pi -> sin
turn: x -> scale 2*pi
tok: x -> rearrange "b ... d -> b (...) d"
tok2: x -> rearrange "b ... d -> (d ...) b"
rep: pos -> repeat "h w c -> b h w c" b=B
rep2: pos -> repeat "... -> t ..." t=T
rep3: gy -> repeat "h w -> (h t) 1 w" t=T
rep4: xs -> repeat "w -> w (t r)" t=T, r=2
"""


def reference(x, H, W, T, **_):
    ys, xs = torch.linspace(-1.0, 1.0, H), torch.linspace(-1.0, 1.0, W)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    pos = torch.stack([gy, gx], dim=-1)
    g3 = torch.meshgrid(torch.arange(H), torch.arange(W), torch.arange(T), indexing="ij")
    return {
        "gy": gy, "gx": gx, "pos": pos, "first": torch.stack([gy, gx, gy], dim=0),
        "mid": torch.stack([gy, gx], dim=1), "g3a": g3[0], "g3b": g3[1], "g3c": g3[2],
        "ints": torch.stack(g3, dim=-1), "lone": torch.meshgrid(xs, indexing="ij")[0],
        "mixed": torch.stack([torch.arange(W), xs], dim=0), "flat": gy.reshape(H * W),
        "scaled": x * pos * math.pi,
        "waves": (pos.unsqueeze(-1) * torch.linspace(1.0, 5.0, T) * math.pi).sin(),
        "turn": x * (2 * math.pi),
        "tok": x.reshape(x.shape[0], H * W, 2),           # einops: "b ... d -> b (...) d"
        "tok2": x.permute(3, 1, 2, 0).reshape(2 * H * W, x.shape[0]),
        "rep": pos.unsqueeze(0).repeat(x.shape[0], 1, 1, 1), "rep2": pos.unsqueeze(0).repeat(T, 1, 1, 1),
        "rep3": gy.repeat_interleave(T, dim=0).unsqueeze(1), "rep4": xs.unsqueeze(1).repeat(1, 2 * T),
    }


SIZES = [{"B": 2, "H": 3, "W": 4, "T": 2}, {"B": 1, "H": 1, "W": 5, "T": 3}, {"B": 3, "H": 6, "W": 1, "T": 1}]
KIND = {torch.bool: "bool", torch.long: "int", torch.float32: "float"}


def _example(sizes) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


@pytest.mark.parametrize("sizes", SIZES, ids=_example)
def test_shapes_and_dtypes_are_pytorchs(sizes):
    spec = checked(GRIDS.format(example=_example(sizes)))
    assert spec.diagnostics == []
    x = torch.randn(sizes["B"], sizes["H"], sizes["W"], 2)
    types = {n: t for b in spec.bindings for n, t in zip(b.names, b.types)}
    for name, value in reference(x, **sizes).items():
        assert shape_at(spec, name, sizes) == tuple(value.shape), name
        assert types[name].dtype == KIND[value.dtype], name


@pytest.mark.parametrize("sizes", SIZES, ids=_example)
def test_generated_module_computes_the_grids(sizes):
    spec = checked(GRIDS.format(example=_example(SIZES[0])))
    model, gen = module(spec, "grids", **sizes)
    assert 'torch.meshgrid(ys, xs, indexing="ij")' in gen.source
    assert "torch.stack([gy, gx], dim=-1)" in gen.source and "math.pi" in gen.source
    x = torch.randn(sizes["B"], sizes["H"], sizes["W"], 2)
    got = model(x)
    want = reference(x, **sizes)
    assert set(got) <= set(want) and {"first", "mid", "ints", "lone", "scaled", "waves", "rep"} <= set(got)
    for name, value in got.items():
        assert value.dtype == want[name].dtype, name
        torch.testing.assert_close(value, want[name], msg=name)


def test_a_meshgrid_is_a_view_a_later_view_must_copy():
    """torch.meshgrid gives expanded views (stride 0 along the other axes), so flattening
    one needs a copy: the checker says so, and `reshape` copies."""
    text = "dim H, W\nexample H=3, W=4\nys: arange(H)\nxs: arange(W)\ngy, gx: meshgrid(ys, xs)\n"
    assert codes(text + "f: gy -> view [H*W]\n") == ["E106"]
    with pytest.raises(RuntimeError):
        torch.meshgrid(torch.arange(3), torch.arange(4), indexing="ij")[0].view(12)
    assert codes(text + "f: gy -> reshape [H*W]\n") == []


def test_pi_is_shown_as_pi_and_a_dim_named_pi_wins():
    spec = checked("dim S\nexample S=3\ninput x: [S]\ny: x * pi\n")
    assert "x * pi" in trace(spec)
    spec = checked("dim S, pi\nexample S=3, pi=2\ninput x: [S, pi]\ny: x -> view [S*pi]\n")
    assert shape_at(spec, "y", {"S": 3, "pi": 2}) == (6,)


ERRORS = [
    # (line, code, PyTorch doing the same, or None)
    ("gy, gx: meshgrid(m, v)", "E110",
     lambda: torch.meshgrid(torch.ones(3, 4), torch.ones(4), indexing="ij")),
    ("gy, gx: meshgrid(arange(S), v)", "E120",
     lambda: torch.meshgrid(torch.arange(3), torch.ones(4), indexing="ij")),
    ("g: meshgrid(v, v)", "E110", None),                     # two tensors, one name
    ("y: v + meshgrid(v, v)", "E110", None),                  # several tensors inside an expression
    ("s: stack_tensors(0, v, arange(0.0, S))", "E102",
     lambda: torch.stack([torch.ones(4), torch.arange(0.0, 3)])),
    ("s: stack_tensors(2, v, v)", "E105", lambda: torch.stack([torch.ones(4), torch.ones(4)], dim=2)),
    ("s: stack_tensors(-3, v, v)", "E105", lambda: torch.stack([torch.ones(4), torch.ones(4)], dim=-3)),
    ("s: stack_tensors(0, m, v)", "E110", lambda: torch.stack([torch.ones(3, 4), torch.ones(4)])),
    ("s: v -> stack_tensors", "E110", None),
    ("dim Q = pi", "E005", None),
    ('s: m -> rearrange "(...) d -> d (...)"', "E110", None),      # einops refuses it too
    ('s: m -> rearrange "s d -> (...) s d"', "E110", None),
    ('s: m -> repeat "s d -> b s d"', "E110", None),                # the new axis has no size
    ('s: m -> repeat "s d -> s" d=D', "E110", None),                 # repeat keeps every axis
    ('s: m -> repeat "s d -> b s d" b=S -> view [S*S, D]', "E106",   # an expanded view, as einops'
     lambda: torch.ones(3, 4).unsqueeze(0).expand(3, -1, -1).view(9, 4)),
    ("s: v -> view [pi]", "E005", None),
]


@pytest.mark.parametrize("line, code, torch_call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(line, code, torch_call):
    text = f"dim S, D\nexample S=3, D=4\ninput m: [S, D]\ninput v: [D]\n{line}\n"
    assert codes(text) == [code], check(text).diagnostics
    if torch_call is not None:
        with pytest.raises((RuntimeError, IndexError)):
            torch_call()


HABITS = [
    # PyTorch's spelling -> the shapelang line the help proposes (re-checked before shown)
    ('gy, gx: torch.meshgrid(ys, xs, indexing="ij")', "gy, gx: meshgrid(ys, xs)"),
    ("gy, gx: torch.meshgrid([ys, xs])", "gy, gx: meshgrid(ys, xs)"),
    ("pos: torch.stack([ys, ys], dim=-1)", "pos: stack_tensors(-1, ys, ys)"),
    ("pos: torch.stack((ys, ys))", "pos: stack_tensors(0, ys, ys)"),
    ("t: ys * math.pi", "t: ys * pi"),
    ("t: ys * (2 * torch.pi)", "t: ys * (2 * pi)"),
]


@pytest.mark.parametrize("line, fixed", HABITS, ids=[h[0] for h in HABITS])
def test_pytorch_spellings_are_answered_with_the_shapelang_line(line, fixed):
    head = "dim H, W\nexample H=3, W=4\nys: linspace(-1.0, 1.0, H)\nxs: linspace(-1.0, 1.0, W)\n"
    [d] = check(head + line + "\n").diagnostics
    assert d.code == "E001" and f"write it as `{fixed}`" in d.help, d
    assert check(head + fixed + "\n").diagnostics == []


def test_indexing_xy_is_not_rewritten_and_stack_as_a_call_points_at_stack_tensors():
    head = "dim H, W\nexample H=3, W=4\nys: linspace(-1.0, 1.0, H)\n"
    [d] = check(head + 'g: torch.meshgrid(ys, ys, indexing="xy")\n').diagnostics
    assert d.code == "E001" and "meshgrid(ys, ys)" not in (d.help or "")
    [d] = check(head + "p: stack(-1, ys, ys)\n").diagnostics
    assert d.code == "E002" and "stack_tensors(-1, A, B)" in d.help


def test_grading_sees_the_ellipsis_group_as_the_same_values():
    """The grader's probe values follow `(...)`: flattening the pixels with
    `b ... d -> b (...) d` holds the numbers of `b h w d -> b (h w) d`, and a different
    order of the merged axes does not."""
    from shapelang.teaching.probe import Probe, Val

    spec = checked('dim B, H, W, D\nexample B=2, H=3, W=4, D=5\ninput x: [B, H, W, D]\n'
                   'a: x -> rearrange "b ... d -> b (...) d"\nb: x -> rearrange "b h w d -> b (h w) d"\n'
                   'c: x -> rearrange "b h w d -> b (w h) d"\n')
    probe = Probe(spec.prover)
    [decl] = spec.decls
    x = Val.base(("tensor", "x"), probe.shape(decl.type.shape))

    def value(k):
        b = spec.bindings[k]
        return probe.binding(b.steps, {"x": x}, 0)[b.results[0]].key

    assert value(0) == value(1) != value(2)


def test_provenance_follows_the_grid_ops():
    """Every step has a known provenance, and a regrouping that mixes a repeated batch
    with the features is still found (W301) after `repeat`."""
    spec = checked(GRIDS.format(example=_example(SIZES[0])))
    assert all(s.provenance is not None for b in spec.bindings for s in b.steps)
    text = ("dim B, N, D\nexample B=2, N=3, D=4\nparam lat: [N, D]\n"
            'x: lat -> repeat "n d -> b n d" b=B -> reshape [B, D, N]\n')
    assert "W301" in codes(text)
