"""The op table's fields that lists elsewhere are derived from, each pinned against what it
means: PyTorch's own results where PyTorch can compute them, else what a learner sees (the
grader's feedback, the pictures, the checker's findings)."""
from __future__ import annotations

import contextlib
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from shapelang import api
from shapelang.checker.ops.table import TABLE

SQUARE = "dim B, S\nexample B=2, S=5\ninput x: [B, S, S]\n"


def _feedback(tmp_path, body: str, reference: str, answer: str) -> str:
    exercise, solution = tmp_path / "ex.shape", tmp_path / "sol.shape"
    exercise.write_text("# Exercise\n" + body + "# ?y: 2 points\ny: ?y\n")
    solution.write_text("# Exercise\n" + body + f"# ?y: 2 points\ny: {reference}\n")
    res = api.grader(str(exercise), str(solution)).grade_text(exercise.read_text().replace("?y", answer))
    assert not res.full_marks
    return res.blanks[0].feedback


@pytest.mark.parametrize("name", sorted(n for n, d in TABLE.items() if (d.reduces or d.normalises)
                                        and d.values[:1] == ("dim",)))
def test_a_reduction_or_softmax_along_the_wrong_axis_is_named_so(name, tmp_path):
    """Every operation the table says reduces or normalises along `dim` gets the advice about
    its axis, not only the four once written out (`std 1` for `std 2` on [B, S, S])."""
    msg = _feedback(tmp_path, SQUARE, f"x -> {name} 2", f"x -> {name} 1")
    assert f"`{name}` {'normalises' if TABLE[name].normalises else 'reduces'} over the wrong dim" in msg


@pytest.mark.parametrize("reference, answer", [("x -> var -1 correction=0", "x -> var -1"),
                                               ("x -> softmax -1 dtype=float32", "x -> softmax -1")])
def test_another_argument_is_not_called_the_wrong_axis(reference, answer, tmp_path):
    """The same axis with another correction or dtype: the axis is right, so the feedback
    does not send the learner to change it."""
    msg = _feedback(tmp_path, SQUARE, reference, answer)
    assert "wrong dim" not in msg and "different arguments" in msg, msg


def _torch_call(torch, name: str, x):
    """torch.NAME along axis 1 (after a count of 1 when it takes one first); None: PyTorch has
    no such function of a tensor and an axis."""
    f = getattr(torch, name, None)
    for args in ((x,), (x, 1)):
        try:
            return f(*args, dim=1) if f is not None else None
        except (TypeError, RuntimeError):
            continue
    return None


def test_the_ranking_operations_are_the_ones_pytorch_gives_positions_for():
    """OpDef.ranks: an operation that chooses or orders along its axis by comparing entries is
    one whose PyTorch function returns the positions it chose (torch.return_types' indices,
    or argmax's int64 result). median, cummax and cummin are among them."""
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 3, 4)
    for name, d in TABLE.items():
        r = _torch_call(torch, name, x)
        if r is None:
            assert not d.ranks, name
            continue
        positions = isinstance(r, tuple) and hasattr(r, "indices") or \
            isinstance(r, torch.Tensor) and r.dtype == torch.int64
        assert positions == d.ranks, name


def _ranking_use(name: str) -> str:
    """`NAME 1 -1`: the operation with a count of 1 and the last axis, from its usage."""
    words = [w.strip("[]") for w in TABLE[name].usage.split()[1:] if "=" not in w]
    return " ".join([name] + [{"K": "1", "A": "-1"}[w] for w in words if w in ("K", "A")])


@pytest.mark.parametrize("name", sorted(n for n, d in TABLE.items() if d.ranks and d.provenance))
def test_choosing_by_weights_normalised_along_another_axis_is_found(name):
    """A router's softmax over the tokens, then a choice among the experts: W303, whichever
    ranking operation chooses (median and a running maximum compare the weights too)."""
    names = "v, y" if TABLE[name].use.startswith("v, y:") else "y"
    head = "dim B, S, D, E\nexample B=2, S=5, D=16, E=4\ninput x: [B, S, D]\n"
    wrong = api.check(head + f"probs: x -> linear E bias=false -> softmax 1\n{names}: probs -> {_ranking_use(name)}\n")
    assert [d.code for d in wrong.diagnostics] == ["W303"], api.render_check(wrong)
    right = api.check(head + f"probs: x -> linear E bias=false -> softmax -1\n{names}: probs -> {_ranking_use(name)}\n")
    assert right.ok and not right.diagnostics, api.render_check(right)


def _reduce_twice(torch, name: str, x):
    """(NAME over axes 1 and 2 at once, NAME over axis 2 then axis 1), every result of each."""
    f = torch.linalg.vector_norm if name == "norm" else getattr(torch, name)
    k = (1,) if "k" in TABLE[name].positional else ()
    x = x > 0 if TABLE[name].dtype == "bool" else x

    def results(r):
        return list(r) if isinstance(r, tuple) else [r]

    once = results(f(x.flatten(1, 2), *k, dim=1))
    inner = results(f(x, *k, dim=2))
    twice = results(f(inner[0], *k, dim=1))
    return once, twice


def _same(torch, a: list, b: list) -> bool:
    return len(a) == len(b) and all(u.shape == v.shape and torch.allclose(
        u.double(), v.double(), equal_nan=True) for u, v in zip(a, b))


REDUCTIONS = sorted(n for n, d in TABLE.items() if d.reduces)


@settings(max_examples=examples(100), deadline=None)
@given(data=st.data())
def test_a_composing_reduction_over_two_axes_is_itself_once_per_axis(data):
    """OpDef.composes, against PyTorch: `sum` over two axes is `sum` over one, then the other
    (the importer writes `x.sum((1, 2))` so), for any values, NaN included."""
    torch = pytest.importorskip("torch")
    name = data.draw(st.sampled_from([n for n in REDUCTIONS if TABLE[n].composes]))
    values = data.draw(st.lists(st.sampled_from([-2.0, -0.5, 0.0, 1.0, 3.0, float("nan")]),
                                min_size=24, max_size=24))
    x = torch.tensor(values, dtype=torch.float64).reshape(2, 3, 4)
    once, twice = _reduce_twice(torch, name, x)
    assert _same(torch, once, twice), name


@pytest.mark.parametrize("name", [n for n in REDUCTIONS if not TABLE[n].composes])
def test_a_reduction_that_does_not_compose_differs_once_per_axis(name):
    """The other reductions (var, median, argmax, max with its indices...) give another result
    when applied axis by axis, so the importer keeps them whole."""
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x[0, 1, 2] = float("nan")
    once, twice = _reduce_twice(torch, name, x)
    assert not _same(torch, once, twice), name


# for each operation that sums products over an axis (or looks rows up): a use, and the axis
# of its inputs that the picture shows gone
CONTRACTING = {
    "linear": ("y: x -> linear F", "D"),
    "einsum": ('y: x -> einsum "bsd,btd->bst" x', "D"),
    "embed": ("y: ids -> embed W", "V"),
    "attention": ("y: q -> attention x x", "S"),
}


@pytest.mark.parametrize("name", sorted(n for n, d in TABLE.items() if d.contracts))
def test_the_picture_shows_the_axis_an_operation_contracts(name):
    """OpDef.contracts: the trace's picture tags the axis the step sums products over (or
    whose rows it looks up) as gone, in the table's word; attention's keys axis too."""
    import re

    from shapelang.render.html import trace_html

    line, axis = CONTRACTING[name]
    spec = api.check("dim B, S, L, D, F, V\nexample B=2, S=5, L=3, D=8, F=16, V=11\ninput x: [B, S, D]\n"
                     "input q: [B, L, D]\ninput ids: [B, S] int\nparam W: [V, D]\n" + line + "\n")
    assert spec.ok, api.render_check(spec)
    page = trace_html(spec)
    step = page[page.index(f'data-step="{spec.bindings[-1].steps[-1].ref}"'):]
    assert re.search(f'<g data-axis="{axis}" data-tag="{TABLE[name].contracts}">', step), step[:3000]


def test_the_statistics_are_the_reductions_pytorch_computes_them_with():
    """OpDef.statistic, against PyTorch: the reductions whose result is the mean, the sum or a
    spread (the variance or its root) of their axis, on values with no NaN (so nanmean is a
    mean); every other reduction is none of these."""
    torch = pytest.importorskip("torch")
    x = torch.rand(2, 5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64) + 0.5
    for name in REDUCTIONS:
        r = torch.linalg.vector_norm(x, dim=1) if name == "norm" else _torch_call(torch, name, x)
        r = (r[0] if isinstance(r, tuple) else r).double()
        kind = "mean" if torch.allclose(r, x.mean(1)) else "sum" if torch.allclose(r, x.sum(1)) else \
            "var" if torch.allclose(r, x.var(1)) or torch.allclose(r * r, x.var(1)) else ""
        assert kind == TABLE[name].statistic, name


@pytest.mark.parametrize("name", sorted(n for n, d in TABLE.items() if d.statistic == "mean"))
def test_a_mean_along_another_axis_than_the_variance_is_found(name):
    """A hand-written layer norm whose mean runs over the tokens (W304, with the fix moving it
    to the features), whichever reduction of the table computes the mean."""
    head = "dim B, S, D\nexample B=1, S=4, D=512\ninput x: [B, S, D]\n"
    tail = "sigma2: x -> var -1 keepdim\nout: (x - mu) / (sigma2 + 1e-5 -> sqrt)\n"
    wrong = api.check(head + f"mu: x -> {name} 1 keepdim\n" + tail)
    assert [(d.code, d.span.line) for d in wrong.diagnostics] == [("W304", 4)], api.render_check(wrong)
    assert wrong.diagnostics[0].fix[1] == f"{name} -1 keepdim"
    assert not api.check(head + f"mu: x -> {name} -1 keepdim\n" + tail).diagnostics


# a PyTorch module for each operation whose result holds features, mapping 8 features to 16
FEATURE_MODULES = {
    "linear": ("Linear", (8, 16), (2, 5, 8)), "embed": ("Embedding", (8, 16), (2, 5)),
    "layernorm": ("LayerNorm", (16,), (2, 5, 16)), "rmsnorm": ("RMSNorm", (16,), (2, 5, 16)),
    "conv1d": ("Conv1d", (8, 16, 3), (2, 8, 7)), "conv2d": ("Conv2d", (8, 16, 3), (2, 8, 7, 7)),
}


@pytest.mark.parametrize("name", sorted(n for n, d in TABLE.items() if d.features is not None))
def test_the_features_axis_is_where_pytorch_puts_the_layers_width(name):
    """OpDef.features, against PyTorch: the layer's 16 features sit at that axis of its result,
    batched or not (an unbatched Conv1d's channels are axis -2 as well)."""
    torch = pytest.importorskip("torch")
    cls, args, shape = FEATURE_MODULES[name]
    module = getattr(torch.nn, cls)(*args)
    for batch in (shape, shape[1:]):
        x = torch.randint(0, 8, batch) if name == "embed" else torch.randn(batch)
        assert module(x).shape[TABLE[name].features] == 16, (name, batch)


def _pytorch_params():
    for name, d in TABLE.items():
        for param in d.pytorch or ():
            yield name, param


@pytest.mark.parametrize("name, param", [(n, p) for n, p in _pytorch_params() if p[0] == "*" or "=" in p])
def test_the_pytorch_parameters_of_a_method_are_pytorchs_own(name, param):
    """OpDef.pytorch, against PyTorch's signatures: `*shape` (sizes as several arguments or one
    list) and `dim=0` (a default shapelang writes out) are what PyTorch documents."""
    torch = pytest.importorskip("torch")
    docs = [(getattr(m, name).__doc__ or "").lstrip() for m in (torch.Tensor, torch) if hasattr(m, name)]
    signatures = [doc.splitlines()[0] for doc in docs if doc.startswith(name + "(")]
    with contextlib.suppress(TypeError, ValueError):   # a function written in Python: its defaults
        signatures.append("(" + ", ".join(f"{p.name}={p.default}" for p in
                                          inspect.signature(getattr(torch, name, None)).parameters.values()))
    assert any(param in sig[sig.find("("):] for sig in signatures), (name, param, signatures)


# PyTorch methods as a learner writes them, and the same computed by PyTorch
METHODS = [
    ("x.flatten(end_dim=1)", lambda x, m: x.flatten(end_dim=1)),
    ("x.flatten()", lambda x, m: x.flatten()),
    ("x.chunk(2)", lambda x, m: x.chunk(2)[0]),
    ("x.split(1)", lambda x, m: x.split(1)[0]),
    ("x.view(2, S * D)", lambda x, m: x.view(2, 12)),
    ("x.reshape([2 * S, D])", lambda x, m: x.reshape([6, 4])),
    ("x.expand(3, 2, S, D)", lambda x, m: x.expand(3, 2, 3, 4)),
    ("x.permute(2, 0, 1)", lambda x, m: x.permute(2, 0, 1)),
    ("x.permute([0, 2, 1])", lambda x, m: x.permute([0, 2, 1])),
    ("x.swapaxes(0, 2)", lambda x, m: x.swapaxes(0, 2)),
    ("x.swapdims(1, 2)", lambda x, m: x.swapdims(1, 2)),
    ("x.contiguous()", lambda x, m: x.contiguous()),
    ("x.masked_fill(m, 0.5)", lambda x, m: x.masked_fill(m, 0.5)),
]


@pytest.mark.parametrize("text, method", METHODS, ids=[t for t, _ in METHODS])
def test_a_pytorch_method_becomes_the_operation_pytorch_computes(text, method):
    """`x.flatten(end_dim=1)` and its kin read in shapelang as a line that checks clean and
    gives PyTorch's shape (`flatten 0 1`: PyTorch's start_dim=0 written out, not `flatten 1`)."""
    torch = pytest.importorskip("torch")
    head = "dim S, D\nexample S=3, D=4\ninput x: [2, S, D]\ninput m: [2, S, D] bool\n"
    from shapelang.checker.habits.spellings import translate_expression

    fixed = translate_expression(text)[0]
    names = "y, z" if " chunk " in fixed or " split " in fixed else "y"   # 2 pieces
    spec = api.check(head + f"{names}: {fixed}\n")
    assert spec.ok and not spec.diagnostics, api.render_check(spec)
    sizes = {"S": 3, "D": 4}
    shape = [int(e.subs({s: sizes[s.name] for s in getattr(e, "free_symbols", ())}))
             for e in spec.bindings[-1].types[0].shape]
    assert shape == list(method(torch.randn(2, 3, 4), torch.zeros(2, 3, 4, dtype=torch.bool)).shape), fixed
