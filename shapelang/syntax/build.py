"""Nodes built while lark parses: one callback per grammar rule, no intermediate tree.

lark's LALR parser calls `NodeBuilder.<rule>(children)` as it reduces each rule
(an "inline transformer"). The grammar is compiled with keep_all_tokens, so the
children include punctuation and keywords; each node's span runs from its first
child to its last, exactly as lark's propagate_positions would compute it.
A parenthesised expression stands for its inner node but keeps the parentheses
in the span its parent sees (`Paren`).

A token among the children is a tuple (kind, text, line, column, end line, end
column): the fast path (tokens.py) makes these directly, and `from_lark` turns
lark's own Token into one for lark's ordinary path.
"""
from __future__ import annotations

from .diagnostics import Diagnostic
from .limits import MAX_DIGITS, MAX_RANK, ParseFailure
from .nodes import (
    Assume,
    Binding,
    BinOp,
    Block,
    Call,
    DimDecl,
    Example,
    ExampleItem,
    Expect,
    Hole,
    KwArg,
    Name,
    Neg,
    Num,
    Op,
    Pipeline,
    Return,
    ShapeLit,
    SizeParam,
    Span,
    Str,
    TensorDecl,
)


class Paren:
    """`( pipeline )`: the inner node, with the span of the parentheses around it."""
    __slots__ = ("node", "span")

    def __init__(self, node, span):
        self.node, self.span = node, span


class ArgTuple:
    """`-> Block(a, b)`: the extra inputs of a block call."""
    __slots__ = ("items", "span")

    def __init__(self, items, span):
        self.items, self.span = items, span


def from_lark(token) -> tuple:
    """lark's Token as a token tuple."""
    return (token.type, token.value, token.line, token.column, token.end_line, token.end_column)


# The parse makes thousands of nodes and spans. A frozen dataclass's __init__ sets each
# field through object.__setattr__; writing the instance's __dict__ directly makes the
# same object (same fields, equality and hash) in about half the time.
_new = object.__new__


def span_of(line: int, column: int, end_line: int, end_column: int) -> Span:
    """Span(line, column, end_line, end_column), made faster."""
    s = _new(Span)
    fields = s.__dict__
    fields["line"] = line
    fields["column"] = column
    fields["end_line"] = end_line
    fields["end_column"] = end_column
    return s


def _maker(cls):
    """cls(**fields), made faster; every field must be given."""
    def make(**fields):
        obj = _new(cls)
        obj.__dict__.update(fields)
        return obj
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    return make


make_num, make_op, make_pipeline, make_binding, make_binop, make_shape = map(
    _maker, (Num, Op, Pipeline, Binding, BinOp, ShapeLit))


def _name_leaf(tok) -> Name:
    """Name(tok_span(tok), text), made faster: a spec is mostly names."""
    name = _new(Name)
    fields = name.__dict__
    fields["span"] = span_of(tok[2], tok[3], tok[4], tok[5])
    fields["name"] = tok[1]
    return name


def _int_leaf(tok) -> Num:
    """Num(tok_span(tok), int_value(tok), text), made faster: sizes and axes are numbers."""
    num = _new(Num)
    fields = num.__dict__
    fields["span"] = span_of(tok[2], tok[3], tok[4], tok[5])
    fields["value"] = int_value(tok)
    fields["text"] = tok[1]
    return num


def tok_span(tok) -> Span:
    return span_of(tok[2], tok[3], tok[4], tok[5])


def _span(first, last) -> Span:
    """From the start of `first` to the end of `last` (tokens, nodes or wrappers)."""
    if type(first) is tuple:
        line, col = first[2], first[3]
    else:
        s = first.span
        line, col = s.line, s.column
    if type(last) is tuple:
        return span_of(line, col, last[4], last[5])
    e = last.span
    return span_of(line, col, e.end_line, e.end_column)


def int_value(tok) -> int:
    text = tok[1]
    if len(text) > MAX_DIGITS and len(text.lstrip("-")) > MAX_DIGITS:
        raise ParseFailure(Diagnostic(
            "E004", f"number has more than {MAX_DIGITS} digits", tok_span(tok),
            "sizes in a spec are at most a few billion"))
    return int(text)


def _signed_name(tok):                 # `-Sh`, `-inf` among an operation's arguments
    span = tok_span(tok)
    return Neg(span, Name(Span(span.line, span.column + 1, span.end_line, span.end_column),
                          tok[1][1:]))


_LEAVES = {   # token kind -> its expression node
    "NAME": _name_leaf,
    "INT": _int_leaf,
    "SIGNED_INT": _int_leaf,
    "DECIMAL": lambda t: make_num(span=tok_span(t), value=float(t[1]), text=t[1]),
    "SIGNED_DECIMAL": lambda t: make_num(span=tok_span(t), value=float(t[1]), text=t[1]),
    "STRING": lambda t: Str(tok_span(t), t[1][1:-1]),
    "SIGNED_NAME": _signed_name,
    "HOLE": lambda t: Hole(tok_span(t), t[1][1:]),
}


def node(x):
    """An expression node from a child: tokens become leaves, parentheses drop away."""
    if type(x) is tuple:
        leaf = _LEAVES.get(x[0])
        if leaf is None:
            raise AssertionError(x[0])
        return leaf(x)
    if type(x) is Paren:
        return x.node
    return x


def _arg(p):
    """An argument of a call or an argument tuple: a pipeline (its head alone if it has no
    operations) or a keyword."""
    if type(p) is KwArg:
        return p
    return p if p.ops else p.head


def _flat(children) -> list:
    """Statements among `children` (a `dim` line gives a list of them; tokens are dropped)."""
    out = []
    for c in children:
        if type(c) is list:
            out.extend(c)
        elif type(c) is not tuple:
            out.append(c)
    return out


def _binop(op):
    def build(self, c):
        return make_binop(span=_span(c[0], c[2]), op=op, left=node(c[0]), right=node(c[2]))
    build.__name__ = op
    return build


class NodeBuilder:
    """The callbacks lark calls, named after the grammar's rules and aliases."""

    def __init__(self):
        self.source = ""
        self._starts: list[int] | None = None

    def reset(self, source: str, starts: list[int] | None = None) -> None:
        """Set the text that positions refer to (for the `text` of ops and assumptions),
        and where its lines start if the caller knows."""
        if source is not self.source or starts is not None:
            self.source, self._starts = source, starts

    def _text(self, span: Span) -> str:
        st = self._starts
        if st is None:
            st, find, i = [0], self.source.find, self.source.find("\n")
            while i >= 0:
                st.append(i + 1)
                i = find("\n", i + 1)
            self._starts = st
        text = self.source[st[span.line - 1] + span.column - 1:
                           st[span.end_line - 1] + span.end_column - 1]
        return " ".join(text.split())

    # ---- the file
    def start(self, c):
        return _flat(c)

    def block_body(self, c):
        return _flat(c)

    # ---- statements
    def dim_decl(self, c):
        items = c[1::2]
        return items if len(items) != 1 else items[0]

    def dim_item(self, c):
        return DimDecl(_span(c[0], c[-1]), c[0][1], node(c[2]) if len(c) > 1 else None)

    def assume_stmt(self, c):
        span = _span(c[0], c[-1])
        return Assume(span, tuple(node(x) for x in c[1::2]), tuple(x[1] for x in c[2::2]),
                      self._text(span))

    def example_stmt(self, c):
        return Example(_span(c[0], c[-1]), tuple(c[1::2]))

    def example_item(self, c):
        return ExampleItem(_span(c[0], c[2]), c[0][1], int_value(c[2]))

    @staticmethod
    def _decl(c, kind, first):
        # [keyword] NAME ":" shape [NAME] [frozen]
        name, shape = c[first], c[first + 2]
        rest = list(c[first + 3:])
        frozen = bool(rest) and type(rest[-1]) is tuple and rest[-1][0] == "FROZEN"
        if frozen:
            rest.pop()
        dtype = rest[0] if rest else None
        return TensorDecl(_span(c[0], c[-1]), kind, name[1], shape,
                          dtype[1] if dtype is not None else None,
                          tok_span(dtype) if dtype is not None else None, frozen)

    def input_decl(self, c):
        return self._decl(c, "input", 1)

    def param_decl(self, c):
        return self._decl(c, "param", 1)

    def buffer_decl(self, c):
        return self._decl(c, "buffer", 1)

    def block_input(self, c):
        return self._decl(c, "input", 0)

    def binding(self, c):
        names = (c[0][1],) if len(c) == 3 else tuple(n[1] for n in c[0:-2:2])
        return make_binding(span=_span(c[0], c[-1]), names=names, value=c[-1])

    def expect_stmt(self, c):
        dtype = c[4] if len(c) > 4 else None
        return Expect(_span(c[0], c[-1]), c[1][1], tok_span(c[1]), node(c[3]),
                      dtype[1] if dtype is not None else None,
                      tok_span(dtype) if dtype is not None else None)

    def return_stmt(self, c):
        return Return(_span(c[0], c[-1]), c[1], tuple(c[1::2]))

    def block_def(self, c):
        kw, name, end = c[0], c[1], c[-1]
        inputs, sizes, k = [], [], 3           # block NAME ( ...
        while not (type(c[k]) is tuple and c[k][0] == "RPAR"):
            if type(c[k]) is SizeParam:
                sizes.append(c[k])
            elif type(c[k]) is not tuple:
                inputs.append(c[k])
            k += 1
        body = _flat(c[k + 1:-1])
        return Block(Span(kw[2], kw[3], kw[2], kw[3] + 5 + len(name[1])), name[1],
                     tuple(inputs), tuple(body),
                     Span(end[4], max(1, end[5] - 3), end[4], end[5]),
                     tuple(sizes))

    def block_size(self, c):
        return SizeParam(_span(c[0], c[1]), c[1][1])

    # ---- pipelines and operations
    def pipeline(self, c):
        first = c[0]
        head = node(first)
        if len(c) == 1:                 # a pipeline without operations spans its head
            return make_pipeline(span=head.span if type(first) is tuple else first.span,
                                 head=head, ops=())
        return make_pipeline(span=_span(first, c[-1]), head=head, ops=tuple(c[2::2]))

    def op(self, c):
        name = c[0]
        name_span = tok_span(name)
        if len(c) == 1:                                  # `-> softmax`
            return make_op(span=name_span, name=name[1], name_span=name_span, args=(),
                           kwargs=(), text=name[1], tuple_kwargs=False)
        pos, kw, in_tuple = [], [], False
        for a in c[1:]:
            t = type(a)
            if t is tuple:
                pos.append(_LEAVES[a[0]](a))
            elif t is KwArg:
                kw.append(a)
            elif t is ArgTuple:
                pos.extend(x for x in a.items if type(x) is not KwArg)
                kw.extend(x for x in a.items if type(x) is KwArg)
                in_tuple = in_tuple or any(type(x) is KwArg for x in a.items)
            else:
                pos.append(node(a))
        span = _span(name, c[-1])
        return make_op(span=span, name=name[1], name_span=name_span, args=tuple(pos),
                       kwargs=tuple(kw), text=self._text(span), tuple_kwargs=in_tuple)

    def arg_tuple(self, c):
        return ArgTuple([_arg(p) for p in c[1:-1] if type(p) is not tuple], _span(c[0], c[-1]))

    def kwarg(self, c):
        return KwArg(_span(c[0], c[-1]), c[0][1], node(c[2]))

    def call_kwarg(self, c):
        return KwArg(_span(c[0], c[-1]), c[0][1], node(c[2]), tok_span(c[1]))

    # ---- expressions
    def paren(self, c):
        p = c[1]
        return Paren(p if p.ops else p.head, _span(c[0], c[2]))

    def call(self, c):
        name = c[0]
        items = [_arg(p) for p in c[2:-1] if type(p) is not tuple]
        return Call(_span(name, c[-1]), name[1], tok_span(name),
                    tuple(x for x in items if type(x) is not KwArg),
                    tuple(x for x in items if type(x) is KwArg))

    def shape(self, c):
        dims = c[1:-1:2]
        if len(dims) > MAX_RANK:
            raise ParseFailure(Diagnostic("E004", f"a shape has more than {MAX_RANK} dims",
                                          _span(c[0], c[-1]),
                                          "tensors in a spec have a handful of dims"))
        first, last = c[0], c[-1]                       # `[` and `]`
        return make_shape(span=span_of(first[2], first[3], last[4], last[5]),
                          dims=tuple([node(d) for d in dims]))

    def compare(self, c):
        return BinOp(_span(c[0], c[2]), c[1][1], node(c[0]), node(c[2]))

    def neg(self, c):
        return Neg(_span(c[0], c[1]), node(c[1]))

    add = _binop("+")
    sub = _binop("-")
    mul = _binop("*")
    div = _binop("/")
    floordiv = _binop("//")
    mod = _binop("%")
    matmul = _binop("@")
    pow = _binop("**")
    bit_and = _binop("&")
    bit_or = _binop("|")
    bit_xor = _binop("^")
    tmul = _binop("*")
    tdiv = _binop("/")
    tpow = _binop("**")
