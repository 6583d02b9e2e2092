"""Memory layout: strides, tracked the way PyTorch tracks them.

Used by the shape rules to decide whether `view` is legal, exactly as
`at::detail::computeStride` does, with symbolic sizes treated generically (a
symbolic size is not assumed to be 1).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .lazysympy import sympy as sp


@dataclass(frozen=True)
class TensorType:
    """A tensor's shape, strides and dtype. `alt` holds other strides the same tensor may
    have at run time (dropout returns its input with p=0 and in eval mode, a new tensor
    while training; a reshape is a view only where a size is 1): a later `view` must be
    legal for every one of them. `why` says where the alternatives come from."""
    shape: tuple
    strides: tuple
    dtype: str = "float"
    alt: tuple = ()
    why: str = field(default="", compare=False)

    _hash = None

    def __hash__(self) -> int:
        # kept on the type once made: a type is a key of the shape rules' results
        # (checker/rulememo.py) at every step, and hashing its sympy sizes costs a call each
        h = self._hash
        if h is None:
            h = hash((self.shape, self.strides, self.dtype, self.alt))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        # the kept hash belongs to this process (str hashes are salted per process)
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_shape(self, shape, strides=None, dtype=None) -> TensorType:
        shape = tuple(shape)
        if strides is None:
            return TensorType(shape, contiguous(shape), dtype or self.dtype)
        return TensorType(shape, tuple(strides), dtype or self.dtype, self.alt, self.why)

    def restrided(self, shape, fn) -> TensorType:
        """The same memory seen with a new shape: fn maps each possible strides tuple."""
        main = tuple(fn(self.strides))
        alt = []
        for strides, subst in self.alt:
            new = tuple(v.xreplace(dict(subst)) for v in fn(strides))
            if (new, subst) not in alt and (subst or new != main):
                alt.append((new, subst))
        return TensorType(tuple(shape), main, self.dtype, tuple(alt), self.why if alt else "")

    def layouts(self):
        """Every possible (shape, strides) at run time, sizes substituted where an
        alternative holds only at some sizes."""
        yield self.shape, self.strides, {}
        for strides, subst in self.alt:
            sub = dict(subst)
            yield tuple(d.xreplace(sub) for d in self.shape), strides, sub

    @property
    def is_contiguous(self) -> bool:
        return self.strides == contiguous(self.shape)




def contiguous(shape) -> tuple:
    """The row-major strides of `shape` (a pure function of the sizes: kept per shape, as a
    spec meets the same few shapes again and again)."""
    shape = tuple(shape)
    key = (shape, tuple(map(type, shape)))
    hit = _CONTIGUOUS.get(key)
    if hit is None:
        strides, acc = [], sp.S.One
        for size in reversed(shape):
            strides.append(acc)
            acc = acc * size
        hit = tuple(reversed(strides))
        if len(_CONTIGUOUS) >= _KEEP:
            _CONTIGUOUS.clear()
        _CONTIGUOUS[key] = hit
    return hit


_CONTIGUOUS: dict = {}
_KEEP = 4096   # shapes whose strides are kept


def fresh(shape, dtype="float") -> TensorType:
    shape = tuple(shape)
    return TensorType(shape, contiguous(shape), dtype)


def view_strides(old: TensorType, new_shape, same) -> tuple | None:
    """Strides of `old.view(new_shape)`, or None where PyTorch refuses the view.

    `same(a, b)` decides symbolic equality. A port of computeStride.
    """
    oldshape, oldstride = list(old.shape), list(old.strides)
    newshape = list(new_shape)
    if not oldshape:
        return tuple(sp.Integer(1) for _ in newshape)
    newstride = [sp.Integer(0)] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = sp.Integer(1)
    view_numel = sp.Integer(1)
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel = tensor_numel * oldshape[tensor_d]
        if tensor_d == 0 or (not same(oldshape[tensor_d - 1], sp.S.One) and
                             not same(oldstride[tensor_d - 1], tensor_numel * chunk_base_stride)):
            while view_d >= 0 and (not same(view_numel, tensor_numel) or same(newshape[view_d], sp.S.One)):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel = view_numel * newshape[view_d]
                view_d -= 1
            if not same(view_numel, tensor_numel):
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = sp.Integer(1)
                view_numel = sp.Integer(1)
    if view_d != -1:
        return None
    return tuple(newstride)


def _stride_key(stride):
    """Generic magnitude of a symbolic stride. The strides of a dense tensor are products
    of sizes, a larger one a multiple of a smaller one, so evaluating with every size set
    to the same large value orders them as they are ordered for all sizes."""
    try:
        return float(stride.xreplace({s: sp.Integer(101) for s in stride.free_symbols}))
    except (TypeError, ValueError):
        return None


class Geometry:
    """Generic comparisons of symbolic sizes and strides, as the layout rules need them:
    `same` is proved equality; order is the generic one (see _stride_key); a symbolic size
    is not 1 unless it is proved to be."""

    def __init__(self, canon, same=None):
        self.canon = canon
        self._same = same
        self._keys: dict = {}   # stride -> _stride_key of its canonical form (a sort asks again and again)

    def same(self, a, b) -> bool:
        if a == b:
            return True
        if self._same is not None:
            return self._same(a, b)
        return sp.expand(self.canon(a) - self.canon(b)) == 0

    def is_one(self, e) -> bool:
        return e == 1 or self.canon(e) == 1

    def is_zero(self, e) -> bool:
        return e == 0 or self.canon(e) == 0

    def key(self, stride):
        """_stride_key of the stride's canonical form."""
        try:
            return self._keys[stride]
        except KeyError:
            k = self._keys[stride] = _stride_key(self.canon(stride))
            return k

    def cmp(self, a, b) -> int:
        """-1, 0 or 1: a against b for generic sizes (0 when equal or undecided)."""
        if self.same(a, b):
            return 0
        ka, kb = self.key(a), self.key(b)
        if ka is None or kb is None or ka == kb:
            return 0
        return -1 if ka < kb else 1


def torch_contiguous(shape, strides, g: Geometry) -> bool:
    """Tensor.is_contiguous(): size-1 dims are ignored."""
    expected = sp.S.One
    for size, stride in zip(reversed(shape), reversed(strides)):
        if g.is_one(size):
            continue
        if not g.same(stride, expected):
            return False
        expected = expected * size
    return True


def _cl_order(rank: int) -> list[int]:
    return [1, 3, 2, 0] if rank == 4 else [1, 4, 3, 2, 0]


def channels_last(shape) -> tuple:
    """Strides of a channels-last (NHWC / NDHWC) tensor of an NC.. shape."""
    strides, acc = [sp.S.One] * len(shape), sp.S.One
    for d in _cl_order(len(shape)):
        strides[d] = acc
        acc = acc * shape[d]
    return tuple(strides)


def channels_last_contiguous(shape, strides, g: Geometry) -> bool:
    """Tensor.is_contiguous(memory_format=torch.channels_last) (channels_last_3d for 5 dims)."""
    if len(shape) not in (4, 5):
        return False
    expected = sp.S.One
    for d in _cl_order(len(shape)):
        if g.is_one(shape[d]):
            continue
        if not g.same(strides[d], expected):
            return False
        expected = expected * shape[d]
    return True


def suggests_channels_last(shape, strides, g: Geometry) -> bool:
    """Tensor.suggest_memory_format() is channels_last(_3d): a port of
    is_channels_last_strides_2d_s4 / _3d_s5 with generic magnitudes."""
    if len(shape) not in (4, 5) or g.is_zero(strides[1]):
        return False
    low = sp.Integer(0)
    for d in _cl_order(len(shape)):
        if g.cmp(strides[d], low) < 0:
            return False
        if d == 0 and g.same(low, strides[1]):
            return False
        low = strides[d] * (1 if g.is_one(shape[d]) else shape[d])
    return True


def non_overlapping_and_dense(shape, strides, g: Geometry) -> bool:
    if len(shape) == 1:
        return g.is_one(shape[0]) or g.same(strides[0], sp.S.One)
    order = sorted(range(len(shape)), key=lambda d: (g.is_one(shape[d]), g.key(strides[d]) or 0))
    expected = sp.S.One
    for d in order:
        if g.is_one(shape[d]):
            return True
        if not g.same(strides[d], expected):
            return False
        expected = expected * shape[d]
    return True


def iterator_strides(operands, shape, g: Geometry) -> tuple:
    """Strides of the output TensorIterator allocates for an elementwise op on `operands`
    [(shape, strides)] broadcast to `shape`: its fast paths (all contiguous, all channels-last,
    all dense with equal strides), else reorder_dimensions' insertion sort, which orders dims
    by the operands' strides, the first operand first, skipping broadcast (stride 0) ones."""
    n = len(shape)
    if n == 0:
        return ()
    if all(len(s) == n and all(g.same(a, b) for a, b in zip(s, shape)) for s, _ in operands):
        if all(torch_contiguous(s, st, g) for s, st in operands):
            return contiguous(shape)
        if all(channels_last_contiguous(s, st, g) for s, st in operands):
            return channels_last(shape)
        if all(non_overlapping_and_dense(s, st, g) for s, st in operands):
            last = operands[-1][1]
            if all(all(g.same(a, b) for a, b in zip(st, last)) for _, st in operands):
                return tuple(last)
    full = []
    for s, st in operands:
        lead = n - len(s)
        row = [sp.Integer(0)] * lead
        for k, (size, stride) in enumerate(zip(s, st)):
            row.append(sp.Integer(0) if g.is_one(size) and not g.is_one(shape[lead + k]) else stride)
        full.append(row)

    def should_swap(d0, d1) -> int:
        for row in full:
            s0, s1 = row[d0], row[d1]
            if g.is_zero(s0) or g.is_zero(s1):
                continue
            c = g.cmp(s0, s1)
            if c:
                return c
            if g.cmp(shape[d0], shape[d1]) > 0:
                return 1
        return 0

    perm = list(range(n - 1, -1, -1))
    for i in range(1, n):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    if perm == list(range(n - 1, -1, -1)):
        return contiguous(shape)
    strides, acc = [sp.S.One] * n, sp.S.One
    for d in perm:
        strides[d] = acc
        acc = acc * shape[d]
    return tuple(strides)


def elementwise(xs: list[TensorType], shape, g: Geometry) -> TensorType:
    """The output of an elementwise op (unary or broadcasting), with the alternatives of
    its inputs carried over."""
    shape = tuple(shape)
    if all(not x.alt and x.strides == contiguous(x.shape) for x in xs):
        return fresh(shape, xs[0].dtype)   # contiguous inputs agree on the order: contiguous
    main = iterator_strides([(x.shape, x.strides) for x in xs], shape, g)
    alt = []
    for k, x in enumerate(xs):
        for s_shape, strides, subst in x.layouts():
            if strides is x.strides and not subst:
                continue
            ops_ = [(y.shape, y.strides) for y in xs]
            ops_[k] = (s_shape, strides)
            out_shape = tuple(d.xreplace(subst) for d in shape)
            new = iterator_strides(ops_, out_shape, g)
            key = (new, tuple(sorted(subst.items(), key=str)))
            if key not in alt and (subst or new != main):
                alt.append(key)
    why = next((x.why for x in xs if x.alt), "")
    return TensorType(shape, main, xs[0].dtype, tuple(alt), why if alt else "")


def dense_like(x: TensorType, canon, same=None) -> TensorType:
    """The output of a unary elementwise op, as TensorIterator lays it out."""
    if not x.alt and x.is_contiguous:
        return fresh(x.shape, x.dtype)
    return elementwise([x], x.shape, Geometry(canon, same))


def _label_index(ch: str) -> int:
    """torch.einsum numbers labels A-Z then a-z; contraction dims follow that order."""
    return ord(ch) - ord("A") if ch.isupper() else 26 + ord(ch) - ord("a")


def einsum_strides(inputs, output: str, operands, g: Geometry) -> tuple | None:
    """Strides of torch.einsum's result: a port of at::einsum and sumproduct_pair (PyTorch 2.x,
    no contraction path) for one or two operands without repeated labels; None where not
    modelled. Every operand is permuted to the output's labels, then the contracted ones, with
    missing labels unsqueezed. One operand: returned as that view, or `sum` over the contracted
    dims (a new contiguous tensor). Two: a contracted dim that is not 1 in both is a bmm sum
    dim; one that is not 1 in one operand only is summed there first (keepdim, contiguous);
    one that is 1 in both stays a size-1 dim. Then a mul (TensorIterator) when no dim is left
    to sum, else a bmm whose output is viewed and permuted back. A size of 1 changes the path,
    so the layout at sizes that may be 1 comes from calling this with those sizes put in.
    Ellipsis dims are labels ('.', j), right-aligned."""
    if len(operands) > 2 or any(len(set(s)) != len(s) for s in inputs):
        return None
    n_ell = max((t.rank - len(s) + 1 for s, t in zip(inputs, operands) if "." in s), default=0)
    ell = [(".", j) for j in range(n_ell)]

    def expand(letters, rank):
        k = rank - len(letters) + 1
        return [x for ch in letters for x in (ell[n_ell - k:] if ch == "." else [ch])]

    per_op = [expand(s, t.rank) for s, t in zip(inputs, operands)]
    out_labels = expand(output, n_ell + len(output) - 1) if "." in output else list(output)
    rest = [] if "." in output else ell
    labels = out_labels + rest + sorted({ch for s in inputs for ch in s if ch not in output and ch != "."},
                                        key=_label_index)
    n_out = len(out_labels)
    ops = [[(t.shape[op.index(ch)], t.strides[op.index(ch)]) if ch in op else (sp.S.One, sp.S.One)
            for ch in labels] for op, t in zip(per_op, operands)]
    if len(ops) == 1:
        return tuple(st for _, st in ops[0]) if n_out == len(labels) else \
            contiguous([s for s, _ in ops[0][:n_out]])
    sum_dims, alone = [], [[], []]
    for k in range(n_out, len(labels)):
        big = [not g.is_one(op[k][0]) for op in ops]
        if all(big):
            sum_dims.append(k)
        elif any(big):
            alone[big.index(True)].append(k)
    ops = [_kept_sum(op, dims) if dims else op for op, dims in zip(ops, alone)]
    return tuple(_sumproduct_pair(*ops, sum_dims, g)[:n_out])


def _kept_sum(op, dims) -> list:
    """Tensor.sum(dims, keepdim=True) of [(size, stride)]: a new contiguous tensor."""
    sizes = [sp.S.One if i in dims else s for i, (s, _) in enumerate(op)]
    return list(zip(sizes, contiguous(sizes)))


def _sumproduct_pair(left, right, sum_dims, g: Geometry) -> list:
    """at::native::sumproduct_pair with keepdim: the strides of (left * right).sum(sum_dims)
    for two aligned operands [(size, stride)], every dim kept."""
    shape = [r if g.is_one(l) else l for (l, _), (r, _) in zip(left, right)]
    if not sum_dims:
        return list(iterator_strides([([s for s, _ in left], [st for _, st in left]),
                                      ([s for s, _ in right], [st for _, st in right])], shape, g))
    groups = {"lro": [], "lo": [], "ro": []}
    for i, ((sl, _), (sr, _)) in enumerate(zip(left, right)):
        if i in sum_dims:
            continue
        big_l, big_r = not g.is_one(sl), not g.is_one(sr)
        groups["lro" if big_l and big_r else "lo" if big_l else "ro"].append(i)
    lo, ro = groups["lo"], groups["ro"]
    if lo and ro and ro[-1] < lo[0]:
        lo, ro = ro, lo   # swap_lo_ro: bmm then gives the output's order directly
    order = groups["lro"] + lo + list(sum_dims) + ro
    st = dict(zip(order, contiguous([sp.S.One if i in sum_dims else shape[i] for i in order])))
    return [st[i] for i in range(len(shape))]
