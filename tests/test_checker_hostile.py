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


@pytest.mark.parametrize("op", ["chunk 4294967297 -1", "split 1 -1"])
def test_a_huge_number_of_pieces_is_refused_not_built(op):
    # once a MemoryError: a list of 2**32 + 1 piece shapes was built before the names were counted
    spec = check(f"dim B\nexample B=2\ninput X: [B, 4294967297]\nq, k, v: X -> {op}\n")
    assert codes(spec) == ["E110"] and "at most 1024" in spec.errors()[0].message
    assert (spec.errors()[0].span.line, spec.errors()[0].span.column) == (4, 15)


@pytest.mark.parametrize("op", ["expand [N - M, Q]", "view [N - M, -1]", "reshape [Q, N - M]"])
def test_other_sizes_from_user_expressions_must_be_positive(op):
    spec = check(f"dim N, M, Q\nexample N=5, M=2, Q=3\ninput X: [1, Q]\ny: X -> {op}\n")
    assert not spec.ok
    err = spec.errors()[0]
    assert err.code in ("E109", "E103"), codes(spec)
    if err.code == "E109":
        assert err.counterexample["N"] - err.counterexample["M"] <= 0


@pytest.mark.parametrize("decl, op", [
    ("[N] int", "embed (N - M) 4"),
    ("[N] int", "embed 4 (M - N)"),
    ("[2, N*M]", 'rearrange "a (b c) -> a b c" b=(N - M)'),
    ("[2, N*M]", 'rearrange "a (b c) -> a b c" b=N/M'),
])
def test_sizes_given_as_arguments_are_whole_and_positive(decl, op):
    spec = check(f"dim N, M\nexample N=5, M=2\ninput X: {decl}\ny: X -> {op}\n")
    err = spec.errors()[0]
    assert err.code in ("E104", "E109"), codes(spec)
    n, m = err.counterexample["N"], err.counterexample["M"]
    assert (n - m <= 0 or m - n <= 0) if err.code == "E109" else n % m != 0


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


# ------------------------------------------------------------ layouts as PyTorch's

def _view_ok(t, *shape) -> bool:
    return not torch_raises(lambda: t.view(*shape))


DROPOUT_CASES = [
    # (pipeline, declared input, the same in torch before the dropout, after it)
    ("X -> slice 1 0 M -> dropout 0.1", "[N, 2*M]", lambda x: x[:, :3], None),
    ("X -> slice 1 0 M -> dropout 0.0", "[N, 2*M]", lambda x: x[:, :3], None),
    ("X -> expand [N, M] -> dropout 0.1", "[N, 1]", lambda x: x.expand(4, 3), None),
    ("X -> transpose 0 1 -> dropout 0.1 -> transpose 0 1", "[N, 2*M]", lambda x: x.t(),
     lambda t: t.t()),
    ("X -> slice 1 0 M -> dropout 0.1 -> contiguous", "[N, 2*M]", lambda x: x[:, :3],
     lambda t: t.contiguous()),
]


@pytest.mark.parametrize("pipeline, decl, before, after", DROPOUT_CASES)
def test_dropout_view_must_be_legal_in_training_and_in_eval(pipeline, decl, before, after):
    """nn.Dropout returns its input itself with p=0 or in eval mode, a new tensor while
    training: a later view is accepted exactly when torch allows it in both modes."""
    x = torch.randn(4, 6 if "2*M" in decl else 1)
    drop = torch.nn.Dropout(float(pipeline.split("dropout ")[1].split()[0]))
    outs = [drop.train(mode)(before(x)) for mode in (True, False)]
    outs = [after(t) if after else t for t in outs]
    legal = [_view_ok(t, -1) for t in outs]
    spec = check(f"dim N, M\nexample N=4, M=3\ninput X: {decl}\ny: {pipeline} -> view [-1]\n")
    assert spec.ok == all(legal), (pipeline, legal, [d.message for d in spec.diagnostics])
    if legal[0] != legal[1]:   # legal in one mode only: the message says why
        assert any("dropout" in n and "eval" in n for n in spec.errors()[0].notes)


CL = "input X: [N, H, W, C]\nc: X -> permute 0 3 1 2\n"   # NCHW sizes, channels-last strides


@pytest.mark.parametrize("op, fn", [
    ("concat 1 c", lambda t: torch.cat([t, t], 1)),
    ("concat 0 c", lambda t: torch.cat([t, t], 0)),
    ("rmsnorm", lambda t: torch.nn.RMSNorm(t.shape[-1])(t)),
    ("layernorm", lambda t: torch.nn.LayerNorm(t.shape[-1])(t)),
    ("softmax -1", lambda t: t.softmax(-1)),
    ("relu", lambda t: t.relu()),
])
def test_channels_last_layouts_follow_torch(op, fn):
    x = torch.randn(2, 3, 5, 7).permute(0, 3, 1, 2)
    out = fn(x)
    torch_ok = _view_ok(out, 2, -1)
    spec = check(f"dim N, H, W, C\nexample N=2, H=3, W=5, C=7\n{CL}y: c -> {op} -> view [N, -1]\n")
    assert spec.ok == torch_ok, (op, out.stride(), [d.message for d in spec.diagnostics])


@pytest.mark.parametrize("eq, shapes", [
    ("abc->cba", [(2, 3, 5)]), ("abc->acb", [(2, 3, 5)]), ("abc->ca", [(2, 3, 5)]),
    ("abc,acd->bad", [(2, 3, 5), (2, 5, 7)]), ("abc,acd->dba", [(2, 3, 5), (2, 5, 7)]),
    ("bqd,bkd->bkq", [(2, 3, 5), (2, 7, 5)]), ("ab,cb->ca", [(3, 5), (7, 5)]),
    ("ab,ab->ba", [(3, 5), (3, 5)]), ("...ab,bc->cab", [(2, 3, 5), (5, 7)]),
])
def test_einsum_layout_follows_torch(eq, shapes):
    names = "PQRS"
    sizes = dict(zip("234567", ["A", "B", "C", "D", "E", "F"]))
    decls = "".join(f"input {names[i]}: [{', '.join(sizes[str(n)] for n in s)}]\n"
                    for i, s in enumerate(shapes))
    rest = " ".join(names[1:len(shapes)])
    out = torch.einsum(eq, *[torch.randn(*s) for s in shapes])
    spec = check(f"dim A, B, C, D, E, F\nexample A=2, B=3, C=4, D=5, E=6, F=7\n{decls}"
                 f'y: P -> einsum "{eq}" {rest} -> view [-1]\n'.replace(" ->  view", " -> view"))
    assert spec.ok == _view_ok(out, -1), (eq, out.stride(), [d.message for d in spec.diagnostics])


def test_reshape_that_is_a_view_only_at_size_one_gives_that_counterexample():
    text = ("dim E, V, B, Q\nexample E=2, V=3, B=5, Q=3\ninput X: [E, V, B, Q]\n"
            "y: X -> permute 3 1 0 2 -> reshape [Q, V, E*B] -> view [-1]\n")
    spec = check(text)
    err = spec.errors()[0]
    # one size at 1, the others as the example has them (sizes where that layout is torch's)
    assert err.code == "E106" and sorted(err.counterexample.values()).count(1) == 1
    v = {"E": 2, "V": 3, "B": 5, "Q": 3} | err.counterexample   # torch fails there
    x = torch.randn(v["E"], v["V"], v["B"], v["Q"])
    assert torch_raises(lambda: x.permute(3, 1, 0, 2).reshape(v["Q"], v["V"], v["E"] * v["B"]).view(-1))
    assert not torch_raises(lambda: torch.randn(2, 3, 5, 3).permute(3, 1, 0, 2).reshape(3, 3, 10).view(-1))
    spec = check(text.replace("example", "assume E >= 2\nassume V >= 2\nassume B >= 2\nexample"))
    assert spec.ok, [d.message for d in spec.diagnostics]


@pytest.mark.parametrize("factor", ["1e300*1e300", "0*1e999", "1e999", "2/1e-320"])
def test_numbers_beyond_a_float_are_refused_by_check(factor):
    """Issue 16 item 10 on the checker's side: `scale 1e300*1e300` used to pass `check` and
    become `x * inf` in the generated module."""
    spec = check_text(f"dim B, D\ninput x: [B, D]\ny: x -> scale {factor}\n")
    assert [d.code for d in spec.diagnostics] == ["E005"]
    assert spec.diagnostics[0].span.line == 3


def test_a_dim_defined_twice_in_terms_of_an_unknown_one_is_reported_not_a_crash():
    # a mangled line (`dimHiC = 3` for `dim Hi, C = 3`) leaves C unknown; Ci is then defined
    # twice from it: every error is reported, and nothing raises
    text = "dim B\ndimHiC = 3\ndim Cf = 2\ndim Ci = C + Cf\ndim Ci = C + Cf\nexample B=1\ninput data: [B, Ci]\n"
    spec = check_text(text)
    found = [(d.code, d.span.line) for d in spec.diagnostics]
    assert ("E002", 4) in found and ("E003", 5) in found, found
