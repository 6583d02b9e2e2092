"""Regressions from a differential fuzzer (checker against PyTorch): pieces and sizes built
from user expressions, repeated dims in block signatures, layouts that PyTorch decides
differently from a naive model, and conditions the prover could not decide."""
from __future__ import annotations

import pytest

from shapelang.checker.checker import check_text

torch = pytest.importorskip("torch")


def check(text):
    return check_text(text, "hostile.shape")


def codes(spec):
    return [d.code for d in spec.errors()]


def shape_of(spec, name):
    for b in spec.bindings:
        for n, t in zip(b.names, b.types):
            if n == name:
                return tuple(int(spec.example_value(e)) for e in t.shape)
    return None


def torch_raises(fn) -> bool:
    try:
        fn()
    except RuntimeError:
        return True
    return False


# ------------------------------------------------------------ sizes from user expressions

@pytest.mark.parametrize("pieces, bad", [
    ("[a, d - a]", lambda c: c["d"] - c["a"]),
    ("[d - 2*a, 2*a]", lambda c: c["d"] - 2 * c["a"]),
    ("[a - 1, d - a + 1]", lambda c: c["a"] - 1),
])
def test_split_piece_that_can_be_empty_or_negative_is_refused(pieces, bad):
    spec = check(f"dim a, d\nexample a=2, d=5\ninput X: [d]\np, q: X -> split {pieces} 0\n")
    err = next(d for d in spec.errors())
    assert err.code == "E109", codes(spec)
    cex = err.counterexample
    assert cex is not None and bad(cex) <= 0, cex   # a real counterexample


def test_split_pieces_proved_positive_are_accepted_and_match_torch():
    spec = check("dim a, d\nassume a < d\nexample a=2, d=5\ninput X: [d, 3]\n"
                 "p, q: X -> split [a, d - a] 0\n")
    assert spec.ok, codes(spec)
    p, q = torch.randn(5, 3).split([2, 3], 0)
    assert shape_of(spec, "p") == tuple(p.shape) and shape_of(spec, "q") == tuple(q.shape)


@pytest.mark.parametrize("op", ["expand [N - M, Q]", "view [N - M, -1]", "reshape [Q, N - M]"])
def test_other_sizes_from_user_expressions_must_be_positive(op):
    spec = check(f"dim N, M, Q\nexample N=5, M=2, Q=3\ninput X: [1, Q]\ny: X -> {op}\n")
    assert not spec.ok
    err = spec.errors()[0]
    assert err.code in ("E109", "E103"), codes(spec)
    if err.code == "E109":
        assert err.counterexample["N"] - err.counterexample["M"] <= 0


def test_symbolic_index_that_can_be_negative_is_refused():
    spec = check("dim N, M\nexample N=5, M=2\ninput X: [N]\ny: X -> select 0 (N - M - 1)\n")
    assert not spec.ok
    spec = check("dim N, M\nassume M < N\nexample N=5, M=2\ninput X: [N]\ny: X -> select 0 (N - M - 1)\n")
    assert spec.ok, codes(spec)


# ------------------------------------------------------------ repeated dims in blocks

SQ = "block Sq(x: [G, G]):\n  return x -> relu\nend\n"


def test_repeated_block_dim_is_compared_not_rebound():
    spec = check(f"dim K, N, G\nexample K=2, N=3, G=2\n{SQ}input X: [K, N]\ny: X -> Sq\n")
    errs = spec.errors()
    assert [d.code for d in errs] == ["E113"]
    cex = errs[0].counterexample
    assert cex and cex["K"] != cex["N"]


def test_repeated_block_dim_with_equal_sizes_keeps_the_callers_shape():
    spec = check(f"dim K, N, G\nassume N == K\nexample K=2, N=2, G=2\n{SQ}"
                 "input X: [K, N]\ny: X -> Sq\n")
    assert spec.ok, codes(spec)
    assert shape_of(spec, "y") == (2, 2)
    (ir,) = spec.blocks["Sq"]
    assert {str(k): str(v) for k, v in ir.binding_of_dims.items()} == {"G": "K"}


def test_repeated_block_dim_across_inputs():
    spec = check("dim K, N, G\nexample K=2, N=3, G=2\nblock P(x: [G], y: [G]):\n"
                 "  return x + y\nend\ninput X: [K]\ninput Y: [N]\nz: X -> P(Y)\n")
    assert codes(spec) == ["E113"]


# ------------------------------------------------------------ masks, prover

def test_mask_on_a_one_dim_tensor_is_accepted_as_masked_fill_is():
    spec = check("dim N\nexample N=4\ninput X: [N]\ninput M: [N] bool\ny: X -> mask M\n")
    assert spec.ok, codes(spec)
    x = torch.randn(4)
    assert shape_of(spec, "y") == tuple(x.masked_fill(torch.rand(4) < 0.5, 0.0).shape)
    assert not check("dim N\nexample N=4\ninput X: [N]\ny: X -> mask causal\n").ok


@pytest.mark.parametrize("assumptions, op", [
    ("assume Z % N == 0\nassume Z <= N", "view [N]"),                  # Z == N
    ("assume Z <= N\nassume Z % N == 0", "view [N]"),                  # either order
    ("assume Z % N == 0\nassume N != Z", "slice 0 0 2*N"),             # Z >= 2N
    ("assume Z % N == 0\nassume Z > N", "slice 0 0 2*N"),
    ("assume Z**2 % 2 == 0", "view [2, Z/2]"),                         # Z even
    ("assume Z**2 % 12 == 0", "view [6, Z/6]"),                        # 2*3 divides Z
    ("assume Z**3 % 8 == 0", "view [2, Z/2]"),
])
def test_prover_combines_assumptions(assumptions, op):
    spec = check(f"dim Z, N\n{assumptions}\nexample Z=12, N=12\ninput X: [Z]\ny: X -> {op}\n"
                 if "<=" in assumptions else
                 f"dim Z, N\n{assumptions}\nexample Z=24, N=6\ninput X: [Z]\ny: X -> {op}\n")
    assert spec.ok, [d.message for d in spec.diagnostics]


def test_power_divisibility_does_not_overreach():
    # Z**2 % 8 == 0 gives 4 | Z, not 8 | Z: Z=4 breaks Z/8
    spec = check("dim Z\nassume Z**2 % 8 == 0\nexample Z=16\ninput X: [Z]\ny: X -> view [8, Z/8]\n")
    err = spec.errors()[0]
    z = err.counterexample["Z"]
    assert z ** 2 % 8 == 0 and z % 8 != 0


def test_undecided_condition_says_could_not_prove():
    # Q == R*R follows, but the prover does not combine two inequalities into an equality
    spec = check("dim R, Q\nassume R*R <= Q\nassume Q < R*R + 1\nexample R=3, Q=9\ninput X: [Q]\n"
                 "y: X -> view [R, R]\n")
    assert [d.code for d in spec.errors()] == ["E103"]
    err = spec.errors()[0]
    assert err.counterexample is None
    assert err.message.startswith("could not prove")
    assert "assume" in (err.help or "")


def test_refuted_condition_keeps_its_claim_and_counterexample():
    spec = check("dim R, Q\nexample R=4, Q=2\ninput X: [R]\ny: X -> view [Q, 2]\n")
    err = spec.errors()[0]
    assert err.counterexample and not err.message.startswith("could not prove")
    assert err.counterexample["R"] != 2 * err.counterexample["Q"]


def test_assumptions_that_force_a_size_below_one_are_refused():
    spec = check("dim Z, N\nassume Z % N == 0\nassume 2*Z <= N\nexample Z=2, N=4\ninput X: [Z]\n"
                 "y: X -> relu\n")
    assert "E115" in codes(spec)
