"""`expect NAME: [..]`: the spec's own test of a shape.

An expectation that holds at the example sizes but is written with numbers where the
tensor has dims (`expect Y: [1, 4, 512]` for `[B, S, D]`) is not "self-contradictory":
it is right only for those sizes. The message says so, as the grader does, and proposes
the shape written with the dims (proved by re-checking, like every fix).
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax.diagnostics import ShapeError
from ..syntax.nodes import Expect, Hole
from . import dims as dimlib
from . import dtypes


def check(c, s: Expect) -> None:
    if s.name not in c.scope.values:
        c.error("E002", f"`expect` names `{s.name}`, which is not defined above", s.name_span,
                c._did_you_mean(s.name, c.scope.values))
        return
    got = c.scope.values[s.name]
    if got is None:
        return   # its statement failed: that error is the one to fix
    try:
        if isinstance(s.shape, Hole):
            raise dimlib.unfilled(s.shape)
        c.data_names = data_names(c.prover)
        try:
            want = [c.build(d) for d in s.shape.dims]
        finally:
            c.data_names = {}
        numbers = _only_at_example(c, got[0].shape, want, s.shape.span)
        if numbers is not None:
            raise numbers
        c.need_shape_equal(got[0].shape, want, span=s.shape.span, code="E107",
                           message=lambda: f"`{s.name}` is {c.show(got[0])}, but the spec expects "
                                   f"{c.show_shape(want)}")
        if s.dtype is not None:
            _check_dtype(s, got[0].dtype)
    except ShapeError as err:
        where = c.scope.spans.get(s.name)
        if err.code == "E107" and where is not None and where.line != s.span.line:
            verb = "declared" if any(d.name == s.name for d in c.scope.decls) else "computed"
            what = f"{dtypes.show(got[0].dtype)} values" if err.span == s.dtype_span else c.show(got[0])
            err = replace(err, labels=tuple(err.labels) + ((where, f"`{s.name}` is {verb} here: {what}"),))
        c.report(err.at(s.span))
        return
    c.out.expects.append((s.name, tuple(want), s.span))


def _check_dtype(s: Expect, got: str) -> None:
    """`expect m: [S, S] bool`: the dtype too (spelled as in an `input`: `long` is `int`)."""
    want = dtypes.canonical(s.dtype)
    if want is None:
        raise dtypes.unknown(s.dtype, s.dtype_span)
    if want != got:
        raise ShapeError("E107", f"`{s.name}` holds {dtypes.show(got)} values, but the spec expects "
                                 f"{dtypes.show(want)}", span=s.dtype_span,
                         help=f"cast it where it is computed (`-> to {want}`), or expect "
                              f"{dtypes.show(got)}")


def data_names(prover) -> dict:
    """The data-dependent sizes an `expect` may name (`expect h: [N_tok, D]`): by their names,
    and by the name without the `_2` of a later occurrence (a block called again)."""
    out = {}
    for sym in prover.unbacked:
        name = str(sym)
        out[name] = sym
        base, _, k = name.rpartition("_")
        if k.isdigit() and base in out:
            out[base] = sym
    return out


def _only_at_example(c, got, want, span) -> ShapeError | None:
    """E107 for an expectation that equals the shape at the example sizes only, because
    it writes numbers where the shape has dims; None otherwise."""
    if len(got) != len(want) or c.example_env is None:
        return None
    fixed = [k for k, (a, b) in enumerate(zip(got, want))
             if b.is_Number and not a.is_Number and not c.prover.equal(a, b).ok]
    if not fixed or any(c.ex(a) is None or c.ex(a) != c.ex(b) for a, b in zip(got, want)):
        return None
    if any(not c.prover.equal(a, b).ok for k, (a, b) in enumerate(zip(got, want)) if k not in fixed):
        return None
    sizes = ", ".join(f"{c.sz(got[k])}={dimlib.fmt_value(c.ex(got[k]))}" for k in fixed)
    which = "it is written with numbers" if len(fixed) == len(want) else \
        f"dim{'s' if len(fixed) > 1 else ''} {', '.join(map(str, fixed))} {'are' if len(fixed) > 1 else 'is'} " \
        "written as numbers"
    shape = "[" + ", ".join(c.sz(d) for d in got) + "]"
    return ShapeError(
        "E107", f"the expected shape {c.show_shape(want)} matches {c.show_shape(got)} only at the "
                f"example sizes ({sizes}): {which}, so it is right only for those sizes",
        help="write the shape with the dims, so that it holds for every size", span=span,
        fixes=((span, shape, "write the shape with the dims, so that it holds for every size"),))
