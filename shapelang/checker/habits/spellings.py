"""PyTorch spellings read as PyTorch and written out in shapelang.

`Q @ K.T`, `x.view(B, S, H, Dh).transpose(1, 2)`, `torch.matmul(Q, K)`,
`F.softmax(x, dim=-1)` are Python expressions, so Python's own `ast` reads
them (nothing is ever evaluated); this module turns the tree back into the
shapelang spelling: `Q @ (K -> transpose -2 -1)`, `x -> view [B, S, H, Dh] ->
transpose 1 2`, `Q @ K`, `x -> softmax -1`. The operation part of a pipeline
(`softmax(dim=-1)`, `mean dim=-1 keepdim=True`, `transpose 1, 2`) is read the
same way as a call. Each translated piece is recorded as a `Habit` so that the
message can name it. Anything this module does not know gives None: no guess.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from ...syntax import brackets
from . import modules as spell_modules

MAX_TEXT = 400   # longer expressions are not read (bounds the work of hostile input)
MAX_DEPTH = 16   # brackets nested deeper are not read

# PyTorch method -> (shapelang operation, its arguments in PyTorch's order as the table's
# `pytorch` writes them): the table's methods by their names (an alias as its original), and
_RENAMED: dict[str, tuple[str, list[str]]] = {"type": ("to", ["dtype"])}


@functools.cache
def _ops() -> dict[str, tuple[str, list[str]]]:
    from ..ops.table import TABLE
    return {**{name: (d.ir_name, list(d.pytorch)) for name, d in TABLE.items() if d.pytorch is not None},
            **_RENAMED}


@functools.cache
def _shapes() -> frozenset:
    """The methods taking sizes or axes as arguments or one list (`x.view(B, S)`): `*shape`."""
    return frozenset(name for name, (_, params) in _ops().items() if params[:1] and params[0][0] == "*")


@functools.cache
def _unary() -> frozenset:
    """The functions of one tensor and no other argument (`torch.tanh(x)`, `x.relu()`): the
    table's entries with a `function`."""
    from ..ops.table import TABLE
    return frozenset(name for name, d in TABLE.items() if d.function)


@functools.cache
def _casts() -> dict[str, str]:
    """`x.float()` and its kin: the table's casts of the same names; Tensor.int() is int32
    (shapelang's `int` is int64)."""
    from ..ops.values import CASTS
    return {**{name: name for name in CASTS}, "int": "to int32"}


MATMUL = {"matmul", "bmm", "mm"}
MODULES = {"torch", "F", "nn.functional", "torch.nn.functional", "functional"}


def _key(param: str) -> str:
    """A parameter's name in the table's `pytorch` (`dim?`, `dim=0`: dim)."""
    return param.split("=")[0].rstrip("?")


@dataclass(frozen=True)
class Habit:
    kind: str          # "attribute", "constant", "method", "function", "indexing", "module",
    #                    "arguments"
    pytorch: str       # the learner's text
    shapelang: str     # the same in shapelang
    start: int         # offsets in the text that was read
    end: int


class Unknown(Exception):
    """Something this module does not translate."""


@dataclass(frozen=True)
class Piece:
    text: str
    prec: int                  # 0 pipeline, 1 sum, 2 product, 3 unary, 4 power, 5 atom
    ops: tuple[str, ...] = ()  # a pipeline: text -> ops

    def top(self) -> str:
        return " -> ".join((self.text,) + self.ops)

    def operand(self) -> str:
        return f"({self.top()})" if self.ops else self.text


_PREC = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.FloorDiv: 2, ast.Mod: 2,
         ast.MatMult: 2, ast.Pow: 4}
_SYM = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
        ast.Mod: "%", ast.MatMult: "@", ast.Pow: "**"}


def _readable(text: str) -> bool:
    if len(text) > MAX_TEXT or not text.isascii():
        return False
    depth = 0
    for ch in text:
        depth += ch in "([{"
        if depth > MAX_DEPTH:
            return False
    return True


def _parse(text: str):
    if not _readable(text):
        return None
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _inverts(node) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert)


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


class Translator:
    """One expression's translation; `habits` lists what it changed, by position."""

    def __init__(self, source: str, hidden: dict[str, str] | None = None):
        self.source = source
        self.hidden = hidden or {}   # names standing for parenthesised shapelang pipelines
        self.habits: list[Habit] = []

    def segment(self, node) -> str:
        return ast.get_source_segment(self.source, node) or ""

    # ------------------------------------------------------------ expressions
    def expr(self, node) -> Piece:
        if not any(isinstance(n, (ast.Attribute, ast.keyword, ast.Subscript)) or _inverts(n)
                   for n in ast.walk(node)):
            return self._plain(node)
        if _inverts(node):   # `~mask`: the opposite of a bool mask
            return self._record("operator", node, self._chain(self.expr(node.operand), "logical_not"))
        if isinstance(node, ast.BinOp) and type(node.op) in _PREC:
            return self._binop(node.op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.expr(node.operand)
            return Piece("-" + (inner.operand() if inner.prec >= 3 else f"({inner.top()})"), 3)
        if isinstance(node, ast.Attribute):
            kind = "constant" if node.attr == "pi" else "attribute"
            return self._record(kind, node, self._attribute(node))
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Subscript):
            return self._record("indexing", node, self._index(node))
        if isinstance(node, (ast.List, ast.Tuple)):
            return Piece("[" + ", ".join(self.expr(e).top() for e in node.elts) + "]", 5)
        raise Unknown(type(node).__name__)

    def _plain(self, node) -> Piece:
        if isinstance(node, (ast.Constant, ast.Name, ast.Call, ast.List, ast.Tuple)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if '"' in node.value:
                    raise Unknown("quote")
                return Piece(f'"{node.value}"', 5)
            if isinstance(node, ast.Constant) and isinstance(node.value, bool):
                return Piece(str(node.value).lower(), 5)
            return Piece(self.segment(node), 5)
        if isinstance(node, ast.BinOp) and type(node.op) in _PREC:
            return Piece(self.segment(node), _PREC[type(node.op)])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return Piece(self.segment(node), 3)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:   # `~(x > 0)`: a comparison
            return Piece(self.segment(node), 0)
        raise Unknown(type(node).__name__)

    @staticmethod
    def _binop(op, left: Piece, right: Piece) -> Piece:
        p = _PREC[type(op)]
        lt = left.operand() if left.prec >= p and not (p == 4 and left.prec == 4) else f"({left.top()})"
        rt = right.operand() if right.prec > p or (p == 4 and right.prec >= 3) else f"({right.top()})"
        return Piece(f"{lt} {_SYM[type(op)]} {rt}", p)

    def _record(self, kind: str, node, piece: Piece) -> Piece:
        self.habits.append(Habit(kind, self.segment(node), piece.top(),
                                 node.col_offset, node.end_col_offset))
        return piece

    def _attribute(self, node: ast.Attribute) -> Piece:
        if node.attr in ("T", "mT"):
            return self._chain(self.expr(node.value), "transpose -2 -1")
        if node.attr == "pi" and _dotted(node.value) in ("math", "torch", "np", "numpy"):
            return Piece("pi", 5)
        raise Unknown(node.attr)

    def _index(self, node: ast.Subscript) -> Piece:
        """PyTorch's basic indexing as operations: `None` -> `unsqueeze`, an integer ->
        `select`, `a:b` -> `slice`, `:` keeps an axis, `...` the axes it stands for. Items
        after `...` count from the end. A tensor, a list, a step or an open end: unknown."""
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        dots = [k for k, item in enumerate(items) if isinstance(item, ast.Constant) and item.value is Ellipsis]
        if len(dots) > 1:
            raise Unknown("...")
        head, tail = (items[:dots[0]], items[dots[0] + 1:]) if dots else (items, [])
        ops: list[str] = []
        axis = 0
        for item in head:                      # from the front: positive axes
            op, keeps = self._index_item(item, axis)
            ops += [op] if op else []
            axis += keeps
        front = ops
        ops, axis = [], -1
        for item in reversed(tail):            # from the back: negative axes
            op, keeps = self._index_item(item, axis)
            ops += [op] if op else []
            axis -= keeps
        if not front + ops:
            raise Unknown("x[:]")
        piece = self.expr(node.value)
        for op in front + ops:
            piece = self._chain(piece, op)
        return piece

    def _index_item(self, item, axis: int) -> tuple[str | None, int]:
        """One index as (the operation on axis `axis`, or None; how many axes it leaves in
        place of the one it read: 1 for `:`, `None` and a slice, 0 for an integer)."""
        if isinstance(item, ast.Constant) and item.value is None:
            return f"unsqueeze {axis}", 1
        number = item.operand if isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub) else item
        if isinstance(number, ast.Constant) and type(number.value) is int:
            return f"select {axis} {self.segment(item).replace(' ', '')}", 0
        if not isinstance(item, ast.Slice) or item.step is not None:
            raise Unknown("index")             # a tensor or list index, or a step
        if item.lower is None and item.upper is None:
            return None, 1
        if item.upper is None:
            raise Unknown("open end")          # the end is the axis' size, unknown here
        start = "0" if item.lower is None else self._bound(item.lower)
        return f"slice {axis} {start} {self._bound(item.upper)}", 1

    def _bound(self, node) -> str:
        """A slice bound as one argument: parenthesised when it has spaces."""
        text = self._arg(node)
        return text if " " not in text else f"({text})"

    def _chain(self, base: Piece, op: str) -> Piece:
        if base.ops:
            return Piece(base.text, 0, base.ops + (op,))
        if base.text in self.hidden:   # `(Q @ (K -> ..)).softmax(-1)`: no parentheses needed
            return Piece(self.hidden[base.text][1:-1].strip(), 0, (op,))
        return Piece(base.text if base.prec > 0 else f"({base.top()})", 0, (op,))

    def _call(self, node: ast.Call) -> Piece:
        func = node.func
        if isinstance(func, ast.Call) and spell_modules.module_name(func.func):
            # `nn.LayerNorm(D)(x)`: the module built and applied at once
            if len(node.args) != 1 or node.keywords:
                raise Unknown("module call")
            return self._record("module", node, self._chain(self.expr(node.args[0]), self.module(func)))
        if isinstance(func, ast.Name):
            if node.keywords:
                raise Unknown(func.id)   # a block or shapelang call form with keywords
            return Piece(f"{func.id}({', '.join(self.expr(a).top() for a in node.args)})", 5)
        if not isinstance(func, ast.Attribute):
            raise Unknown("call")
        module = _dotted(func.value)
        if module == "math" and func.attr == "sqrt" and len(node.args) == 1 and not node.keywords:
            return self._record("function", node, Piece(f"sqrt({self.expr(node.args[0]).top()})", 5))
        if module in MODULES:
            return self._record("function", node, self._function(func.attr, node))
        base = self.expr(func.value)
        if func.attr in MATMUL and len(node.args) == 1 and not node.keywords:
            return self._record("method", node, self._binop(ast.MatMult(), base, self.expr(node.args[0])))
        return self._record("method", node, self._chain(base, self.op(func.attr, node.args, node.keywords)))

    def _function(self, name: str, node: ast.Call) -> Piece:
        args, keywords = list(node.args), [k for k in node.keywords if k.arg != "input"]
        given = [k.value for k in node.keywords if k.arg == "input"]
        if name in MATMUL and len(args) == 2 and not keywords:
            return self._binop(ast.MatMult(), self.expr(args[0]), self.expr(args[1]))
        if name in ("cat", "concat", "concatenate") and args and isinstance(args[0], (ast.List, ast.Tuple)):
            dim = self._kw(args[1:], keywords, "dim", "0")
            parts = ", ".join(self.expr(e).top() for e in args[0].elts)
            return Piece(f"concat({dim}, {parts})", 5)
        if name == "stack" and args and isinstance(args[0], (ast.List, ast.Tuple)):
            dim = self._kw(args[1:], keywords, "dim", "0")
            parts = ", ".join(self.expr(e).top() for e in args[0].elts)
            return Piece(f"stack_tensors({dim}, {parts})", 5)
        if name == "meshgrid" and args and all(k.arg == "indexing" for k in keywords):
            if any(not (isinstance(k.value, ast.Constant) and k.value.value == "ij") for k in keywords):
                raise Unknown("meshgrid")       # indexing="xy" swaps the first two axes
            parts = args[0].elts if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)) else args
            return Piece(f"meshgrid({', '.join(self.expr(e).top() for e in parts)})", 5)
        if name == "einsum" and args and isinstance(args[0], ast.Constant):
            rest = args[1].elts if len(args) == 2 and isinstance(args[1], (ast.List, ast.Tuple)) else args[1:]
            parts = ", ".join([self._plain(args[0]).text] + [self.expr(e).top() for e in rest])
            return Piece(f"einsum({parts})", 5)
        tensor = given[0] if given else (args.pop(0) if args else None)
        if tensor is None:
            raise Unknown(name)
        return self._chain(self.expr(tensor), self.op(name, args, keywords))

    def _kw(self, args, keywords, name: str, default: str) -> str:
        for k in keywords:
            if k.arg == name:
                return self._arg(k.value)
        if len(args) == 1:
            return self._arg(args[0])
        if args:
            raise Unknown(name)
        return default

    # ------------------------------------------------------------ operations
    def _arg(self, node) -> str:
        """An operation argument: tight, so anything with `+` or `-` between terms is parenthesised."""
        piece = self.expr(node)
        if piece.ops or piece.prec == 1:
            return f"({piece.top()})"
        return piece.text.replace(" * ", "*").replace(" / ", "/") if piece.prec == 2 else piece.text

    def _clamp(self, args: list, keywords: list) -> str:
        """`clamp(0, 1)`, `clamp(min=0)`, `clip(max=x)`: the bounds by their keywords."""
        given = dict(zip(("min", "max"), args))
        for k in keywords:
            if k.arg not in ("min", "max") or k.arg in given:
                raise Unknown(f"clamp({k.arg}=)")
            given[k.arg] = k.value
        bounds = [(k, self._arg(v)) for k, v in given.items() if not (isinstance(v, ast.Constant) and v.value is None)]
        if not bounds or len(args) > 2:
            raise Unknown("clamp")
        return "clamp " + " ".join(f"{k}=({v})" if v.startswith("-") and not v[1:].isdigit() else f"{k}={v}"
                                   for k, v in bounds)

    def module(self, call: ast.Call) -> str:
        """`nn.Linear(D, 4*D)` as the operation it computes, `linear 4*D`."""
        try:
            return spell_modules.module_op(call, self._arg, lambda n: self._plain(n).text)
        except spell_modules.Unknown as err:
            raise Unknown(str(err)) from None

    def op(self, name: str, args: list, keywords: list) -> str:
        """`name(args, keywords)` as a shapelang operation."""
        if name in _unary() and not args and not keywords:
            return name
        if name in _casts() and not args and not keywords:
            return _casts()[name]
        if name == "gelu" and not args and [k.arg for k in keywords] == ["approximate"]:
            return f"gelu approximate={self._plain(keywords[0].value).text}"
        if name in _shapes():
            if keywords:
                raise Unknown(name)
            items = args[0].elts if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)) else args
            texts = [self.expr(e).top() for e in items]
            op, params = _ops()[name]   # axes as numbers (permute(*dims)), sizes as a list
            if not texts:
                raise Unknown(name)
            return f"{op} " + (" ".join(map(self._arg, items)) if params == ["*dims"] else f"[{', '.join(texts)}]")
        if name in ("clamp", "clip"):
            return self._clamp(args, keywords)
        OPS = _ops()
        if name not in OPS:
            raise Unknown(name)
        op, params = OPS[name]
        values: dict[str, object] = {}
        for param, node in zip(params, args):
            values[_key(param)] = node
        if len(args) > len(params):
            raise Unknown(name)
        for k in keywords:
            key = {"axis": "dim", "keepdims": "keepdim"}.get(k.arg, k.arg)
            known = [_key(p) for p in params]
            if key not in known or key in values:
                raise Unknown(f"{name}({k.arg}=)")
            values[key] = k.value
        out = [op]
        for param in params:
            key = _key(param)
            node = values.get(key)
            if node is None:
                if "=" in param:                   # PyTorch's default, which shapelang writes
                    out.append(param.split("=")[1])
                elif not param.endswith("?"):
                    raise Unknown(f"{name} needs {key}")
                continue
            if key == "keepdim":
                if not (isinstance(node, ast.Constant) and isinstance(node.value, bool)):
                    raise Unknown("keepdim")
                if node.value:
                    out.append("keepdim")
            elif key == "dtype":
                dtype = _dotted(node)
                if dtype is None or not dtype.startswith("torch."):
                    raise Unknown("dtype")
                out.append(("dtype=" if op != "to" else "") + dtype[len("torch."):])
            elif key == "value":
                text = self.segment(node)
                if "inf" in text or text.lstrip().startswith("-"):
                    out[0] = "mask"            # `mask` fills with -inf; another value is masked_fill's
                else:
                    out.append(self._arg(node))
            else:
                out.append(self._arg(node))
        return " ".join(out)


def translate_expression(text: str) -> tuple[str, list[Habit]] | None:
    """`text` (a pipeline's head, read as Python) in shapelang, with what changed; None if unknown.

    Parenthesised shapelang pipelines in it (`Q @ (K -> transpose -2 -1)`) stay as written."""
    stripped, hidden = _hide_pipelines(text.strip())
    node = _parse(stripped)
    if node is None:
        return None
    t = Translator(stripped, hidden)
    try:
        piece = t.expr(node)
    except (Unknown, RecursionError):
        return None

    def back(s: str) -> str:
        for name, original in hidden.items():
            s = s.replace(name, original)
        return s

    lead = len(text) - len(text.lstrip())
    habits = [Habit(h.kind, back(h.pytorch), back(h.shapelang), h.start + lead, h.end + lead)
              for h in t.habits]
    return back(piece.top()), habits


def _hide_pipelines(text: str) -> tuple[str, dict[str, str]]:
    """`text` with each parenthesised pipeline replaced by a name of the same length (so that
    offsets stay), and the names with what they stand for."""
    hidden: dict[str, str] = {}
    k = 0
    while k < len(text):
        if text[k] == '"':
            k = text.find('"', k + 1) + 1 or len(text)
            continue
        if text[k] == "(" and not (k and (text[k - 1].isalnum() or text[k - 1] in "_')]")):
            close = _closing(text, k)
            if close < 0:
                break
            if "->" in re.sub(r'"[^"]*"', '""', text[k + 1:close]):
                name = f"_{len(hidden)}".ljust(close - k + 1, "_")
                if len(name) > close - k + 1:
                    break
                hidden[name] = text[k:close + 1]
                text = text[:k] + name + text[close + 1:]
                k = close + 1
                continue
        k += 1
    return text, hidden


def translate_operation(name: str, rest: str) -> str | None:
    """`softmax(dim=-1)`, `mean dim=-1 keepdim=True`, `transpose 1, 2` as a shapelang operation."""
    rest = rest.strip()
    if rest.startswith("."):   # `-> nn.Linear(D, 4*D)`: a module where its operation goes
        node = _parse(name + rest)
        if not isinstance(node, ast.Call):
            return None
        try:
            return Translator(name + rest).module(node)
        except (Unknown, RecursionError):
            return None
    if rest.startswith("(") and _closing(rest, 0) == len(rest) - 1:
        call = name + rest
    else:
        pieces = split_top(rest, " ,\t")
        if any(p in ("*", "/", "+", "-", "**", "//", "%") for p in pieces):
            return None
        call = f"{name}({', '.join(pieces)})"
    node = _parse(call)
    if not isinstance(node, ast.Call):
        return None
    t = Translator(call)
    try:
        return t.op(name, list(node.args), list(node.keywords))
    except (Unknown, RecursionError):
        return None


def _closing(text: str, start: int) -> int:
    """The index of the bracket that closes the one at `start`, or -1."""
    return brackets.closing(text, start)


def split_top(text: str, separators: str) -> list[str]:
    """`text` cut at top-level `separators` (outside brackets and quotes), empty pieces dropped."""
    return [text[a:b] for a, b in brackets.pieces(text, tuple(separators)) if b > a]
