"""Shape rules that move or regroup elements: view, reshape, transpose, permute,
(un)squeeze, flatten, expand, repeat_interleave, rearrange."""
from __future__ import annotations

import itertools

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import ShapeLit
from ..layout import Geometry, TensorType, contiguous, fresh, torch_contiguous, view_strides
from ..lazysympy import sympy as sp
from . import patterns
from .args import Args, Result, _ax, _is_minus_one, prod


def _reshape(c, x: TensorType, a: Args, *, view: bool) -> Result:
    a.count(1, usage=f"{a.op.name} [B, S, D]")
    target, infer = a.shape_at(0)
    numel = prod(x.shape)
    if infer is not None:
        known = prod(d for j, d in enumerate(target) if j != infer)
        inferred = c.prover.name_of(sp.cancel(numel / known))
        c.need_whole(inferred, span=a.pos[0].dims[infer].span,
                     what=lambda: f"the -1 in `{a.op.text}` stands for {c.sz(inferred)}")
        if known.free_symbols & c.prover.zero_ok:   # torch cannot infer -1 beside a size 0
            c.need_positive(known, a.pos[0].span,
                            what=lambda: f"the product of the sizes beside the -1 ({c.sz(known)})")
        if inferred.free_symbols & set(c.prover.unbacked):   # of a data-dependent size: may be 0
            c.need_leq(sp.S.Zero, inferred, span=a.pos[0].dims[infer].span,
                       message=lambda: f"the -1 in `{a.op.text}` stands for {c.sz(inferred)}, which may be negative")
        else:
            c.need_positive(inferred, a.pos[0].dims[infer].span)
        target[infer] = inferred
    else:
        c.need_equal(numel, prod(target), code="E103", span=a.pos[0].span,
                     message=lambda: f"`{a.op.name}` cannot turn {c.show(x)} into {c.show_shape(target)}: "
                     f"{c.sz(numel)} elements cannot become {c.sz(prod(target))}",
                     help="the product of the new sizes must equal the product of the old ones")
    out, copies, refused = regroup(c, x, target)
    if view and (copies or refused):
        notes = ["PyTorch raises: view size is not compatible with input tensor's size and stride"]
        cex = None
        if refused and not copies:
            notes.insert(0, f"{x.why}: the view is legal for one of these layouts, not for all")
            sub = next((s for s in refused if s), None)
            cex = _refusal_sizes(c, x, target, sub) if sub else None
            if cex:
                notes.insert(1, "counterexample: " + ", ".join(f"{k}={v}" for k, v in cex.items()))
        raise ShapeError(
            "E106", f"`view` cannot give {c.show(x)} the shape {c.show_shape(target)} without copying",
            help=f"the dims it merges or splits are not adjacent in memory (after a transpose or "
                 f"permute); use `reshape {_shape_src(c, target, infer)}`, or add `-> contiguous` first",
            notes=tuple(notes), counterexample=cex, span=a.op.span)
    return Result((out,), detail={"shape": tuple(target), "infer": infer, "copies": copies})


def _refusal_sizes(c, x: TensorType, target, sub: dict) -> dict | None:
    """Sizes at which a layout that refuses the view is the one torch has: the sizes `sub`
    sets to 1 at 1, and every other free size of the shapes at 2 or more (a layout rule holds
    a size it has not proved to be 1 above 1), the example's value where it is one of those,
    with every assumption holding. Shown for the sizes of the shapes; None where the bounded
    search finds none, so that no counterexample is shown rather than a wrong one."""
    p = c.prover
    free = set(p.free_vars())
    ones = {k for k, v in sub.items() if v == 1 and k in free}
    shown = sorted({s for d in (*x.shape, *target) for s in d.free_symbols} | set(ones), key=str)
    rest = sorted({s for d in (*x.shape, *target) for s in p.canon(d).free_symbols} & free - ones, key=str)
    base = {**p._canon_example(), **{o: 1 for o in ones}}
    choices = [list(dict.fromkeys(([base[v]] if base.get(v, 0) >= 2 else []) + [2, 3, 4])) for v in rest]
    for values in itertools.islice(itertools.product(*choices), 256):
        env = p._to_user({**base, **dict(zip(rest, values))})
        if env is not None:
            return {str(s): int(env[s]) for s in shown if s in env}
    return None


def regroup(c, x: TensorType, target, *, size_one: bool = True):
    """x.reshape(target) as torch lays it out: a view where computeStride allows one, else
    a contiguous copy, for every layout x may have. Returns the result, whether its main
    layout copies, and the alternative layouts (their size substitutions) that copy: a
    `view` fails at run time in any of them. A copy that is a view when a size is 1 gets
    that view as an alternative layout (when it is not a contiguous one anyway)."""
    target = tuple(target)
    main = view_strides(x, target, c.same)
    refused = []
    alt = []
    for shape, strides, subst in list(x.layouts())[1:]:
        t = tuple(d.xreplace(subst) for d in target)
        st = view_strides(TensorType(shape, strides), t, c.same)
        if st is None:
            refused.append(subst)
            st = contiguous(t)
        alt.append((tuple(st), tuple(subst.items())))
    why = x.why
    if main is None and size_one:
        for sub in one_sets(c, x):
            shape = tuple(d.xreplace(sub) for d in x.shape)
            t = tuple(d.xreplace(sub) for d in target)
            st = view_strides(TensorType(shape, tuple(v.xreplace(sub) for v in x.strides)), t,
                              c.same)
            if st is not None and not torch_contiguous(t, st, Geometry(c.prover.canon, c.same)):
                alt.append((tuple(st), tuple(sub.items())))
                why = why or "`reshape` returns a view instead of a copy when a size it merges is 1"
    strides = main if main is not None else contiguous(target)
    alt = tuple(a for a in dict.fromkeys(alt) if a[1] or a[0] != tuple(strides))
    return TensorType(target, tuple(strides), x.dtype, alt, why if alt else ""), main is None, refused


def _maybe_one(c, x):
    """The free sizes in x's shape, each with the substitution that sets it to 1 in every
    dim that depends on it (the caller asks the prover whether it may be 1)."""
    if any(v == 0 for v in x.strides):
        return
    p = c.prover
    free = p._free_user()
    syms = [s for d in x.shape for s in sorted(p.canon(d).free_symbols, key=str) if s in free]
    for sym in list(dict.fromkeys(syms))[:6]:
        sub = {u: p.canon(u).xreplace({sym: sp.S.One}) for u in p.user.values()
               if sym in p.canon(u).free_symbols}
        sub[sym] = sp.S.One
        yield sym, sub


MAX_ONES = 5   # sizes that may be 1 whose every combination is tried (31 sets at most)


def one_sets(c, x, limit: int = MAX_ONES):
    """Substitutions that set each set of the free sizes of x's shape that may be 1 (not
    proved >= 2) to 1 at once (`T=2, Z=1` and `A=1, C=1` lay a reshape out differently from
    either alone); the first `limit` such sizes."""
    ones = [sub for sym, sub in _maybe_one(c, x) if not c.prover.leq(sp.Integer(2), sym, search=False).ok][:limit]
    for k in range(1, len(ones) + 1):
        for chosen in itertools.combinations(ones, k):
            sub: dict = {}
            for one in chosen:
                sub = {u: v.xreplace(one) for u, v in sub.items()}
                sub.update({u: v.xreplace(sub) for u, v in one.items()})
            yield sub


def _paren(c, e) -> str:
    return f"({c.sz(e)})" if e.is_Add else c.sz(e)


def _shape_src(c, target, infer) -> str:
    return "[" + ", ".join("-1" if j == infer else c.sz(d) for j, d in enumerate(target)) + "]"


def view(c, x, a):
    return _reshape(c, x, a, view=True)


def reshape(c, x, a):
    return _reshape(c, x, a, view=False)


def transpose(c, x, a):
    a.count(2, usage="transpose -2 -1")
    i, j = a.axis_at(0, x.rank), a.axis_at(1, x.rank)
    order = list(range(x.rank))
    order[i], order[j] = order[j], order[i]
    return _permuted(x, order, {"dims": (i, j)})


def permute(c, x, a):
    a.count(x.rank, usage="permute " + " ".join(str(k) for k in range(x.rank)))
    order = [a.axis_at(k, x.rank) for k in range(x.rank)]
    if sorted(order) != list(range(x.rank)):
        raise a.fail(f"`permute` needs each axis of the {_ax(x.rank)} exactly once",
                     f"e.g. `permute {' '.join(str(k) for k in reversed(range(x.rank)))}`")
    return _permuted(x, order, {"dims": tuple(order)})


def movedim(c, x, a):
    a.count(2, usage="movedim 1 2")
    src, dst = a.axis_at(0, x.rank), a.axis_at(1, x.rank)
    order = [k for k in range(x.rank) if k != src]
    order.insert(dst, src)
    return _permuted(x, order, {"source": src, "destination": dst, "dims": tuple(order)})


def _permuted(x, order, detail):
    return Result((x.restrided(tuple(x.shape[k] for k in order),
                               lambda st: tuple(st[k] for k in order)),), detail=detail)


def unsqueeze(c, x, a):
    a.count(1, usage="unsqueeze 1")
    d = a.axis_at(0, x.rank, extra=1)
    shape = x.shape[:d] + (sp.S.One,) + x.shape[d:]
    return Result((x.restrided(shape, lambda st: st[:d] + (
        x.shape[d] * st[d] if d < x.rank else sp.S.One,) + st[d:]),), detail={"dim": d})


def squeeze(c, x, a):
    a.count(0, 1, usage="squeeze 1")
    if not a.pos:
        maybe_one = [k for k in range(x.rank) if not c.prover.is_one(x.shape[k])
                     and not c.prover.leq(sp.Integer(2), x.shape[k]).ok]
        if maybe_one:
            raise ShapeError("E110", f"`squeeze` without an axis removes every dim that is 1, so its "
                             f"result depends on the sizes: dim {maybe_one[0]} of {c.show(x)} is "
                             f"{c.sz(x.shape[maybe_one[0]])}, which may or may not be 1",
                             help="name the axis: `squeeze 1`", span=a.op.span)
        keep = [k for k in range(x.rank) if not c.prover.is_one(x.shape[k])]
        dims = None
    else:
        d = a.axis_at(0, x.rank)
        if not c.prover.is_one(x.shape[d]):
            raise ShapeError("E110", f"dim {d} of {c.show(x)} is {c.sz(x.shape[d])}, which is not always 1",
                             help="`squeeze` removes a dim of size 1; use `select` to pick one "
                                  "position, or `sum`/`mean` to reduce it", span=a.op.span)
        keep, dims = [k for k in range(x.rank) if k != d], d
    return Result((x.restrided(tuple(x.shape[k] for k in keep),
                               lambda st: tuple(st[k] for k in keep)),), detail={"dim": dims})


def flatten(c, x, a):
    a.count(0, 2, usage="flatten 1 2")
    start = a.axis_at(0, x.rank) if len(a.pos) > 0 else 0
    end = a.axis_at(1, x.rank) if len(a.pos) > 1 else x.rank - 1
    if end < start:
        raise a.fail("`flatten` needs the start axis before the end axis")
    shape = x.shape[:start] + (prod(x.shape[start:end + 1]),) + x.shape[end + 1:]
    out, _, _ = regroup(c, x, shape)
    return Result((out,), detail={"start": start, "end": end})


def expand(c, x, a):
    a.count(1, usage="expand [B, H, S, D]")
    target, _ = _shape_allow_minus_ones(c, a)
    if len(target) < x.rank:
        raise a.fail(f"`expand` needs at least {x.rank} sizes for {c.show(x)}")
    lead = len(target) - x.rank
    shape, keep = [], []   # keep[j]: the input dim whose stride dim j keeps (None: stride 0)
    for j, t in enumerate(target):
        if j < lead:
            if t == -1:
                raise a.fail("-1 can only keep an existing dim", span=a.pos[0].dims[j].span)
            shape.append(t)
            keep.append(None)
            continue
        size = x.shape[j - lead]
        if t == -1 or c.same(t, size):
            shape.append(size)
            keep.append(j - lead)
        elif c.prover.is_one(size):
            shape.append(t)
            keep.append(None)
        else:
            c.need_equal(size, t, code="E102", span=a.pos[0].dims[j].span,
                         message=lambda j=j, size=size, t=t: f"`expand` cannot stretch dim {j - lead} of {c.show(x)} from "
                                 f"{c.sz(size)} to {c.sz(t)}: only size-1 dims expand",
                         help="use `repeat_interleave` to copy along a dim that is not 1", broadcast=True)
            shape.append(size)
            keep.append(j - lead)
    return Result((x.restrided(shape, lambda st: tuple(sp.S.Zero if k is None else st[k] for k in keep)),),
                  detail={"shape": tuple(target)})


def _shape_allow_minus_ones(c, a):
    node = a.pos[0]
    if not isinstance(node, ShapeLit):
        raise a.fail("`expand` needs a shape in brackets")
    out = []
    for d in node.dims:
        if _is_minus_one(d):
            out.append(sp.Integer(-1))
            continue
        e = c.dim(d)
        c.need_whole(e, span=d.span, what=lambda e=e: f"this size is {c.sz(e)}")
        c.need_positive(e, d.span)
        out.append(e)
    return out, None


def repeat_interleave(c, x, a):
    a.count(2, usage="repeat_interleave H/G 1")
    n = a.dim_at(0)
    c.need_whole(n, span=a.pos[0].span, what=lambda: f"the repeat count {c.sz(n)}")
    c.need_positive(n, a.pos[0].span)
    d = a.axis_at(1, x.rank)
    shape = x.shape[:d] + (x.shape[d] * n,) + x.shape[d + 1:]
    return Result((fresh(shape, x.dtype),), detail={"repeats": n, "dim": d})


def repeat(c, x, a):
    """einops' repeat: a rearrange whose right side may add axes (sizes given), copied along."""
    return rearrange(c, x, a, repeat=True)


def rearrange(c, x, a, repeat=False):
    name = a.op.name
    a.count(1, usage='repeat "n d -> b n d" b=B' if repeat else 'rearrange "b s (h d) -> b h s d" h=H')
    text = a.str_at(0)
    try:
        pat = patterns.parse_rearrange(text, repeat)
    except ValueError as err:
        raise ShapeError("E110", f"bad {name} pattern: {err}", span=a.pos[0].span) from None
    given = {k: c.dim(v.value) for k, v in a.kw.items()}
    for k, e in given.items():
        span = a.kw[k].span
        c.need_whole(e, span=span, what=lambda k=k, e=e: f"`{k}={c.sz(e)}`")
        c.need_positive(e, span, what=lambda k=k, e=e: f"`{k}={c.sz(e)}`")
    left = pat.left
    n_ell = x.rank - (len(left) - (1 if "..." in left else 0))
    if n_ell < 0 or ("..." not in left and n_ell != 0):
        raise ShapeError("E110", f"the pattern's left side has {len(left)} dims but the input is "
                         f"{c.show(x)}", span=a.pos[0].span)
    sizes = dict(given)
    k = 0
    ell = []
    for group in left:
        if group == "...":
            ell = list(x.shape[k:k + n_ell])
            k += n_ell
            continue
        size = x.shape[k]
        k += 1
        unknown = [ax for ax in group if ax not in sizes]
        if len(unknown) > 1:
            raise ShapeError("E110", f"cannot tell the sizes of {', '.join(unknown)} in ({' '.join(group)}); "
                             f"give all but one, e.g. {unknown[0]}=...", span=a.pos[0].span)
        known = prod(sizes[ax] for ax in group if ax in sizes)
        if unknown:
            val = sp.cancel(size / known)
            c.need_whole(val, span=a.pos[0].span,
                         what=lambda known=known, size=size, unknown=unknown, val=val:
                         f"`{unknown[0]}` would be {_paren(c, size)}/{_paren(c, known)} = {c.sz(val)}")
            sizes[unknown[0]] = c.prover.name_of(val)
        else:
            c.need_equal(known, size, code="E103", span=a.pos[0].span,
                         message=lambda group=group, k=k, known=known, size=size: f"({' '.join(group)}) is {c.sz(known)} but dim {k - 1} of {c.show(x)} is {c.sz(size)}")
    right = {ax for g in pat.right if g != "..." for ax in g if ax != "..."}
    new = right - {ax for g in left if g != "..." for ax in g}
    for kw in given:
        if not any(kw in g for g in left if g != "...") and kw not in new:
            raise ShapeError("E110", f"`{kw}=` names an axis that is not in the pattern",
                             span=a.kw[kw].span)
    unsized = sorted(new - set(given))
    if unsized:
        raise ShapeError("E110", f"`{unsized[0]}` is a new axis: give its size, e.g. `{unsized[0]}=B`",
                         span=a.pos[0].span)
    # einops: reshape to the elementary axes, permute, reshape to the output groups
    elementary, flat = [], []
    for group in left:
        if group == "...":
            elementary.append(("...",))
            flat.extend(ell)
        else:
            for ax in group:
                elementary.append(ax)
                flat.append(sizes[ax])
    t = x
    copies = [None, None]  # per reshape stage: None (no stage), False (a view), True (a copy)
    if list(flat) != list(x.shape):
        t, copies[0], _ = regroup(c, x, flat)
    order_names = [g for g in elementary]
    out_names = []
    for group in pat.right:
        if group == "...":
            out_names.append(("...",))
        else:
            out_names.extend(("...",) if ax == "..." else ax for ax in group)
    ell_pos = order_names.index(("...",)) if ("...",) in order_names else None

    def positions(name):
        if name == ("...",):
            return list(range(ell_pos, ell_pos + n_ell))
        idx = order_names.index(name)
        return [idx + (n_ell - 1 if ell_pos is not None and idx > ell_pos else 0)]

    perm = [p for nm in out_names if nm not in new for p in positions(nm)]
    t = t.restrided(tuple(t.shape[p] for p in perm), lambda st: tuple(st[p] for p in perm))
    added, k = [], 0      # repeat: the new axes, (position, size), each expanded (stride 0)
    for nm in out_names:
        if nm in new:
            added.append((k, sizes[nm]))
        k += n_ell if nm == ("...",) else 1
    if added:
        shape = list(t.shape)
        for pos, size in added:
            shape.insert(pos, size)

        def spread(st):
            st = list(st)
            for pos, _size in added:
                st.insert(pos, sp.S.Zero)
            return tuple(st)
        t = t.restrided(shape, spread)
    final = []
    for group in pat.right:
        final.extend(ell if group == "..." else [prod(prod(ell) if ax == "..." else sizes[ax] for ax in group)])
    if list(final) != list(t.shape):
        t, copies[1], _ = regroup(c, t, final)
    # flat/perm/final/copies: the three stages (reshape, permute, reshape) for codegen
    return Result((t,), detail={"pattern": text, "sizes": {k: v for k, v in given.items()},
                                "flat": tuple(flat), "perm": tuple(perm), "final": tuple(final),
                                "copies": tuple(copies), "new": tuple(added)})
