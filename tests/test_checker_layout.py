"""The layout model against PyTorch: for random pipelines of the operations that can return
a non-contiguous tensor, the checker's verdict on a later `view` and its predicted strides
must be torch's. Dropout runs in both modes (training, and eval, where nn.Dropout returns
its input): a `view` is legal only when it is legal in both."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples

from shapelang.checker.checker import check_text

torch = pytest.importorskip("torch")

SIZES = {"A": 2, "B": 3, "C": 5, "E": 7}
# sizes of 1 change torch's layouts (a reshape can be a view only then): the generic case
# is compared here, sizes of 1 in the regression tests below
HEADER = ("dim A, B, C, E\nassume A >= 2\nassume B >= 2\nassume C >= 2\nassume E >= 2\n"
          "example A=2, B=3, C=5, E=7\n")


class Pipeline:
    """A spec and the same computation in torch, built step by step."""

    def __init__(self, shape: list[str]):
        self.lines = [f"input X: [{', '.join(shape)}]"]
        self.inputs = {"X": list(shape)}
        self.shape = list(shape)        # dim texts of the current tensor
        self.steps = []                 # (fn(env, mode) -> tensor); env: name -> tensor
        self.cur = "X"
        self.n = 0

    def sizes(self, dims):
        return [_value(d) for d in dims]

    def step(self, text, fn, shape):
        self.n += 1
        name = f"t{self.n}"
        self.lines.append(f"{name}: {self.cur} -> {text}" if text else f"{name}: {fn[1]}")
        prev = self.cur
        call = fn[0] if isinstance(fn, tuple) else fn
        self.steps.append((name, lambda env, mode, prev=prev: call(env[prev], env, mode)))
        self.cur, self.shape = name, list(shape)

    def new_input(self, dims) -> str:
        name = f"Y{len(self.inputs)}"
        self.inputs[name] = list(dims)
        self.lines.insert(0, f"input {name}: [{', '.join(dims)}]")
        return name

    def text(self, final: str) -> str:
        return HEADER + "\n".join(self.lines) + f"\ny: {self.cur} -> {final}\n"

    def run(self, mode: str, final):
        gen = torch.Generator().manual_seed(0)
        env = {n: torch.randn(self.sizes(d), generator=gen) for n, d in self.inputs.items()}
        for name, fn in self.steps:
            env[name] = fn(env, mode)
        before = env[self.cur]
        try:
            final(before)
            return before, True
        except RuntimeError as err:
            assert "view size is not compatible" in str(err)
            return before, False


def _value(d: str) -> int:
    """A size written as a product of dims and numbers (`2*A*B`) at the example sizes."""
    out = 1
    for f in d.split("*"):
        out *= SIZES[f] if f in SIZES else int(f)
    return out


# ---------------------------------------------------------------- operations

def op_transpose(p, draw):
    r = len(p.shape)
    if r < 2:
        return
    i, j = draw(st.sampled_from(list(itertools.combinations(range(r), 2))))
    shape = list(p.shape)
    shape[i], shape[j] = shape[j], shape[i]
    p.step(f"transpose {i} {j}", lambda x, env, m: x.transpose(i, j), shape)


def op_permute(p, draw):
    order = draw(st.permutations(range(len(p.shape))))
    p.step("permute " + " ".join(map(str, order)), lambda x, env, m: x.permute(*order),
           [p.shape[k] for k in order])


def op_select(p, draw):
    if len(p.shape) < 2:
        return
    d = draw(st.integers(0, len(p.shape) - 1))
    p.step(f"select {d} 0", lambda x, env, m: x.select(d, 0), p.shape[:d] + p.shape[d + 1:])


def op_expand(p, draw):
    if len(p.shape) > 3:
        return
    d = draw(st.integers(0, len(p.shape)))
    shape = p.shape[:d] + ["1"] + p.shape[d:]
    p.step(f"unsqueeze {d}", lambda x, env, m: x.unsqueeze(d), shape)
    target = shape[:d] + ["E"] + shape[d + 1:]
    p.step(f"expand [{', '.join(target)}]",
           lambda x, env, m: x.expand(*[_value(t) for t in target]), target)


def op_unary(p, draw):
    p.step("relu", lambda x, env, m: x.relu(), p.shape)


def op_dropout(p, draw):
    prob = draw(st.sampled_from([0.5, 0.0]))
    drop = torch.nn.Dropout(prob)
    p.step(f"dropout {prob}", lambda x, env, m: drop.train(m == "train")(x), p.shape)


def op_binary(p, draw):
    """`prev + Y` or `Y + prev`, Y broadcast (a 1 somewhere) and maybe transposed."""
    r = len(p.shape)
    dims = [d if not draw(st.booleans()) else "1" for d in p.shape]
    drop_lead = draw(st.integers(0, max(0, r - 2)))
    dims = dims[drop_lead:]
    if len(dims) >= 2 and draw(st.booleans()):
        i, j = len(dims) - 2, len(dims) - 1
        decl = list(dims)
        decl[i], decl[j] = decl[j], decl[i]
        y = p.new_input(decl)
        other, other_fn = f"({y} -> transpose {i} {j})", (lambda e: e[y].transpose(i, j))
    else:
        y = p.new_input(dims)
        other, other_fn = y, (lambda e: e[y])
    first = draw(st.booleans())
    prev = p.cur
    text = f"{prev} + {other}" if first else f"{other} + {prev}"
    fn = (lambda x, env, m: x + other_fn(env)) if first else (lambda x, env, m: other_fn(env) + x)
    p.step(None, (fn, text), p.shape)


def op_einsum(p, draw):
    r = len(p.shape)
    if not 1 <= r <= 4:
        return
    letters = "abcd"[:r]
    if draw(st.booleans()):   # one operand: a permutation, maybe summing one index
        keep = list(draw(st.permutations(letters)))
        if r > 1 and draw(st.booleans()):
            keep.pop(draw(st.integers(0, r - 1)))
        eq = f"{letters}->{''.join(keep)}"
        p.step(f'einsum "{eq}"', lambda x, env, m: torch.einsum(eq, x),
               [p.shape[letters.index(ch)] for ch in keep])
        return
    if draw(st.booleans()):   # ellipsis: contract the last index with a new one
        last = letters[-1]
        out = draw(st.sampled_from(["...e", "e...", f"...{last}e"]))
        y = p.new_input([p.shape[-1], "E"])
        eq = f"...{last},{last}e->{out}"
        head = p.shape[:-1]
        shape = {"...e": head + ["E"], "e...": ["E"] + head}.get(out)
        if shape is None:   # `...de`: d is kept, so nothing is summed; a broadcast product
            shape = head + [p.shape[-1], "E"]
        p.step(f'einsum "{eq}" {y}', lambda x, env, m: torch.einsum(eq, x, env[y]), shape)
        return
    # two operands: contract one index with a new one
    k = draw(st.integers(0, r - 1))
    y = p.new_input([p.shape[k], "E"])
    out = [ch for ch in letters if ch != letters[k]] + ["e"]
    out = list(draw(st.permutations(out)))
    eq = f"{letters},{letters[k]}e->{''.join(out)}"
    sizes = {ch: d for ch, d in zip(letters, p.shape)} | {"e": "E"}
    p.step(f'einsum "{eq}" {y}', lambda x, env, m: torch.einsum(eq, x, env[y]),
           [sizes[ch] for ch in out])


def op_concat(p, draw):
    d = draw(st.integers(0, len(p.shape) - 1))
    prev = p.cur
    shape = list(p.shape)
    shape[d] = f"2*{shape[d]}" if shape[d] != "1" else "2"
    p.step(f"concat {d} {prev}", lambda x, env, m: torch.cat([x, x], d), shape)


def op_norm(p, draw):
    name = draw(st.sampled_from(["rmsnorm", "layernorm"]))
    width = _value(p.shape[-1])
    mod = torch.nn.RMSNorm(width) if name == "rmsnorm" else torch.nn.LayerNorm(width)
    p.step(name, lambda x, env, m: mod(x), p.shape)


def op_reshape(p, draw):
    """Merge two adjacent dims (a copy or a view, as torch decides)."""
    r = len(p.shape)
    if r < 2:
        return
    i = draw(st.integers(0, r - 2))
    merged = f"{p.shape[i]}*{p.shape[i + 1]}"
    shape = p.shape[:i] + [merged] + p.shape[i + 2:]
    p.step(f"reshape [{', '.join(shape)}]",
           lambda x, env, m: x.reshape(*[_value(t) for t in shape]), shape)


OPS = [op_transpose, op_permute, op_select, op_expand, op_unary, op_dropout, op_binary,
       op_einsum, op_concat, op_norm, op_reshape]


@st.composite
def pipelines(draw):
    rank = draw(st.integers(2, 4))
    shape = draw(st.permutations(list(SIZES)))[:rank]
    p = Pipeline(shape)
    for _ in range(draw(st.integers(1, 4))):
        draw(st.sampled_from(OPS))(p, draw)
    return p


def _checker_strides(spec, name):
    for b in spec.bindings:
        for n, t in zip(b.names, b.types):
            if n == name:
                return [int(spec.example_value(s)) for s in t.strides]
    return None


@settings(max_examples=examples(1500), deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(pipelines())
def test_view_legality_and_strides_agree_with_torch(p):
    text = p.text("view [-1]")
    spec = check_text(text, "layout.shape")
    results = [p.run(mode, lambda t: t.view(-1)) for mode in ("train", "eval")]
    torch_ok = all(ok for _, ok in results)
    assert spec.ok == torch_ok, (text, [d.message for d in spec.diagnostics],
                                 [(tuple(t.stride()), ok) for t, ok in results])
    before = results[0][0]
    strides = _checker_strides(spec, p.cur)
    if strides is not None:
        want = [s for s, n in zip(before.stride(), before.shape) if n > 1]
        got = [s for s, n in zip(strides, before.shape) if n > 1]
        assert got == want, (text, strides, before.stride())
