"""Values at probe sizes: which input elements each tensor of a checked binding holds.

Input: the prover of an exercise's reference and the checked steps of a binding
(shapelang.checker.ir.Step). Output: a `Val` per tensor, whose `key` is equal for two
tensors exactly when they hold the same numbers, element by element.

Equal shapes do not make equal tensors: `view [B, H, S, Dh]` has the shape of
`view [B, S, H, Dh] -> transpose 1 2` but not its numbers. So each tensor also
gets a *value*: at small "probe" sizes that satisfy the assumptions, every
element is labelled with where it comes from. Layout operations (view,
transpose, reshape, ...) move labels; any other operation makes new labels
from the operation, its value-changing arguments and its inputs' values
from ..checker.ops.table import moving
(einsum and `@` are put in one canonical form first, so `A @ B` and
`einsum("ij,jk->ik", A, B)` are one value). Two tensors with the same value
hold the same numbers for every input.
"""
from __future__ import annotations

import sympy as sp

from ..checker import dims as dimlib
from ..checker.ops.table import TABLE, moving

MAX_PROBE_ELEMENTS = 50_000
# steps that only move or copy data: equal shapes mean equal values
LAYOUT = moving("regroup", "move", "rearrange", "copy", "broadcast", "repeat") | {"input"}
PARTS = moving("pick", "cut", "join")           # steps that pick, cut or join parts: moved too
REGROUP = moving("regroup", "copy")             # the same elements in the same order
COMMUTATIVE = {"add", "mul"}
LEARNED = frozenset(d.ir_name for d in TABLE.values() if d.learned)   # each use: its own weights


class TooBig(Exception):
    """A tensor or size the probe does not track (too many elements, not a whole number)."""


# what can go wrong while following values through steps: the value is then not tracked
PROBE_ERRORS = (TooBig, KeyError, IndexError, ValueError, TypeError, ZeroDivisionError)


def _digest(obj) -> bytes:
    import hashlib
    return hashlib.blake2b(repr(obj).encode(), digest_size=16).digest()


class Val:
    """Element labels of a tensor at probe sizes (row-major)."""
    __slots__ = ("idx", "key", "shape", "src")

    def __init__(self, shape: tuple, src: tuple, idx):
        # src: ((label, numel), ...); idx: None (identity over src[0]) or a tuple of
        # codes (source number << 32 | flat index), renumbered canonically
        if idx is not None:
            order, remap = [], {}
            for c in idx:
                s = c >> 32
                if s not in remap:
                    remap[s] = len(order)
                    order.append(s)
            if order != list(range(len(src))):
                idx = tuple((remap[c >> 32] << 32) | (c & 0xFFFFFFFF) for c in idx)
                src = tuple(src[s] for s in order)
            if len(src) == 1 and len(idx) == src[0][1] and \
                    all(c == k for k, c in enumerate(idx)):
                idx = None
        self.shape, self.src, self.idx = shape, src, idx
        self.key = _digest((shape, src, idx))

    @staticmethod
    def base(label, shape: tuple) -> Val:
        n = 1
        for d in shape:
            n *= d
        return Val(shape, ((_digest(label), n),), None)

    def codes(self):
        return self.idx if self.idx is not None else range(self.src[0][1])

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def _strides(shape) -> list:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _gather(v: Val, shape: tuple, index_of) -> Val:
    import itertools
    n = 1
    for d in shape:
        n *= d
    if n > MAX_PROBE_ELEMENTS:
        raise TooBig
    codes = v.codes()
    return Val(shape, v.src, tuple(codes[index_of(m)]
                                   for m in itertools.product(*(range(d) for d in shape))))


def _permute(v: Val, order) -> Val:
    st = _strides(v.shape)
    sts = [st[o] for o in order]
    return _gather(v, tuple(v.shape[o] for o in order),
                   lambda m: sum(a * b for a, b in zip(m, sts)))


def _reshape(v: Val, shape: tuple) -> Val:
    return Val(tuple(shape), v.src, v.idx)


def _canon_einsum(eq: str) -> str:
    names: dict = {}
    out = []
    for ch in eq:
        if ch.isalpha():
            names.setdefault(ch, chr(ord("a") + len(names)))
            out.append(names[ch])
        elif not ch.isspace():
            out.append(ch)
    return "".join(out)


def _matmul_equation(ins) -> str | None:
    """`a @ b` as an einsum equation, when both have the same batch dims."""
    if len(ins) != 2 or any(v is None for v in ins):
        return None
    a, b = ins
    if len(a.shape) < 2 or len(a.shape) != len(b.shape) or a.shape[:-2] != b.shape[:-2]:
        return None
    batch = "".join(chr(ord("a") + k) for k in range(len(a.shape) - 2))
    return f"{batch}xy,{batch}yz->{batch}xz"


def _sorted_einsum(eq: str, keys: list):
    """Operands in a canonical order, index letters renamed by first use."""
    eq = "".join(eq.split())
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(keys):
        return _canon_einsum(eq), keys
    pairs = sorted(zip(keys, terms), key=lambda p: repr(p[0]))
    keys = [k for k, _ in pairs]
    return _canon_einsum(",".join(t for _, t in pairs) + "->" + out), keys


class Probe:
    """Small sizes that satisfy the assumptions, and the values of tensors at those sizes."""

    def __init__(self, prover):
        self.prover = prover
        self.env = _probe_env(prover)

    def size(self, e) -> int:
        v = self.prover.value(e, self.env) if self.env is not None else None
        iv = dimlib.as_int(v) if v is not None else None
        if iv is None or iv < 0:
            raise TooBig
        return iv

    def shape(self, shape) -> tuple:
        return tuple(self.size(d) for d in shape)

    def number(self, e):
        """A value-changing argument (a scale factor, an index) as a comparable number."""
        if isinstance(e, sp.Basic):
            v = self.prover.value(e, self.env) if self.env is not None else None
            if v is None:
                return ("expr", str(e))
            return float(f"{float(v):.12g}")
        if isinstance(e, (tuple, list)):
            return tuple(self.number(x) for x in e)
        if isinstance(e, (int, float, str, bool)) or e is None:
            return e
        return "?"

    def binding(self, steps, inputs: dict, owner) -> dict:
        """Values of a binding's steps: ref -> Val. `inputs`: ref -> Val for what it reads."""
        vals = dict(inputs)
        own = 0
        for s in steps:
            outs = [self.shape(t.shape) for t in s.outputs]
            refs = [r for r in s.inputs if r != "?"]   # "?": a scalar argument, not a tensor
            ins = [vals.get(r) for r in refs]
            if s.op in LAYOUT or s.op in PARTS:
                if any(v is None for v in ins) and s.op != "input":
                    raise TooBig
                res = self._layout(s, ins, outs)
            else:
                detail = tuple(sorted((k, self.number(v)) for k, v in s.detail.items()
                                      if k not in ("table", "shape", "infer", "copies")))
                keys = [v.key if v is not None else ("ref", r) for v, r in zip(ins, refs)]
                op = s.op
                eq = s.detail.get("equation") if op == "einsum" else _matmul_equation(ins)
                if eq is not None and op in ("einsum", "matmul"):
                    op, eq, keys = "einsum", *_sorted_einsum(eq, keys)
                    detail = (("equation", eq),)
                if op in COMMUTATIVE:
                    keys = sorted(keys, key=repr)
                label = (op, detail, tuple(keys), tuple(outs))
                if s.op in LEARNED:
                    label += (owner, own)    # its own learned weights
                    own += 1
                if s.block is not None:
                    label += (self.block_value(s.block),)
                res = [Val.base(label + (k,), o) for k, o in enumerate(outs)]
            if len(res) == 1:
                vals[s.ref] = res[0]
            else:
                for k, v in enumerate(res):
                    vals[f"{s.ref}.{k}"] = v
                vals[s.ref] = res[0]
        return vals

    def block_value(self, block) -> bytes | None:
        """What a block computes from its inputs (labelled by position), at probe sizes."""
        try:
            vals = {d.name: Val.base(("block input", k), self.shape(d.type.shape))
                    for k, d in enumerate(block.inputs)}
            for d in list(block.params) + list(block.buffers):
                vals[d.name] = Val.base(("block weight", d.name), self.shape(d.type.shape))
            for b in block.bindings:
                got = self.binding(b.steps, vals, ("block", block.name))
                vals.update(got)
                for n, r in zip(b.names, b.results):
                    vals[n] = got.get(r)
            out = vals.get(block.result)
            return out.key if out is not None else None
        except PROBE_ERRORS:
            return None

    def _layout(self, s, ins, outs) -> list:
        op, d = s.op, s.detail
        x = ins[0] if ins else None
        if op == "input":
            return [Val.base(("literal", outs[0]), outs[0])]
        if op in REGROUP:
            return [_reshape(x, outs[0])]
        if op == "transpose":
            i, j = d["dims"]
            order = list(range(len(x.shape)))
            order[i], order[j] = order[j], order[i]
            return [_permute(x, order)]
        if op in ("permute", "movedim"):     # movedim's detail holds its whole order too
            return [_permute(x, list(d["dims"]))]
        if op == "expand":
            shape = outs[0]
            lead = len(shape) - len(x.shape)
            st = _strides(x.shape)
            parts = [(k + lead, st[k]) for k in range(len(x.shape)) if x.shape[k] != 1]
            return [_gather(x, shape, lambda m: sum(m[a] * b for a, b in parts))]
        if op == "repeat_interleave":
            n, dim = self.size(d["repeats"]), d["dim"]
            st = _strides(x.shape)
            return [_gather(x, outs[0], lambda m: sum((mk // n if k == dim else mk) * st[k]
                                                      for k, mk in enumerate(m)))]
        if op == "select":
            dim, i = d["dim"], self.size(d["index"])
            st = _strides(x.shape)
            return [_gather(x, outs[0], lambda m: i * st[dim] + sum(
                mk * st[k if k < dim else k + 1] for k, mk in enumerate(m)))]
        if op == "slice":
            dim, a = d["dim"], self.size(d["start"])
            st = _strides(x.shape)
            return [_gather(x, outs[0], lambda m: sum((mk + a if k == dim else mk) * st[k]
                                                      for k, mk in enumerate(m)))]
        if op in ("split", "chunk"):
            dim = d["dim"]
            st = _strides(x.shape)
            res, start = [], 0
            for o in outs:
                a = start
                res.append(_gather(x, o, lambda m, a=a: sum((mk + a if k == dim else mk) * st[k]
                                                             for k, mk in enumerate(m))))
                start += o[dim]
            return res
        if op == "concat":
            dim = d["dim"]
            src = tuple(p for v in ins for p in v.src)
            codes, offset = [], 0
            for v in ins:
                codes.append([((c >> 32) + offset) << 32 | (c & 0xFFFFFFFF) for c in v.codes()])
                offset += len(v.src)
            sizes = [v.shape[dim] for v in ins]
            sts = [_strides(v.shape) for v in ins]
            import itertools
            out = []
            for m in itertools.product(*(range(n) for n in outs[0])):
                k, pos = 0, m[dim]
                while pos >= sizes[k]:
                    pos -= sizes[k]
                    k += 1
                flat = sum((pos if a == dim else ma) * sts[k][a] for a, ma in enumerate(m))
                out.append(codes[k][flat])
            if len(out) > MAX_PROBE_ELEMENTS:
                raise TooBig
            return [Val(outs[0], src, tuple(out))]
        if op == "rearrange":
            return [self._rearrange(x, d["pattern"], d.get("sizes", {}), outs[0])]
        raise TooBig

    def _rearrange(self, x: Val, pattern: str, given: dict, out_shape) -> Val:
        from ..checker.ops import patterns
        pat = patterns.parse_rearrange(pattern)
        sizes = {k: self.size(v) for k, v in given.items()}
        n_ell = len(x.shape) - (len(pat.left) - (1 if "..." in pat.left else 0))
        names, elem, k = [], [], 0
        for g in pat.left:
            if g == "...":
                for e in range(n_ell):
                    names.append(("...", e))
                    elem.append(x.shape[k])
                    k += 1
                continue
            size = x.shape[k]
            k += 1
            known = 1
            for a in g:
                if a in sizes:
                    known *= sizes[a]
            for a in g:
                if a not in sizes:
                    sizes[a] = size // known if known else 0
                names.append(a)
                elem.append(sizes[a])
        order = []
        for g in pat.right:
            if g == "...":
                order += [names.index(("...", e)) for e in range(n_ell)]
            else:       # `(...)` on the right: the ellipsis axes merged into the group
                for a in g:
                    order += [names.index(("...", e)) for e in range(n_ell)] if a == "..." \
                        else [names.index(a)]
        t = _permute(_reshape(x, tuple(elem)), order)
        return _reshape(t, out_shape)


def _probe_env(prover):
    """User-level sizes >= 2, as distinct and small as the assumptions allow."""
    import random
    try:
        free = prover.free_vars()
    except AttributeError:
        return None
    rng = random.Random(12345)
    best, best_score = None, None
    pools = [2, 3, 4, 5, 6, 7]
    for attempt in range(300):
        if attempt == 0:
            cand = {v: pools[k % len(pools)] for k, v in enumerate(free)}
        else:
            cand = {v: rng.choice(pools) for v in free}
        try:
            env = prover._to_user(cand)
        except (TypeError, ValueError, ZeroDivisionError, KeyError, OverflowError,
                AttributeError):
            env = None
        if env is None:
            continue
        vals = [env[s] for s in prover.user.values()]
        if any(v < 2 for v in vals if v is not None):
            score = (0, len(set(vals)), -sum(vals))
        else:
            score = (1, len(set(vals)), -sum(vals))
        if best_score is None or score > best_score:
            best, best_score = env, score
    return best

