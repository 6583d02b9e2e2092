"""False errors, each a regression test checked against PyTorch where it can compute the
shape. Issue 12: a parenthesised argument after a name argument, a mask that broadcasts the
input, and dims bound at block calls (trace and `run`). Found while writing whole models
(Mistral, Pythia, BLOOM): sizes with `min`/`max` in them (a sliding-window cache); and a
missed error, an ALiBi bias laid out along the queries, which softmax cancels (W308). Found
while writing Qwen2's grouped-query attention: a missed error, keys repeated per group and
values tiled, whose heads do not pair up (W307). Found while writing Swin-T: window labels
built from one vector cut into windows (a false W302), assumptions about dims bound at block
calls (a false W201 and E113), sizes computed in blocks printed as `2*2*D`, and a window side
generated as `math.sqrt(N)`."""
from __future__ import annotations

import warnings

import pytest

from shapelang import check, render_check, to_json, trace
from shapelang.codegen import runner
from shapelang.codegen.generator import generate as codegen_generate
from shapelang.fmt import format_text

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")


# ------------------------------------------------------------------ `slice 1 H (H + 1)`

@pytest.mark.parametrize("op, index", [
    ("slice 1 H (H + 1)", lambda t, h: t[:, h:h + 1]),
    ("slice 1 (H - 1) H", lambda t, h: t[:, h - 1:h]),
    ("slice -1 H (H + 2)", lambda t, h: t[..., h:h + 2]),
    ("select 1 (H - 1)", lambda t, h: t[:, h - 1]),
    ("repeat_interleave H (0)", lambda t, h: t.repeat_interleave(h, dim=0)),
])
def test_a_parenthesised_argument_after_a_name_is_an_argument(op, index):
    torch = pytest.importorskip("torch")
    text = f"dim H\nexample H=3\ninput X: [H + 2, H + 2]\ny: X -> {op}\n"
    spec = check(text)
    assert spec.ok, render_check(spec)
    got = [int(spec.example_value(d)) for d in spec.bindings[-1].types[0].shape]
    assert got == list(index(torch.zeros(5, 5), 3).shape)


def test_a_call_is_still_a_call():
    spec = check("dim B, S, D\nexample B=1, S=2, D=16\ninput x: [B, S, D]\n"
                 "block Blk(z: [B, S, D], w: [B, S, D]):\n  return z + w\nend\n"
                 "a: x -> scale 1/sqrt(D)\nb: x -> stack 2 Blk(x)\nc: x -> Blk(x)\nd: sqrt (D) * x\n")
    assert spec.ok, render_check(spec)


def test_fmt_keeps_the_space_that_separates_the_arguments():
    text = "dim H\ninput X: [H + 2, 3]\ny: X -> slice 0 H (H + 1)\nz: X -> scale 1/sqrt(H)\n"
    assert format_text(text) == text


# ------------------------------------------------------------------ masks broadcast the input

@pytest.mark.parametrize("scores, mask", [
    ("[B, 1, S]", "[B, H, S]"),
    ("[1, S]", "[B, H, S]"),
    ("[B, H, S, S]", "[S]"),
    ("[B, 1, 1, S]", "[B, 1, S, 1]"),
])
def test_masked_fill_broadcasts_both_operands(scores, mask):
    torch = pytest.importorskip("torch")
    sizes = {"B": 2, "H": 3, "S": 4}
    text = (f"dim B, H, S\nexample B=2, H=3, S=4\ninput mm: {mask} bool\n"
            f"y: {scores} -> mask mm -> softmax -1\n")
    spec = check(text)
    assert spec.ok, render_check(spec)
    dims = lambda s: [sizes.get(d.strip(), 1) for d in s[1:-1].split(",")]
    want = torch.zeros(dims(scores)).masked_fill(torch.zeros(dims(mask), dtype=torch.bool), 0).shape
    assert [int(spec.example_value(d)) for d in spec.bindings[-1].types[0].shape] == list(want)
    assert runner.run_spec(spec, runner.resolve_sizes(spec)).ok


def test_a_mask_that_does_not_broadcast_is_still_refused():
    spec = check("dim B, H, S\nexample B=2, H=3, S=4\ninput mm: [B, H, S] bool\ny: [B, 2, S] -> mask mm\n")
    assert [d.code for d in spec.errors()] == ["E102"]


# ------------------------------------------------------------------ dims bound at block calls

BLOCK = """\
dim B, T, N, C, H
example B=2, T=5, C=8, H=2
assume C % H == 0
block Block(x: [B, N, C]):
  a: x -> view [B, N, H, C / H] -> transpose 1 2
  y: a -> transpose 1 2 -> reshape [B, N, C] -> layernorm -> linear C
  return y
end
input x: [B, T, C]
out: x -> Block -> Block
"""


def test_a_dim_only_in_a_block_signature_needs_no_example_value():
    spec = check(BLOCK)
    assert not spec.diagnostics, render_check(spec)
    assert spec.call_bound == ["N"]
    text = trace(spec)
    assert "out      10    Block      [B, T, C]  [B, T, C]  [2, 5, 8]" in text
    assert "total parameters: 2·C² + 6·C = 176" in text
    data = to_json(spec, trace=True)
    assert data["bindings"][0]["example"] == [2, 5, 8]
    assert data["total"]["params_example"] == 176


def test_run_needs_no_value_for_it_and_honours_one_given():
    pytest.importorskip("torch")
    spec = check(BLOCK)
    sizes = runner.resolve_sizes(spec)
    assert sizes == {"B": 2, "T": 5, "C": 8, "H": 2}
    assert runner.run_spec(spec, sizes).ok
    assert runner.resolve_sizes(spec, {"N": 3})["N"] == 3


def test_run_names_only_the_dims_really_missing():
    spec = check(BLOCK.replace("example B=2, T=5, C=8, H=2", "example B=2, C=8, H=2"))
    assert [d.code for d in spec.diagnostics] == ["W201"]
    assert "T" in spec.diagnostics[0].message and "N" not in spec.diagnostics[0].message
    with pytest.raises(runner.SizesError) as err:
        runner.resolve_sizes(spec)
    assert "no size for T:" in str(err.value)
    assert runner.resolve_sizes(spec, {"T": 4})["T"] == 4


def test_a_dim_used_outside_the_blocks_is_still_needed():
    text = BLOCK.replace("input x: [B, T, C]", "input x: [B, T, C]\ninput pos: [N, C]")
    spec = check(text)
    assert [d.code for d in spec.diagnostics] == ["W201"]
    assert "N" in spec.diagnostics[0].message


# ------------------------------------------------------------------ sizes with min / max

WINDOW = """\
dim B, S, T, W
dim P = min(T, W - 1)
assume W >= 2
example B=1, S=2, T=5, W=4
input past: [B, P, 3]
x: [B, S, 3]
keys: concat(1, past, x)
kept: keys -> slice 1 (P + S - min(T + S, W - 1)) (P + S)
"""


def test_a_size_with_min_is_whole_positive_and_bounds_a_slice():
    """Mistral's sliding-window cache: the last min(P + S, W - 1) positions. These were E104
    (`min(T, W - 1)` not proved whole), E109 (nor at least 1) and E105 (the slice start not
    proved >= 0); each holds in every branch of the min."""
    torch = pytest.importorskip("torch")
    spec = check(WINDOW)
    assert [d.code for d in spec.diagnostics] == [], render_check(spec)
    kept = spec.bindings[-1].types[0].shape
    for t, s, w in [(5, 2, 4), (1, 1, 9), (1, 7, 2), (9, 3, 9), (2, 2, 3)]:
        p = min(t, w - 1)
        keys = torch.zeros(1, p + s, 3)
        want = keys[:, p + s - min(t + s, w - 1):p + s].shape
        env = spec.prover.user_env({"B": 1, "S": s, "T": t, "W": w})
        assert [int(spec.prover.value(d, env)) for d in kept] == list(want)


def test_a_slice_that_min_does_not_save_is_still_refused():
    spec = check("dim B, S, P, W\nassume P >= 0\nexample B=1, S=2, P=5, W=4\n"
                 "input keys: [B, P + S, 3]\nkept: keys -> slice 1 (W - min(P + S, W - 1)) (P + S)\n")
    text = render_check(spec)
    assert [d.code for d in spec.errors()] == ["E109"]
    assert "is not always positive" in text and "counterexample: P=5, S=2, W=16" in text
    # at the counterexample torch gives an empty slice where the spec promised 7 - 9 rows
    torch = pytest.importorskip("torch")
    assert torch.zeros(1, 7, 3)[:, 16 - 7:7].shape[1] == 0


def test_max_minus_one_of_its_arguments_may_be_zero():
    spec = check("dim B, S, W\nexample B=1, S=2, W=4\nm: [B, max(S, W) - W, 3]\n")
    assert [d.code for d in spec.errors()] == ["E109"]
    assert "counterexample: S=1, W=4" in render_check(spec)


def test_without_the_assumption_the_min_may_be_zero():
    spec = check(WINDOW.replace("assume W >= 2\n", ""))
    assert [d.code for d in spec.errors()] == ["E109", "E109"]
    assert "`P = min(T, W - 1)` is not always positive" in render_check(spec)


# ------------------------------------------------------------------ a bias softmax cancels (missed)

ALIBI = """\
dim B, S, H, Dh
example B=2, S=5, H=4, Dh=8
input q: [B, H, S, Dh]
input k: [B, H, S, Dh]
slopes: 2.0 ** (-8.0 * arange(1, H + 1) / H)
alibi: outer(slopes, arange(S))
weights: q @ (k -> transpose -2 -1) + (alibi -> unsqueeze {axis}) -> softmax -1
"""


def test_an_alibi_bias_along_the_queries_is_reported():
    """BLOOM's bias `[H, 1, S]` written as `[H, S, 1]` checked silently: every score of a
    query's row moves by the same amount, and PyTorch's softmax gives back the unbiased
    weights."""
    torch = pytest.importorskip("torch")
    wrong, right = check(ALIBI.format(axis=2)), check(ALIBI.format(axis=1))
    assert right.diagnostics == []
    assert [(d.code, d.span.line, d.span.column) for d in wrong.diagnostics] == [("W308", 7, 10)]
    assert wrong.diagnostics[0].message == (
        "`q @ (k -> transpose -2 -1) + (alibi -> unsqueeze 2)` shifts the attention scores by a term "
        "that is the same for every key (size 1 on axis -1, where the scores have the keys, S), so "
        "`softmax -1` on line 7 cancels it")
    s = torch.randn(2, 4, 5, 5)
    slopes = 2.0 ** (-8.0 * torch.arange(1, 5) / 4)
    table = slopes[:, None] * torch.arange(5)
    torch.testing.assert_close((s + table[:, :, None]).softmax(-1), s.softmax(-1))     # cancelled
    assert ((s + table[:, None, :]).softmax(-1) - s.softmax(-1)).abs().max() > 1e-2


def test_scores_from_a_matmul_with_a_key_bias_stay_silent():
    spec = check("dim B, S, H, Dh\nexample B=1, S=4, H=2, Dh=8\ninput q: [B, H, S, Dh]\n"
                 "input k: [B, H, S, Dh]\ninput pad: [B, S]\n"
                 "w: q @ (k -> transpose -2 -1) + (pad -> view [B, 1, 1, S]) -> softmax -1\n"
                 "u: q @ (k -> transpose -2 -1) + (pad -> view [B, 1, S, 1]) -> softmax -1\n")
    assert [(d.code, d.span.line) for d in spec.diagnostics] == [("W308", 7)]


# ------------------------------------------------------------------ keys and values repeated differently (missed)

GQA = """\
dim B, S, H, G, Dh
dim Nrep = H / G
assume H % G == 0
example B=1, S=4, H=6, G=2, Dh=8
input q: [B, H, S, Dh]
input k: [B, G, S, Dh]
input v: [B, G, S, Dh]
k_rep: k -> {keys}
v_rep: v -> {values}
a: q -> attention k_rep v_rep
w: q @ (k_rep -> transpose -2 -1) -> softmax -1
o: w @ v_rep
"""
INTERLEAVE = "repeat_interleave Nrep 1"                                      # HF's repeat_kv
REPEAT_KV = "unsqueeze 2 -> expand [B, G, Nrep, S, Dh] -> reshape [B, H, S, Dh]"  # the same order
TILED = "unsqueeze 1 -> expand [B, Nrep, G, S, Dh] -> reshape [B, H, S, Dh]"    # torch's v.repeat(1, Nrep, 1, 1)


def test_values_tiled_against_keys_repeated_per_group_are_reported():
    """Found writing Qwen2 (14 query heads, 2 key/value heads): keys repeated with
    repeat_interleave and values tiled both have H heads and checked silently, but head h
    then takes its keys from group h // Nrep and its values from group h % G."""
    torch = pytest.importorskip("torch")
    spec = check(GQA.format(keys=INTERLEAVE, values=TILED))
    assert spec.ok
    assert [(d.code, d.span.line, d.span.column) for d in spec.diagnostics] == [("W307", 10, 9), ("W307", 12, 4)]
    assert spec.diagnostics[0].message == (
        "`attention k_rep v_rep` lines up axis -3 (G·Nrep) of the keys with axis -3 (Nrep·G) of the "
        "values: the same pieces merged in another order, so the sizes agree but position j of one "
        "is not position j of the other")
    assert spec.diagnostics[1].message.startswith("`w @ v_rep` lines up axis -3 (G·Nrep) of one side")
    assert "`repeat_interleave` on both" in spec.diagnostics[1].help
    # in PyTorch: head 1 of the keys comes from group 0, head 1 of the tiled values from group 1
    kv = torch.arange(2.0).view(1, 2, 1, 1).expand(1, 2, 4, 8)
    keys = kv.repeat_interleave(3, dim=1)
    values = kv.unsqueeze(1).expand(1, 3, 2, 4, 8).reshape(1, 6, 4, 8)
    assert keys[0, :, 0, 0].tolist() == [0, 0, 0, 1, 1, 1]
    assert values[0, :, 0, 0].tolist() == [0, 1, 0, 1, 0, 1]
    torch.testing.assert_close(values, kv.repeat(1, 3, 1, 1))


@pytest.mark.parametrize("keys, values", [(INTERLEAVE, INTERLEAVE), (REPEAT_KV, INTERLEAVE),
                                          (INTERLEAVE, REPEAT_KV), (TILED, TILED)])
def test_keys_and_values_repeated_the_same_way_stay_silent(keys, values):
    torch = pytest.importorskip("torch")
    spec = check(GQA.format(keys=keys, values=values))
    assert spec.diagnostics == [], render_check(spec)
    kv = torch.randn(1, 2, 4, 8)
    if keys != TILED:     # both of HF's spellings of repeat_kv give the same tensor
        torch.testing.assert_close(kv.unsqueeze(2).expand(1, 2, 3, 4, 8).reshape(1, 6, 4, 8),
                                   kv.repeat_interleave(3, dim=1))


# ------------------------------------------------------------------ found writing Swin-T

WINDOW_LABELS = """\
dim R = 8
dim W = 4
dim N = W*W
pos: arange(R)
region: ((pos >= R - W) -> long) + ((pos >= R - 2) -> long)
label: (region -> unsqueeze 1) * 3 + region
windows: label -> view [R/W, W, R/W, W] -> {order}reshape [-1, N]
"""


def test_window_labels_made_from_one_vector_are_cut_into_windows_silently():
    """Swin's attention mask labels the grid with `(region -> unsqueeze 1) * 3 + region`: rows
    and columns are two axes over the same positions. They shared their identity, so cutting
    both into windows read as one axis's pieces merged out of order (a false W302, once per
    stage). A partition without the permute still mixes the windows (W301)."""
    torch = pytest.importorskip("torch")
    right = check(WINDOW_LABELS.format(order="permute 0 2 1 3 -> "))
    assert right.diagnostics == [], render_check(right)
    wrong = check(WINDOW_LABELS.format(order=""))
    assert [(d.code, d.span.line, d.span.column) for d in wrong.diagnostics] == [("W301", 7, 44)]
    assert wrong.diagnostics[0].message == (
        "`reshape [-1, N]` reads the elements of [R/W, W, R/W, W] in order into [R*R/N, N], so the "
        "axis of size R*R/N is made of positions of W: values of different axes get mixed")
    # in PyTorch: each row of the right partition is one window (one label of the top-left
    # window's 4 x 4 block); rows of the wrong one take 4 positions from each of 4 windows
    ids = torch.arange(2).repeat_interleave(4)
    win = ids[:, None] * 2 + ids
    rows = win.view(2, 4, 2, 4).permute(0, 2, 1, 3).reshape(-1, 16)
    assert [len(set(r.tolist())) for r in rows] == [1, 1, 1, 1]
    assert [len(set(r.tolist())) for r in win.view(2, 4, 2, 4).reshape(-1, 16)] == [2, 2, 2, 2]


WINDOWS = """\
dim B, R, C, W
assume R % W == 0
example B=2, R=8, C=16, W=4
input x: [B, R, R, C]
win: x -> view [B, R/W, W, R/W, W, C] -> permute {part} -> reshape [-1, W*W, C]
back: win -> view [B, R/W, R/W, W, W, C] -> {rev}reshape [B, R, R, C]
"""


def test_a_window_partition_and_its_reverse_are_silent_and_wrong_ones_are_not():
    torch = pytest.importorskip("torch")
    right = check(WINDOWS.format(part="0 1 3 2 4 5", rev="permute 0 1 3 2 4 5 -> "))
    assert right.diagnostics == [], render_check(right)
    wrong = check(WINDOWS.format(part="0 2 1 3 4 5", rev="permute 0 1 3 2 4 5 -> "))
    assert [(d.code, d.span.line) for d in wrong.diagnostics] == [("W301", 5)]
    wrong = check(WINDOWS.format(part="0 1 3 2 4 5", rev=""))
    assert [(d.code, d.span.line) for d in wrong.diagnostics] == [("W302", 6)]
    assert wrong.diagnostics[0].message == (
        "`reshape [B, R, R, C]` merges R/W and W back into R, but they are not next to each other "
        "in that order in [B, R/W, R/W, W, W, C]: heads and tokens get mixed")
    x = torch.randn(2, 8, 8, 16)
    win = x.view(2, 2, 4, 2, 4, 16).permute(0, 1, 3, 2, 4, 5).reshape(-1, 16, 16)
    torch.testing.assert_close(win[1], x[0, :4, 4:].reshape(16, 16))        # window (0, 1) of image 0
    back = win.view(2, 2, 2, 4, 4, 16).permute(0, 1, 3, 2, 4, 5).reshape(2, 8, 8, 16)
    torch.testing.assert_close(back, x)


MERGE = """\
dim B, D, Nh
dim R, C, Rh, NH
assume R % 2 == 0
assume C % NH == 0
assume D % Nh == 0
example B=1, D=8, Nh=2
block Merge(x: [B, R, R, C]):
  return x -> slice 1 0 R step=2 -> slice 2 0 R step=2 -> linear 2*C
end
block Heads(x: [B, Rh, Rh, C], dim NH):
  return x -> view [B, Rh, Rh, NH, C/NH]
end
input x: [B, {side}, {side}, D]
y: x -> Merge -> Merge -> Heads(NH=Nh)
"""


def test_an_assumption_about_a_dim_bound_at_calls_is_proved_at_each_call():
    """Swin's patch merging needs an even grid and its heads a width divisible by their count:
    `assume R % 2 == 0` and `assume C % NH == 0` about dims bound at block calls. The first made
    the example owe a value for R (a false W201); the second was checked with C left free (a
    false E113, counterexample C=2)."""
    torch = pytest.importorskip("torch")
    right = check(MERGE.format(side=12))
    assert right.diagnostics == [], render_check(right)
    assert right.call_bound == ["R", "C", "Rh", "NH"]
    merged = torch.nn.Linear(8, 16)(torch.zeros(1, 12, 12, 8)[:, ::2, ::2])
    merged = torch.nn.Linear(16, 32)(merged[:, ::2, ::2])
    assert [int(right.example_value(d)) for d in right.bindings[-1].types[0].shape] == \
        list(merged.view(1, 3, 3, 2, 16).shape)
    wrong = check(MERGE.format(side=6))
    assert [(d.code, d.span.line, d.span.column) for d in wrong.diagnostics] == [("E113", 14, 18)]
    assert wrong.diagnostics[0].message == "block `Merge` assumes `R % 2 == 0`, which does not hold for R = 3"
    assert wrong.diagnostics[0].help == "call `Merge` on a tensor whose sizes satisfy `R % 2 == 0`"


def test_a_size_computed_in_a_block_prints_as_itself():
    """`linear 2*C` with C bound to 2*D printed as `2*2*D` (the text of the call, not the size),
    and every later `4*D` with it, `linear 8*D` as `2*2*2*D`."""
    text = trace(check("dim D\ndim C\nexample D=4\ninput x: [D]\nblock M(x: [C]):\n  return x -> linear 2*C\nend\n"
                 "y: x -> M -> M -> M\nz: x -> linear 8*D\n"))
    assert "2*2" not in text
    assert "[4*D]" in text and "[8*D]" in text


def test_generated_code_keeps_a_window_side_whole():
    """`dim N = W*W`: the generated code wrote W as `math.sqrt(N)` (sympy folding W*W into N),
    a float that `view` and `arange` refuse. A fixed size read from the input (`dim Img = 224`)
    kept every other size fixed in the config; it is read in forward, so the config is free."""
    pytest.importorskip("torch")
    text = ("dim B\ndim Img = 8\ndim W = 2\ndim N = W*W\nassume Img % W == 0\nexample B=2\n"
            "input x: [B, Img, Img]\n"
            "win: x -> view [B, Img/W, W, Img/W, W] -> permute 0 1 3 2 4 -> reshape [-1, N]\n"
            "pos: arange(W)\n")
    spec = check(text)
    assert spec.diagnostics == [], render_check(spec)
    gen = codegen_generate(spec)
    assert "sqrt" not in gen.source and "that value only" not in gen.source
    for sizes in ({}, {"Img": 12, "W": 3}):
        assert runner.run_spec(spec, runner.resolve_sizes(spec, sizes)).ok
