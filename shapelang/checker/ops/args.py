"""What every shape rule shares: typed access to arguments, and the rule's result."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...syntax.diagnostics import ShapeError
from ...syntax.nodes import Name, Neg, Num, Op, ShapeLit, Str
from ..layout import TensorType
from ..lazysympy import sympy as sp
from ..lazysympy import zero


@dataclass(slots=True)   # one per shape rule applied, and per result kept and given again
class Result:
    outputs: tuple
    params: sp.Expr = field(default_factory=zero)
    flops: sp.Expr = field(default_factory=zero)
    detail: dict = field(default_factory=dict)


def prod(xs) -> sp.Expr:
    """The product of the sizes `xs` (kept per tuple of sizes, as `layout.contiguous`)."""
    xs = tuple(xs)
    key = (xs, tuple(map(type, xs)))
    out = _PRODUCTS.get(key)
    if out is None:
        out = sp.S.One
        for x in xs:
            out = out * x
        if len(_PRODUCTS) >= 4096:
            _PRODUCTS.clear()
        _PRODUCTS[key] = out
    return out


_PRODUCTS: dict = {}


def _ax(n: int) -> str:
    return f"{n}-d tensor"


class Args:
    """Typed access to an operation's arguments, with learner-facing errors."""

    def __init__(self, c, op: Op, x: TensorType | None = None, opdef=None):
        self.c, self.op, self.pos, self.x = c, op, op.args, x
        self.opdef = opdef
        self.kw = _Keywords((k.name, k) for k in op.kwargs)
        self.tensors: list[TensorType] = []    # the tensor arguments read, in order (for dtypes)
        if opdef is not None and opdef.positional:
            self._positional_keywords(opdef.positional)

    def _positional_keywords(self, names) -> None:
        """`softmax dim=-1`, `dropout p=0.1`: a positional argument given by its keyword."""
        given = sorted((names.index(k), k) for k in self.kw if k in names)
        pos = list(self.pos)
        for i, name in given:
            k = self.kw[name]
            if i < len(pos):
                raise self.fail(f"`{self.op.name}` gets `{name}` twice: as argument {i + 1} and as "
                                f"`{name}=`", span=k.span)
            if i > len(pos):
                raise self.fail(f"`{self.op.name} {name}=` needs the arguments before it too: "
                                f"{', '.join(names[:i])}", span=k.span,
                                help=f"write it as `{self.opdef.usage}`")
            pos.append(k.value)
        self.pos = tuple(pos)

    def finish(self) -> None:
        """Refuse a keyword the rule did not read: no keyword is silently dropped."""
        for name, k in self.kw.items_unread():
            accepted = sorted(set(getattr(self.opdef, "kwargs", ()) or ())
                              | set(getattr(self.opdef, "positional", ()) or ()))
            if accepted:
                help = "it takes " + ", ".join(f"`{n}=`" for n in accepted)
            else:
                help = f"`{self.op.name}` takes no keyword arguments"
            raise ShapeError("E110", f"`{self.op.name}` has no keyword `{name}=`", span=k.span,
                             help=help + " (docs/language.md lists the keywords of every operation)")

    def fail(self, message: str, help: str | None = None, span=None) -> ShapeError:
        return ShapeError("E110", message, help=help, span=span or self.op.span)

    def count(self, lo: int, hi: int | None = None, usage: str = "") -> None:
        hi = lo if hi is None else hi
        n = len(self.pos)
        if not lo <= n <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.fail(f"`{self.op.name}` takes {want} argument{'s' if hi != 1 else ''}, got {n}",
                            f"write it as `{usage}`" if usage else None)

    def int_at(self, i: int) -> int:
        node = self.pos[i]
        if isinstance(node, Neg) and isinstance(node.operand, Num):
            node = Num(node.span, -node.operand.value, "-" + node.operand.text)
        if not (isinstance(node, Num) and isinstance(node.value, int)):
            raise self.fail(f"`{self.op.name}` needs a whole number here", span=node.span)
        return node.value

    def axis_at(self, i: int, rank: int, *, extra: int = 0) -> int:
        """A dim index normalised to 0..rank-1 (rank+extra for unsqueeze)."""
        a = self.int_at(i)
        n = rank + extra
        if not -n <= a < n:
            what = f"`{self.op.name}` on {self.c.show(self.x)}, a {_ax(rank)}" \
                if self.x is not None and self.x.rank == rank else f"a {_ax(rank)}"
            raise ShapeError("E105", f"axis {a} is out of range for {what}",
                             help=f"the axes of a {_ax(rank)} run from {-n} to {n - 1}"
                             if n else "a 0-d tensor has no axes", span=self.pos[i].span)
        return a + n if a < 0 else a

    def dim_at(self, i: int) -> sp.Expr:
        return self.c.dim(self.pos[i])

    def scalar_at(self, i: int) -> sp.Expr:
        return self.c.scalar(self.pos[i])

    def shape_at(self, i: int, *, allow_infer: bool = True) -> tuple[list, int | None]:
        node = self.pos[i]
        if not isinstance(node, ShapeLit):
            raise self.fail(f"`{self.op.name}` needs a shape in brackets, e.g. [B, S, D]",
                            span=node.span)
        dims, infer = [], None
        for j, d in enumerate(node.dims):
            if allow_infer and _is_minus_one(d):
                if infer is not None:
                    raise ShapeError("E110", "only one size may be -1", span=d.span,
                                     help="-1 asks PyTorch to work out one size; give the others")
                infer = j
                dims.append(sp.Integer(-1))
            else:
                e = self.c.dim(d)
                self.c.need_whole(e, span=d.span, what=lambda e=e: f"this size is {self.c.sz(e)}")
                self.c.need_positive(e, d.span)
                dims.append(e)
        return dims, infer

    def tensor_at(self, i: int) -> TensorType:
        t = self.c.tensor(self.pos[i])
        self.tensors.append(t)
        return t

    def str_at(self, i: int) -> str:
        node = self.pos[i]
        if not isinstance(node, Str):
            raise self.fail(f"`{self.op.name}` needs a quoted pattern here", span=node.span)
        return node.value

    def flag(self, name: str) -> bool:
        return any(isinstance(p, Name) and p.name == name for p in self.pos)

    def without_flags(self, *names) -> Args:
        self.pos = tuple(p for p in self.pos if not (isinstance(p, Name) and p.name in names))
        return self

    def kw_bool(self, name: str, default: bool) -> bool:
        k = self.kw.get(name)
        if k is None:
            return default
        if isinstance(k.value, Name) and k.value.name in ("true", "false", "True", "False"):
            return k.value.name.lower() == "true"
        raise self.fail(f"`{name}=` takes true or false", span=k.span)

    def kw_number(self, name: str, default, *, positive: bool = False, whole: bool = False):
        """A keyword's number (`eps=1e-6`, `correction=0`), or `default` when not given."""
        k = self.kw.get(name)
        if k is None:
            return default
        v = k.value
        if isinstance(v, Neg) and isinstance(v.operand, Num):
            v = Num(v.span, -v.operand.value, "-" + v.operand.text)
        if not isinstance(v, Num) or (whole and not isinstance(v.value, int)) \
                or (positive and not v.value > 0):
            what = "a whole number" if whole else "a number"
            raise self.fail(f"`{name}=` takes {what}{' above 0' if positive else ''}", span=k.span)
        return v.value

    def kw_choice(self, name: str, choices: tuple, default: str) -> str:
        """A keyword that takes one of a few words (`approximate="tanh"`)."""
        k = self.kw.get(name)
        if k is None:
            return default
        v = k.value
        word = v.value if isinstance(v, Str) else v.name if isinstance(v, Name) else None
        if word not in choices:
            raise self.fail(f"`{name}=` takes " + " or ".join(f'"{c}"' for c in choices), span=k.span)
        return word


class _Keywords(dict):
    """The keyword arguments by name; remembers which ones a rule read."""

    def __init__(self, items):
        super().__init__(items)
        self.read: set = set()

    def get(self, name, default=None):
        self.read.add(name)
        return super().get(name, default)

    def __getitem__(self, name):
        self.read.add(name)
        return super().__getitem__(name)

    def __contains__(self, name):
        self.read.add(name)
        return super().__contains__(name)

    def items(self):
        self.read.update(self.keys())
        return super().items()

    def items_unread(self):
        return [(n, k) for n, k in super().items() if n not in self.read]


def _is_minus_one(node) -> bool:
    return (isinstance(node, Num) and node.value == -1) or \
        (isinstance(node, Neg) and isinstance(node.operand, Num) and node.operand.value == 1)
