"""Proved fixes for dtype refusals (E120) and for sizes that may not be positive (E109).

A learner who writes what PyTorch refuses for its dtype (`ids -> softmax -1` on int ids,
`1 - pad` or `-pad` on a bool mask, `x @ W` with bfloat16 weights) gets the cast that makes
the step valid, written into the line and re-checked before it is shown; where `1 - pad`
meant the opposite of the mask (it is used as a condition), `pad -> logical_not`. PyTorch
itself refuses the original and takes the rewrite. A size such as `L - 1` that is not
always positive gets the assumption that makes it so (`assume L >= 2`), proved the same way.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from shapelang import check

HEAD = """\
dim B, S, D, V, L
example B=2, S=3, D=4, V=11, L=3
input ids: [B, S] int
input pad: [B, S] bool
input x: [B, S, D]
input W: [D, D] bfloat16
"""

# (the line, the line the help writes, each in PyTorch: (refused, taken))
CASTS = [
    ("y: ids -> softmax -1", "y: ids -> to float -> softmax -1",
     (lambda t: t.torch.softmax(t.ids, -1), lambda t: t.torch.softmax(t.ids.float(), -1))),
    ("y: ids -> log_softmax -1", "y: ids -> to float -> log_softmax -1",
     (lambda t: t.torch.log_softmax(t.ids, -1), lambda t: t.torch.log_softmax(t.ids.float(), -1))),
    ("y: ids -> mean 1", "y: ids -> to float -> mean 1", (lambda t: t.ids.mean(1), lambda t: t.ids.float().mean(1))),
    ("y: ids -> var 1", "y: ids -> to float -> var 1", (lambda t: t.ids.var(1), lambda t: t.ids.float().var(1))),
    ("y: ids -> unsqueeze -1 -> layernorm", "y: ids -> unsqueeze -1 -> to float -> layernorm",
     (lambda t: t.F.layer_norm(t.ids[..., None], (1,)), lambda t: t.F.layer_norm(t.ids[..., None].float(), (1,)))),
    ("y: ids -> gelu", "y: ids -> to float -> gelu", (lambda t: t.F.gelu(t.ids), lambda t: t.F.gelu(t.ids.float()))),
    ("y: pad -> relu", "y: pad -> to float -> relu", (lambda t: t.F.relu(t.pad), lambda t: t.F.relu(t.pad.float()))),
    ("y: ids -> linear D", "y: ids -> to float -> linear D",
     (lambda t: t.nn.Linear(3, 4)(t.ids), lambda t: t.nn.Linear(3, 4)(t.ids.float()))),
    ("y: (ids * 0.5) -> embed V D", "y: (ids * 0.5) -> to int -> embed V D",
     (lambda t: t.nn.Embedding(11, 4)(t.ids * 0.5), lambda t: t.nn.Embedding(11, 4)((t.ids * 0.5).long()))),
    ("y: 1 - pad", "y: 1 - (pad -> to float)", (lambda t: 1 - t.pad, lambda t: 1 - t.pad.float())),
    ("y: x - (pad -> unsqueeze -1)", "y: x - (pad -> unsqueeze -1 -> to float)",
     (lambda t: t.x - t.pad[..., None], lambda t: t.x - t.pad[..., None].float())),
    ("y: (1.0 - pad) * -10000.0", "y: (1.0 - (pad -> to float)) * -10000.0",
     (lambda t: (1.0 - t.pad) * -10000.0, lambda t: (1.0 - t.pad.float()) * -10000.0)),
    ("y: -pad", "y: -(pad -> to float)", (lambda t: -t.pad, lambda t: -t.pad.float())),
    ("y: x @ W", "y: (x -> to bfloat16) @ W", (lambda t: t.x @ t.W, lambda t: t.x.bfloat16() @ t.W)),
    ("y: pad ** pad", "y: (pad -> to int) ** (pad -> to int)", (lambda t: t.pad ** t.pad, lambda t: t.pad.long() ** t.pad.long())),
]


def _torch_env():
    torch = pytest.importorskip("torch")
    ids = torch.randint(0, 11, (2, 3))
    return SimpleNamespace(torch=torch, F=torch.nn.functional, nn=torch.nn, ids=ids, pad=ids > 5,
                           x=torch.randn(2, 3, 4), W=torch.randn(4, 4).bfloat16())


@pytest.mark.parametrize("line, rewritten, programs", CASTS, ids=[c[0] for c in CASTS])
def test_a_dtype_refusal_shows_the_cast_that_makes_it_valid(line, rewritten, programs):
    spec = check(HEAD + line + "\n")
    [d] = spec.diagnostics
    assert d.code == "E120" and d.span.line == 7
    assert d.fix is not None and d.fix[2] == rewritten, d.help
    assert d.help.endswith(f"write it as `{rewritten}`") and "cast" in d.help
    again = check(HEAD + rewritten + "\n")
    assert again.ok and not again.diagnostics, [x.message for x in again.diagnostics]


@pytest.mark.parametrize("line, rewritten, programs", CASTS, ids=[c[0] for c in CASTS])
def test_pytorch_refuses_the_line_and_takes_the_rewrite(line, rewritten, programs):
    env = _torch_env()
    refused, taken = programs
    with pytest.raises(RuntimeError):
        refused(env)
    taken(env)


def test_one_minus_a_mask_used_as_a_condition_becomes_its_opposite():
    text = HEAD + "keep: 1 - pad\ny: where(keep, x -> sum -1, 0.0)\n"
    spec = check(text)
    [d] = spec.diagnostics
    assert d.code == "E120" and d.fix[2] == "keep: pad -> logical_not"
    assert "logical_not" in d.help and "opposite" in d.help
    fixed = check(text.replace("keep: 1 - pad", "keep: pad -> logical_not"))
    assert fixed.ok and not fixed.diagnostics
    torch = pytest.importorskip("torch")
    pad = torch.tensor([True, False])
    assert torch.equal(torch.logical_not(pad), (1 - pad.float()).bool())


@pytest.mark.parametrize("line, rewritten", [
    ("m: ~pad", "m: pad -> logical_not"),
    ("y: x * ~(pad -> unsqueeze -1)", "y: x * (pad -> unsqueeze -1 -> logical_not)"),
    ("y: where(~pad, ids, 0)", "y: where(pad -> logical_not, ids, 0)"),
    ("y: x * ~(x > 0)", "y: x * ((x > 0) -> logical_not)"),
])
def test_pytorchs_invert_is_named_and_rewritten_as_logical_not(line, rewritten):
    [d] = check(HEAD + line + "\n").diagnostics
    assert d.code == "E001" and "PyTorch syntax" in d.message and "logical_not" in d.notes[0]
    assert d.fix is not None and d.fix[2] == rewritten
    assert check(HEAD + rewritten + "\n").ok


def test_the_cast_goes_into_a_continuation_line():
    text = HEAD + "y: ids\n  -> softmax -1\n"
    [d] = check(text).diagnostics
    assert d.code == "E120" and d.fix[2] == "-> to float -> softmax -1"


def test_a_cast_that_would_break_a_later_line_is_not_shown():
    # the float the cast gives cannot be looked up: no rewrite is offered, the help says why
    text = HEAD + "y: ids - pad\nz: y -> embed V D\n"
    spec = check(text)
    d = spec.diagnostics[0]
    assert d.code == "E120" and d.fix is None and "to float" in d.help


# ------------------------------------------------------------------ E109: the assumption

SIZES = """\
dim B, S, D, L, K
example B=2, S=6, D=4, L=3, K=2
input x: [B, S, D]
block Layer(h: [B, S, D]):
  return h -> linear D
end
block First(h: [B, S, D]):
  return h -> relu
end
"""

POSITIVE = [
    ("y: x -> First -> stack (L - 1) Layer", "assume L >= 2"),
    ("y: x -> stack (L - 2) Layer", "assume L >= 3"),
    ("y: x -> slice 1 K S", "assume S >= K + 1"),
    ("y: x -> slice 1 0 (S - 2*K)", "assume S >= 2*K + 1"),
    ("y: arange(S - K)", "assume S >= K + 1"),
    ("input m: [S - 4]", "assume S >= 5"),
]


@pytest.mark.parametrize("line, assume", POSITIVE, ids=[p[0] for p in POSITIVE])
def test_a_size_that_may_not_be_positive_gets_its_assumption(line, assume):
    spec = check(SIZES + line + "\n")
    [d] = spec.diagnostics
    assert d.code == "E109" and d.span.line == 10
    assert d.fix is not None and d.fix[2] == assume, d.help
    assert d.help.endswith(f"add the line `{assume}` after line 1")
    lines = (SIZES + line + "\n").split("\n")
    fixed = "\n".join(lines[:1] + [assume] + lines[1:])
    again = check(fixed)
    assert again.ok and not again.diagnostics, [x.message for x in again.diagnostics]


def test_the_assumption_is_not_shown_when_the_example_breaks_it():
    spec = check(SIZES.replace("L=3", "L=1") + "y: x -> First -> stack (L - 1) Layer\n")
    d = next(d for d in spec.diagnostics if d.code == "E109")
    assert d.fix is None and "`assume L >= 2`" in d.help


def test_a_dim_defined_as_a_difference_gets_its_assumption():
    text = "dim S, K, M = S - K\nexample S=5, K=2\ninput x: [M]\n"
    [d] = check(text).diagnostics
    assert d.code == "E109" and d.fix[2] == "assume S >= K + 1"
    assert check("dim S, K, M = S - K\nassume S >= K + 1\nexample S=5, K=2\ninput x: [M]\n").ok


def test_the_assumption_is_written_as_a_learner_writes_it():
    import sympy as sp

    from shapelang.checker.advice.causes import positive_relation
    S, K, L = sp.symbols("S K L", positive=True, integer=True)
    assert positive_relation(L - 1, str) == "L >= 2"
    assert positive_relation(S - 2 * K, str) == "S >= 2*K + 1"
    assert positive_relation((S - K) / 2, str) == "S >= K + 2"
    assert positive_relation(S / 3 - 1, str) == "S >= 6"
    assert positive_relation(1 - K, str) == "1 - K >= 1"   # nothing to keep on the left
    # where the prover needs the size itself, the help falls back to it
    text = "dim S, K\nassume (S - K) % 2 == 0\nexample S=8, K=2\ny: arange((S - K) / 2)\n"
    [d] = check(text).diagnostics
    assert d.code == "E109" and d.fix[2] == "assume (S - K)/2 >= 1"
