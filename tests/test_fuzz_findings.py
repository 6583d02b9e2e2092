"""Wrong verdicts a differential fuzzer found (issue 24), each as a reproduction with PyTorch's
verdict and a property test of its class against PyTorch: assumptions over derived sizes and
sums in any order, W202's help, negative starts, and the layout `view` sees after einsum, roll
and pad. The checker must stay sound: what it accepts, torch runs at every size that satisfies
the assumptions; and where torch runs at every such size, the reproductions must check."""
from __future__ import annotations

import functools
import itertools
import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from shapelang import check
from shapelang.checker import dims as dimlib

torch = pytest.importorskip("torch")
F = torch.nn.functional
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")


def codes(text: str) -> list[str]:
    return [d.code for d in check(text).diagnostics]


def sizes_satisfying(spec, names, values):
    """Assignments of `names` from `values` that satisfy the spec's assumptions, completed with
    the derived dims (the prover's own evaluation of the definitions)."""
    out = []
    for combo in itertools.product(values, repeat=len(names)):
        env = spec.prover.user_env(dict(zip(names, combo)))
        if env is None or any(v < 1 for v in env.values()):
            continue
        if all(dimlib._CMP[cmp](spec.prover.value(a, env), spec.prover.value(b, env))
               for a, cmp, b, _ in spec.assumptions):
            out.append({str(k): int(v) for k, v in env.items()})
    return out


# ------------------------------------------------------------------ the reproductions

REPRODUCTIONS = {
    # 1. an assume on a sum, and on a derived quotient
    "sum": ("dim E\ndim Dk = E + 1\nassume Dk % 2 == 0\ninput X: [Dk]\ny: X -> reshape [2, Dk/2]\n",
            ["E"], lambda s: torch.zeros(s["Dk"]).reshape(2, s["Dk"] // 2)),
    "quotient": ("dim D\ndim Np = D / 2\nassume Np % 2 == 0\ninput X: [Np]\ny: X -> slice 0 1 Np step=2\n",
                 ["D"], lambda s: torch.zeros(s["Np"])[1:s["Np"]:2]),
    # 3. the order of assumptions
    "order": ("dim D, H\nassume D % H == 0\nassume D % 2 == 0\ninput X: [D, D]\ny: X -> slice 1 1 D\n",
              ["D", "H"], lambda s: torch.zeros(s["D"], s["D"])[:, 1:s["D"]]),
    # 4. an even product is at least 2
    "even product": ("dim B, W\ndim Ctx = B*W\nassume Ctx % 2 == 0\ninput X: [Ctx - 1]\n", ["B", "W"],
                     lambda s: torch.zeros(s["Ctx"] - 1)),
    # 10. n(n+1) is even
    "consecutive": ("dim D\ninput X: [D, D + 1]\ny: X -> reshape [2, D*(D + 1)/2]\n", ["D"],
                    lambda s: torch.zeros(s["D"], s["D"] + 1).reshape(2, s["D"] * (s["D"] + 1) // 2)),
    # 7. roll returns a contiguous tensor
    "roll": ("dim A, B\ninput X: [A, B]\ny: X -> transpose 0 1 -> roll 1 0 -> view [-1]\n", ["A", "B"],
             lambda s: torch.zeros(s["A"], s["B"]).t().roll(1, 0).view(-1)),
    # 9. negative starts
    "narrow": ("dim S\nassume S >= 3\ninput X: [S]\ny: X -> narrow 0 -3 3\n", ["S"],
               lambda s: torch.zeros(s["S"]).narrow(0, -3, 3)),
    "slice": ("dim S, K\nassume K <= S\ninput X: [S]\ny: X -> slice 0 (-K) S\n", ["S", "K"],
              lambda s: torch.zeros(s["S"])[-s["K"]:s["S"]]),
}


@pytest.mark.parametrize("name", REPRODUCTIONS)
def test_what_torch_runs_at_every_allowed_size_checks(name):
    text, names, run = REPRODUCTIONS[name]
    spec = check(text)
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    allowed = sizes_satisfying(spec, names, range(1, 9))
    assert allowed
    for sizes in allowed:
        out = run(sizes)
        if spec.bindings:
            shape = [int(spec.prover.value(d, spec.prover.user_env(sizes))) for d in spec.bindings[-1].types[0].shape]
            assert shape == list(out.shape), sizes


@pytest.mark.parametrize("text, refused", [
    # 5. an index summed out of one operand: torch lays the result out as it likes
    ('dim B, O, F, Z\ninput a: [B, O]\ninput b: [O, F, Z]\ny: a -> einsum "bo,ofz->zb" b -> view [-1]\n',
     lambda: torch.einsum("bo,ofz->zb", torch.zeros(3, 2), torch.zeros(2, 5, 7)).view(-1)),
    # 6. a rearrange whose groups have size 1 at once: torch's reshape is a view there
    (('dim A, B, C, D\ninput x: [D*B*C*A]\ny: x -> rearrange "(d b c a) -> (a b) (c d)" a=A b=B c=C d=D '
      '-> view [-1]\n'),
     lambda: torch.zeros(4).reshape(2, 2, 1, 1).permute(3, 1, 2, 0).reshape(2, 2).view(-1)),
    # 8. pad with zero widths copies the transposed layout
    ("dim A, B\ninput X: [A, B]\ny: X -> transpose 0 1 -> pad [0, 0] -> view [-1]\n",
     lambda: F.pad(torch.zeros(3, 4).t(), [0, 0]).view(-1)),
])
def test_a_view_torch_refuses_is_refused(text, refused):
    with pytest.raises(RuntimeError):
        refused()
    assert codes(text) == ["E106"]


# ------------------------------------------------------------------ assumptions, any order

# derived dims (a sum, a product, a sum with a number) and divisibility assumptions over them,
# each with the test's own reading of it in Python
DEFS = {"P": ("A + B", lambda A, B: A + B), "Q": ("A * B", lambda A, B: A * B),
        "R": ("A + 1", lambda A, B: A + 1)}
FACTS = {"P % 2 == 0": lambda v: v["P"] % 2 == 0, "Q % 2 == 0": lambda v: v["Q"] % 2 == 0,
         "R % 2 == 0": lambda v: v["R"] % 2 == 0, "A % 2 == 0": lambda v: v["A"] % 2 == 0,
         "B % 3 == 0": lambda v: v["B"] % 3 == 0, "Q % B == 0": lambda v: v["Q"] % v["B"] == 0,
         "P % A == 0": lambda v: v["P"] % v["A"] == 0, "A >= 2": lambda v: v["A"] >= 2}
USES = [(f"reshape [2, {n}/2]", n, lambda t, n=n: t.reshape(2, t.shape[0] // 2) if t.shape[0] % 2 == 0
         else t.reshape(2, -1)) for n in DEFS] + \
       [(f"slice 0 1 {n}", n, lambda t: t[1:] if t.shape[0] > 1 else t[1:].reshape(1)) for n in DEFS]


@settings(max_examples=examples(2000), deadline=None)
@given(chosen=st.lists(st.sampled_from(sorted(FACTS)), min_size=1, max_size=3, unique=True),
       use=st.sampled_from(range(len(USES))), order=st.randoms(use_true_random=False))
def test_assumptions_over_derived_sizes_in_any_order(chosen, use, order):
    op, axis, _run = USES[use]
    head = "dim A, B\n" + "".join(f"dim {n} = {text}\n" for n, (text, _) in DEFS.items())
    failures = _torch_failures(frozenset(chosen), use)
    verdicts = set()
    for perm in {tuple(chosen), tuple(order.sample(chosen, len(chosen)))}:
        text = head + "".join(f"assume {f}\n" for f in perm) + f"input X: [{axis}]\ny: X -> {op}\n"
        ok = _checks(text)
        verdicts.add(ok)
        if ok:   # sound: torch runs at every allowed size tried
            assert not failures, (text, failures[:3])
    assert len(verdicts) == 1, chosen   # the order never changes the verdict


@functools.cache
def _checks(text: str) -> bool:
    return check(text).ok


@functools.cache
def _torch_failures(chosen, use) -> list:
    """The sizes A, B (1..12) that satisfy the assumptions where torch refuses the step."""
    _op, axis, run = USES[use]
    allowed = []
    for A, B in itertools.product(range(1, 13), repeat=2):
        v = {"A": A, "B": B, **{n: fn(A, B) for n, (_, fn) in DEFS.items()}}
        if all(FACTS[f](v) for f in chosen):
            allowed.append(v)
    failures = []
    for v in allowed:
        try:
            run(torch.zeros(v[axis]))
        except RuntimeError:
            failures.append(v)
    return failures


# ------------------------------------------------------------------ W202's help

@settings(max_examples=examples(2000), deadline=None)
@given(stride=st.integers(2, 4), padding=st.integers(0, 2), dilation=st.integers(1, 2),
       kernel=st.sampled_from(["K", "3", "K + 1"]))
def test_w202_help_silences_it_and_torch_agrees(stride, padding, dilation, kernel):
    head = "dim B, C, L, K\nassume K <= 3\nassume L >= 8\n"
    body = f"input X: [B, C, L]\ny: X -> conv1d C {kernel} stride={stride} padding={padding} dilation={dilation}\n"
    spec = check(head + body)
    found = [d for d in spec.diagnostics if d.code == "W202"]
    if not found:
        return
    (d,) = found
    assert d.fix is not None, d.help   # a line proved to silence it
    line = d.fix[1].strip()
    assert line.startswith("assume ")
    fixed = check(head + line + "\n" + body)
    assert fixed.ok and not fixed.diagnostics, (line, fixed.diagnostics)
    # not a tautology: some sizes break it, and where it holds torch's length is the exact one
    seen_odd = False
    for L, K in itertools.product(range(8, 14), range(1, 4)):
        sizes = {"B": 1, "C": 1, "L": L, "K": K}
        k = {"K": K, "3": 3, "K + 1": K + 1}[kernel]
        conv = torch.nn.Conv1d(1, 1, k, stride=stride, padding=padding, dilation=dilation)
        length = conv(torch.zeros(1, 1, L)).shape[-1]
        env = spec.prover.user_env(sizes)
        assert int(spec.prover.value(spec.bindings[-1].types[0].shape[2], env)) == length
        fixed_env = fixed.prover.user_env(sizes)
        if all(dimlib._CMP[cmp](fixed.prover.value(a, fixed_env), fixed.prover.value(b, fixed_env))
               for a, cmp, b, _ in fixed.assumptions):
            assert int(fixed.prover.value(fixed.bindings[-1].types[0].shape[2], fixed_env)) == length
        else:
            seen_odd = True
    assert seen_odd, line


# ------------------------------------------------------------------ negative starts

def _torch_position(op, x, s, S):
    """Whether torch takes start (or index) s on an axis of S, and the result."""
    try:
        if op == "narrow":
            return True, x.narrow(0, s, 1)
        if op == "select":
            return True, x[s] if -S <= s < S else x[S]
        out = x[s:S]
        return out.numel() > 0 and -S <= s, out   # an empty or clamped slice is refused too
    except (RuntimeError, IndexError):
        return False, None


STARTS = {"-K": lambda S, K: -K, "-3": lambda S, K: -3, "K - 4": lambda S, K: K - 4,
          "-1": lambda S, K: -1, "-S": lambda S, K: -S}


@settings(max_examples=examples(2000), deadline=None)
@given(op=st.sampled_from(["narrow", "slice", "select"]), start=st.sampled_from(sorted(STARTS)),
       extra=st.sampled_from(["assume K <= S", "assume S >= 3", "assume K <= 3"]))
def test_negative_starts_follow_torch(op, start, extra):
    text = (f"dim S, K\n{extra}\nassume S >= 1\ninput X: [S]\ny: X -> "
            + {"narrow": f"narrow 0 ({start}) 1", "slice": f"slice 0 ({start}) S",
               "select": f"select 0 ({start})"}[op] + "\n")
    spec = check(text)
    for S, K in itertools.product(range(1, 8), repeat=2):
        env = spec.prover.user_env({"S": S, "K": K})
        if not all(dimlib._CMP[cmp](spec.prover.value(a, env), spec.prover.value(b, env))
                   for a, cmp, b, _ in spec.assumptions):
            continue
        s = STARTS[start](S, K)
        ok, out = _torch_position(op, torch.zeros(S), s, S)
        if spec.ok:
            assert ok, (text, S, K)
            shape = [int(spec.prover.value(d, env)) for d in spec.bindings[-1].types[0].shape]
            assert shape == list(out.shape), (text, S, K)


# ------------------------------------------------------------------ layouts seen by `view`

def _view_verdict(text):
    spec = check(text)
    errors = [d.code for d in spec.errors()]
    assert set(errors) <= {"E106"}, (text, spec.diagnostics)
    return not errors


LETTERS = "abcde"


@st.composite
def einsums(draw):
    n = draw(st.integers(1, 2))
    inputs = []
    for _ in range(n):
        k = draw(st.integers(1, 4))
        inputs.append("".join(draw(st.permutations(LETTERS))[:k]))
    used = sorted(set("".join(inputs)))
    output = "".join(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
    perms = [draw(st.permutations(range(len(s)))) for s in inputs]
    return inputs, output, perms


@settings(max_examples=examples(2000), deadline=None)
@given(case=einsums(), sizes=st.lists(st.sampled_from([1, 2, 3]), min_size=5, max_size=5))
def test_einsum_layout_then_view(case, sizes):
    inputs, output, perms = case
    size = dict(zip(LETTERS, sizes))
    lines = ["dim " + ", ".join(ch.upper() for ch in LETTERS)]
    names, tensors = [], []
    for k, (s, perm) in enumerate(zip(inputs, perms)):
        stored = [s[p] for p in perm]   # the operand as stored, permuted into the equation's order
        back = [perm.index(i) for i in range(len(s))]
        lines.append(f"input t{k}: [{', '.join(ch.upper() for ch in stored)}]")
        names.append(f"(t{k} -> permute {' '.join(map(str, back))})" if len(s) > 1 else f"t{k}")
        tensors.append(torch.zeros([size[ch] for ch in stored]).permute(back))
    eq = ",".join(inputs) + "->" + output
    rest = f' {names[1]}' if len(names) > 1 else ""
    lines.append(f'y: {names[0]} -> einsum "{eq}"{rest} -> view [-1]')
    accepted = _view_verdict("\n".join(lines) + "\n")
    if accepted:   # sound: a view the checker accepts runs at these sizes, ones included
        torch.einsum(eq, *tensors).view(-1)
    else:          # and never a false error: some sizes make torch refuse it too
        used = sorted(set("".join(inputs)))
        assert any(not _einsum_views(eq, inputs, perms, dict(zip(used, at)))
                   for at in itertools.product([1, 2, 3], repeat=len(used))), "\n".join(lines)


def _einsum_views(eq, inputs, perms, size) -> bool:
    tensors = [torch.zeros([size[s[p]] for p in perm]).permute([perm.index(i) for i in range(len(s))])
               for s, perm in zip(inputs, perms)]
    try:
        torch.einsum(eq, *tensors).view(-1)
    except RuntimeError:
        return False
    return True


def test_a_view_after_a_contraction_over_an_index_of_one_follows_torch():
    """At E=1 torch sums `e` out of nothing and lays `cba` out by a mul, not a bmm: the view is
    refused there, so the checker refuses it for sizes that may be 1."""
    text = ('dim A, B, C, E\ninput t0: [E]\ninput t1: [A, B, C, E]\n'
            'y: t0 -> einsum "e,abce->cba" t1 -> view [-1]\n')
    with pytest.raises(RuntimeError):
        torch.einsum("e,abce->cba", torch.zeros(1), torch.zeros(1, 2, 2, 1)).view(-1)
    assert not _view_verdict(text)
    assert _view_verdict(text.replace("dim A, B, C, E\n", "dim A, B, C, E\nassume E >= 2\n"))


@pytest.mark.parametrize("eq, shapes", [("bqd,bkd->bkq", [(2, 3, 1), (2, 7, 1)]),
                                        ("abc->ca", [(2, 1, 5)]), ("ab,cb->ca", [(3, 1), (7, 1)])])
def test_a_view_after_a_size_one_contraction_torch_accepts_is_not_refused(eq, shapes):
    """The other side of the gap: attention scores by einsum, then `view`, are correct at every
    size, a head width of 1 included; the checker must not argue a learner out of them."""
    torch.einsum(eq, *[torch.zeros(*s) for s in shapes]).view(-1)     # torch accepts
    ins, _out = eq.split("->")
    dims = sorted(set(ins) - {","})
    lines = ["dim " + ", ".join(ch.upper() for ch in dims)]
    lines += [f"input t{k}: [{', '.join(ch.upper() for ch in s)}]" for k, s in enumerate(ins.split(","))]
    rest = " t1" if "," in ins else ""
    lines.append(f'y: t0 -> einsum "{eq}"{rest} -> view [-1]')
    assert _view_verdict("\n".join(lines) + "\n")


@settings(max_examples=examples(2000), deadline=None)
@given(rank=st.integers(2, 4), data=st.data())
def test_roll_and_pad_layout_then_view(rank, data):
    perm = data.draw(st.permutations(range(rank)))
    sizes = data.draw(st.lists(st.integers(3, 4), min_size=rank, max_size=rank))
    op = data.draw(st.sampled_from(["roll", "pad"]))
    names = "ABCD"[:rank]
    if op == "roll":
        axis = data.draw(st.integers(0, rank - 1))
        shift = data.draw(st.integers(-2, 2))
        step, run = f"roll {shift} {axis}", lambda t: t.roll(shift, axis)
    else:
        widths = data.draw(st.lists(st.integers(-1, 1), min_size=2, max_size=2 * rank).filter(lambda w: len(w) % 2 == 0))
        step, run = f"pad [{', '.join(map(str, widths))}]", lambda t: F.pad(t, widths)
    text = (f"dim {', '.join(names)}\n" + "".join(f"assume {n} >= 3\n" for n in names)
            + f"input X: [{', '.join(names)}]\ny: X -> permute {' '.join(map(str, perm))} -> {step} -> view [-1]\n")
    spec = check(text)
    if any(d.code != "E106" for d in spec.errors()):
        return   # a width that crops a size to 0: refused before the view
    accepted = spec.ok
    t = run(torch.zeros(sizes).permute(perm))   # sizes that stay above 1 after a crop: generic
    try:
        t.view(-1)
        torch_ok = True
    except RuntimeError:
        torch_ok = False
    assert accepted == torch_ok, (text, t.stride())


def _groups(draw, axes):
    """The axes cut into consecutive groups, as a pattern side: `a (b c) d`."""
    cuts = sorted(draw(st.sets(st.integers(1, len(axes) - 1), max_size=len(axes) - 1))) if len(axes) > 1 else []
    bounds = [0, *cuts, len(axes)]
    return [axes[i:j] for i, j in itertools.pairwise(bounds)]


@settings(max_examples=examples(2000), deadline=None)
@given(data=st.data())
def test_rearrange_layout_then_view(data):
    """einops' rearrange is a reshape to the elementary axes, a permute and a reshape to the
    output groups; torch decides at run time whether each reshape is a view, also where a
    group has size 1."""
    n = data.draw(st.integers(2, 4))
    axes = list("abcd"[:n])
    size = dict(zip(axes, data.draw(st.lists(st.sampled_from([1, 2, 3]), min_size=n, max_size=n))))
    left = _groups(data.draw, data.draw(st.permutations(axes)))
    right = _groups(data.draw, data.draw(st.permutations(axes)))
    side = lambda groups: " ".join(g[0] if len(g) == 1 else f"({' '.join(g)})" for g in groups)
    shape = [math.prod(size[a] for a in g) for g in left]
    perm = data.draw(st.permutations(range(len(left))))    # how the input is stored
    back = [perm.index(i) for i in range(len(left))]
    dims = [f"{a.upper()}" for a in axes]
    lines = [f"dim {', '.join(dims)}",
             f"input x: [{', '.join('*'.join(a.upper() for a in left[p]) for p in perm)}]"]
    src = f"(x -> permute {' '.join(map(str, back))})" if len(left) > 1 else "x"
    kw = " ".join(f"{a}={a.upper()}" for a in axes)
    lines.append(f'y: {src} -> rearrange "{side(left)} -> {side(right)}" {kw} -> view [-1]')
    spec = check("\n".join(lines) + "\n")
    errors = [d.code for d in spec.errors()]
    assert set(errors) <= {"E106"}, (lines, spec.diagnostics)
    x = torch.zeros([shape[p] for p in perm]).permute(back) if len(left) > 1 else torch.zeros(shape)
    flat = [size[a] for g in left for a in g]
    order = [a for g in left for a in g]
    t = x.reshape(flat) if flat != list(x.shape) else x
    t = t.permute([order.index(a) for g in right for a in g])
    final = [math.prod(size[a] for a in g) for g in right]
    t = t.reshape(final) if final != list(t.shape) else t
    if not errors:   # sound: a view the checker accepts runs at these sizes
        t.view(-1)


def test_a_layout_counterexample_names_every_size_torch_needs():
    """The layout that refuses this view needs H=1 and lambda=1, and N of 2 or more: at the
    example's N=1 torch runs it. The counterexample must be sizes where torch refuses."""
    text = ("dim N, I, lambda, C, H\nexample N=1, I=2, lambda=1, C=5, H=1\n"
            "input t0: [N*lambda, I + C, I, H]\n"
            'y: t0 -> einsum "abcd->dab" -> rearrange "a0 (b0 h0) w0 -> (a0 w0 h0) b0" b0=N h0=lambda'
            " -> view [H*(I + C)*lambda*N, 1, 1]\n")
    (d,) = check(text).errors()
    assert d.code == "E106" and d.counterexample["N"] >= 2, d
    s = d.counterexample
    t = torch.zeros(s["N"] * s["lambda"], s["I"] + s["C"], s["I"], s["H"])
    x = torch.einsum("abcd->dab", t).reshape(s["H"], s["N"], s["lambda"], s["I"] + s["C"])
    x = x.permute(0, 3, 2, 1).reshape(-1, s["N"])
    with pytest.raises(RuntimeError):
        x.view(-1, 1, 1)
