"""Parse stage: `.shape` text -> nodes (shapelang.nodes).

The grammar lives in grammars/shapelang.lark. This module only builds nodes,
one method per rule, and turns lark's exceptions into friendly diagnostics.
Untrusted text is bounded before lark sees it: size, line count, nesting.
"""
from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path

from .diagnostics import Diagnostic
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
    Span,
    Spec,
    Str,
    TensorDecl,
)

MAX_BYTES = 256 * 1024
MAX_LINES = 5000
MAX_DEPTH = 64
MAX_DIGITS = 18
MAX_RANK = 32

KEYWORDS = {"dim", "assume", "example", "input", "param", "buffer", "expect", "block",
            "return", "end"}

# lark terminal names -> words a learner knows
_TOKEN_WORDS = {
    "NAME": "a name", "INT": "a number", "SIGNED_INT": "a negative number",
    "DECIMAL": "a decimal number", "STRING": "a quoted pattern", "HOLE": "a blank `?`", "_NL": "end of line",
    "CMP": "a comparison (==, <=, ...)", "COLON": "`:`", "COMMA": "`,`", "LSQB": "`[`",
    "RSQB": "`]`", "LPAR": "`(`", "RPAR": "`)`", "EQUAL": "`=`", "PLUS": "`+`",
    "MINUS": "`-`", "STAR": "`*`", "SLASH": "`/`", "PERCENT": "`%`", "$END": "end of file",
}


class ParseFailure(Exception):
    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def grammar_text() -> str:
    try:
        return resources.files("shapelang.grammars").joinpath("shapelang.lark").read_text()
    except (ModuleNotFoundError, FileNotFoundError):
        return (Path(__file__).resolve().parents[2] / "grammars" / "shapelang.lark").read_text()


@functools.cache
def _lark():
    import lark
    # cache=True keeps the compiled LALR tables in the temp directory: start-up is
    # then about 0.1 s faster; lark rebuilds them when the file is missing or stale
    return lark.Lark(grammar_text(), parser="lalr", propagate_positions=True,
                     maybe_placeholders=False, cache=True)


def _fail(code: str, message: str, line: int, col: int, help: str | None = None,
          end_col: int | None = None) -> ParseFailure:
    span = Span(line, col, line, end_col if end_col is not None else col + 1)
    return ParseFailure(Diagnostic(code, message, span, help))


def _check_bounds(text: str) -> None:
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise _fail("E004", f"file is larger than {MAX_BYTES // 1024} KB", 1, 1,
                    "a spec is a few hundred lines; split it or remove generated text")
    if text.count("\n") > MAX_LINES:
        raise _fail("E004", f"file has more than {MAX_LINES} lines", MAX_LINES, 1)
    depth, line, col = 0, 1, 0
    for ch in text:
        col += 1
        if ch == "\n":
            line, col = line + 1, 0
        elif ch in "([":
            depth += 1
            if depth > MAX_DEPTH:
                raise _fail("E004", f"brackets are nested more than {MAX_DEPTH} deep", line,
                            col, "simplify the expression or give parts of it names")
        elif ch in ")]":
            depth = max(0, depth - 1)


def parse(text: str, path: str = "<input>") -> Spec:
    """Parse spec text; raises ParseFailure with one diagnostic on a syntax error."""
    import lark

    _check_bounds(text)
    source = text if text.endswith("\n") else text + "\n"
    try:
        tree = _lark().parse(source)
    except lark.exceptions.UnexpectedInput as err:
        raise _friendly(err, source) from None
    builder = _Builder(source)
    return Spec(path, text, tuple(builder.statements(tree)))


MAX_RECOVERIES = 50
_DEFINES = re.compile(r"^\s*(?:(?:input|param|buffer)\s+([A-Za-z_]\w*)|dim\s+(.*)|"
                      r"block\s+([A-Za-z_]\w*)|([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*:)")


def parse_recovering(text: str, path: str = "<input>"):
    """Parse, skipping statements with syntax errors so that every one is reported.

    Returns (spec or None, diagnostics, names defined by the skipped statements).
    Line numbers stay those of the original text: a skipped statement becomes blank lines.
    """
    try:
        return parse(text, path), [], set()
    except ParseFailure as failure:
        if failure.diagnostic.code != "E001":
            return None, [failure.diagnostic], set()
        first = failure.diagnostic
    lines = text.split("\n")
    diagnostics, skipped = [first], set()
    failure_line = first.span.line
    for _ in range(MAX_RECOVERIES):
        start, end = _statement_extent(lines, failure_line - 1)
        if start is None:
            return None, diagnostics, skipped
        for k in range(start, end + 1):
            skipped.update(_defined_names(lines[k]))
            lines[k] = ""
        try:
            spec = parse("\n".join(lines), path)
            return Spec(path, text, spec.statements), diagnostics, skipped
        except ParseFailure as again:
            if again.diagnostic.code != "E001" or again.diagnostic.span.line - 1 < 0:
                return None, diagnostics, skipped
            if again.diagnostic not in diagnostics:
                diagnostics.append(again.diagnostic)
            failure_line = again.diagnostic.span.line
    return None, diagnostics, skipped


def _statement_extent(lines: list[str], i: int):
    """The lines of the statement around line index i (a block counts as one)."""
    if not 0 <= i < len(lines):
        return None, None

    def is_cont(k):
        return lines[k].lstrip().startswith("->")

    start = i
    while start > 0 and (is_cont(start) or not lines[start].strip()):
        start -= 1
    end = i
    while end + 1 < len(lines) and (is_cont(end + 1) or
                                    (not lines[end + 1].strip() and end + 2 < len(lines)
                                     and is_cont(end + 2))):
        end += 1
    if not any(lines[k].strip() for k in range(start, end + 1)):
        return None, None
    return start, end


def _defined_names(line: str) -> set[str]:
    m = _DEFINES.match(line.split("#", 1)[0])
    if not m:
        return set()
    if m.group(2) is not None:
        return {part.split("=")[0].strip() for part in m.group(2).split(",") if part.strip()}
    return {n.strip() for g in (m.group(1), m.group(3), m.group(4)) if g for n in g.split(",")}


def _friendly(err, source: str) -> ParseFailure:
    import lark

    line, col = getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1
    lines = source.split("\n")
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        ch = source[err.pos_in_stream] if err.pos_in_stream < len(source) else "?"
        shown = ch if ch.isprintable() and not ch.isspace() else repr(ch)[1:-1]
        return _fail("E001", f"unexpected character `{shown}`", line, col, _char_help(ch))
    token = getattr(err, "token", None)
    expected = sorted(_TOKEN_WORDS.get(t, f"`{t.lower()}`" if t.isupper() else t)
                      for t in (getattr(err, "expected", None) or ())
                      if not t.startswith("__"))
    if token is not None and token.type == "$END":
        line = len(lines) - 1 if len(lines) > 1 else 1
        return _fail("E001", "the file ends in the middle of a statement", line, 1,
                     "a `block` needs a closing `end` line" if "block" in source else None)
    got = "end of line" if token is not None and token.type == "_NL" else f"`{token}`"
    if token is not None and token.type == "_NL":
        col = len(lines[line - 1]) + 1 if line - 1 < len(lines) else col
    message = f"unexpected {got}"
    help_text = None
    text_line = lines[line - 1] if 0 < line <= len(lines) else ""
    before = text_line[: col - 1]
    if token is not None and str(token) in KEYWORDS:
        help_text = f"`{token}` is a keyword; choose another name"
    elif token is not None and str(token) == "=" and text_line.lstrip().startswith("assume"):
        help_text = "assumptions compare with `==`, e.g. `assume D == H * Dk`"
    elif before.rstrip().endswith("->"):
        help_text = "write an operation after `->`, e.g. `-> softmax -1`"
    elif "->" in before and token is not None and token.type in ("PLUS", "MINUS", "__ANON_0"):
        help_text = "wrap an argument with `+` or `-` in parentheses, e.g. `linear (D + 1)`"
    elif expected:
        shown = expected if len(expected) <= 6 else expected[:6] + ["..."]
        help_text = "expected " + ", ".join(dict.fromkeys(shown))
    end = col + max(1, len(str(token))) if token is not None and token.type != "_NL" else col + 1
    return _fail("E001", message, line, col, help_text, end)


def _char_help(ch: str) -> str | None:
    if ch == "'":
        return "patterns are written in double quotes: \"b s d -> b d s\""
    if ch == "=":
        return "assumptions compare with `==`"
    if ch in "{}":
        return "blocks are written `block Name(x: [B, S, D]):` ... `end`"
    return None


class _Builder:
    """Mechanical translation of lark trees to nodes, one method per rule."""

    def __init__(self, source: str):
        self.source = source
        self._line_starts = [0]
        for i, ch in enumerate(source):
            if ch == "\n":
                self._line_starts.append(i + 1)

    def statements(self, tree):
        for child in tree.children:
            s = self.stmt(child)
            yield from (s if isinstance(s, list) else [s])

    def text(self, meta) -> str:
        return " ".join(self.source[meta.start_pos:meta.end_pos].split())

    def stmt(self, t):
        return getattr(self, "s_" + t.data)(t)

    # statements
    def s_dim_decl(self, t):
        items = []
        for item in t.children:
            name, *value = item.children
            items.append(DimDecl(Span.of(item.meta), str(name),
                                 self.expr(value[0]) if value else None))
        return items if len(items) != 1 else items[0]

    def s_assume_stmt(self, t):
        terms = tuple(self.expr(c) for c in t.children[0::2])
        cmps = tuple(str(c) for c in t.children[1::2])
        return Assume(Span.of(t.meta), terms, cmps, self.text(t.meta))

    def s_example_stmt(self, t):
        items = []
        for item in t.children:
            name, value = item.children
            items.append(ExampleItem(Span.of(item.meta), str(name), self.int_value(value)))
        return Example(Span.of(t.meta), tuple(items))

    def _decl(self, t, kind):
        name, shape, *dtype = t.children
        return TensorDecl(Span.of(t.meta), kind, str(name), self.expr(shape),
                          str(dtype[0]) if dtype else None,
                          _tok_span(dtype[0]) if dtype else None)

    def s_input_decl(self, t):
        return self._decl(t, "input")

    def s_param_decl(self, t):
        return self._decl(t, "param")

    def s_buffer_decl(self, t):
        return self._decl(t, "buffer")

    def s_binding(self, t):
        *names, value = t.children
        return Binding(Span.of(t.meta), tuple(str(n) for n in names), self.pipeline(value))

    def s_expect_stmt(self, t):
        name, shape = t.children
        return Expect(Span.of(t.meta), str(name), _tok_span(name), self.expr(shape))

    def s_return_stmt(self, t):
        return Return(Span.of(t.meta), self.pipeline(t.children[0]))

    def s_block_def(self, t):
        name, *rest = t.children
        inputs, body = [], []
        for c in rest:
            if getattr(c, "data", None) == "block_input":
                inputs.append(self._decl(c, "input"))
            else:
                s = self.stmt(c)
                body.extend(s if isinstance(s, list) else [s])
        meta = t.meta
        end = Span(meta.end_line, max(1, meta.end_column - 3), meta.end_line, meta.end_column)
        return Block(Span(meta.line, meta.column, meta.line, meta.column + 5 + len(name)),
                     str(name), tuple(inputs), tuple(body), end)

    # expressions
    def pipeline(self, t) -> Pipeline:
        if getattr(t, "data", None) != "pipeline":
            e = self.expr(t)
            return e if isinstance(e, Pipeline) else Pipeline(e.span, e, ())
        head, *ops = t.children
        return Pipeline(Span.of(t.meta), self.expr(head), tuple(self.op(o) for o in ops))

    def op(self, t) -> Op:
        name, *args = t.children
        pos, kw = [], []
        for a in args:
            if getattr(a, "data", None) == "kwarg":
                k, v = a.children
                kw.append(KwArg(Span.of(a.meta), str(k), self.expr(v)))
            elif getattr(a, "data", None) == "arg_tuple":
                pos.extend(self.pipeline_or_expr(c) for c in a.children)
            else:
                pos.append(self.expr(a))
        return Op(Span.of(t.meta), str(name), _tok_span(name), tuple(pos), tuple(kw),
                  self.text(t.meta))

    def expr(self, t):
        from lark import Token

        if isinstance(t, Token):
            span = _tok_span(t)
            if t.type == "NAME":
                return Name(span, str(t))
            if t.type in ("INT", "SIGNED_INT"):
                return Num(span, self.int_value(t), str(t))
            if t.type == "DECIMAL":
                return Num(span, float(t), str(t))
            if t.type == "STRING":
                return Str(span, str(t)[1:-1])
            if t.type == "HOLE":
                return Hole(span, str(t)[1:])
            raise AssertionError(t.type)
        span = Span.of(t.meta)
        kind = t.data
        if kind == "pipeline":
            return self.pipeline(t)
        if kind == "paren":
            inner = self.pipeline(t.children[0])
            return inner if inner.ops else inner.head
        if kind == "shape":
            if len(t.children) > MAX_RANK:
                raise ParseFailure(Diagnostic("E004", f"a shape has more than {MAX_RANK} dims", span,
                                              "tensors in a spec have a handful of dims"))
            return ShapeLit(span, tuple(self.expr(c) for c in t.children))
        if kind == "call":
            name, *args = t.children
            return Call(span, str(name), _tok_span(name), tuple(self.pipeline_or_expr(a) for a in args))
        if kind == "neg":
            return Neg(span, self.expr(t.children[0]))
        ops = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
               "matmul": "@", "pow": "**", "tmul": "*", "tdiv": "/"}
        left, right = t.children
        return BinOp(span, ops[kind], self.expr(left), self.expr(right))

    def pipeline_or_expr(self, t):
        p = self.pipeline(t)
        return p if p.ops else p.head

    def int_value(self, tok) -> int:
        digits = str(tok).lstrip("-")
        if len(digits) > MAX_DIGITS:
            raise ParseFailure(Diagnostic(
                "E004", f"number has more than {MAX_DIGITS} digits", _tok_span(tok),
                "sizes in a spec are at most a few billion"))
        return int(str(tok))


def _tok_span(tok) -> Span:
    return Span(tok.line, tok.column, tok.end_line, tok.end_column)
