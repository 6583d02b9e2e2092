"""Grading: score each blank of an exercise submission against the reference.

Input: an exercise (a `.shape` file with blanks, see shapelang.exercise), its
reference solution, and submissions. Output: per blank a score and feedback in
the learner's terms, plus findings of the whole-file check, as text, JSON,
Gradescope results.json, PrairieLearn results or one number.

An answer is right when it is *equivalent* to the reference under the
exercise's assumptions, decided on the checked IR: the statement holding the
blank is re-checked with the learner's answer (all other blanks at their
reference answers) and its tensors must have the reference shapes and dtypes,
the same value-changing operations (softmax axis, scale factor, ...), and the
rest of the file must still check. So `D/H`, `Dh` and `D//H` are one answer,
and so are `transpose 1 2`, `transpose 2 1` and `transpose -3 -2`.

Re-checking is incremental: one statement at a time, memoised on (statement,
text, shapes of the tensors it reads), with the reference's dims, assumptions
and prover built once per exercise. Exercises with blanks in `dim`/`assume`
lines or inside blocks fall back to checking whole files (memoised by text).

Submissions are untrusted: nothing is evaluated, answers only reach the
shapelang parser, and each grading runs under a wall-clock limit.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import sympy as sp

from . import dims as dimlib
from .diagnostics import Diagnostic, ShapeError
from .exercise import Answer, ExerciseError, Template, _squash, extract, fill, load_template, make
from .nodes import Expect, Hole, Name, Span, Spec
from .parser import MAX_BYTES, ParseFailure, parse

__all__ = [
    "BlankResult",
    "ExerciseError",
    "Grader",
    "GradingTimeout",
    "SubmissionResult",
    "cli",
    "find_solution",
]

_MISSING = object()
# steps that only move or copy data: equal shapes mean equal values
_LAYOUT = {"view", "reshape", "transpose", "permute", "contiguous", "flatten", "unsqueeze",
           "squeeze", "expand", "repeat_interleave", "input", "rearrange"}
_COMMUTATIVE = {"add", "mul"}
_SIG_DETAILS = {
    "softmax": ("dim",), "log_softmax": ("dim",), "scale": ("factor",), "dropout": ("p",),
    "mask": ("kind",), "sum": ("dim", "keepdim"), "mean": ("dim", "keepdim"),
    "var": ("dim", "keepdim"), "amax": ("dim", "keepdim"), "select": ("dim", "index"),
    "slice": ("dim", "start", "end"), "layernorm": ("bias",), "linear": ("bias",),
    "concat": ("dim",), "split": ("dim",), "chunk": ("dim", "chunks"), "block": ("block",),
    "stack": ("block", "count"),
}
CACHE_LIMIT = 200_000


class GradingTimeout(BaseException):
    """Raised by the wall-clock guard (a BaseException, so no `except Exception` eats it)."""


# ------------------------------------------------------------------ results

@dataclass
class BlankResult:
    name: str
    points: float
    max_points: float
    status: str          # correct | partial | wrong | unfilled | missing | not graded
    feedback: str = ""
    hint: str | None = None
    line: int | None = None
    answer: str | None = None

    @property
    def label(self) -> str:
        return f"?{self.name}"


@dataclass
class SubmissionResult:
    path: str
    score: float
    max_score: float
    gradable: bool = True
    blanks: list = field(default_factory=list)
    findings: list = field(default_factory=list)   # whole-file check, (line, message)
    notes: list = field(default_factory=list)      # (line, message)
    error: str | None = None                       # why nothing (more) could be graded
    seconds: float = 0.0

    @property
    def full_marks(self) -> bool:
        return self.gradable and self.score >= self.max_score - 1e-9


# ------------------------------------------------------------------ text safety

_UNSAFE = None


def clean(text: str, limit: int = 2000) -> str:
    """Text from a submission made safe to print: no control characters, bounded length."""
    global _UNSAFE
    if _UNSAFE is None:
        import re
        _UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
    if _UNSAFE.search(text) is None:
        return text if len(text) <= limit else text[: limit - 3] + "..."
    out = []
    for ch in text:
        o = ord(ch)
        if ch in "\n\t" or (o >= 32 and not 127 <= o < 160 and o not in (0x2028, 0x2029)):
            out.append(ch)
        else:
            out.append(f"\\x{o:02x}" if o < 256 else f"\\u{o:04x}")
    s = "".join(out)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _q(text: str, limit: int = 80) -> str:
    return "`" + clean(" ".join(text.split()), limit) + "`"


# ------------------------------------------------------------------ wall-clock guard

@contextmanager
def deadline(seconds: float | None):
    """Raise GradingTimeout in this thread after `seconds` (main thread, Unix only)."""
    usable = seconds and hasattr(signal, "setitimer") and \
        threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return
    armed = [True]

    def handler(signum, frame):
        if armed[0]:
            raise GradingTimeout()

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------------ engine

@dataclass
class UnitResult:
    errors: tuple          # error Diagnostics (lines in the exercise's numbering)
    defs: dict             # name -> TensorType | None (None: failed)
    sigs: dict             # name -> value signature (tuple)
    steps: tuple           # the binding's steps
    deps: tuple            # tensor names it reads
    results: dict = field(default_factory=dict)   # name -> ref of the step that made it


_SKIPPED = UnitResult((), {}, {}, (), ())


@dataclass
class Run:
    units: list            # UnitResult per unit
    vals: list             # per unit: name -> Val (None where values are not tracked)


@dataclass
class Unit:
    index: int
    stmt: int              # first template statement
    line: int
    end_line: int
    kind: str
    names: tuple           # names it defines
    holes: bool


def _walk_names(node, out: set) -> None:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Name):
            out.add(n.name)
        elif isinstance(n, (list, tuple)):
            stack.extend(n)
        elif hasattr(n, "__dataclass_fields__") and not isinstance(n, Span):
            for f in n.__dataclass_fields__:
                v = getattr(n, f)
                if not isinstance(v, (str, int, float, type(None), Span)):
                    stack.append(v)


def _sig(binding, ref_names) -> tuple:
    out = []
    for s in binding.steps:
        if s.op in _LAYOUT:
            continue
        keys = _SIG_DETAILS.get(s.op, ())
        detail = tuple(s.detail.get(k) for k in keys)
        names = tuple(ref_names.get(r, "%") for r in s.inputs if r != "?")
        if s.op in _COMMUTATIVE:
            names = tuple(sorted(names))
        out.append((s.op, detail, names))
    return tuple(out)


# ------------------------------------------------------------------ values at probe sizes
#
# Equal shapes do not make equal tensors: `view [B, H, S, Dh]` has the shape of
# `view [B, S, H, Dh] -> transpose 1 2` but not its numbers. So each tensor also
# gets a *value*: at small "probe" sizes that satisfy the assumptions, every
# element is labelled with where it comes from. Layout operations (view,
# transpose, reshape, ...) move labels; any other operation makes new labels
# from the operation, its value-changing arguments and its inputs' values.
# Two tensors with the same value hold the same numbers for every input.

MAX_PROBE_ELEMENTS = 50_000


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


class _TooBig(Exception):
    pass


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
        raise _TooBig
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
            raise _TooBig
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
            if s.op in _LAYOUT or s.op in ("split", "chunk", "select", "slice", "concat"):
                if any(v is None for v in ins) and s.op != "input":
                    raise _TooBig
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
                if op in _COMMUTATIVE:
                    keys = sorted(keys, key=repr)
                label = (op, detail, tuple(keys), tuple(outs))
                if s.op in ("linear", "embed", "layernorm", "rmsnorm", "block", "stack"):
                    label += (owner, own)    # its own learned weights
                    own += 1
                res = [Val.base(label + (k,), o) for k, o in enumerate(outs)]
            if len(res) == 1:
                vals[s.ref] = res[0]
            else:
                for k, v in enumerate(res):
                    vals[f"{s.ref}.{k}"] = v
                vals[s.ref] = res[0]
        return vals

    def _layout(self, s, ins, outs) -> list:
        op, d = s.op, s.detail
        x = ins[0] if ins else None
        if op == "input":
            return [Val.base(("literal", outs[0]), outs[0])]
        if op in ("view", "reshape", "flatten", "unsqueeze", "squeeze", "contiguous"):
            return [_reshape(x, outs[0])]
        if op == "transpose":
            i, j = d["dims"]
            order = list(range(len(x.shape)))
            order[i], order[j] = order[j], order[i]
            return [_permute(x, order)]
        if op == "permute":
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
            joined = Val(ins[0].shape, src, tuple(codes[0]))
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
                raise _TooBig
            del joined
            return [Val(outs[0], src, tuple(out))]
        if op == "rearrange":
            return [self._rearrange(x, d["pattern"], d.get("sizes", {}), outs[0])]
        raise _TooBig

    def _rearrange(self, x: Val, pattern: str, given: dict, out_shape) -> Val:
        from . import patterns
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
            else:
                order += [names.index(a) for a in g]
        t = _permute(_reshape(x, tuple(elem)), order)
        return _reshape(t, out_shape)


def _probe_env(prover):
    """User-level sizes >= 2, as distinct and small as the assumptions allow."""
    import random
    free = prover.free_vars()
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
        except (TypeError, ValueError, ZeroDivisionError, KeyError, OverflowError):
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


class _Engine:
    """Runs the exercise's statements with some holes filled; returns per-unit results."""

    def __init__(self, tmpl: Template, ref_text: str, path: str):
        self.tmpl = tmpl
        self.path = path
        self.units = _units(tmpl)
        self.unit_of_stmt = {}
        for u in self.units:
            for k in range(u.stmt, len(tmpl.stmts)):
                if tmpl.stmts[k].line > u.end_line:
                    break
                self.unit_of_stmt[k] = u.index
        self.tensor_names = {n for u in self.units for n in u.names}
        self.probe = None
        self.vmemo: dict = {}

    def run(self, fills: dict) -> Run:
        raise NotImplementedError

    def reset(self) -> None:
        pass

    def _unit_values(self, u: Unit, code: str, res: UnitResult, vals: dict) -> dict:
        """name -> Val for the tensors a unit defines (None when not tracked)."""
        if not u.names or self.probe is None or self.probe.env is None:
            return {n: None for n in u.names}
        if u.kind in ("input", "param", "buffer"):
            t = res.defs.get(u.names[0])
            try:
                return {u.names[0]: Val.base(("tensor", u.names[0]), self.probe.shape(t.shape))
                        if t is not None else None}
            except _TooBig:
                return {u.names[0]: None}
        inputs = {n: vals.get(n) for n in res.deps}
        key = (u.index, code, tuple(v.key if v is not None else None for v in inputs.values()))
        hit = self.vmemo.get(key)
        if hit is not None:
            return hit
        out = {n: None for n in u.names}
        if res.steps and not any(v is None for v in inputs.values()):
            try:
                got = self.probe.binding(res.steps, inputs, u.index)
                out = {n: got.get(res.results.get(n)) for n in u.names}
            except (_TooBig, KeyError, IndexError, ValueError, TypeError, ZeroDivisionError):
                pass
        if len(self.vmemo) > CACHE_LIMIT:
            self.vmemo.clear()
        self.vmemo[key] = out
        return out


def _units(tmpl: Template) -> list[Unit]:
    units, k = [], 0
    stmts = tmpl.stmts
    while k < len(stmts):
        st = stmts[k]
        if st.kind == "block":
            e = k
            while e + 1 < len(stmts) and stmts[e + 1].block == st.index:
                e += 1
            holes = any(stmts[j].holes for j in range(k, e + 1))
            units.append(Unit(len(units), k, st.line, stmts[e].end_line, "block", st.names, holes))
            k = e + 1
            continue
        names = st.names if st.kind in ("binding", "input", "param", "buffer") else ()
        units.append(Unit(len(units), k, st.line, st.end_line, st.kind, names, bool(st.holes)))
        k += 1
    return units


class FastEngine(_Engine):
    """Statement-at-a-time checking against the reference's sizes and prover."""

    def __init__(self, tmpl: Template, ref_text: str, path: str):
        super().__init__(tmpl, ref_text, path)
        from .checker import Checker
        from .nodes import Block

        spec = parse(ref_text, path)
        base = Checker(spec)
        base.run()
        self.ref_spec = base.out
        self.base = base
        self.prover = base.prover
        self.example_env = base.example_env
        self.blocks = {s.name: s for s in spec.statements if isinstance(s, Block)}
        self.lines = ref_text.split("\n")
        self.memo: dict = {}
        self.parsed: dict = {}
        self.block_cache: dict = {}
        self.probe = Probe(self.prover)

    def reset(self) -> None:
        self.block_cache = {}

    def _parse(self, unit: Unit, code: str):
        key = (unit.index, code)
        hit = self.parsed.get(key)
        if hit is not None:
            return hit
        try:
            spec = parse("\n" * (unit.line - 1) + code, self.path)
            names: set = set()
            for s in spec.statements:
                _walk_names(s, names)
                if isinstance(s, Expect):
                    names.add(s.name)
            deps = tuple(sorted(n for n in names if n in self.tensor_names))
            hit = (spec.statements, deps)
        except ParseFailure as failure:
            hit = failure.diagnostic
        if len(self.parsed) > CACHE_LIMIT:
            self.parsed.clear()
        self.parsed[key] = hit
        return hit

    def run(self, fills: dict) -> Run:
        env: dict = {}
        vals: dict = {}
        out, out_vals = [], []
        for u in self.units:
            if u.kind in ("dim", "assume", "example", "block", "end", "other", "return"):
                out.append(_SKIPPED)
                out_vals.append({})
                continue
            code = fills.get(u.stmt, _MISSING)
            if code is None:
                out.append(_SKIPPED)
                out_vals.append({})
                continue
            if code is _MISSING:
                code = self.tmpl.stmts[u.stmt].code
            parsed = self._parse(u, code)
            if isinstance(parsed, Diagnostic):
                res = UnitResult((parsed,), {n: None for n in u.names}, {}, (), ())
            else:
                stmts, deps = parsed
                key = (u.index, code, tuple(env.get(n, _MISSING) for n in deps))
                res = self.memo.get(key)
                if res is None:
                    res = self._exec(u, code, stmts, deps, env)
                    if len(self.memo) > CACHE_LIMIT:
                        self.memo.clear()
                    self.memo[key] = res
            for n in u.names:
                env[n] = res.defs.get(n)
            uv = self._unit_values(u, code, res, vals)
            vals.update(uv)
            out.append(res)
            out_vals.append(uv)
        return Run(out, out_vals)

    def _exec(self, u: Unit, code: str, stmts, deps, env) -> UnitResult:
        from .checker import Checker

        lines = list(self.lines)
        if u.line - 1 < len(lines):
            lines[u.line - 1] = code
            for k in range(u.line, min(u.end_line, len(lines))):
                lines[k] = ""
        chk = Checker(Spec(self.path, "\n".join(lines), tuple(stmts)))
        chk.prover = self.prover
        chk.out.prover = self.prover
        chk.example_env = self.example_env
        chk.blocks = self.blocks
        chk.block_cache = self.block_cache
        for n in deps:
            v = env.get(n, _MISSING)
            if v is not _MISSING:
                chk.scope.values[n] = None if v is None else (v, n)
        for s in stmts:
            chk._statement(s)
        errors = tuple(d for d in chk.out.diagnostics if d.severity == "error")
        defs = {}
        for n in u.names:
            v = chk.scope.values.get(n)
            defs[n] = v[0] if v else None
        sigs, steps, results = {}, (), {}
        ref_names = {n: n for n in deps}
        for b in chk.out.bindings:
            steps = tuple(b.steps)
            for n, r in zip(b.names, b.results):
                sigs[n] = _sig(b, ref_names)
                results[n] = r
        return UnitResult(errors, defs, sigs, steps, deps, results)


class FullEngine(_Engine):
    """Whole-file checking, memoised by the filled text: works for any exercise."""

    def __init__(self, tmpl: Template, ref_text: str, path: str):
        super().__init__(tmpl, ref_text, path)
        from .checker import check_text

        self.ref_spec = check_text(ref_text, path)
        self.prover = self.ref_spec.prover
        self.memo: dict = {}
        self.lines = [ln.text for ln in tmpl.lines]
        self.probe = Probe(self.prover)

    def run(self, fills: dict) -> Run:
        from .checker import check_text

        lines = list(self.lines)
        for k, st in enumerate(self.tmpl.stmts):
            code = fills.get(k, _MISSING)
            if code is _MISSING:
                continue
            for no in range(st.line, st.end_line + 1):
                lines[no - 1] = ""
            lines[st.line - 1] = "" if code is None else code
        text = "\n".join(lines)
        hit = self.memo.get(text)
        if hit is not None:
            return hit
        spec = check_text(text, self.path)
        out = self._split(spec)
        if len(self.memo) > CACHE_LIMIT // 100:
            self.memo.clear()
        self.memo[text] = out
        return out

    def _split(self, spec) -> list:
        ref_names = {d.name: d.name for d in spec.decls}
        by_name = {}
        for b in spec.bindings:
            for n, r, t in zip(b.names, b.results, b.types):
                ref_names[r] = n
                by_name[n] = (t, b)
        decls = {d.name: d.type for d in spec.decls}
        out, out_vals = [], []
        vals: dict = {}
        probe = self.probe
        for u in self.units:
            errors = tuple(d for d in spec.diagnostics if d.severity == "error"
                           and u.line <= d.span.line <= u.end_line)
            defs, sigs, steps = {}, {}, ()
            if u.kind == "block":
                for k, inst in enumerate(spec.blocks.get(u.names[0] if u.names else "", [])):
                    defs[f"{u.names[0]}#{k}"] = inst.output
                    for b in inst.bindings:
                        for n, t in zip(b.names, b.types):
                            defs[f"{u.names[0]}#{k}.{n}"] = t
                        sigs[f"{u.names[0]}#{k}.{b.names[0]}"] = _sig(b, {})
            elif u.kind in ("dim",):
                st = self.tmpl.stmts[u.stmt]
                for t in st.tokens[1:]:
                    if t.kind == "name" and t.text in spec.definitions:
                        defs["dim " + t.text] = spec.definitions[t.text]
            uv = {n: None for n in u.names}
            for n in u.names:
                if u.kind == "binding":
                    hit = by_name.get(n)
                    defs[n] = hit[0] if hit else None
                    if hit:
                        sigs[n] = _sig(hit[1], ref_names)
                        steps = tuple(hit[1].steps)
                elif u.kind in ("input", "param", "buffer"):
                    defs[n] = decls.get(n)
            if probe is not None and probe.env is not None and u.names:
                try:
                    if u.kind == "binding" and steps:
                        b = by_name[u.names[0]][1]
                        got = probe.binding(b.steps, vals, u.index)
                        vals.update(got)
                        for n, r in zip(b.names, b.results):
                            uv[n] = got.get(r)
                            vals[n] = uv[n]
                    elif u.kind in ("input", "param", "buffer") and defs.get(u.names[0]):
                        n = u.names[0]
                        uv[n] = Val.base(("tensor", n), probe.shape(defs[n].shape))
                        vals[n] = uv[n]
                except (_TooBig, KeyError, IndexError, ValueError, TypeError, ZeroDivisionError):
                    pass
            out.append(UnitResult(errors, defs, sigs, steps, ()))
            out_vals.append(uv)
        return Run(out, out_vals)


# ------------------------------------------------------------------ the grader

@dataclass
class _Verdict:
    fraction: float
    message: str = ""


def _shape_text(shape, prover, env) -> str:
    sym = "[" + ", ".join(dimlib.show(d) for d in shape) + "]"
    if not env:
        return sym
    vals = [prover.value(d, env) for d in shape]
    if any(v is None or dimlib.as_int(v) is None for v in vals):
        return sym
    num = "[" + ", ".join(str(dimlib.as_int(v)) for v in vals) + "]"
    return sym if num == sym else f"{sym} = {num}"


class Grader:
    """One exercise, ready to grade any number of submissions."""

    def __init__(self, exercise_text: str, solution_text: str, exercise_path: str = "exercise.shape",
                 solution_path: str = "solution.shape", engine: str | None = None,
                 time_limit: float | None = None):
        self.tmpl = load_template(exercise_text, exercise_path)
        self.path = exercise_path
        self.options = self.tmpl.options
        self.time_limit = time_limit if time_limit is not None else self.options.time_limit
        self.warnings: list[str] = []
        ext = extract(self.tmpl, solution_text)
        self.ref_answers: dict[str, str | None] = {}
        for name, b in self.tmpl.blanks.items():
            a = ext.answers.get(name)
            if a is not None and a.status == "given":
                self.ref_answers[name] = a.text
            elif b.whole_shape:
                self.ref_answers[name] = None
            else:
                why = a.message if a is not None else "not found"
                raise ExerciseError(f"{solution_path}: no answer for `?{name}` (line {b.line} of "
                                    f"{exercise_path}): {why}")
        for line, msg in ext.notes:
            self.warnings.append(f"{solution_path}:{line}: {msg}")
        self.ref_fills = {}
        for st in self.tmpl.stmts:
            if st.holes:
                self.ref_fills[st.index] = self._fill(st, {})
        ref_text = self._full_text(self.ref_fills)
        from .checker import check_text
        ref_check = check_text(ref_text, solution_path)
        if not ref_check.ok:
            d = ref_check.errors()[0]
            raise ExerciseError(f"the exercise filled with the solution's answers does not check: "
                                f"line {d.span.line}: {d.message}")
        fast_ok = engine != "full" and not any(
            st.holes and (st.kind in ("dim", "assume", "example") or st.block is not None)
            for st in self.tmpl.stmts)
        self.engine = FastEngine(self.tmpl, ref_text, exercise_path) if fast_ok else \
            FullEngine(self.tmpl, ref_text, exercise_path)
        self.ref_run = self.engine.run(self.ref_fills)
        if any(r.errors for r in self.ref_run.units) and isinstance(self.engine, FastEngine):
            self.engine = FullEngine(self.tmpl, ref_text, exercise_path)
            self.ref_run = self.engine.run(self.ref_fills)
        self.ref = self.ref_run.units
        self.prover = self.engine.prover
        self.example_env = getattr(self.engine, "example_env", None) or self._example_env()
        self.ref_env = {}
        for u, r in zip(self.engine.units, self.ref_run.units):
            for n in u.names:
                self.ref_env[n] = r.defs.get(n)
        self.max_score = sum(b.points for b in self.tmpl.blanks.values())
        self._visible = None
        self._judged: dict = {}
        self._lookup = self._dim_lookup_factory()

    # -- helpers
    def _example_env(self):
        spec = self.engine.ref_spec
        if not spec.example:
            return None
        return {self.prover.user[k]: v for k, v in spec.example.items() if k in self.prover.user}

    def _dim_lookup_factory(self):
        p = self.prover
        tensors = self.engine.tensor_names

        def lookup(node: Name):
            if node.name in p.user:
                return p.user[node.name]
            if node.name in tensors:
                raise ShapeError("E112", f"`{node.name}` is a tensor, but a size is expected here",
                                 span=node.span)
            import difflib
            close = difflib.get_close_matches(node.name, list(p.user), n=1, cutoff=0.5) or \
                [k for k in p.user if k.lower() == node.name.lower()][:1]
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise ShapeError("E002", f"`{node.name}` is not a dim of this exercise (its dims are "
                             f"{', '.join(p.user)}){hint}", span=node.span)
        return lookup

    def _fill(self, st, answers: dict) -> str:
        """Statement code with the learner's `answers` (name -> text), the rest reference."""
        repl = {}
        for b in self.tmpl.blanks.values():
            if b.stmt != st.index:
                continue
            if b.name in answers:
                repl[b.token] = answers[b.name]
            elif self.ref_answers.get(b.name) is not None:
                repl[b.token] = self.ref_answers[b.name]
            else:
                return None      # an `expect X: ?` with no reference text: not run
        return fill(st, repl)

    def _full_text(self, fills: dict) -> str:
        lines = [ln.text for ln in self.tmpl.lines]
        for k, code in fills.items():
            st = self.tmpl.stmts[k]
            for no in range(st.line, st.end_line + 1):
                lines[no - 1] = ""
            lines[st.line - 1] = code or ""
        return "\n".join(lines)

    def _show(self, shape) -> str:
        return _shape_text(shape, self.prover, self.example_env)

    # -- grading
    def grade_file(self, path: str) -> SubmissionResult:
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_BYTES + 1)
        except OSError as err:
            return self._reject(path, f"cannot read the submission: {err.strerror}")
        return self.grade_bytes(data, path)

    def grade_bytes(self, data: bytes, path: str = "<submission>") -> SubmissionResult:
        if len(data) > MAX_BYTES:
            return self._reject(path, f"the submission is larger than {MAX_BYTES // 1024} KB; "
                                      "submit the exercise file with your answers filled in")
        if b"\x00" in data:
            return self._reject(path, "the submission is not a text file")
        return self.grade_text(data.decode("utf-8", errors="replace"), path)

    def _reject(self, path: str, message: str) -> SubmissionResult:
        res = SubmissionResult(path, 0.0, self.max_score, gradable=False, error=message)
        for b in self.tmpl.blanks.values():
            res.blanks.append(BlankResult(b.name, 0.0, b.points, "not graded", message, None,
                                          b.line))
        return res

    def grade_text(self, text: str, path: str = "<submission>") -> SubmissionResult:
        start = time.perf_counter()
        if len(text.encode("utf-8", "replace")) > MAX_BYTES:
            return self._reject(path, f"the submission is larger than {MAX_BYTES // 1024} KB; "
                                      "submit the exercise file with your answers filled in")
        if text.count("\n") > 5000:
            return self._reject(path, "the submission has more than 5000 lines")
        res = SubmissionResult(path, 0.0, self.max_score)
        done: dict[str, BlankResult] = {}
        try:
            with deadline(self.time_limit):
                self._grade(text, res, done)
        except GradingTimeout:
            self.engine.reset()
            res.error = (f"grading stopped after {self.time_limit:g} s, the time limit for one "
                         "submission; the blanks graded until then keep their scores")
        except RecursionError:
            self.engine.reset()
            res.error = "the submission is too deeply nested to grade"
        for b in self.tmpl.blanks.values():
            if b.name not in done:
                done[b.name] = BlankResult(b.name, 0.0, b.points, "not graded",
                                           res.error or "not graded", b.hint, b.line)
        res.blanks = [done[n] for n in self.tmpl.blanks]
        res.score = sum(r.points for r in res.blanks)
        if not any(r.status not in ("missing", "not graded") for r in res.blanks) and \
                res.error is None:
            res.gradable = False
            res.error = "no line of the submission matches a line of the exercise that has a " \
                        "blank; submit the exercise file with the blanks filled in"
        res.seconds = time.perf_counter() - start
        return res

    def _grade(self, text: str, res: SubmissionResult, done: dict) -> None:
        ext = extract(self.tmpl, text)
        res.notes.extend((ln, clean(m)) for ln, m in ext.notes)
        answers: dict[str, Answer] = ext.answers
        given = {n: a.text for n, a in answers.items() if a.status == "given"}
        wrong_units: set[int] = set()
        for st in self.tmpl.stmts:
            blanks = [b for b in self.tmpl.blanks.values() if b.stmt == st.index]
            if not blanks:
                continue
            for b in blanks:
                a = answers.get(b.name) or Answer(None, "missing", None,
                                                  "the line with this blank is missing")
                if a.status != "given":
                    status = "unfilled" if a.status in ("unfilled", "empty") else \
                        "wrong" if a.status == "too long" else "missing"
                    done[b.name] = BlankResult(b.name, 0.0, b.points, status, a.message or status,
                                               b.hint, a.line or b.line)
            here = [b for b in blanks if b.name in given]
            if not here:
                wrong_units.add(self.engine.unit_of_stmt[st.index])
                continue
            verdicts = self._judge_statement(st, {b.name: given[b.name] for b in here})
            for b in here:
                v = verdicts[b.name]
                status = "correct" if v.fraction >= 1 else ("partial" if v.fraction > 0 else "wrong")
                msg = v.message
                if status != "correct" and self.options.reveal:
                    msg += f" The expected answer: {self._reference_text(b)}."
                done[b.name] = BlankResult(b.name, b.points * v.fraction, b.points, status,
                                           clean(msg) if msg else ("right" if status == "correct"
                                                                   else ""),
                                           b.hint if status != "correct" else None,
                                           answers[b.name].line, clean(given[b.name], 200))
                if status != "correct":
                    wrong_units.add(self.engine.unit_of_stmt[st.index])
        self._whole_file(given, wrong_units, res, done)

    def _reference_text(self, b) -> str:
        if self.ref_answers.get(b.name):
            return _q(self.ref_answers[b.name])
        st = self.tmpl.stmts[b.stmt]
        t = self.ref_env.get(st.names[0]) if st.names else None
        return f"`{self._show(t.shape)}`" if t is not None else "(not available)"

    def _judge_statement(self, st, answers: dict) -> dict:
        """Verdicts for the learner's answers in one statement (memoised: they depend only
        on the statement and these answers, every other blank being at its reference)."""
        key = (st.index, tuple(sorted(answers.items())))
        hit = self._judged.get(key)
        if hit is None:
            hit = self._judge_statement_uncached(st, answers)
            if len(self._judged) > CACHE_LIMIT:
                self._judged.clear()
            self._judged[key] = hit
        return hit

    def _judge_statement_uncached(self, st, answers: dict) -> dict:
        judge = self._judge_expect if st.kind == "expect" else self._judge_binding
        v = judge(st, answers)
        if v.fraction >= 1 or len(answers) == 1:
            return {n: v for n in answers}
        return {n: judge(st, {n: a}) for n, a in answers.items()}

    # -- expect statements: compare the learner's shape with the tensor's reference shape
    def _judge_expect(self, st, answers: dict) -> _Verdict:
        code = self._fill(st, answers)
        name = st.names[0]
        want = self.ref_env.get(name)
        if code is None or want is None:
            return _Verdict(0.0, "this blank could not be graded")
        try:
            spec = parse(code, self.path)
            node = next(s for s in spec.statements if isinstance(s, Expect))
        except ParseFailure as failure:
            return _Verdict(0.0, f"your answer does not parse: {failure.diagnostic.message}"
                            + (f" ({failure.diagnostic.help})" if failure.diagnostic.help else ""))
        except StopIteration:
            return _Verdict(0.0, "your answer does not give a shape")
        if isinstance(node.shape, Hole):
            return _Verdict(0.0, "the blank is not filled in")
        try:
            got = [dimlib.build(d, self._lookup) for d in node.shape.dims]
        except ShapeError as err:
            return _Verdict(0.0, err.message + (f" ({err.help})" if err.help else ""))
        unit = self.engine.unit_of_stmt.get(self._binding_stmt(name))
        frac, msg = self._compare(got, want.shape, unit, name, subject="your shape")
        return _Verdict(frac, msg)

    def _binding_stmt(self, name: str) -> int | None:
        for st in self.tmpl.stmts:
            if st.block is None and name in st.names and st.kind != "expect":
                return st.index
        return None

    # -- other statements: re-check with the answers and compare the IR
    def _judge_binding(self, st, answers: dict) -> _Verdict:
        code = self._fill(st, answers)
        fills = dict(self.ref_fills)
        fills[st.index] = code
        full = self.engine.run(fills)
        run = full.units
        ui = self.engine.unit_of_stmt[st.index]
        mine, ref = run[ui], self.ref[ui]
        if mine.errors:
            d = mine.errors[0]
            refs = [_squash(self.ref_answers.get(n) or "") for n in answers]
            if d.help and any(len(r) >= 3 and r in _squash(d.help) for r in refs):
                d = Diagnostic(d.code, d.message, d.span, None, d.notes, d.counterexample)
            return _Verdict(0.0, self._error_text(d, ui, tuple(answers.values())))
        unit = self.engine.units[ui]
        for n in unit.names:
            got, want = mine.defs.get(n), ref.defs.get(n)
            if got is None or want is None:
                return _Verdict(0.0, f"with your answer `{n}` cannot be computed")
            if got.dtype != want.dtype:
                return _Verdict(0.0, f"with your answer `{n}` holds {got.dtype} values, not "
                                     f"{want.dtype} values")
            if not self._same_shape(got.shape, want.shape):
                frac, msg = self._compare(got.shape, want.shape, ui, n,
                                          subject=f"with your answer `{n}` is {self._show(got.shape)}:"
                                                  " that")
                return _Verdict(frac, msg)
        values = full.vals[ui], self.ref_run.vals[ui]
        tracked = all(values[0].get(n) is not None and values[1].get(n) is not None
                      for n in unit.names)
        for n in unit.names:
            msg = self._sig_difference(mine.sigs.get(n, ()), ref.sigs.get(n, ()), n)
            if tracked and values[0][n].key == values[1][n].key:
                continue
            if msg:
                return _Verdict(0.0, msg)
            if tracked:
                return _Verdict(0.0, self._layout_message(n, code))
            if not self._same_shape(mine.defs[n].strides, ref.defs[n].strides):
                return _Verdict(0.0, self._layout_message(n, code))
        for k in range(ui + 1, len(run)):
            if run[k].errors:
                return _Verdict(0.0, f"`{'`, `'.join(unit.names) or 'this line'}` gets the right "
                                     f"shape, but with your answer line {self.engine.units[k].line} "
                                     f"then fails: {self._error_text(run[k].errors[0], k)}")
            for n, t in run[k].defs.items():
                r = self.ref[k].defs.get(n)
                if (t is None) != (r is None) or (t is not None and not self._same_shape(t.shape,
                                                                                          r.shape)):
                    return _Verdict(0.0, f"with your answer, `{n}` on line "
                                         f"{self.engine.units[k].line} comes out different")
            for n, v in full.vals[k].items():
                r = self.ref_run.vals[k].get(n)
                if v is not None and r is not None and v.key != r.key:
                    return _Verdict(0.0, f"with your answer, `{n}` on line "
                                         f"{self.engine.units[k].line} computes something else")
        return _Verdict(1.0)

    def _layout_message(self, name: str, text: str) -> str:
        moves = any(w in text for w in ("transpose", "permute", "rearrange"))
        msg = f"`{name}` has the right shape, but its numbers end up in the wrong places"
        if "view" in text or "reshape" in text or "flatten" in text:
            msg += (": `view`, `reshape` and `flatten` only regroup the numbers in memory order; "
                    "moving an axis to another position takes `transpose` or `permute`")
            if moves:
                msg += " (check which axes are swapped, and whether that happens before or "  \
                       "after the reshaping)"
        return msg

    def _error_text(self, d: Diagnostic, unit_index: int, mine: tuple = ()) -> str:
        text = d.message
        if d.help:
            text += f" (help: {d.help})"
        return self._scrub(text, mine)

    def _scrub(self, text: str, mine: tuple = ()) -> str:
        """Hide reference shapes of `expect X: ?` blanks that a message would give away
        (unless the exercise shows that shape in its code anyway)."""
        if self._visible is None:
            self._visible = _squash(" ".join(st.code for st in self.tmpl.stmts))
        for b in self.tmpl.blanks.values():
            if not b.whole_shape:
                continue
            st = self.tmpl.stmts[b.stmt]
            t = self.ref_env.get(st.names[0]) if st.names else None
            if t is None:
                continue
            shown = self._show(t.shape)
            sym = shown.split(" = ")[0]
            if _squash(sym) in self._visible:
                continue
            if any(_squash(sym) in _squash(a) for a in mine):
                continue
            for s in (shown, sym):
                text = text.replace(s, f"[the shape that {b.label} asks for]")
        return text

    def _same_shape(self, a, b) -> bool:
        return len(a) == len(b) and all(x == y or self.prover.equal(x, y).ok for x, y in zip(a, b))

    def _sig_difference(self, mine: tuple, ref: tuple, name: str) -> str | None:
        if len(mine) == len(ref) and all(self._sig_entry_equal(a, b) for a, b in zip(mine, ref)):
            return None
        mine_ops = [e[0] for e in mine]
        ref_ops = [e[0] for e in ref]
        extra = [op for op in mine_ops if op not in ref_ops]
        if extra:
            return f"`{name}` has the right shape, but `{extra[0]}` is not the operation needed here"
        if len(mine_ops) < len(ref_ops):
            return f"`{name}` has the right shape, but a step is missing"
        if len(mine_ops) > len(ref_ops):
            return f"`{name}` has the right shape, but there is a step too many"
        for a, b in zip(mine, ref):
            if self._sig_entry_equal(a, b):
                continue
            op = a[0]
            if a[0] != b[0]:
                return f"`{name}` has the right shape, but its steps are in a different order"
            if a[2] != b[2]:
                return f"`{name}` has the right shape, but `{op}` takes the wrong tensors (or " \
                       "takes them in the wrong order)"
            if op in ("softmax", "log_softmax"):
                return f"`{name}` has the right shape, but `{op}` normalises over the wrong dim " \
                       f"(dim {a[1][0]} here)"
            if op == "scale":
                return f"`{name}` has the right shape, but the scale factor `{a[1][0]}` is not right"
            if op in ("sum", "mean", "var", "amax"):
                return f"`{name}` has the right shape, but `{op}` reduces over the wrong dim"
            if op == "mask":
                return f"`{name}` has the right shape, but the mask is not the right one"
            return f"`{name}` has the right shape, but `{op}` is used with different arguments"
        return f"`{name}` has the right shape, but computes something else"

    def _sig_entry_equal(self, a, b) -> bool:
        if a[0] != b[0] or a[2] != b[2] or len(a[1]) != len(b[1]):
            return False
        for x, y in zip(a[1], b[1]):
            if isinstance(x, sp.Basic) and isinstance(y, sp.Basic):
                if not (x == y or self.prover.equal(x, y).ok):
                    return False
            elif x != y:
                return False
        return True

    # -- describing a wrong shape in the learner's terms
    def _compare(self, got, want, unit_index, name, subject) -> tuple[float, str]:
        if self._same_shape(got, want):
            return 1.0, ""
        p = self.prover
        shown = self._show(got)
        if subject == "your shape":
            subject = f"your shape {shown}: it"
            that = f"your shape {shown} is"
        else:
            that = subject + " is"
            subject = subject + " shape"
        earlier = self._earlier_shapes(unit_index, name)
        for label, shape in earlier:
            if self._same_shape(got, shape):
                return 0.0, f"{that} {label}"
        if len(got) != len(want):
            return 0.0, (f"{subject} has {len(got)} dim{'s' if len(got) != 1 else ''}; "
                         f"`{name}` has {len(want)}")
        env = self.example_env
        if env:
            vals = [(p.value(a, env), p.value(b, env)) for a, b in zip(got, want)]
            if all(x is not None and x == y for x, y in vals):
                only = [k for k, (a, b) in enumerate(zip(got, want)) if not p.equal(a, b).ok]
                dims = ", ".join(f"{n}={env[p.user[n]]}" for n in p.user
                                 if p.user[n] in env and p.user[n] not in p.definition)
                which = "it is written with numbers, which are" if len(only) == len(want) else \
                    f"{_dims_phrase(only)} {'is' if len(only) == 1 else 'are'}"
                return self.options.partial, (
                    f"{subject} has the right sizes for the example ({dims}), but {which} right "
                    "only for those sizes: write the shape with the dims, so that it holds for "
                    "every size")
        perm = self._permutation(got, want)
        if perm is not None:
            a, b = perm
            return 0.0, f"{subject} has the right sizes in the wrong order: `{a}` comes before `{b}`"
        diff = [k for k, (a, b) in enumerate(zip(got, want)) if not p.equal(a, b).ok]
        if len(diff) == 1:
            k = diff[0]
            factor = self._factor(got[k], want[k])
            where = f"dim {k}" + (" (the last)" if k == len(want) - 1 and k > 0 else "")
            if factor:
                return 0.0, f"{subject} is off by a factor in {where}: `{got[k]}` is {factor}"
            return 0.0, f"{subject} has {where} wrong (`{got[k]}`); the other dims are right"
        return 0.0, f"{subject} has {_dims_phrase(diff)} wrong"

    def _permutation(self, got, want):
        used = [False] * len(want)
        for a in got:
            for j, b in enumerate(want):
                if not used[j] and (a == b or self.prover.equal(a, b).ok):
                    used[j] = True
                    break
            else:
                return None
        for k, a in enumerate(got):
            if not self.prover.equal(a, want[k]).ok:
                # `a` is out of place: name a dim it should come after
                for b in got[k + 1:]:
                    ia = next(j for j, w in enumerate(want) if self.prover.equal(a, w).ok)
                    ib = next(j for j, w in enumerate(want) if self.prover.equal(b, w).ok)
                    if ib < ia:
                        return a, b
                return a, want[k]
        return None

    def _factor(self, got, want) -> str | None:
        p = self.prover
        try:
            ratio = sp.cancel(p.canon(got) / p.canon(want))
        except (TypeError, ValueError, ZeroDivisionError):
            return None
        if ratio.free_symbols - set(p.user.values()):
            return None
        num, den = sp.fraction(ratio)
        if ratio.is_Number:
            if ratio > 1 and ratio.is_Integer:
                return f"{ratio} times too big"
            if ratio < 1 and (1 / ratio).is_Integer:
                return f"{1 / ratio} times too small"
            return None
        monomial = (sp.Symbol, sp.Mul, sp.Pow)
        if den == 1 and isinstance(num, monomial):
            return f"{num} times too big"
        if num == 1 and isinstance(den, monomial):
            return f"{den} times too small"
        return None

    def _earlier_shapes(self, unit_index, name) -> list:
        """(how to describe it, shape) for shapes a learner may confuse with the answer."""
        out = []
        if unit_index is None:
            return out
        units = self.engine.units
        ref = self.ref[unit_index]
        steps = ref.steps
        st = self.tmpl.stmts[units[unit_index].stmt]
        hidden = self._hole_ranges(st)
        for k in range(len(steps) - 2, -1, -1):
            s = steps[k]
            if s.op == "input":
                continue
            nxt = steps[k + 1]
            col = nxt.span.column - 1
            is_hidden = any(a <= col < b for a, b in hidden)
            where = f"partway through line {units[unit_index].line}"
            out.append((f"the shape `{name}` has {where}, before `{nxt.text}`"
                        if not is_hidden else f"the shape `{name}` has {where}, not at its end",
                        s.out.shape))
        reads = set(ref.deps) if ref.deps else self._reads(st)
        for k in range(unit_index - 1, -1, -1):
            u = units[k]
            for n in u.names:
                t = self.ref[k].defs.get(n)
                if t is not None and n in reads:
                    what = "declared" if u.kind in ("input", "param", "buffer") else "computed"
                    out.append(((f"the shape of `{n}` ({what} on line {u.line}), which `{name}` "
                                 "is computed from"), t.shape))
        return out

    def _reads(self, st) -> set:
        names = self.engine.tensor_names
        return {t.text for t in st.tokens if t.kind == "name" and t.text in names}

    def _hole_ranges(self, st) -> list:
        """Character ranges of the reference answers in the filled statement."""
        code = st.code
        out = []
        shift = 0
        for b in sorted((b for b in self.tmpl.blanks.values() if b.stmt == st.index),
                        key=lambda b: b.token):
            t = st.tokens[b.token]
            ans = self.ref_answers.get(b.name) or t.text
            out.append((t.start + shift, t.start + shift + len(ans)))
            shift += len(ans) - (t.end - t.start)
        del code
        return out

    # -- the whole file with all the learner's answers
    def _whole_file(self, given: dict, wrong_units: set, res: SubmissionResult, done) -> None:
        fills = {}
        for st in self.tmpl.stmts:
            if not st.holes:
                continue
            repl = {}
            for b in self.tmpl.blanks.values():
                if b.stmt == st.index:
                    repl[b.token] = given.get(b.name, f"?{b.name}")
            fills[st.index] = fill(st, repl)
        run = self.engine.run(fills).units
        reads: dict[int, set] = {}
        producer = {}
        for u in self.engine.units:
            for n in u.names:
                producer[n] = u.index
        for k, r in enumerate(run):
            src = {producer[n] for n in r.deps if n in producer}
            reads[k] = set(src)
            for j in src:
                reads[k] |= reads.get(j, set())
        expect_holes = {self.engine.unit_of_stmt[b.stmt] for b in self.tmpl.blanks.values()
                        if self.tmpl.stmts[b.stmt].kind == "expect"}
        for k, r in enumerate(run):
            if k in wrong_units or k in expect_holes:
                continue
            for d in r.errors:
                if d.code == "E116":
                    continue
                if any(d.message == e.message for e in self.ref[k].errors):
                    continue
                blame = sorted({b.label for b in self.tmpl.blanks.values()
                                if self.engine.unit_of_stmt[b.stmt] in (reads.get(k, set()) |
                                                                        {k})
                                and done.get(b.name) and done[b.name].status != "correct"},
                               key=lambda s: s)
                msg = self._error_text(d, k)
                if blame:
                    msg += f" (this follows from your answer{'s' if len(blame) > 1 else ''} to " \
                           f"{', '.join(blame)})"
                res.findings.append((self.engine.units[k].line, clean(msg)))
                break


def _dims_phrase(ks: list) -> str:
    if len(ks) == 1:
        return f"dim {ks[0]}"
    return "dims " + ", ".join(str(k) for k in ks[:-1]) + f" and {ks[-1]}"


# ------------------------------------------------------------------ output formats

def _num(x: float):
    return int(x) if float(x).is_integer() else round(x, 4)


def text_report(res: SubmissionResult) -> str:
    out = [f"{clean(res.path)}: {_num(res.score)}/{_num(res.max_score)} points"]
    if res.error:
        out.append(f"  {res.error}")
    marks = {"correct": "[ok]     ", "partial": "[partial]", "wrong": "[wrong]  ",
             "unfilled": "[empty]  ", "missing": "[missing]", "not graded": "[skipped]"}
    for b in res.blanks:
        where = f" (line {b.line})" if b.line else ""
        head = f"  {marks.get(b.status, b.status)} {b.label}{where}: {_num(b.points)}/{_num(b.max_points)}"
        if b.status == "correct":
            out.append(head)
            continue
        out.append(head + (f": {b.feedback}" if b.feedback else ""))
        if b.hint:
            out.append(f"              hint: {clean(b.hint)}")
    for line, msg in res.findings:
        out.append(f"  whole file, line {line}: {msg}")
    for line, msg in res.notes:
        out.append(f"  note{f', line {line}' if line else ''}: {msg}")
    return "\n".join(out) + "\n"


def result_json(res: SubmissionResult) -> dict:
    return {
        "file": res.path, "score": _num(res.score), "max_score": _num(res.max_score),
        "gradable": res.gradable, "error": res.error,
        "blanks": [{"name": b.label, "line": b.line, "points": _num(b.points),
                    "max_points": _num(b.max_points), "status": b.status, "feedback": b.feedback,
                    "hint": b.hint, "answer": b.answer} for b in res.blanks],
        "whole_file": [{"line": ln, "message": m} for ln, m in res.findings],
        "notes": [{"line": ln, "message": m} for ln, m in res.notes],
        "seconds": round(res.seconds, 4),
    }


def gradescope_json(res: SubmissionResult, title: str | None = None) -> dict:
    tests = []
    for b in res.blanks:
        output = b.feedback if b.status != "correct" else "right"
        if b.answer is not None:
            output = f"your answer: {_q(b.answer)}\n{output}"
        if b.hint:
            output += f"\nhint: {b.hint}"
        tests.append({"name": f"{b.label}" + (f" (line {b.line})" if b.line else ""),
                      "score": _num(b.points), "max_score": _num(b.max_points),
                      "status": "passed" if b.status == "correct" else "failed",
                      "output": output, "visibility": "visible"})
    tests.append({"name": "whole file checks with your answers", "score": 0, "max_score": 0,
                  "status": "failed" if res.findings else "passed",
                  "output": "\n".join(f"line {ln}: {m}" for ln, m in res.findings) or
                  "every step checks", "visibility": "visible"})
    summary = f"{_num(res.score)}/{_num(res.max_score)} points" + \
        (f" on {title}" if title else "")
    if res.error:
        summary += f"\n{res.error}"
    if res.notes:
        summary += "\n" + "\n".join(f"note{f' (line {ln})' if ln else ''}: {m}"
                                    for ln, m in res.notes)
    return {"score": _num(res.score), "output": summary, "tests": tests,
            "visibility": "visible", "stdout_visibility": "hidden",
            "execution_time": round(res.seconds, 3)}


def prairielearn_json(res: SubmissionResult) -> dict:
    out = {
        "gradable": res.gradable,
        "score": round(res.score / res.max_score, 6) if res.max_score and res.gradable else 0.0,
        "message": res.error or f"{_num(res.score)}/{_num(res.max_score)} points",
        "output": text_report(res),
        "tests": [{"name": b.label, "description": b.hint or "",
                   "points": _num(b.points), "max_points": _num(b.max_points),
                   "message": b.feedback if b.status != "correct" else "right",
                   "output": f"your answer: {_q(b.answer)}" if b.answer is not None else ""}
                  for b in res.blanks],
    }
    if not res.gradable:
        out["format_errors"] = [res.error or "the submission could not be graded"]
    return out


# ------------------------------------------------------------------ files and the CLI

def find_solution(exercise_path: str) -> str | None:
    """`NAME.shape` -> `solutions/NAME.shape` beside it, or `NAME.solution.shape`."""
    p = Path(exercise_path)
    for cand in (p.parent / "solutions" / p.name, p.with_name(p.stem + ".solution.shape")):
        if cand.is_file():
            return str(cand)
    return None


def submission_files(paths: list[str], exclude: set[str]) -> list[str]:
    out = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for f in sorted(path.rglob("*.shape")):
                if f.is_file() and str(f.resolve()) not in exclude:
                    out.append(str(f))
        elif path.is_file():
            out.append(str(path))
        else:
            raise FileNotFoundError(p)
    return out


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _write(path: str | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def cli(args) -> int:
    if getattr(args, "command", None) == "exercise" or getattr(args, "exercise_command", None):
        return _make_cli(args)
    return _grade_cli(args)


def _make_cli(args) -> int:
    try:
        text = _read(args.file)
    except OSError as err:
        print(f"shapelang: cannot read {args.file}: {err.strerror}", file=sys.stderr)
        return 2
    if args.output and Path(args.output).exists():
        if Path(args.output).resolve() == Path(args.file).resolve():
            print("shapelang: the output would overwrite the solution", file=sys.stderr)
            return 2
        if not args.force:
            print(f"shapelang: {args.output} exists; use --force to overwrite it", file=sys.stderr)
            return 2
    try:
        out, warnings = make(text, args.file, all_shapes=args.all_shapes)
    except ExerciseError as err:
        print(f"shapelang: {err}", file=sys.stderr)
        return 1
    for w in warnings:
        print(f"shapelang: note: {w}", file=sys.stderr)
    try:
        _write(args.output, out)
    except OSError as err:
        print(f"shapelang: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return 2
    return 0


def _grade_cli(args) -> int:
    solution = args.solution or find_solution(args.exercise)
    if solution is None:
        print(f"shapelang: no solution found for {args.exercise} (looked for "
              "solutions/NAME.shape and NAME.solution.shape beside it); pass --solution",
              file=sys.stderr)
        return 2
    try:
        grader = Grader(_read(args.exercise), _read(solution), args.exercise, solution)
    except OSError as err:
        print(f"shapelang: cannot read {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
    except ExerciseError as err:
        print(f"shapelang: the exercise cannot be graded: {err}", file=sys.stderr)
        return 2
    for w in grader.warnings:
        print(f"shapelang: note: {w}", file=sys.stderr)
    exclude = {str(Path(args.exercise).resolve()), str(Path(solution).resolve())}
    try:
        files = submission_files(args.submissions, exclude)
    except FileNotFoundError as err:
        print(f"shapelang: no such file or folder: {err.args[0]}", file=sys.stderr)
        return 2
    fmt = args.format
    if fmt in ("gradescope", "prairielearn"):
        res = _one_submission(grader, files, args.exercise)
        results = [res]
        obj = gradescope_json(res, grader.options.title) if fmt == "gradescope" \
            else prairielearn_json(res)
        out = json.dumps(obj, indent=2) + "\n"
    else:
        if not files:
            print("shapelang: no .shape submissions found", file=sys.stderr)
            return 2
        results = [grader.grade_file(f) for f in files]
        if fmt == "json":
            out = json.dumps({"exercise": args.exercise, "title": grader.options.title,
                              "max_score": _num(grader.max_score),
                              "submissions": [result_json(r) for r in results]}, indent=2) + "\n"
        elif fmt == "score":
            if len(results) == 1:
                out = f"{_num(results[0].score)}\n"
            else:
                out = "".join(f"{_num(r.score)}\t{r.path}\n" for r in results)
        else:
            out = "\n".join(text_report(r) for r in results)
    try:
        _write(args.output, out)
    except OSError as err:
        print(f"shapelang: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return 2
    return 0 if all(r.full_marks for r in results) else 1


def _one_submission(grader: Grader, files: list[str], exercise_path: str) -> SubmissionResult:
    """Gradescope and PrairieLearn grade one submission: pick the file to grade."""
    if not files:
        return grader._reject("(no file)", "the submission contains no .shape file; upload "
                                           "the exercise file with your answers filled in")
    same = [f for f in files if Path(f).name == Path(exercise_path).name]
    if len(same) == 1:
        return grader.grade_file(same[0])
    if len(files) == 1:
        return grader.grade_file(files[0])
    best = max((grader.grade_file(f) for f in files), key=lambda r: (r.gradable, r.score))
    best.notes.append((None, ("the submission has several .shape files; graded the one that "
                              "scored best")))
    return best
