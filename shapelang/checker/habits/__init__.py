"""Python habits answered: a finding caused by writing PyTorch gets a message that names
the habit and the shapelang spelling.

- A syntax error (E001) on a line written the PyTorch way (`Q @ K.T`,
  `x.view(B, S, D)`, `torch.matmul(Q, K)`, `softmax(dim=-1)`, `mean dim=-1
  keepdim=True`, `transpose 1, 2`) says what the habit is, shows the shapelang
  spelling of that piece, and proposes the whole line rewritten.
- `Q * K` that does not broadcast (E102) proposes `Q @ K`.

Rewrites are only candidates (`Diagnostic.fixes`): shapelang.checker.advice.fixes
re-checks each one and shows it ("write it as `...`") only when the line and
everything after it check. The spelling of the piece itself is shown once the
rewritten line parses; `did you mean `@`?` only once its fix is proved.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...syntax import brackets
from ...syntax.comments import comment_start
from ...syntax.diagnostics import Diagnostic
from ...syntax.nodes import Span
from ...syntax.parser import ParseFailure, parse
from .spellings import MAX_TEXT, Habit, translate_expression, translate_operation

NOTES = {
    "attribute": "shapelang applies operations with `->`; the transpose of a batch of "
                 "matrices (PyTorch's `.mT`, and `.T` for a matrix) is `x -> transpose -2 -1`",
    "method": "shapelang applies operations with `->`: `x -> op args`, not `x.op(args)`",
    "function": "shapelang has no `torch.` or `F.` functions: `@` is the matrix product, "
                "and operations follow the tensor after `->`",
    "operator": "shapelang writes the opposite of a bool mask (PyTorch's `~mask`) as "
                "`mask -> logical_not`",
    "constant": "shapelang names its constants without a module: `pi` (math.pi) in a scalar",
    "indexing": "shapelang writes PyTorch's indexing as operations: `x[:, None]` is "
                "`x -> unsqueeze 1`, `x[:, 0]` is `x -> select 1 0`, `x[..., :k]` is "
                "`x -> slice -1 0 k`",
    "module": "shapelang names the operation a module computes, not the module: "
              "`nn.Linear(D, 4*D)` is `linear 4*D` (the in-features are read off the tensor, "
              "and the weights are made for it)",
    "assignment": "shapelang binds a name with `:` (`Q: X -> linear D`): the line states what "
                  "the name is, once; `=` gives keywords (`eps=1e-6`) and `==` compares",
    "arguments": "an operation's arguments follow its name, separated by spaces, without "
                 "parentheses or commas: `transpose 1 2`, `softmax -1`, `mean -1 keepdim`",
}
_BINDING = re.compile(r"^(\s*(?:[A-Za-z_]\w*'?\s*,\s*)*[A-Za-z_]\w*'?\s*:\s*)")
_RETURN = re.compile(r"^(\s*return\s+)")
_ASSIGN = re.compile(r"^(\s*)((?:[A-Za-z_]\w*'?\s*,\s*)*[A-Za-z_]\w*'?)\s*=(?!=)\s*")
_OP = re.compile(r"^\s*([A-Za-z_]\w*)(.*)$", re.DOTALL)
_MARKS = re.compile(r"[,=(]|\.(?!\d)")
STAR_HELP = "did you mean `@`? `*` multiplies element by element; `@` is the matrix product"


def _code_end(line: str) -> int:
    """Where the code of a line ends (a comment starts; a `#` inside quotes stays)."""
    k = comment_start(line)
    return len(line) if k is None else k


def _pipes(text: str) -> list[tuple[int, int]]:
    """(start, end) of the pieces of `text` between top-level `->`."""
    return brackets.pieces(text, ("->",))


def rewrite_line(line: str) -> tuple[int, int, str, list[Habit]] | None:
    """The code of `line` (from column `start` to `end`, 0-based) rewritten in shapelang,
    with the habits found (offsets in the line); None when nothing is recognised."""
    end = len(line[:_code_end(line)].rstrip())
    code = line[:end]
    if len(code) > MAX_TEXT:   # bounds the work a hostile line causes
        return None
    assign = None
    habits: list[Habit] = []
    if code.lstrip().startswith("->"):
        start = len(code) - len(code.lstrip())
    else:
        m = _BINDING.match(code) or _RETURN.match(code)
        if not m:
            m = assign = _ASSIGN.match(code)   # `Q = X -> linear D`: Python's assignment
            if not m or not code[m.end():].strip():
                return None
            names = re.sub(r"\s*,\s*", ", ", m.group(2))
            habits.append(Habit("assignment", code[m.start(2):m.end()].rstrip(), f"{names}:",
                                m.start(2), m.end()))
        start = m.end()
    rhs = code[start:]
    pieces = _pipes(rhs)
    out: list[str] = []
    for n, (a, b) in enumerate(pieces):
        text = rhs[a:b]
        if n == 0:
            if not text.strip():
                out.append("")
                continue
            got = translate_expression(text)
            if got is None:
                out.append(text.strip())
                continue
            new, found = got
            out.append(new)
            habits += [replace(h, start=h.start + start + a, end=h.end + start + a) for h in found]
            continue
        m = _OP.match(text)
        new = translate_operation(m.group(1), m.group(2)) \
            if m and _MARKS.search(m.group(2)) and (not _parses(f"_x: _x -> {text.strip()}")
                                                     or _TUPLE_KEYWORD.search(m.group(2))) else None
        if new is None or new == text.strip():
            out.append(text.strip())
            continue
        out.append(new)
        lead = len(text) - len(text.lstrip())
        kind = "module" if m.group(2).lstrip().startswith(".") else "arguments"
        habits.append(Habit(kind, text.strip(), new, start + a + lead, start + a + len(text.rstrip())))
    if not habits:
        return None
    new_rhs = " -> ".join(out) if out[0] else "-> " + " -> ".join(out[1:])
    if assign:
        return assign.start(2), end, f"{habits[0].shapelang} {new_rhs}", habits
    return start, end, new_rhs, habits


# `(dim=-1)`, `(-1, keepdim=True)`: keywords in parentheses parse (for block calls), but
# after an operation they are a PyTorch call
_TUPLE_KEYWORD = re.compile(r"^\s*\(.*\b[A-Za-z_]\w*\s*=(?!=)")


def _parses(new_line: str) -> bool:
    """Whether `new_line` (line index k) parses as shapelang, in a statement of its own kind."""
    stripped = new_line.strip()
    if stripped.startswith("->"):
        text = f"_x: _x\n{stripped}\n"
    elif stripped.startswith("return"):
        text = f"block _B(_x: [1]):\n  {stripped}\nend\n"
    else:
        text = stripped + "\n"
    try:
        parse(text)
    except ParseFailure:
        return False
    return True


def _syntax(text: str, d: Diagnostic) -> Diagnostic:
    lines = text.split("\n")
    if not 0 < d.span.line <= len(lines):
        return d
    line = lines[d.span.line - 1]
    got = rewrite_line(line)
    if got is None:
        return d
    start, end, new_rhs, habits = got
    new_line = line[:start] + new_rhs + line[end:]
    if not _parses(new_line):
        return d
    col = d.span.column - 1
    hits = [h for h in habits if h.start <= col < h.end]
    habit = min(hits, key=lambda h: h.end - h.start) if hits else habits[0]
    for h in sorted(hits, key=lambda h: h.end - h.start):   # a method chain is named whole
        if h.shapelang.startswith(habit.shapelang + " -> "):
            habit = h
    row = d.span.line
    message = f"`{habit.pytorch}` is PyTorch syntax, not shapelang"
    help_ = f"in shapelang this is `{habit.shapelang}`"
    if habit.kind == "assignment":
        message = f"a binding is written `{habit.shapelang} ...`, not `{habit.pytorch} ...`"
        help_ = "a binding takes `:`"
    return replace(
        d, message=message,
        span=Span(row, habit.start + 1, row, habit.end + 1),
        notes=(NOTES[habit.kind],) + tuple(n for n in d.notes if n not in NOTES.values()),
        help=help_,
        fixes=((Span(row, start + 1, row, end + 1), new_rhs),) + tuple(d.fixes))


_TOKEN = re.compile(r'"[^"]*"|\*\*|//|->|[-+*/%@()\[\]]|[^\s"()\[\]*/%@+-]+')


def _star(text: str, d: Diagnostic) -> Diagnostic:
    """E102 on `A * B`: the candidate `A @ B` (the product's own `*`, the last at its top level)."""
    lines = text.split("\n")
    s = d.span
    if s.line != s.end_line or not 0 < s.line <= len(lines):
        return d
    src = lines[s.line - 1][s.column - 1:s.end_column - 1]
    depth, top, prev = 0, [], None
    for m in _TOKEN.finditer(src):
        tok = m.group()
        if tok in "([":
            depth += 1
        elif tok in ")]":
            depth -= 1
        elif depth == 0 and tok in ("+", "-", "*", "/", "//", "%", "@", "->") and prev not in (None, "op"):
            top.append((tok, m.start()))
        prev = "op" if tok in ("+", "-", "*", "/", "//", "%", "@", "**", "->", "(", "[") else "atom"
    if not top or any(t in ("+", "-", "->") for t, _ in top) or top[-1][0] != "*":
        return d
    k = top[-1][1]
    return replace(d, fixes=tuple(d.fixes) + ((s, src[:k] + "@" + src[k + 1:]),))


_LIST = re.compile(r"^(\s*)(dim|example)\s+(.*?)\s*$")
_NAME_ONLY = re.compile(r"[A-Za-z_]\w*'?")
_SIZE_ITEM = re.compile(r"[A-Za-z_]\w*'?\s*=\s*\d+")


def _commas(text: str, d: Diagnostic) -> Diagnostic | None:
    """`dim B S D` or `example B=2 S=4`: the items of a list separated by spaces; the
    candidate separates them with commas."""
    lines = text.split("\n")
    if not 0 < d.span.line <= len(lines):
        return None
    line = lines[d.span.line - 1]
    code = line[:_code_end(line)]
    m = _LIST.match(code)
    if not m or "," in m.group(3):
        return None
    item = _NAME_ONLY if m.group(2) == "dim" else _SIZE_ITEM
    items = item.findall(m.group(3))
    if len(items) < 2 or re.sub(r"\s+", "", "".join(items)) != re.sub(r"\s+", "", m.group(3)):
        return None
    items = [re.sub(r"\s*=\s*", "=", i) for i in items]
    new = f"{m.group(1)}{m.group(2)} {', '.join(items)}"
    row = d.span.line
    what = "dims of a `dim`" if m.group(2) == "dim" else "sizes of an `example`"
    return replace(d, message=f"the {what} line are separated by commas",
                   help=None, notes=(), fixes=((Span(row, 1, row, len(code.rstrip()) + 1), new),))


def improve(text: str, d: Diagnostic) -> Diagnostic:
    """`d` with the PyTorch habit behind it named, and a candidate fix; else `d` as it is."""
    try:
        if d.code == "E001":
            return _commas(text, d) or _syntax(text, d)
        if d.code == "E102":
            return _star(text, d)
    except RecursionError:
        pass
    return d


def proved(text: str, d: Diagnostic) -> Diagnostic:
    """After the fixes are proved: `did you mean `@`?` where the `@` candidate was the one."""
    if d.code != "E102" or d.fix is None:
        return d
    span, replacement, rewritten = d.fix
    lines = text.split("\n")
    if span != d.span or not 0 < span.line <= len(lines):
        return d
    original = lines[span.line - 1][span.column - 1:span.end_column - 1]
    if replacement.replace("@", "*") != original.replace("@", "*") or replacement.count("@") <= original.count("@"):
        return d
    return replace(d, help=f"{STAR_HELP}: write it as `{rewritten}`")
