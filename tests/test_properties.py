"""Property tests: the checker's shapes agree with PyTorch on real tensors.

A hypothesis strategy builds a random spec (dims with awkward names, derived
and fixed dims, inputs of rank 1..5, and a pipeline of 1..6 operations) and,
alongside it, the same computation as a list of torch calls. Every size in the
generator is a sympy expression over the spec's dims, so the validity of a
generated pipeline does not depend on the example values (a `view` may still
depend on them through strides, and the intentionally broken cases are broken
by mismatching symbols). The oracle:

* torch succeeds at the example sizes -> the checker accepts and every named
  tensor has torch's shape at the example; or the checker rejects and the
  rejection is real: torch fails at the diagnostic's counterexample, or (for a
  diagnostic without one, e.g. a `view` on a transposed layout) at generic
  sizes where no dim is 1.
* torch raises -> the checker reports an error, and the prefix of the pipeline
  that torch did run is checked as above.

Programs also come with `expect` lines, shuffled header lines, comments, CRLF,
continuation lines, anonymous shape-literal operands, token ids with `embed`,
and blocks (called as `X -> F`, `F(X)` or `stack 2 F`). Two tests run them:
1,200 general pipelines (a fifth end in a deliberately broken step) and 600
layout-heavy ones (views after transposes, expands, chunks, slices and
elementwise ops), all with derandomize=True.

Known checker bugs are kept as strict xfail tests at the bottom, so that this
file stays green. Layouts are compared as they are: the checker
follows torch's (tests/test_checker_layout.py has a property test of its own).
"""
from __future__ import annotations

import itertools
import random
import re
import warnings
from dataclasses import dataclass, field

import pytest
from tiers import examples

hypothesis = pytest.importorskip("hypothesis")
torch = pytest.importorskip("torch")

import sympy as sp
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from shapelang.checker.checker import check_text

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
pytestmark = pytest.mark.filterwarnings("ignore:var\\(\\)")
torch.set_num_threads(1)

TORCH_ERRORS = (RuntimeError, IndexError, ValueError)
MAX_RANK = 6
MAX_NUMEL = 2_000_000       # skip torch re-runs at counterexamples that would be huge
DROPOUT_EVAL = [False]      # run dropout as in eval mode (it returns its input)

# ----------------------------------------------------------------------------- dims


def sym(name: str) -> sp.Symbol:
    return sp.Symbol(name, positive=True, integer=True)


_ATOMIC = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def paren(t: str) -> str:
    return t if _ATOMIC.fullmatch(t) else f"({t})"


@dataclass(frozen=True)
class Dm:
    """One size: its value over the generator's atoms, its spelling, its factors."""
    e: sp.Expr
    t: str
    f: tuple | None = None      # atomic factors whose product is e (None: itself)
    parts: tuple | None = None  # summands, for sizes made by concat

    @property
    def factors(self) -> tuple:
        if self.e == 1:
            return ()
        return self.f if self.f is not None else (self,)

    @property
    def one(self) -> bool:
        return self.e == 1


ONE = Dm(sp.Integer(1), "1")


def const(n: int) -> Dm:
    return ONE if n == 1 else Dm(sp.Integer(n), str(n))


def mul(dims) -> Dm:
    dims = [d for d in dims if not d.one] or [ONE]
    if len(dims) == 1:
        return dims[0]
    e = sp.Mul(*[d.e for d in dims])
    return Dm(e, "*".join(paren(d.t) for d in dims), tuple(f for d in dims for f in d.factors))


def add(dims) -> Dm:
    e = sp.Add(*[d.e for d in dims])
    return Dm(e, " + ".join(paren(d.t) for d in dims), None, tuple(dims))


def from_expr(e) -> Dm:
    e = sp.expand(e)
    return const(int(e)) if e.is_Integer else Dm(e, str(e))


def shape_text(dims) -> str:
    return "[" + ", ".join(d.t for d in dims) + "]"


def ev(e, env) -> int:
    v = sp.sympify(e).xreplace(env)
    assert v.is_Integer, (e, v)
    return int(v)


# ----------------------------------------------------------------------------- programs

@dataclass
class Step:
    kind: str          # op | bin | multi | break
    text: str = ""     # op text, or the binary operator, or the multi op text
    fn: object = None  # torch: fn(x, env, tensors) -> tensor (or list for multi)
    other: str = ""    # bin: the other operand's text
    left: bool = False  # bin: the other operand stands on the left
    pieces: int = 0
    pick: int = 0
    newline: bool = False  # op: continue on a new line starting with `->`
    call: object = None  # bin via call form: call(cur_text) -> expression text


@dataclass
class Program:
    dims_lines: list
    example: dict           # dim name -> int (the example line)
    atom_env: dict          # atom symbol -> int at the example
    names: dict             # user dim name -> expression over atoms
    inputs: list            # (name, [Dm], dtype)
    head: str               # `X0` or a shape literal
    head_dims: list
    steps: list = field(default_factory=list)
    expect: list | None = None   # final shape (Dm) if the generator knows it
    invalid: str | None = None   # what the last step breaks on purpose
    style: int = 0               # seed for line order, comments and line endings
    block: str | None = None     # the steps inside `block F(x: [P0, ..])`, applied by pipe|call|stack

    def __repr__(self) -> str:
        return "Program:\n" + self.render()[0]

    def _repr_pretty_(self, p, cycle):   # hypothesis prints failing examples with this
        p.text(repr(self))

    def prefix(self, n: int) -> Program:
        return Program(self.dims_lines, self.example, self.atom_env, self.names, self.inputs,
                       self.head, self.head_dims, self.steps[:n], None, None, self.style,
                       self.block if self.block != "stack" else "pipe")

    # -- text
    def render(self) -> tuple[str, list]:
        """Spec text, and per step the binding names recorded after it."""
        lines = list(self.dims_lines)
        lines.append("example " + ", ".join(f"{k}={v}" for k, v in self.example.items()))
        for name, dims, dtype in self.inputs:
            lines.append(f"input {name}: {shape_text(dims)}" + (f" {dtype}" if dtype else ""))
        rng = random.Random(self.style)
        if rng.random() < 0.3:     # sizes, assumptions, example and inputs in any order
            rng.shuffle(lines)
        cur, k = ("x" if self.block else self.head), 0
        bound = [[] for _ in self.steps]
        is_name = lambda s: _ATOMIC.fullmatch(s) is not None
        top, lines = lines, ([] if self.block else lines)
        for i, s in enumerate(self.steps):
            if s.kind == "op":
                cur += ("\n    -> " if s.newline else " -> ") + s.text
            elif s.kind == "bin":
                if s.call is not None:
                    cur = s.call(cur)
                    continue
                inner = cur if is_name(cur) else f"({cur})"
                cur = f"{s.other} {s.text} {inner}" if s.left else f"{inner} {s.text} {s.other}"
            elif s.kind == "break":
                lines.append(f"t{k}: {cur}")
                bound[i].append((f"t{k}", None))
                cur, k = f"t{k}", k + 1
            elif s.kind == "multi":
                names = [f"p{k}_{j}" for j in range(s.pieces)]
                lines.append(f"{', '.join(names)}: {cur} -> {s.text}")
                bound[i].extend((n, j) for j, n in enumerate(names))
                cur, k = names[s.pick], k + 1
        if self.block:
            params = ", ".join(f"P{i}" for i in range(len(self.head_dims)))
            body = [f"block F(x: [{params}]):"] + [f"  {ln}" for ln in lines] + [f"  return {cur}", "end"]
            lines = top + body
            cur = {"pipe": "X0 -> F", "call": "F(X0)", "stack": "X0 -> stack 2 F"}[self.block]
            bound = [[] for _ in self.steps]
        lines.append(f"y: {cur}")
        if self.expect is not None:
            lines.append(f"expect y: {shape_text(self.expect)}")
        if rng.random() < 0.3:     # comments and blank lines
            out = []
            for line in lines:
                if rng.random() < 0.2:
                    out.append(rng.choice(["", "# a comment: -> [B, S] ?", "   ", "\t# indented"]))
                out.append(line + (" # note" if rng.random() < 0.2 else ""))
            lines = out
        newline = "\r\n" if rng.random() < 0.1 else "\n"
        return newline.join(lines) + newline, bound

    # -- torch
    def run(self, env) -> Run:
        """Run in torch at atom values `env`; record the shape of every named tensor."""
        tensors = {}
        total = 0
        for name, dims, dtype in self.inputs + ([("<head>", self.head_dims, None)]):
            sizes = [ev(d.e, env) for d in dims]
            total += _numel(sizes)
            if total > MAX_NUMEL:
                return Run(skipped=True)
            if dtype == "bool":
                tensors[name] = torch.rand(sizes) < 0.5
            elif dtype in ("int", "long"):
                tensors[name] = torch.zeros(sizes, dtype=torch.long)
            else:
                tensors[name] = torch.randn(sizes)
        x = tensors["X0"] if self.head == "X0" else tensors["<head>"]
        _, bound = self.render()
        shapes = {}
        steps = list(enumerate(self.steps)) * (2 if self.block == "stack" else 1)
        for i, s in steps:
            try:
                out = s.fn(x, env, tensors)
                if s.kind == "multi" and len(out) != s.pieces:
                    raise RuntimeError(f"torch gives {len(out)} pieces, the spec names {s.pieces}")
            except TORCH_ERRORS as err:
                return Run(fail=i, error=f"{type(err).__name__}: {err}", shapes=shapes)
            if s.kind == "multi":
                for name, j in bound[i]:
                    shapes[name] = tuple(out[j].shape)
                x = out[s.pick]
            else:
                x = out
                for name, _ in bound[i]:
                    shapes[name] = tuple(x.shape)
            if x.numel() > MAX_NUMEL:
                return Run(skipped=True)
        shapes["y"] = tuple(x.shape)
        return Run(shapes=shapes)


def _numel(sizes) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


@dataclass
class Run:
    shapes: dict = field(default_factory=dict)
    fail: int | None = None
    error: str = ""
    skipped: bool = False

    @property
    def ok(self) -> bool:
        return self.fail is None and not self.skipped


# ----------------------------------------------------------------------------- generator

BASE_NAMES = ["B", "S", "N", "E", "I", "Q", "lambda", "T", "C", "K_v"]


class G:
    """Drawing helpers over a seeded Random (hypothesis draws the seed).

    Hypothesis' own integer draws lean hard towards small values, which would
    make the first option of every choice dominate; one seed per program keeps
    the choices uniform and the runs reproducible (derandomize=True).
    """

    def __init__(self, rng: random.Random):
        self.rng = rng

    def int(self, lo, hi):
        return self.rng.randint(lo, hi)

    def pick(self, seq):
        return self.rng.choice(list(seq))

    def coin(self, p=0.5) -> bool:
        return self.rng.random() < p

    def perm(self, n):
        out = list(range(n))
        self.rng.shuffle(out)
        return out

    def axis(self, k, n) -> int:
        """Axis k of n, written positive or negative."""
        return k - n if self.coin() else k


class Vocab:
    def __init__(self, g: G):
        self.g = g
        names = [n for n in BASE_NAMES if g.coin(0.45)] or ["N"]
        names = names[:6]
        self.atoms = {n: Dm(sym(n), n) for n in names}
        self.names = {n: sym(n) for n in names}
        self.lines = [f"dim {', '.join(names)}"]
        self.example = {n: g.int(1, 6) for n in names}
        self.extra = []  # Dm spelled with derived or fixed dims
        if g.coin(0.35):   # dim Dk = D / H with an assumption
            D, H = g.int(1, 6), None
            H = g.pick([h for h in range(1, D + 1) if D % h == 0])
            h, k = sym("H"), sym("Dk")
            self.lines += ["dim D, H", "dim Dk = D / H", "assume D % H == 0"]
            self.example.update(D=D, H=H)
            self.names.update(D=h * k, H=h, Dk=k)
            self.atom_values = {h: H, k: D // H}
            dh, dk = Dm(h, "H"), Dm(k, "Dk")
            self.atoms.update(H=dh, Dk=dk)
            self.extra.append(Dm(h * k, "D", (dh, dk)))
        else:
            self.atom_values = {}
        self.halves = {}
        if g.coin(0.25):   # an even size: X = 2 * (X/2)
            x = names[-1]
            xh = sym(x + "_half")
            self.example[x] = 2 * g.int(1, 3)
            self.lines.append(g.pick([f"assume {x} % 2 == 0", f"assume 2 <= {x}\nassume {x} % 2 == 0"]))
            self.halves[x] = xh
            self.names[x] = 2 * xh
            self.atoms[x] = Dm(2 * xh, x, (const(2), Dm(xh, f"{x}/2")))
        if len(names) >= 2 and g.coin(0.35):   # a derived product
            a, b = names[0], names[1]
            self.lines.append(f"dim d_model = {a} * {b}")
            e = self.atoms[a].e * self.atoms[b].e
            self.names["d_model"] = e
            self.extra.append(Dm(e, "d_model", self.atoms[a].factors + self.atoms[b].factors))
            if g.coin():
                self.example["d_model"] = self.example[a] * self.example[b]
        if g.coin(0.3):
            self.lines.append("dim V = 3")
            self.names["V"] = sp.Integer(3)
            self.extra.append(Dm(sp.Integer(3), "V"))
        if g.coin(0.3):
            self.lines.append("dim U = 1")
            self.names["U"] = sp.Integer(1)
            self.extra.append(Dm(sp.Integer(1), "U"))
        for n in names:
            if n in self.halves:
                self.atom_values[self.halves[n]] = self.example[n] // 2
            else:
                self.atom_values[sym(n)] = self.example[n]
        self.env = {s: sp.Integer(v) for s, v in self.atom_values.items()}

    def atom(self) -> Dm:
        return self.g.pick(self.atoms.values())

    def term(self, allow_one=True) -> Dm:
        g = self.g
        r = g.int(0, 99)
        if r < 55:
            return self.atom()
        if r < 68 and self.extra:
            return g.pick(self.extra)
        if r < 76:
            return const(g.pick([2, 3]))
        if r < 84 and allow_one:
            return ONE
        if r < 90:
            a, b = self.atom(), self.atom()
            return mul([a, b]) if a.t != b.t else mul([const(2), a])
        if r < 95:
            return mul([const(2), self.atom()])
        return add([self.atom(), self.g.pick([self.atom(), ONE])])

    def other_term(self, d: Dm) -> Dm:
        """A size that is not `d` for all sizes and not 1 (for broken cases)."""
        for _ in range(20):
            t = self.term(allow_one=False)
            if sp.expand(t.e - d.e) != 0 and not t.one:
                return t
        return add([d, ONE])


class Builder:
    def __init__(self, g: G, vocab: Vocab):
        self.g, self.v = g, vocab
        self.inputs = []
        self.steps = []
        self.n_other = 0

    def new_input(self, dims, dtype=None) -> str:
        g = self.g
        if g.coin(0.15) and dims and dtype is None:
            return shape_text(dims)          # an anonymous input
        self.n_other += 1
        name = f"M{self.n_other}"
        self.inputs.append((name, list(dims), dtype))
        return name

    # ---------------------------------------------------------------- ops
    def op(self, text, fn, sh):
        self.steps.append(Step("op", text, fn, newline=self.g.coin(0.1)))
        return sh

    def apply_random(self, sh: list, ops: list[str]) -> list:
        name = self.g.pick(ops)
        return getattr(self, "op_" + name)(sh)

    def applicable(self, sh, numel_ex) -> list[str]:
        r = len(sh)
        out = ["transpose", "permute", "reshape", "reshape", "contiguous", "pointwise", "reduce",
               "einsum", "rearrange", "rearrange", "concat", "matmul", "matmul", "elementwise",
               "elementwise", "flatten", "brk"]
        if r < MAX_RANK:
            out += ["unsqueeze"]
        if any(d.one for d in sh):
            out += ["squeeze", "expand", "expand"]
        if r >= 2:
            out += ["select", "mask"]
        out += ["slice", "chunk", "split"]
        if numel_ex < 5000:
            out += ["linear", "repeat", "scalar"]
        return out

    def op_brk(self, sh):
        self.steps.append(Step("break", fn=lambda x, env, T: x))
        return sh

    def op_transpose(self, sh):
        g, r = self.g, len(sh)
        i, j = g.int(0, r - 1), g.int(0, r - 1)
        a, b = g.axis(i, r), g.axis(j, r)
        sh = list(sh)
        sh[i], sh[j] = sh[j], sh[i]
        return self.op(f"transpose {a} {b}", lambda x, env, T: x.transpose(a, b), sh)

    def op_permute(self, sh):
        g, r = self.g, len(sh)
        p = g.perm(r)
        ps = [g.axis(k, r) for k in p]
        return self.op("permute " + " ".join(map(str, ps)), lambda x, env, T: x.permute(*ps),
                       [sh[k] for k in p])

    def op_unsqueeze(self, sh):
        g, r = self.g, len(sh)
        k = g.int(0, r)
        a = g.axis(k, r + 1)
        return self.op(f"unsqueeze {a}", lambda x, env, T: x.unsqueeze(a), sh[:k] + [ONE] + sh[k:])

    def op_squeeze(self, sh):
        g, r = self.g, len(sh)
        k = g.pick([i for i, d in enumerate(sh) if d.one])
        if r == 1:
            return sh
        a = g.axis(k, r)
        return self.op(f"squeeze {a}", lambda x, env, T: x.squeeze(a), sh[:k] + sh[k + 1:])

    def op_flatten(self, sh):
        g, r = self.g, len(sh)
        i = g.int(0, r - 1)
        j = g.int(i, r - 1)
        form = g.int(0, 3)
        if form == 0 and j == r - 1:
            text, fn = f"flatten {g.axis(i, r)}", (lambda x, env, T: x.flatten(i))
        elif form == 1 and i == 0 and j == r - 1:
            text, fn = "flatten", (lambda x, env, T: x.flatten())
        else:
            a, b = g.axis(i, r), g.axis(j, r)
            text, fn = f"flatten {a} {b}", (lambda x, env, T: x.flatten(a, b))
        return self.op(text, fn, sh[:i] + [mul(sh[i:j + 1])] + sh[j + 1:])

    def op_reshape(self, sh):
        """view / reshape to a random regrouping of the factors (maybe with -1)."""
        g = self.g
        seq = []           # (factor, index of the source dim)
        for k, d in enumerate(sh):
            seq.extend((f, k) for f in d.factors)
        n = len(seq)
        cuts = sorted({g.int(0, n) for _ in range(g.int(0, 4))} | {0, n})
        groups = [seq[a:b] for a, b in itertools.pairwise(cuts)] or [[]]
        new = []
        for grp in groups:
            srcs = {k for _, k in grp}
            if len(srcs) == 1 and len(grp) == len(sh[next(iter(srcs))].factors) and g.coin(0.7):
                new.append(sh[next(iter(srcs))])
            else:
                new.append(mul([f for f, _ in grp]))
        while len(new) < MAX_RANK and g.coin(0.2):
            new.insert(g.int(0, len(new)), ONE)
        new = new[:MAX_RANK] if all(d.one for d in new[MAX_RANK:]) else new
        if len(new) > MAX_RANK:
            new = [mul(new)]
        infer = g.int(0, len(new) - 1) if g.coin(0.4) else None
        texts = ["-1" if k == infer else d.t for k, d in enumerate(new)]
        exprs = [None if k == infer else d.e for k, d in enumerate(new)]
        verb = "view" if g.coin() else "reshape"

        def fn(x, env, T, verb=verb, exprs=exprs):
            sizes = [-1 if e is None else ev(e, env) for e in exprs]
            return x.view(sizes) if verb == "view" else x.reshape(sizes)
        return self.op(f"{verb} [{', '.join(texts)}]", fn, new)

    def op_contiguous(self, sh):
        return self.op("contiguous", lambda x, env, T: x.contiguous(), sh)

    def op_pointwise(self, sh):
        g, r = self.g, len(sh)
        kind = g.pick(["softmax", "relu", "gelu", "silu", "tanh", "sigmoid", "exp", "layernorm",
                       "rmsnorm", "scale", "dropout"])
        if kind == "softmax":
            a = g.axis(g.int(0, r - 1), r)
            return self.op(f"softmax {a}", lambda x, env, T: torch.softmax(x, a), sh)
        if kind == "scale":
            d = self.v.atom()
            return self.op(f"scale 1/sqrt({d.t})", lambda x, env, T: x / ev(d.e, env) ** 0.5, sh)
        if kind == "dropout":
            # nn.Dropout returns its input in eval mode: the oracle runs both modes
            return self.op("dropout 0.1", lambda x, env, T: torch.nn.functional.dropout(
                x, 0.1, training=not DROPOUT_EVAL[0]), sh)
        if kind == "layernorm":
            return self.op(kind, lambda x, env, T: torch.nn.functional.layer_norm(x, x.shape[-1:]), sh)
        if kind == "rmsnorm":
            return self.op(kind, lambda x, env, T: torch.nn.functional.rms_norm(x, x.shape[-1:]), sh)
        fn = {"relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
              "tanh": torch.tanh, "sigmoid": torch.sigmoid, "exp": torch.exp}[kind]
        return self.op(kind, lambda x, env, T: fn(x), sh)

    def op_reduce(self, sh):
        g, r = self.g, len(sh)
        kind = g.pick(["sum", "mean", "var", "amax"])
        k = g.int(0, r - 1)
        a = g.axis(k, r)
        keep = r == 1 or g.coin()
        spelled = g.pick(["keepdim", "keepdim=true"]) if keep else g.pick(["", "keepdim=false"])
        f = {"sum": torch.sum, "mean": torch.mean, "var": torch.var, "amax": torch.amax}[kind]
        new = sh[:k] + [ONE] + sh[k + 1:] if keep else sh[:k] + sh[k + 1:]
        return self.op(f"{kind} {a} {spelled}".strip(), lambda x, env, T: f(x, a, keepdim=keep), new)

    def op_select(self, sh):
        g, r = self.g, len(sh)
        k = g.int(0, r - 1)
        d = sh[k]
        if d.e.is_Integer:
            i = g.int(-int(d.e), int(d.e) - 1)   # negative indices count from the end
            it, ie = str(i), sp.Integer(i)
        else:
            it, ie = g.pick([("0", sp.Integer(0)), ("-1", sp.Integer(-1)), (f"({d.t} - 1)", d.e - 1)])
        a = g.axis(k, r)
        return self.op(f"select {a} {it}", lambda x, env, T: x.select(a, ev(ie, env)),
                       sh[:k] + sh[k + 1:])

    def op_slice(self, sh):
        g, r = self.g, len(sh)
        k = g.int(0, r - 1)
        d = sh[k]
        a = g.axis(k, r)
        opts = [("0", d.t if _ATOMIC.fullmatch(d.t) else f"({d.t})", sp.Integer(0), d.e, d)]
        fs = d.factors
        if len(fs) >= 2:
            sub = [f for f in fs if g.coin()] or [fs[-1]]
            if len(sub) < len(fs):
                m = mul(sub)
                opts.append(("0", paren(m.t), sp.Integer(0), m.e, m))
        if d.parts:
            p, rest = d.parts[0], add(d.parts[1:]) if len(d.parts) > 2 else d.parts[1]
            opts.append(("0", paren(p.t), sp.Integer(0), p.e, p))
            opts.append((paren(p.t), paren(d.t), p.e, d.e, rest))
        if d.e.is_Integer and int(d.e) >= 2:
            opts.append(("1", str(int(d.e)), sp.Integer(1), d.e, const(int(d.e) - 1)))
        st_t, en_t, st_e, en_e, new = g.pick(opts)

        def fn(x, env, T):
            s0 = ev(st_e, env)
            return x.narrow(a, s0, ev(en_e, env) - s0)
        return self.op(f"slice {a} {st_t} {en_t}", fn, sh[:k] + [new] + sh[k + 1:])

    def op_expand(self, sh):
        g = self.g
        lead = [self.v.term() for _ in range(g.int(0, 2 if len(sh) <= MAX_RANK - 2 else 0))]
        target, texts = [], []
        for d in sh:
            if d.one and g.coin(0.7):
                t = self.v.term()
                target.append(t)
                texts.append(t.t)
            elif g.coin():
                target.append(d)
                texts.append("-1")
            else:
                target.append(d)
                texts.append(d.t)
        exprs = [d.e for d in lead] + [None if t == "-1" else d.e for d, t in zip(target, texts)]

        def fn(x, env, T):
            return x.expand(*[-1 if e is None else ev(e, env) for e in exprs])
        return self.op(f"expand [{', '.join([d.t for d in lead] + texts)}]", fn, lead + target)

    def op_repeat(self, sh):
        g, r = self.g, len(sh)
        k = g.int(0, r - 1)
        n = g.pick([const(2), self.v.atom(), self.v.atom()])
        a = g.axis(k, r)
        new = sh[:k] + [mul([sh[k], n])] + sh[k + 1:]
        return self.op(f"repeat_interleave {paren(n.t)} {a}",
                       lambda x, env, T: x.repeat_interleave(ev(n.e, env), dim=a), new)

    def _multi(self, text, fn, pieces, pick):
        self.steps.append(Step("multi", text, fn, pieces=pieces, pick=pick))

    def op_chunk(self, sh):
        g, r = self.g, len(sh)
        cands = []
        for k, d in enumerate(sh):
            cands.append((k, 1, d))
            for i, f in enumerate(d.factors):
                if f.e.is_Integer and int(f.e) in (2, 3):
                    cands.append((k, int(f.e), mul(d.factors[:i] + d.factors[i + 1:])))
            if d.e.is_Integer and int(d.e) in (2, 3):
                cands.append((k, int(d.e), ONE))
        # prefer real cuts
        real = [c for c in cands if c[1] > 1]
        k, n, piece = g.pick(real if real and g.coin(0.8) else cands)
        a = g.axis(k, r)
        pick = g.int(0, n - 1)
        self._multi(f"chunk {n} {a}", lambda x, env, T: x.chunk(n, a), n, pick)
        return sh[:k] + [piece] + sh[k + 1:]

    def op_split(self, sh):
        g, r = self.g, len(sh)
        cands = []
        for k, d in enumerate(sh):
            if d.parts:
                cands.append((k, "list", list(d.parts)))
            for i, f in enumerate(d.factors):
                if f.e.is_Integer and int(f.e) in (2, 3):
                    rest = mul(d.factors[:i] + d.factors[i + 1:])
                    c = int(f.e)
                    cands.append((k, "size", [rest] * c))
                    cands.append((k, "list", [rest, mul([const(c - 1), rest])]))
            if d.e.is_Integer and int(d.e) >= 2:
                cands.append((k, "list", [ONE, const(int(d.e) - 1)]))
            cands.append((k, "list", [d]))
        k, form, pieces = g.pick(cands)
        a = g.axis(k, r)
        if form == "size":
            text = f"split {paren(pieces[0].t)} {a}"
            fn = lambda x, env, T: x.split(ev(pieces[0].e, env), a)
        else:
            text = f"split {shape_text(pieces)} {a}"
            fn = lambda x, env, T: x.split([ev(p.e, env) for p in pieces], a)
        pick = g.int(0, len(pieces) - 1)
        self._multi(text, fn, len(pieces), pick)
        return sh[:k] + [pieces[pick]] + sh[k + 1:]

    def op_concat(self, sh):
        g, r = self.g, len(sh)
        k = g.int(0, r - 1)
        a = g.axis(k, r)
        others, sizes = [], [sh[k]]
        for _ in range(g.int(1, 2)):
            t = self.v.term(allow_one=False)
            dims = sh[:k] + [t] + sh[k + 1:]
            others.append(self._operand(dims))
            sizes.append(t)
        refs = [o[0] for o in others]
        getters = [o[1] for o in others]

        def fn(x, env, T):
            return torch.cat([x] + [get(env, T) for get in getters], a)
        if g.coin(0.3):
            call = lambda cur: f"concat({a}, {cur}, {', '.join(refs)})"
            self.steps.append(Step("bin", "concat", fn, call=call))
        else:
            self.op(f"concat {a} {' '.join(refs)}", fn, None)
        return sh[:k] + [add(sizes)] + sh[k + 1:]

    def _operand(self, dims):
        ref = self.new_input(dims)
        if ref.startswith("["):
            return ref, (lambda env, T: torch.randn([ev(d.e, env) for d in dims]))
        return ref, (lambda env, T: T[ref])

    def _broadcastable(self, sh, *, max_extra=1):
        """A shape that broadcasts against sh (right-aligned; equal or 1)."""
        g = self.g
        n = g.int(0, len(sh))
        dims = []
        for d in sh[len(sh) - n:]:
            if d.one:
                dims.append(self.v.term() if g.coin(0.5) else ONE)
            else:
                dims.append(ONE if g.coin(0.25) else d)
        extra = [self.v.term() for _ in range(g.int(0, max_extra))] \
            if len(sh) < MAX_RANK - 1 and n == len(sh) else []
        return extra + dims

    def op_elementwise(self, sh):
        g = self.g
        dims = self._broadcastable(sh) or [ONE]
        ref, get = self._operand(dims)
        opname = g.pick(["+", "-", "*"])
        left = g.coin(0.3)
        f = {"+": torch.add, "-": torch.sub, "*": torch.mul}[opname]

        def fn(x, env, T):
            o = get(env, T)
            return f(o, x) if left else f(x, o)
        self.steps.append(Step("bin", opname, fn, other=ref, left=left))
        return _broadcast(sh, dims)

    def op_scalar(self, sh):
        g = self.g
        opname = g.pick(["+", "-", "*", "/"])
        if g.coin():
            n = g.int(1, 5)
            s_t, s_e = str(n), sp.Integer(n)
        else:
            d = self.v.atom()
            s_t, s_e = d.t, d.e
        left = g.coin(0.4)

        def fn(x, env, T):
            s = float(ev(s_e, env))
            return {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
                    "/": lambda a, b: a / b}[opname](*((s, x) if left else (x, s)))
        self.steps.append(Step("bin", opname, fn, other=s_t, left=left))
        return sh

    def op_matmul(self, sh):
        g, r = self.g, len(sh)
        left = g.coin(0.3)
        batch = sh[:-2]
        if not left:
            k = sh[-1]
            if g.coin(0.2) and r >= 2:
                odims, out = [k], sh[:-1]
            else:
                n = self.v.term()
                ob = self._broadcastable(batch) if batch else \
                    [self.v.term() for _ in range(g.int(0, 1))]
                odims = ob + [k, n]
                if r >= 2:
                    out = _broadcast(batch, ob) + [sh[-2], n]
                else:
                    out = ob + [n]
        else:
            k = sh[-2] if r >= 2 else sh[-1]
            m = self.v.term()
            if r >= 2 and g.coin(0.2):
                odims, out = [k], batch + [sh[-1]]
            else:
                ob = self._broadcastable(batch) if batch else \
                    [self.v.term() for _ in range(g.int(0, 1))]
                odims = ob + [m, k]
                out = (_broadcast(batch, ob) + [m, sh[-1]]) if r >= 2 else ob + [m]
        if len(odims) > MAX_RANK:
            return self.op_contiguous(sh)
        ref, get = self._operand(odims)

        def fn(x, env, T):
            o = get(env, T)
            return torch.matmul(o, x) if left else torch.matmul(x, o)
        self.steps.append(Step("bin", "@", fn, other=ref, left=left))
        return out

    def op_linear(self, sh):
        g = self.g
        out = self.v.term()
        bias = g.coin(0.7)

        def fn(x, env, T):
            o = ev(out.e, env)
            w = torch.randn(o, x.shape[-1])
            return torch.nn.functional.linear(x, w, torch.randn(o) if bias else None)
        return self.op(f"linear {paren(out.t)}" + ("" if bias else " bias=false"), fn,
                       sh[:-1] + [out])

    def op_einsum(self, sh):
        g, r = self.g, len(sh)
        alphabet = "abcdefghijklmnopqrstuvwxyz" if g.coin(0.85) else "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        letters = iter(alphabet)
        ell = r >= 3 and g.coin(0.25)
        n_ell = g.int(1, r - 2) if ell else 0
        mine = [next(letters) for _ in range(r - n_ell)]
        size = dict(zip(mine, sh[n_ell:]))
        two = g.coin(0.7)
        theirs, their_ell = [], None
        if two:
            shared = [c for c in mine if g.coin(0.5)]
            g.rng.shuffle(shared)
            new = [next(letters) for _ in range(g.int(0, 2))]
            for c in new:
                size[c] = self.v.term()
            theirs = shared + new
            g.rng.shuffle(theirs)
            if not theirs:
                theirs = [mine[-1]]
            their_size = {c: size[c] for c in theirs}
            for c in theirs:   # torch.einsum broadcasts a size 1 against the same letter
                if c in mine and g.coin(0.15):
                    if size[c].one:
                        their_size[c] = size[c] = self.v.term()
                    else:
                        their_size[c] = ONE
            if ell and g.coin(0.5):   # the second operand has a (broadcasting) ellipsis too
                their_ell = self._broadcastable(list(sh[:n_ell]), max_extra=0)
        pool = list(dict.fromkeys(mine + theirs))
        outl = [c for c in pool if g.coin(0.6)] or [pool[0]]
        g.rng.shuffle(outl)
        keep_ell = ell and g.coin(0.8)   # without `...` on the right torch sums those dims
        ell_out = _broadcast(sh[:n_ell], their_ell) if their_ell is not None else list(sh[:n_ell])
        pre = "..." if ell else ""
        sep, arrow = (", ", " -> ") if g.coin(0.2) else (",", "->")
        eq = pre + "".join(mine) + \
            (sep + ("..." if their_ell is not None else "") + "".join(theirs) if two else "") + \
            arrow + ("..." if keep_ell else "") + "".join(outl)
        out = (ell_out if keep_ell else []) + [size[c] for c in outl]
        if len(out) > MAX_RANK:
            return self.op_contiguous(sh)
        if two:
            odims = (their_ell or []) + [their_size[c] for c in theirs]
            if len(odims) > MAX_RANK:
                return self.op_contiguous(sh)
            ref, get = self._operand(odims)
            if g.coin(0.3):   # the call form
                call = lambda cur: f'einsum("{eq}", {cur}, {ref})'
                self.steps.append(Step("bin", "einsum",
                                       lambda x, env, T: torch.einsum(eq, x, get(env, T)), call=call))
            else:
                self.op(f'einsum "{eq}" {ref}', lambda x, env, T: torch.einsum(eq, x, get(env, T)), None)
        else:
            self.op(f'einsum "{eq}"', lambda x, env, T: torch.einsum(eq, x), None)
        return out

    def op_mask(self, sh):
        g, r = self.g, len(sh)
        if g.coin(0.4):
            def fn(x, env, T):
                causal = torch.ones(x.shape[-2], x.shape[-1], dtype=torch.bool).triu(1)
                return x.masked_fill(causal, float("-inf"))
            return self.op("mask causal", fn, sh)
        n = g.int(1, r)
        dims = [ONE if g.coin(0.3) else d for d in sh[r - n:]]
        ref = self.new_input(dims, "bool")
        return self.op(f"mask {ref}", lambda x, env, T: x.masked_fill(T[ref], float("-inf")), sh)

    def op_rearrange(self, sh):
        g, r = self.g, len(sh)
        names = iter(f"{c}{i}" for i in range(9) for c in "abhwxyz")
        use_ell = g.coin(0.25)
        n_ell = g.int(0, r - 1) if use_ell else 0
        left, kw, elementary = [], {}, []   # elementary: (axis, Dm) or ("...", None)
        if use_ell:
            left.append("...")
            elementary.append(("...", None))
        for d in sh[n_ell:]:
            if d.one and g.coin(0.3):
                left.append("1")
                continue
            fs = d.factors
            if len(fs) >= 2 and g.coin(0.6):
                axes = [next(names) for _ in fs]
                unknown = g.int(-1, len(fs) - 1)   # -1: all given
                for i, (ax, f) in enumerate(zip(axes, fs)):
                    if i != unknown:
                        kw[ax] = paren(f.t)
                    elementary.append((ax, f))
                left.append("(" + " ".join(axes) + ")")
            else:
                ax = next(names)
                elementary.append((ax, d))
                left.append(ax)
        order = g.perm(len(elementary))
        right, out = [], []
        i = 0
        items = [elementary[p] for p in order]
        while i < len(items):
            if items[i][0] == "...":
                right.append("...")
                out.extend(sh[:n_ell])
                i += 1
                continue
            j = i + 1
            while j < len(items) and items[j][0] != "..." and g.coin(0.3):
                j += 1
            grp = items[i:j]
            right.append(grp[0][0] if len(grp) == 1 else "(" + " ".join(a for a, _ in grp) + ")")
            out.append(grp[0][1] if len(grp) == 1 else mul([d for _, d in grp]))
            i = j
        while len(out) < MAX_RANK and g.coin(0.15):
            k = g.int(0, len(right))
            # a `1` on the right: find the output position it lands on
            before = right[:k]
            pos = sum(n_ell if t == "..." else 1 for t in before)
            right.insert(k, "1")
            out.insert(pos, ONE)
        if not out:
            right.append("1")
            out.append(ONE)
        pattern = " ".join(left) + " -> " + " ".join(right)
        kws = "".join(f" {k}={v}" if g.coin() or i == 0 else f", {k}={v}"
                      for i, (k, v) in enumerate(kw.items()))
        elem_dims = [None if a == "..." else d for a, d in elementary]

        def fn(x, env, T):
            flat = []
            for d in elem_dims:
                flat.extend(x.shape[:n_ell] if d is None else [ev(d.e, env)])
            t = x.reshape(flat)
            pos, p = [], 0
            for d in elem_dims:
                pos.append(list(range(p, p + n_ell)) if d is None else [p])
                p += n_ell if d is None else 1
            t = t.permute([q for o in order for q in pos[o]])
            final = [ev(d.e, env) for d in out]
            return t.reshape(final)
        return self.op(f'rearrange "{pattern}"{kws}', fn, out)


def _broadcast(a, b):
    n = max(len(a), len(b))
    a = [None] * (n - len(a)) + list(a)
    b = [None] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x is None or x.one:
            out.append(y if y is not None else x)
        else:
            out.append(x)
    return out


# ----------------------------------------------------------------------------- broken steps

def add_broken_step(bld: Builder, sh: list) -> str:
    """Append a step that is invalid for generic sizes; return what it breaks."""
    g, v, r = bld.g, bld.v, len(sh)
    kinds = ["axis", "matmul", "broadcast", "concat", "view", "select", "einsum", "split", "expand"]
    kind = g.pick(kinds)
    if kind == "axis":
        a = g.pick([r, -r - 1, r + 1])
        op = g.pick(["transpose", "softmax", "select", "sum"])
        text = {"transpose": f"transpose 0 {a}", "softmax": f"softmax {a}", "select": f"select {a} 0",
                "sum": f"sum {a}"}[op]
        fn = {"transpose": lambda x, env, T: x.transpose(0, a),
              "softmax": lambda x, env, T: torch.softmax(x, a),
              "select": lambda x, env, T: x.select(a, 0),
              "sum": lambda x, env, T: x.sum(a)}[op]
        bld.op(text, fn, None)
    elif kind == "matmul":
        k = sh[-1]
        wrong = v.other_term(k)
        ref, get = bld._operand([wrong, v.term()])
        bld.steps.append(Step("bin", "@", lambda x, env, T: torch.matmul(x, get(env, T)),
                              other=ref))
    elif kind == "broadcast":
        cand = [i for i, d in enumerate(sh) if not d.one]
        if not cand:
            bld.op(f"transpose 0 {r}", lambda x, env, T: x.transpose(0, r), None)
            return "axis"
        i = g.pick(cand)
        dims = list(sh)
        dims[i] = v.other_term(sh[i])
        ref, get = bld._operand(dims[i:])
        bld.steps.append(Step("bin", "+", lambda x, env, T: x + get(env, T), other=ref))
    elif kind == "concat":
        if r < 2:
            kind = "axis"
            bld.op(f"transpose 0 {r}", lambda x, env, T: x.transpose(0, r), None)
            return kind
        k = g.int(0, r - 1)
        j = g.pick([i for i in range(r) if i != k])
        dims = list(sh)
        dims[k] = v.term(allow_one=False)
        dims[j] = v.other_term(sh[j])
        ref, get = bld._operand(dims)
        bld.op(f"concat {k} {ref}", lambda x, env, T: torch.cat([x, get(env, T)], k), None)
    elif kind == "view":
        extra = v.term(allow_one=False)
        dims = sh + [extra] if r < MAX_RANK else [mul(sh), extra]
        verb = g.pick(["view", "reshape"])
        exprs = [d.e for d in dims]
        bld.op(f"{verb} {shape_text(dims)}",
               lambda x, env, T: getattr(x, verb)([ev(e, env) for e in exprs]), None)
    elif kind == "select":
        k = g.int(0, r - 1)
        d = sh[k]
        bld.op(f"select {k} {paren(d.t)}", lambda x, env, T: x.select(k, ev(d.e, env)), None)
    elif kind == "einsum":
        cand = [i for i, d in enumerate(sh) if not d.one]
        if not cand:
            bld.op(f"softmax {r}", lambda x, env, T: torch.softmax(x, r), None)
            return "axis"
        i = g.pick(cand)
        letters = "abcdefg"[:r]
        wrong = v.other_term(sh[i])
        ref, get = bld._operand([wrong])
        eq = f"{letters},{letters[i]}->{letters}"
        bld.op(f'einsum "{eq}" {ref}', lambda x, env, T: torch.einsum(eq, x, get(env, T)), None)
    elif kind == "split":
        k = g.int(0, r - 1)
        d = sh[k]
        pieces = [d, v.term(allow_one=False)]
        bld._multi(f"split {shape_text(pieces)} {k}",
                   lambda x, env, T: x.split([ev(p.e, env) for p in pieces], k), 2, 0)
    elif kind == "expand":
        cand = [i for i, d in enumerate(sh) if not d.one]
        if not cand:
            bld.op(f"softmax {-r - 1}", lambda x, env, T: torch.softmax(x, -r - 1), None)
            return "axis"
        i = g.pick(cand)
        target = ["-1"] * r
        wrong = v.other_term(sh[i])
        target[i] = wrong.t
        exprs = [None] * r
        exprs[i] = wrong.e
        bld.op(f"expand [{', '.join(target)}]",
               lambda x, env, T: x.expand(*[-1 if e is None else ev(e, env) for e in exprs]), None)
    return kind


# ----------------------------------------------------------------------------- strategy

@st.composite
def programs(draw, ops=None, p_broken=0.2, max_ops=6):
    g = G(random.Random(draw(st.integers(0, 2 ** 32 - 1))))
    v = Vocab(g)
    bld = Builder(g, v)
    rank = g.int(1, 5)
    head_dims = [v.term() for _ in range(rank)]
    sh = list(head_dims)
    if g.coin(0.1):
        head = shape_text(head_dims)
    elif ops is None and g.coin(0.1) and rank < MAX_RANK:   # token ids and an embedding
        head = "X0"
        bld.inputs.append(("X0", head_dims, g.pick(["int", "long"])))
        vocab, width = v.term(allow_one=False), v.term()
        if g.coin():
            def fn(x, env, T):
                return torch.nn.functional.embedding(x, torch.randn(ev(vocab.e, env), ev(width.e, env)))
            bld.op(f"embed {paren(vocab.t)} {paren(width.t)}", fn, None)
        else:
            bld.inputs.append(("W_e", [vocab, width], None))
            bld.op("embed W_e", lambda x, env, T: torch.nn.functional.embedding(x, T["W_e"]), None)
        sh = sh + [width]
    else:
        head = "X0"
        bld.inputs.append(("X0", head_dims, None))
    n_ops = g.int(1, max_ops)
    broken = None
    for i in range(n_ops):
        if i == n_ops - 1 and g.coin(p_broken):
            broken = add_broken_step(bld, sh)
            sh = None
            break
        numel = _numel([ev(d.e, v.env) for d in sh])
        allowed = bld.applicable(sh, numel)
        if ops is not None:
            allowed = [o for o in allowed if o in ops] or ["contiguous"]
        sh = bld.apply_random(sh, allowed)
    block = None
    if head == "X0" and len(bld.inputs) == 1 and bld.inputs[0][2] is None and g.coin(0.3):
        same = sh is not None and len(sh) == len(head_dims) and \
            all(sp.expand(a.e - b.e) == 0 for a, b in zip(sh, head_dims))
        block = g.pick(["pipe", "call"] + (["stack", "stack"] if same else []))
        v.lines = v.lines + ["dim " + ", ".join(f"P{i}" for i in range(len(head_dims)))]
        for i, d in enumerate(head_dims):   # the block's own size names, bound at the call
            v.example[f"P{i}"] = ev(d.e, v.env)
            v.names[f"P{i}"] = sym(f"P{i}")
            v.env[sym(f"P{i}")] = sp.Integer(ev(d.e, v.env))
    prog = Program(v.lines, v.example, v.env, v.names, bld.inputs, head, head_dims, bld.steps,
                   None, broken, g.int(0, 2 ** 30), block)
    if sh is not None and g.coin(0.5):
        prog.expect = sh
    return prog


# ----------------------------------------------------------------------------- oracle

def checker_shapes(spec) -> dict:
    out = {}
    for b in spec.bindings:
        for name, t in zip(b.names, b.types):
            vals = [spec.example_value(e) for e in t.shape]
            out[name] = tuple(int(x) if x is not None else None for x in vals)
    return out


def cex_env(prog: Program, cex: dict) -> dict | None:
    """Atom values for a counterexample over user dims (None if none fits).

    Derived dims (D = H*Dk, d_model = B*S, an even X = 2*X_half) are products
    of atoms: each atom that is not given directly ranges over the divisors of
    the values it has to make up.
    """
    base = {s: int(v) for s, v in prog.atom_env.items()}
    want = {}
    for name, value in cex.items():
        if name not in prog.names:
            return None
        e = prog.names[name]
        if e.is_Symbol:
            base[e] = value
        else:
            want[name] = value
    given = {prog.names[k] for k in cex if prog.names[k].is_Symbol}
    free = sorted({s for n in want for s in prog.names[n].free_symbols if s not in given}, key=str)
    targets = {v for v in want.values()} | {1}
    divisors = sorted({d for t in targets for d in range(1, t + 1) if t % d == 0})
    if len(divisors) ** len(free) > 50_000:
        return None
    funcs = [(sp.lambdify(free, prog.names[n].xreplace({k: v for k, v in base.items() if k not in free}),
                          "math"), val) for n, val in want.items()]
    for values in itertools.product(divisors, repeat=len(free)):
        if all(f(*values) == val for f, val in funcs):
            env = dict(base)
            env.update(zip(free, values))
            return {k: sp.Integer(x) for k, x in env.items()}
    return None


def generic_envs(prog: Program, n=4, seed=0):
    """Atom assignments with no size 1: first all atoms distinct, then small ones."""
    rng = random.Random(seed)
    atoms = sorted(prog.atom_env, key=str)
    for i in range(n):
        if i < n // 2:
            vals = rng.sample(range(2, 2 + max(len(atoms), 5)), len(atoms))
        else:
            vals = [rng.choice([2, 3, 4]) for _ in atoms]
        yield {a: sp.Integer(x) for a, x in zip(atoms, vals)}


def describe(prog, text, spec, run) -> str:
    diags = "\n".join(f"  {d.code} {d.span.line}:{d.span.column} {d.message} cex={d.counterexample}"
                      for d in spec.diagnostics)
    return (f"--- spec\n{text}--- checker ok={spec.ok}\n{diags}\n--- torch: "
            f"{'ok ' + str(run.shapes) if run.ok else run.error}")


def rejection_is_real(prog: Program, spec) -> tuple[bool, str]:
    """Torch also fails, at a counterexample or at generic sizes."""
    why = []
    for d in spec.errors():
        generic = not d.counterexample
        env = cex_env(prog, d.counterexample) if d.counterexample else None
        if d.counterexample and env is None:
            why.append(f"{d.code}: counterexample {d.counterexample} not mapped to sizes")
            generic = True
        elif d.counterexample:
            run = prog.run(env)
            if run.skipped or not run.ok or not run_eval(prog, env).ok:
                return True, ""
            why.append(f"{d.code}: torch succeeds at counterexample {d.counterexample}: {run.shapes}")
        if generic:
            runs = [r for env in generic_envs(prog, 6) for r in (prog.run(env), run_eval(prog, env))]
            if any(not r.ok and not r.skipped for r in runs):
                return True, ""
            if all(r.skipped for r in runs):
                COUNTS["unverified"] = COUNTS.get("unverified", 0) + 1
                return True, ""   # too big to run anywhere: nothing to compare
            why.append(f"{d.code}: torch succeeds at generic sizes too")
    return False, "; ".join(why)


def run_eval(prog: Program, env) -> Run:
    """The run with dropout as in eval mode."""
    DROPOUT_EVAL[0] = True
    try:
        return prog.run(env)
    finally:
        DROPOUT_EVAL[0] = False


def check_against_torch(prog: Program, depth=0):
    text, _ = prog.render()
    spec = check_text(text, "prop.shape")
    run = prog.run(prog.atom_env)
    note(describe(prog, text, spec, run))
    outcome = None
    got = checker_shapes(spec)
    for name, shape in run.shapes.items():
        if name in got and None not in got[name]:
            assert got[name] == shape, f"`{name}`: checker {got[name]} but torch {shape}\n" + \
                describe(prog, text, spec, run)
    if run.skipped:
        return "skipped"
    if run.ok and spec.ok and "dropout" in text:
        ev_run = run_eval(prog, prog.atom_env)
        assert ev_run.ok or ev_run.skipped, "torch raises in eval mode but the checker accepts\n" + \
            describe(prog, text, spec, ev_run)
    if run.ok:
        if spec.ok:
            assert got.get("y") == run.shapes["y"], describe(prog, text, spec, run)
            return outcome or "accepted"
        assert all(d.code != "E107" for d in spec.errors()), \
            "the checker cannot prove the generator's expect line\n" + describe(prog, text, spec, run)
        real, why = rejection_is_real(prog, spec)
        assert real, f"false rejection: {why}\n" + describe(prog, text, spec, run)
        return "rejected-real"
    assert not spec.ok, "torch raises but the checker accepts\n" + describe(prog, text, spec, run)
    if depth == 0 and run.fail > 0:
        check_against_torch(prog.prefix(run.fail), depth + 1)
    return "torch-fails"


COUNTS: dict = {}


@settings(max_examples=examples(1200), deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(programs())
def test_pipelines_agree_with_torch(prog):
    outcome = check_against_torch(prog)
    COUNTS[outcome] = COUNTS.get(outcome, 0) + 1


LAYOUT_OPS = ["transpose", "permute", "reshape", "reshape", "reshape", "expand", "chunk", "split",
              "slice", "select", "unsqueeze", "squeeze", "flatten", "rearrange", "contiguous",
              "pointwise", "elementwise", "scalar"]


@settings(max_examples=examples(600), deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(programs(ops=LAYOUT_OPS, p_broken=0.0))
def test_layout_pipelines_agree_with_torch(prog):
    """Strides matter here: views after transposes, expands, chunks and slices."""
    outcome = check_against_torch(prog)
    COUNTS["layout-" + outcome] = COUNTS.get("layout-" + outcome, 0) + 1


# ============================================================================= known bugs
# Minimal repros of checker bugs found by the tests above. Each is a strict
# xfail: it turns into an error (XPASS) once the bug is fixed, so that the
# marker gets removed (the fixed ones stay as regression tests).
# `test_torch_facts_behind_known_bugs` checks the PyTorch behaviour each repro
# relies on, so that an xfail cannot hide a wrong premise.

def _check(text):
    return check_text(text, "repro.shape")


def _shape(spec, name):
    for b in spec.bindings:
        for n, t in zip(b.names, b.types):
            if n == name:
                vals = [spec.example_value(e) for e in t.shape]
                return tuple(int(v) if v is not None else None for v in vals)
    return None


def _codes(spec):
    return [(d.code, d.message) for d in spec.diagnostics]


def _torch_raises(fn) -> bool:
    try:
        fn()
    except TORCH_ERRORS:
        return True
    return False


def test_torch_facts_behind_known_bugs():
    A, B = torch.randn(2, 3), torch.randn(3, 5)
    assert torch.einsum("ab,bc->ac", A, B).shape == (2, 5)
    X = torch.randn(2, 3, 4)
    assert _torch_raises(lambda: X.transpose(0, 1).relu().view(-1))
    assert X.transpose(0, 1).relu().transpose(0, 1).view(-1).shape == (24,)
    assert _torch_raises(lambda: (X.transpose(0, 1) * 2).view(-1))
    assert _torch_raises(lambda: torch.einsum("abc->cba", X).view(-1))
    for E, fails in ((1, True), (2, False)):
        Y = torch.randn(E, 3, 5, 3).permute(3, 1, 0, 2).reshape(3, 3, E * 5)
        assert _torch_raises(lambda Y=Y: Y.view(-1)) == fails
    assert (torch.randn(2) + torch.randn(1)).shape == (2,)                  # [B] + [S] at S=1
    assert torch.randn(1).expand(6).shape == (6,)                           # [C] -> expand [B] at C=1
    assert torch.einsum("ab,ab->ab", torch.randn(2, 1), torch.randn(2, 3)).shape == (2, 3)
    assert torch.randn(1, 4).squeeze().shape == (4,)
    assert torch.randn(2, 1, 3).squeeze().shape == (2, 3)
    assert _torch_raises(lambda: torch.randn(2, 3).select(0, -3))
    assert torch.randn(2, 3)[:, -2:3].shape == (2, 2)
    z = torch.randn(())
    assert z.transpose(0, -1).shape == () and z.softmax(0).shape == () and z.sum(0).shape == ()
    assert z.flatten().shape == (1,)
    assert len(torch.randn(3, 2).split(1, 0)) == 3
    assert torch.randn(5)[3:4].shape == (1,)
    assert torch.cat([torch.randn(2, 3) @ torch.randn(3, 3), torch.randn(2, 3)], -1).shape == (2, 6)


def test_einsum_call_form_parses():
    """Was a bug (fixed in 7c3bf2c): the documented call form did not parse (E001)."""
    spec = _check('dim N, K, Q\nexample N=2, K=3, Q=5\ninput A: [N, K]\ninput B: [K, Q]\n'
                  'y: einsum("ab,bc->ac", A, B)\n')
    assert spec.ok, _codes(spec)
    assert _shape(spec, "y") == (2, 5)


def test_bug_kwarg_swallows_comma_in_call():
    spec = _check("dim N, Q\nexample N=2, Q=3\ninput X: [N, Q]\ninput M: [N, Q]\n"
                  "y: concat(-1, X -> linear Q bias=false, M)\n")
    assert spec.ok, _codes(spec)
    assert _shape(spec, "y") == (2, 6)


def test_bug_name_then_parenthesised_argument_is_a_call():
    spec = _check("dim N, Q\nexample N=4, Q=3\ninput X: [N + 1, Q]\ny: X -> slice 0 N (N + 1)\n")
    assert spec.ok, _codes(spec)
    assert _shape(spec, "y") == (1, 3)   # torch: X[4:5]


@pytest.mark.parametrize("text", [
    "dim V = 3\ninput X: [V, 2]\na, b, c: X -> split 1 0\n",   # torch: 3 pieces of [1, 2]
    ("dim D, H\ndim Dk = D / H\nassume D % H == 0\nexample D=4, H=2\n"
     "input X: [2*D]\na, b: X -> split H*Dk 0\n"),
], ids=["V=3", "Dk=D/H"])
def test_bug_split_piece_count_ignores_definitions(text):
    spec = _check(text)
    assert spec.ok, _codes(spec)


@pytest.mark.parametrize("text, want", [
    ("dim N, Q\ndim U = 1\nexample N=2, Q=3\ninput X: [N, Q]\ny: X -> view [U, N, Q]\n", (1, 2, 3)),
    (("dim D, H\ndim Dk = D / H\nassume D % H == 0\nexample D=4, H=2\n"
      "input X: [D]\ny: X -> view [-1, H, Dk]\n"), (1, 2, 2)),
], ids=["U=1", "inferred D/(Dk*H)"])
def test_bug_view_compares_raw_sizes_with_one(text, want):
    spec = _check(text)
    assert spec.ok, _codes(spec)
    assert _shape(spec, "y") == want


@pytest.mark.parametrize("pipeline", ["X -> transpose 0 1 -> relu -> view [-1]",
                                      "(X -> transpose 0 1) * 2 -> view [-1]",
                                      'X -> einsum "abc->cba" -> view [-1]'])
def test_bug_elementwise_output_keeps_permuted_layout(pipeline):
    spec = _check(f"dim B, S, D\nexample B=2, S=3, D=4\ninput X: [B, S, D]\ny: {pipeline}\n")
    assert not spec.ok, f"torch raises on `{pipeline}`, the checker accepts it"


def test_bug_elementwise_layout_false_rejection():
    spec = _check("dim B, S, D\nexample B=2, S=3, D=4\ninput X: [B, S, D]\n"
                  "y: X -> transpose 0 1 -> relu -> transpose 0 1 -> view [-1]\n")
    assert spec.ok, _codes(spec)


def test_bug_reshape_layout_depends_on_size_one():
    """reshape returns a view when the merged sizes are adjacent in memory, which depends on
    a size being 1: at E=1 the reshape below is a view and the later view fails in torch."""
    spec = _check("dim E, V, B, Q\nexample E=1, V=3, B=5, Q=3\ninput X: [E, V, B, Q]\n"
                  "y: X -> permute 3 1 0 2 -> reshape [Q, V, E*B] -> view [-1]\n")
    assert not spec.ok, "torch raises at the example sizes"


@pytest.mark.parametrize("text", [
    "dim B, S\nexample B=2, S=1\ninput X: [B]\ninput Y: [S]\ny: X + Y\n",
    "dim B, C\nexample B=6, C=1\ninput X: [C]\ny: X -> expand [B]\n",
    'dim B, C\nexample B=6, C=1\ninput X: [B]\ninput Y: [C]\ny: X -> einsum "a,a->a" Y\n',
], ids=["broadcast", "expand", "einsum"])
def test_bug_broadcast_counterexample_does_not_break_torch(text):
    spec = _check(text)
    assert not spec.ok
    cex = spec.errors()[0].counterexample
    assert cex is not None
    a, b = list(cex.values())[:2]
    assert a != b and 1 not in (a, b), f"{cex} is no counterexample: torch broadcasts a size 1"


def test_bug_einsum_does_not_broadcast_size_one():
    spec = _check('dim N, Q\nexample N=2, Q=3\ninput X: [N, 1]\ninput O: [N, Q]\n'
                  'y: X -> einsum "ab,ab->ab" O\n')
    assert spec.ok, _codes(spec)
    assert _shape(spec, "y") == (2, 3)


@pytest.mark.parametrize("text, want", [
    (("dim N, Q\ndim U = 1\nassume N >= 2\nassume Q >= 2\nexample N=2, Q=3\ninput X: [N, U, Q]\n"
      "y: X -> squeeze\n"), (2, 3)),
    # torch gives [4] here and [B, S] when B > 1: the result depends on the size, so the
    # checker should refuse it (or at least not claim [B, S] at the example)
    ("dim B, S\nexample B=1, S=4\ninput X: [B, S]\ny: X -> squeeze\n", (4,)),
], ids=["U=1", "B=1 at the example"])
def test_bug_squeeze_without_axis(text, want):
    spec = _check(text)
    if "U = 1" in text:
        assert spec.ok, _codes(spec)
    assert not spec.ok or _shape(spec, "y") == want, (_codes(spec), _shape(spec, "y"))


def test_bug_select_negative_index_lower_bound():
    spec = _check("dim N, Q\nexample N=2, Q=3\ninput X: [N, Q]\ny: X -> select 0 -3\n")
    assert not spec.ok


def test_bug_slice_negative_start():
    spec = _check("dim N, Q\nexample N=2, Q=3\ninput X: [N, Q]\ny: X -> slice 1 -2 Q\n")
    assert not spec.ok or _shape(spec, "y") == (2, 2), (_codes(spec), _shape(spec, "y"))


@pytest.mark.xfail(strict=True, reason="a 0-d tensor accepts axes -1 and 0 in torch (transpose, "
                   "softmax, sum; flatten gives [1]); the checker says it has no axes (E105/E110)")
@pytest.mark.parametrize("op, want", [("transpose 0 -1", ()), ("softmax 0", ()), ("sum -1", ()),
                                     ("flatten", (1,))])
def test_bug_zero_dim_axes(op, want):
    spec = _check(f"dim N\nexample N=3\ninput X: [N]\ns: X -> sum 0\ny: s -> {op}\n")
    assert spec.ok and _shape(spec, "y") == want, (op, _codes(spec))


@pytest.mark.parametrize("size, want", [("min(S, N)", 2), ("max(S, N)", 3), ("L // 2 + 1", 3),
                                       ("L % 3 + 1", 2)])
def test_min_max_floordiv_mod_sizes_are_whole_and_positive(size, want):
    """The dim expressions the docs list: min and max by their cases, // and % by the bounds
    of what they round (floor(L/2) >= (L - 1)/2, L % 3 >= 0)."""
    spec = _check(f"dim S, N, L\nexample S=2, N=3, L=4\ninput X: [{size}]\ny: X -> relu\n")
    assert spec.ok, (size, _codes(spec))
    assert _shape(spec, "y") == (want,)


@pytest.mark.parametrize("op", ["select 0 0", "slice 0 0 1"])
def test_bug_inferred_size_not_simplified(op):
    spec = _check(f"dim Q\nexample Q=3\ninput X: [3, Q + 1, 2]\ny: X -> reshape [-1, 3*(Q + 1)] -> {op}\n")
    assert spec.ok, _codes(spec)   # torch: X.reshape(-1, 12) is [2, 12]


def test_bug_reversed_modulo_assumption():
    spec = _check("dim X\nassume 0 == X % 2\nexample X=4\ninput T: [X]\ny: T -> view [2, X/2]\n")
    assert spec.ok, _codes(spec)


@pytest.mark.parametrize("text", [
    # the first operand broadcasts to more dims
    "dim Dk\nexample Dk=3\ninput X: [Dk, 2]\ninput M: [1, 2, 1]\ny: (X -> transpose 0 1) - M -> view [-1]\n",
    # the first operand broadcasts, the second is transposed
    "dim N\nexample N=4\ninput X: [N, 3]\ninput M: [3, 1]\ny: M + (X -> transpose 0 1) -> view [-1]\n",
    # the first operand is expanded (stride 0), the second is transposed
    ("dim N\nexample N=4\ninput X: [N, 1]\ninput M: [3, N]\n"
     "y: (X -> expand [N, 3]) + (M -> transpose 0 1) -> view [-1]\n"),
    # an expanded, transposed input to a unary op
    "dim N\nexample N=4\ninput X: [2, N, 1]\ny: X -> expand [2, N, 3] -> transpose 0 1 -> relu -> view [-1]\n",
], ids=["broadcast-grows", "left-broadcasts", "left-expanded", "unary-expanded"])
def test_bug_elementwise_layout_gaps(text):
    spec = _check(text)
    assert not spec.ok, "torch raises `view size is not compatible` here"


def test_elementwise_layout_with_sum_strides():
    """A stride that is a sum of sizes (I + E) keeps its place in the memory order."""
    spec = _check("dim I, E\nexample I=2, E=3\ninput X: [3, I + E]\n"
                  "y: X -> transpose 0 1 -> relu -> view [-1]\n")
    assert not spec.ok   # torch: X.t().relu().view(-1) raises
    spec = _check("dim I, E\nexample I=2, E=3\ninput X: [3, I + E]\n"
                  "y: X -> transpose 0 1 -> relu -> transpose 0 1 -> view [-1]\n")
    assert spec.ok, _codes(spec)


def test_torch_facts_behind_layout_gaps():
    assert _torch_raises(lambda: (torch.randn(3, 2).t() - torch.randn(1, 2, 1)).view(-1))
    assert _torch_raises(lambda: (torch.randn(3, 1) + torch.randn(4, 3).t()).view(-1))
    assert _torch_raises(lambda: (torch.randn(4, 1).expand(4, 3) + torch.randn(3, 4).t()).view(-1))
    assert _torch_raises(lambda: torch.randn(3, 5).t().relu().view(-1))
    assert torch.randn(3, 5).t().relu().t().view(-1).shape == (15,)
    assert _torch_raises(lambda: torch.randn(2, 4, 1).expand(2, 4, 3).transpose(0, 1).relu().view(-1))
