"""The grammar (grammars/shapelang.lark) compiled once, and lark's errors in a learner's words.

`run(text, ...)` parses all of a text, or a stretch of whole lines of it, and returns
nodes: the NodeBuilder's callbacks run as the LALR parser reduces, so no parse tree
is built. Text that parses goes through tokens.FastPath (lark's lexer regexes and
parse table in one loop); anything else goes through lark's ordinary path, which
raises the error that `friendly` turns into a diagnostic. Line numbers are those of
the whole text either way.

The fast path's tables are read out of lark's compiled parser (tokens.describe) and kept
as JSON beside lark's own cache, so a process whose text parses never imports lark.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
from bisect import bisect_right

from .build import NodeBuilder, from_lark
from .collector import paused
from .limits import ParseFailure, fail
from .tokens import FORMAT, MISSING, FastPath, describe

KEYWORDS = {"dim", "assume", "example", "input", "param", "buffer", "expect", "block",
            "return", "end"}

# lark terminal names -> words a learner knows
_TOKEN_WORDS = {
    "NAME": "a name", "INT": "a number", "SIGNED_INT": "a negative number", "SIGNED_NAME": "a negated name",
    "DECIMAL": "a decimal number", "SIGNED_DECIMAL": "a negative number", "STRING": "a quoted pattern", "HOLE": "a blank `?`", "_NL": "end of line",
    "CMP": "a comparison (==, <=, ...)", "COLON": "`:`", "COMMA": "`,`", "LSQB": "`[`",
    "RSQB": "`]`", "LPAR": "`(`", "CALL_OPEN": "`(`", "KW_COMMA": "`,`", "RPAR": "`)`", "EQUAL": "`=`", "PLUS": "`+`",
    "MINUS": "`-`", "STAR": "`*`", "SLASH": "`/`", "PERCENT": "`%`", "$END": "end of file",
}


def grammar_text() -> str:
    """The grammar's text: grammars/shapelang.lark, which an installed copy ships inside the
    package (shapelang/grammars/) and the source tree keeps beside it; through
    importlib.resources where neither is a file (an install in a zip)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder in (package, os.path.dirname(package)):
        path = os.path.join(folder, "grammars", "shapelang.lark")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return f.read()
    from importlib import resources

    return resources.files("shapelang.grammars").joinpath("shapelang.lark").read_text(encoding="utf-8")


_BUILDER = NodeBuilder()


class _LarkTokens:
    """The NodeBuilder's callbacks for lark's own parser: its Tokens become token tuples."""

    def __init__(self, builder: NodeBuilder):
        self._builder = builder

    def __getattr__(self, name: str):
        build = getattr(self._builder, name)         # lark makes a Tree where this fails

        def callback(children):
            return build([from_lark(c) if isinstance(c, str) else c for c in children])
        return callback


@functools.cache
def lark_parser():
    import lark
    # keep_all_tokens: the callbacks see brackets and keywords, so spans include them.
    grammar = grammar_text()
    return lark.Lark(grammar, parser="lalr", transformer=_LarkTokens(_BUILDER), keep_all_tokens=True,
                     maybe_placeholders=False, start=["start", "block_body"],
                     cache=cache_file(grammar, lark.__version__))


def cache_file(grammar: str, lark_version: str, purpose: str = "parser",
               suffix: str = ".lark-cache") -> str | bool:
    """Where lark keeps the compiled parse tables between processes (start-up is then about
    0.1 s faster; lark rebuilds them when the file is missing or stale).

    lark reads the file back with pickle, so it lives where only this user can write:
    $XDG_CACHE_HOME/shapelang (default ~/.cache/shapelang), never in the installed package
    or the shared temp folder. False (build in every process) where that folder cannot be
    made or is not private; lark's own default (the temp folder, per user there) where the
    system has no POSIX owners. `purpose` names the lark options the file is for (lark keeps
    one parser per file, so two parsers of one grammar need two files)."""
    import hashlib

    if os.name != "posix":
        return True
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "shapelang")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.stat(folder)
    except OSError:
        return False
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        return False
    key = hashlib.sha256(f"{grammar}|{lark_version}|{sys.version}".encode()).hexdigest()[:20]
    return os.path.join(folder, f"{purpose}-{key}{suffix}")


class Text:
    """A text ending in a newline, split into lines once (for messages and recovery)."""

    def __init__(self, source: str):
        self.source = source
        self.lines = source.split("\n")
        self.starts = [0]
        for ln in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(ln) + 1)

    def line(self, n: int) -> str:
        return self.lines[n - 1] if 0 < n <= len(self.lines) else ""


def lark_version() -> str:
    """The installed lark's version, read without importing lark where it is not loaded yet."""
    if "lark" in sys.modules:
        return sys.modules["lark"].__version__
    import importlib.util
    import re

    spec = importlib.util.find_spec("lark")
    try:
        with open(spec.origin, encoding="utf-8") as f:
            head = f.read()
        return re.search(r"""^__version__\b[^=]*=\s*["']([^"']+)["']""", head, re.MULTILINE)[1]
    except (AttributeError, OSError, TypeError, ValueError):
        import lark
        return lark.__version__


def _stored_tables(path: str) -> dict | None:
    """The tables stored at `path`: a line with the SHA-256 of the rest, then the JSON."""
    import hashlib
    import json

    try:
        with open(path, "rb") as f:
            digest, _, body = f.read().partition(b"\n")
        if hashlib.sha256(body).hexdigest().encode() != digest:
            return None
        tables = json.loads(body)
    except (OSError, ValueError):
        return None
    return tables if isinstance(tables, dict) else None


def _store_tables(path: str, tables: dict) -> None:
    """Write the tables beside lark's cache, whole or not at all (a temp file, then renamed)."""
    import hashlib
    import json
    import tempfile

    body = json.dumps(tables, separators=(",", ":")).encode()
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tables-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass                    # a full or read-only disk: the next process builds them again


@functools.cache
def fast_path() -> FastPath:
    """The fast path over the grammar's tables (tokens.describe): the ones stored in the
    private cache when they are there and describe the grammar the builder knows, else read
    out of lark's parser and stored for the next process."""
    path = cache_file(grammar_text(), lark_version(), f"tables{FORMAT}", ".json")
    if isinstance(path, str):
        tables = _stored_tables(path)
        if tables is not None:
            try:
                return FastPath(tables, _BUILDER)
            except (AttributeError, IndexError, KeyError, TypeError, ValueError):
                pass                                   # stale: made again below
    tables = describe(lark_parser(), _BUILDER)
    if isinstance(path, str):
        _store_tables(path, tables)
    return FastPath(tables, _BUILDER)


class NotParsed(Exception):
    """The fast path stopped at `line`; raised instead of running lark (run(..., lark=False))."""

    def __init__(self, line: int | None):
        super().__init__(line)
        self.line = line


def run(text: Text, start: str = "start", first: int | None = None, last: int | None = None,
        offset: int = 0, lark: bool = True):
    """Statements of the whole text, or of its lines first..last (1-based, inclusive).

    Line numbers and columns are those of the whole text, plus `offset` lines when the
    text is a piece cut from a longer one. Raises ParseFailure; with lark=False, raises
    NotParsed where the fast path stops instead of asking lark for the error.
    """
    with _ONE_AT_A_TIME:              # the builder holds the text being parsed
        return _run(text, start, first, last, offset, lark)


_ONE_AT_A_TIME = threading.Lock()


def _run(text: Text, start: str, first: int | None, last: int | None, offset: int,
         use_lark: bool):
    source = text.source
    _BUILDER.reset(source, text.starts)
    # The parse allocates many small objects and no cycles: the collector's passes over a
    # growing heap cost more than the parse itself on large files, so it waits until the end.
    with paused():
        if first is None and not offset:
            a, b = 0, len(source)
        else:
            first = first or 1
            last = last or len(text.lines) - 1
            a = text.starts[first - 1]
            b = text.starts[last] if last < len(text.starts) else len(source)
        fast = fast_path()
        nodes = fast.parse(source, text.starts, start, a, b, offset)
        if nodes is not MISSING:
            return nodes
        if not use_lark:
            at = fast.failed_at
            raise NotParsed(None if at is None else bisect_right(text.starts, at) + offset)
        return _lark_run(text, start, first, last, offset, a, b)


def _lark_run(text: Text, start: str, first: int | None, last: int | None, offset: int,
              a: int, b: int):
    """lark's own path: it raises lark's error for the text the fast path left to it."""
    import lark
    from lark.lexer import LexerState, LineCounter, TextSlice

    parser = lark_parser()
    source = text.source
    try:
        if first is None and not offset:
            return parser.parse(source, start=start)
        interactive = parser.parse_interactive(None, start=start)
        counter = LineCounter("\n")
        counter.char_pos = counter.line_start_pos = a
        counter.line = first + offset
        interactive.lexer_thread.state = LexerState(TextSlice(source, a, b), counter)
        return interactive.resume_parse()
    except lark.exceptions.UnexpectedInput as err:
        end_line = (len(text.lines) - 1 if last is None else last) + offset
        raise friendly(err, text, end_line, start == "block_body" or None, offset) from None


def friendly(err, text: Text, end_line: int, in_block: bool | None = None,
             offset: int = 0) -> ParseFailure:
    """lark's error as a diagnostic. `end_line` is the last line that was parsed."""
    import lark

    line, col = getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        source = text.source
        ch = source[err.pos_in_stream] if err.pos_in_stream < len(source) else "?"
        shown = ch if ch.isprintable() and not ch.isspace() else repr(ch)[1:-1]
        return fail("E001", f"unexpected character `{shown}`", line, col, _char_help(ch))
    token = getattr(err, "token", None)
    expected = sorted(_TOKEN_WORDS.get(t, f"`{t.lower()}`" if t.isupper() else t)
                      for t in (getattr(err, "expected", None) or ())
                      if not t.startswith("__"))
    if token is not None and token.type == "$END":
        if in_block is None:
            in_block = "block" in text.source
        return fail("E001", "the file ends in the middle of a statement", max(1, end_line), 1,
                    "a `block` needs a closing `end` line" if in_block else None)
    got = "end of line" if token is not None and token.type == "_NL" else f"`{token}`"
    text_line = text.line(line - offset)
    if token is not None and token.type == "_NL":
        col = len(text_line) + 1 if line - offset - 1 < len(text.lines) else col
    message = f"unexpected {got}"
    help_text = None
    before = text_line[: col - 1]
    if token is not None and str(token) in KEYWORDS:
        help_text = f"`{token}` is a keyword; choose another name"
    elif token is not None and str(token) == "=" and text_line.lstrip().startswith("assume"):
        help_text = "assumptions compare with `==`, e.g. `assume D == H * Dk`"
    elif token is not None and token.type == "FROZEN":
        help_text = "only a `param` is `frozen` (loaded, not trained); an `input` is given at each " \
                    "call, and a `buffer` is never trained"
    elif before.rstrip().endswith("->"):
        help_text = "write an operation after `->`, e.g. `-> softmax -1`"
    elif "->" in before and token is not None and token.type in ("PLUS", "MINUS", "__ANON_0"):
        help_text = "wrap an argument with `+` or `-` in parentheses, e.g. `linear (D + 1)`"
    elif expected:
        shown = expected if len(expected) <= 6 else expected[:6] + ["..."]
        help_text = "expected " + ", ".join(dict.fromkeys(shown))
    end = col + max(1, len(str(token))) if token is not None and token.type != "_NL" else col + 1
    return fail("E001", message, line, col, help_text, end)


def _char_help(ch: str) -> str | None:
    if ch == "'":
        return "patterns are written in double quotes: \"b s d -> b d s\""
    if ch == "=":
        return "assumptions compare with `==`"
    if ch in "{}":
        return "blocks are written `block Name(x: [B, S, D]):` ... `end`"
    return None
