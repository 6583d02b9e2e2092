"""The exercise format: an exercise's statements, read by the shapelang parser,
its blanks (the grammar's `Hole` nodes) and the directives in its comments.

    # @title: Splitting the heads             file options (title, reveal,
    # @reveal: no                              partial, time limit)
    # ?split: 2 points; hint: cut D into H pieces       one line per blank
    Qh: Q -> ?split -> transpose 1 2

The directives live in comments, which the grammar ignores; they are read from
the comment lines with the small patterns below. Everything else (statements,
where a blank sits, which names a statement defines) comes from the parser's
nodes and their spans.
"""
from __future__ import annotations

import bisect
import dataclasses
import functools
import re
from dataclasses import dataclass, field

from ..syntax.comments import split_comment
from ..syntax.grammar import cache_file
from ..syntax.nodes import (
    Assume,
    Binding,
    Block,
    DimDecl,
    Example,
    Expect,
    Hole,
    Name,
    Op,
    Return,
    Span,
    TensorDecl,
)
from ..syntax.parser import ParseFailure, grammar_text, parse

MAX_ANSWER = 300          # characters in one answer
MAX_STATEMENT = 4000      # characters in one statement of a submission
MATCH_BUDGET = 20000      # matcher steps per statement

OPTION_NAMES = {"title", "reveal", "partial", "time limit"}


class ExerciseError(Exception):
    """The exercise or solution is not usable (an author's mistake, not a student's)."""


# ------------------------------------------------------------------ lines and comments

@dataclass
class Line:
    no: int                 # 1-based
    text: str
    code: str               # the text before a comment, right-stripped
    comment: str | None     # from `#` to the end of the line


def split_lines(text: str) -> list[Line]:
    out = []
    for i, raw in enumerate(text.split("\n")):
        raw = raw.rstrip("\r")
        code, comment = split_comment(raw)
        out.append(Line(i + 1, raw, code, comment))
    return out


def joined_code(lines, first: int) -> tuple[str, list]:
    """The code of consecutive lines (comments removed) joined with single spaces, and
    its segments: (offset in the code, line number, columns cut from the line's start)."""
    code, segments = "", []
    for k, raw in enumerate(lines):
        part = split_comment(raw)[0]
        stripped = part.strip()
        if not stripped:
            continue
        if code:
            code += " "
        segments.append((len(code), first + k, len(part) - len(part.lstrip())))
        code += stripped
    return code, segments


def offset_of(segments: list, line: int, column: int) -> int:
    """Offset into joined code of a 1-based (line, column) of the text it came from."""
    k = bisect.bisect_right([s[1] for s in segments], line) - 1
    start, _, lead = segments[max(k, 0)]
    return start + max(column - 1 - lead, 0)


# ------------------------------------------------------------------ the grammar's tokens

@dataclass(frozen=True)
class Tok:
    kind: str     # hole | name | num | str | op | junk
    text: str
    start: int
    end: int


_KIND = {"HOLE": "hole", "NAME": "name", "INT": "num", "SIGNED_INT": "num", "DECIMAL": "num",
         "SIGNED_DECIMAL": "num", "STRING": "str"}


@functools.cache
def _lexer():
    import lark
    grammar = grammar_text()
    return lark.Lark(grammar, parser="lalr", lexer="basic",
                     cache=cache_file(grammar, lark.__version__, "template-lexer"))


@functools.cache
def statement_end():
    """The grammar's end of a statement (`_NL`: a newline not followed by a `->` line)."""
    return re.compile(_lexer().get_terminal("_NL").pattern.to_regexp())


def lex(code: str) -> tuple:
    """The grammar's tokens of one statement's code; a character no token starts with
    becomes a `junk` token of its own (for text that does not parse)."""
    import lark

    out, pos = [], 0
    while pos < len(code):
        try:
            for t in _lexer().lex(code[pos:]):
                if t.type in ("_NL", "CONTINUATION"):
                    continue
                out.append(Tok(_KIND.get(t.type, "op"), str(t), pos + t.start_pos,
                               pos + t.end_pos))
            break
        except lark.exceptions.UnexpectedCharacters as err:
            bad = pos + err.pos_in_stream
            out.append(Tok("junk", code[bad], bad, bad + 1))
            pos = bad + 1
    return tuple(out)


# ------------------------------------------------------------------ statements

@dataclass
class Stmt:
    index: int
    line: int                 # first line
    end_line: int
    code: str                 # code of all its lines joined with single spaces
    segments: list            # (offset in code, line no, column offset in that line)
    kind: str                 # binding | expect | input | param | buffer | dim | assume |
    #                           example | block | end | return
    nodes: tuple = ()         # its nodes (a block header: the block without its body)
    holes: list = field(default_factory=list)   # (text, start, end) in `code`, in order
    names: tuple = ()         # names it defines (`q, k, v:`), or the name an expect checks
    head: tuple = ()          # what identifies it for a learner: ("binding", ("Qh",)), ...
    block: int | None = None  # index of the `block` statement it belongs to

    def position(self, offset: int) -> tuple[int, int]:
        """(line, column offset) in the file of an offset into `code`."""
        k = bisect.bisect_right([s[0] for s in self.segments], offset) - 1
        start, line, col = self.segments[max(k, 0)]
        return line, col + offset - start

    def mentioned(self) -> list:
        """The names it mentions, in the order they are written."""
        found = [((n.span.line, n.span.column), n.name) for n in walk(self.nodes)
                 if isinstance(n, (Name, DimDecl))]
        return [name for _, name in sorted(found)]


def walk(nodes):
    """Every node in `nodes` and below, once (a `return h, k` holds its first value twice)."""
    stack, seen = list(nodes), set()
    while stack:
        n = stack.pop()
        if isinstance(n, (list, tuple)):
            stack.extend(n)
        elif dataclasses.is_dataclass(n) and not isinstance(n, Span):
            if id(n) in seen:
                continue
            seen.add(id(n))
            yield n
            stack.extend(v for v in (getattr(n, f.name) for f in dataclasses.fields(n))
                         if not isinstance(v, (str, int, float, Span, type(None))))


_HEAD = re.compile(r"\s*(?:(input|param|buffer|expect|block|dim|assume|example|return|end)\b"
                   r"\s*([A-Za-z_]\w*'?)?|([A-Za-z_]\w*'?(?:\s*,\s*[A-Za-z_]\w*'?)*)\s*:)")


def head_of(code: str) -> tuple:
    m = _HEAD.match(code)
    if not m:
        return ("other",)
    if m.group(3) is not None:
        return ("binding", tuple(n.strip() for n in m.group(3).split(",")))
    return (m.group(1), m.group(2) or "")


def hole_spans(nodes) -> list:
    """(text, span) of every blank in `nodes`: `Hole` nodes and blanks in an operation's place."""
    out = [("?" + n.name, n.span) for n in walk(nodes) if isinstance(n, Hole)]
    out += [(n.name, n.name_span) for n in walk(nodes)
            if isinstance(n, Op) and n.name.startswith("?")]
    return sorted(out, key=lambda h: (h[1].line, h[1].column))


def statements_of(text: str, path: str, lines: list[Line] | None = None) -> list[Stmt]:
    """The statements of a file that parses, each with its nodes and blanks."""
    try:
        spec = parse(text, path)
    except ParseFailure as failure:
        d = failure.diagnostic
        raise ExerciseError(f"{path}:{d.span.line}: {d.message}"
                            + (f" ({d.help})" if d.help else "")) from None
    lines = lines if lines is not None else split_lines(text)
    out: list[Stmt] = []

    def add(nodes, kind, first, last, block=None, names=()):
        code, segments = joined_code([ln.text for ln in lines[first - 1:last]], first)
        st = Stmt(len(out), first, last, code, segments, kind, tuple(nodes), [],
                  tuple(names), head_of(code), block)
        for hole_text, span in hole_spans(nodes):
            start = offset_of(segments, span.line, span.column)
            st.holes.append((hole_text, start, start + len(hole_text)))
        out.append(st)
        return st

    def top(nodes, block=None):
        groups: list[list] = []
        for n in nodes:
            if groups and isinstance(n, DimDecl) and isinstance(groups[-1][0], DimDecl) \
                    and groups[-1][0].span.line == n.span.line:
                groups[-1].append(n)
            else:
                groups.append([n])
        for g in groups:
            n = g[0]
            if isinstance(n, Block):
                head = add([dataclasses.replace(n, body=())], "block", n.span.line, n.span.line,
                           names=(n.name,))
                top(n.body, head.index)
                add([], "end", n.end_span.line, n.end_span.line, head.index)
                continue
            last = max(x.span.end_line for x in g)
            kind, names = _kind(n)
            add(g, kind, n.span.line, last, block, names)

    top(spec.statements)
    return out


def _kind(n) -> tuple[str, tuple]:
    if isinstance(n, Binding):
        return "binding", n.names
    if isinstance(n, Expect):
        return "expect", (n.name,)
    if isinstance(n, TensorDecl):
        return n.kind, (n.name,)
    if isinstance(n, DimDecl):
        return "dim", ()
    if isinstance(n, Assume):
        return "assume", ()
    if isinstance(n, Example):
        return "example", ()
    if isinstance(n, Return):
        return "return", ()
    raise AssertionError(type(n).__name__)


# ------------------------------------------------------------------ directives in comments

_BLANK_DIRECTIVE = re.compile(r"^#\s*\?([A-Za-z0-9_]+)\s*:(.*)$")
_TAG = re.compile(r"^#\s*\?([A-Za-z0-9_]+)\s*=(.*)$")
_OPTION = re.compile(r"^#\s*@([A-Za-z][A-Za-z _-]*?)\s*:(.*)$")


@dataclass
class BlankInfo:
    points: float = 1.0
    hint: str | None = None
    occurrence: int | None = None    # tags only


def parse_fields(text: str, where: str, allow_occurrence: bool = False) -> BlankInfo:
    """`2 points; hint: ...` (the hint takes the rest of the line)."""
    info = BlankInfo()
    m = re.search(r"(?:^|;)\s*hint\s*:(.*)$", text)
    if m:
        info.hint = m.group(1).strip() or None
        text = text[:m.start()]
    for field_ in (f.strip() for f in text.split(";")):
        if not field_:
            continue
        pm = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*points?", field_)
        om = re.fullmatch(r"occurrence\s+([0-9]+)", field_)
        if pm:
            info.points = float(pm.group(1))
        elif om and allow_occurrence:
            info.occurrence = int(om.group(1))
        else:
            raise ExerciseError(f"{where}: cannot read `{field_}`; write e.g. "
                                "`2 points; hint: ...`")
    return info


@dataclass
class Options:
    title: str | None = None
    reveal: bool = False
    partial: float = 0.5
    time_limit: float = 10.0


def parse_option(name: str, value: str, opts: Options, where: str) -> None:
    name = " ".join(name.lower().replace("-", " ").replace("_", " ").split())
    value = value.strip()
    if name not in OPTION_NAMES:
        raise ExerciseError(f"{where}: unknown option `@{name}`; the options are "
                            + ", ".join(sorted(OPTION_NAMES)))
    try:
        if name == "title":
            opts.title = value
        elif name == "reveal":
            if value.lower() not in ("yes", "no", "true", "false"):
                raise ValueError
            opts.reveal = value.lower() in ("yes", "true")
        elif name == "partial":
            opts.partial = float(value)
            if not 0 <= opts.partial <= 1:
                raise ValueError
        else:
            opts.time_limit = float(value.split()[0])
            if opts.time_limit <= 0:
                raise ValueError
    except (ValueError, IndexError):
        raise ExerciseError(f"{where}: bad value `{value}` for `@{name}`") from None


# ------------------------------------------------------------------ the exercise template

@dataclass
class Blank:
    name: str          # without the `?`
    stmt: int          # statement index in the exercise
    hole: int          # index in that statement's holes
    line: int
    points: float = 1.0
    hint: str | None = None
    whole_shape: bool = False   # `expect X: ?` (the whole shape is the answer)

    @property
    def label(self) -> str:
        return f"?{self.name}"


@dataclass
class Template:
    path: str
    text: str
    lines: list
    stmts: list
    blanks: dict            # name -> Blank, in order of appearance
    options: Options = field(default_factory=Options)
    memo: dict = field(default_factory=dict, repr=False)   # matches of submission statements


def load_template(text: str, path: str = "<exercise>") -> Template:
    lines = split_lines(text)
    opts = Options()
    infos: dict[str, BlankInfo] = {}
    for ln in lines:
        if ln.comment is None:
            continue
        where = f"{path}:{ln.no}"
        m = _BLANK_DIRECTIVE.match(ln.comment)
        if m:
            if m.group(1) in infos:
                raise ExerciseError(f"{where}: `?{m.group(1)}` is described twice")
            infos[m.group(1)] = parse_fields(m.group(2), where)
            continue
        m = _OPTION.match(ln.comment)
        if m:
            parse_option(m.group(1), m.group(2), opts, where)
    stmts = statements_of(text, path, lines)
    blanks: dict[str, Blank] = {}
    anon = 0
    for st in stmts:
        for k, (hole_text, _, _) in enumerate(st.holes):
            name = hole_text[1:]
            if not name:
                anon += 1
                while str(anon) in blanks or str(anon) in infos:
                    anon += 1
                name = str(anon)
            if name in blanks:
                raise ExerciseError(f"{path}:{st.line}: the blank `?{name}` appears twice; "
                                    "give each blank its own name")
            whole = st.kind == "expect" and isinstance(st.nodes[0].shape, Hole)
            b = Blank(name, st.index, k, st.line, whole_shape=whole)
            info = infos.get(name)
            if info is not None:
                b.points, b.hint = info.points, info.hint
            blanks[name] = b
    unknown = [n for n in infos if n not in blanks]
    if unknown:
        raise ExerciseError(f"{path}: `?{unknown[0]}` is described in a comment but is not a "
                            "blank in the code")
    if not blanks:
        raise ExerciseError(f"{path}: the exercise has no blanks (`?` or `?name`)")
    return Template(path, text, lines, stmts, blanks, opts)


def fill(st: Stmt, answers: dict[int, str]) -> str:
    """The statement's code with its holes (by index in `st.holes`) replaced by `answers`."""
    code = st.code
    for k in sorted(answers, reverse=True):
        _, start, end = st.holes[k]
        code = code[:start] + answers[k] + code[end:]
    return code


def _squash(text: str) -> str:
    """Text compared for leaks: no whitespace, round brackets as square ones."""
    return "".join(text.split()).replace("(", "[").replace(")", "]")
