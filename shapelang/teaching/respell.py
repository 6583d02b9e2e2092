"""Answers written another way: PyTorch spellings, sums as arguments, negative powers,
and numbers where the exercise's dims belong.

Input: a statement of the exercise with the learner's answers filled in. Output:
the same statement in shapelang, when the learner wrote something shapelang
spells differently, and what to say about it:

- a PyTorch habit (`transpose 1, 2`, `softmax(dim=-1)`, `x.transpose(1, 2)`):
  the checker's own reading (shapelang.checker.habits), so `check` and `grade`
  answer the same habit with the same spelling;
- a sum as an operation's argument (`linear 2*D + 2*D`): shapelang reads it only
  in parentheses, and there is no other reading of it;
- a negative power (`D*H**-1`): exact division, `D/H`; a power of 0.5 is `sqrt`.

Every rewrite is made on the grammar's tokens and only reaches the parser;
nothing is evaluated. `number_runs` finds the numbers in an answer that stand
where a size belongs (`view [B, S, H, 64]`, `linear 3072`), for the partial
credit of an answer right only at the example sizes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..checker.ops import TABLE
from ..syntax.nodes import Op
from ..syntax.parser import ParseFailure, parse
from .template import lex

ARITH = {"*", "/", "//", "+", "-", "**", "%"}
# operations whose numeric arguments are axes or counts, never sizes
AXIS_OPS = {name for name, d in TABLE.items() if d.axes or d.reduces}
WHY = {
    "grouping": "shapelang reads an argument with `+` or `-` only in parentheses",
    "power": "shapelang has no negative or fractional exponents; `/` is exact division "
             "and `sqrt` is the square root",
}


@dataclass(frozen=True)
class Respelling:
    code: str            # the statement in shapelang
    said: str | None     # what the learner wrote (a piece of the statement; None: the answer)
    shapelang: str | None  # the same piece in shapelang
    why: str             # the rule, for the learner


def parses(code: str) -> bool:
    """Whether `code` is shapelang as written (`softmax(dim=-1)` parses, as a block call with
    keywords would, but is the PyTorch habit after an operation)."""
    text = code.strip()
    if text.startswith("return"):
        text = f"block _B(_x: [1]):\n  {text}\nend"
    try:
        spec = parse(text + "\n")
    except (ParseFailure, RecursionError):
        return False
    return not any(op_call_keywords(st) for st in spec.statements)


def op_call_keywords(node, depth: int = 0) -> bool:
    """Whether a statement calls an operation of the table with keywords in parentheses."""
    if depth > 50:
        return False
    if isinstance(node, Op) and node.tuple_kwargs and node.name in TABLE:
        return True
    if isinstance(node, (list, tuple)):
        return any(op_call_keywords(x, depth + 1) for x in node)
    if hasattr(node, "__dataclass_fields__"):
        return any(op_call_keywords(getattr(node, f), depth + 1) for f in node.__dataclass_fields__
                   if f not in ("span", "name_span", "text"))
    return False


def respell(code: str) -> Respelling | None:
    """`code` (one statement) in shapelang, or None when it needs no rewrite or none helps.
    A statement that parses is only rewritten for negative powers."""
    if parses(code) or "**" in code:
        got = _powers(code)
        if got is not None and parses(got.code) or parses(code):
            return got
    for step in (_habits, _grouping):
        got = step(code)
        if got is not None:
            if parses(got.code):
                return got
            again = _grouping(got.code)      # a habit and a sum in one statement
            if again is not None and parses(again.code):
                return Respelling(again.code, got.said, got.shapelang, got.why)
    return None


def _habits(code: str) -> Respelling | None:
    from ..checker.habits import NOTES, rewrite_line
    try:
        got = rewrite_line(code)
    except RecursionError:
        return None
    if got is None:
        return None
    start, end, rhs, habits = got
    h = max(habits, key=lambda h: h.end - h.start)     # a method chain is named whole
    return Respelling(code[:start] + rhs + code[end:], h.pytorch, h.shapelang, NOTES[h.kind])


def _grouping(code: str) -> Respelling | None:
    """`-> linear 2*D + 2*D` as `-> linear (2*D + 2*D)`: each operation whose arguments hold
    a top-level `+` or `-` between terms gets them in parentheses."""
    toks = lex(code)
    out, last, said, new = [], 0, None, None
    k = 0
    while k < len(toks):
        t = toks[k]
        if t.text == "->" and k + 1 < len(toks) and toks[k + 1].kind == "name":
            name = toks[k + 1]
            j, depth = k + 2, 0
            while j < len(toks) and not (depth == 0 and toks[j].text == "->"):
                depth += toks[j].text in "([" and toks[j].kind == "op"
                depth -= toks[j].text in ")]" and toks[j].kind == "op"
                j += 1
            args = toks[k + 2:j]
            if args and _has_sum(args):
                a, b = args[0].start, args[-1].end
                out.append(code[last:a] + "(" + code[a:b] + ")")
                last = b
                if said is None:
                    said = code[name.start:b]
                    new = f"{name.text} ({code[a:b]})"
            k = j
            continue
        k += 1
    if said is None:
        return None
    return Respelling("".join(out) + code[last:], said, new, WHY["grouping"])


def _has_sum(args) -> bool:
    depth = 0
    for k, t in enumerate(args):
        if t.kind == "op" and t.text in "([":
            depth += 1
        elif t.kind == "op" and t.text in ")]":
            depth -= 1
        elif depth == 0 and k > 0 and t.text in ("+", "-") and args[k - 1].text not in ARITH:
            return True
    return False


_EXPONENT = re.compile(r"[ \t]*(?P<open>\([ \t]*)?(-?)[ \t]*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
                       r"(?![0-9.])(?(open)[ \t]*\))")


def _powers(code: str) -> Respelling | None:
    """`X ** -n` as division: `A*X**-1` -> `A/X`, `A*X**-2` -> `A/X**2`, else `(1/X**n)`;
    `X**0.5` as `sqrt(X)` and `X**-0.5` as `1/sqrt(X)`."""
    toks = lex(code)
    pieces = []
    for k in range(1, len(toks)):
        if toks[k].text != "**" or (pieces and toks[k].start < pieces[-1][1]):
            continue
        m = _EXPONENT.match(code, toks[k].end)
        if m is None:
            continue
        negative, exp = m.group(2) == "-", m.group(3)
        half = exp in ("0.5", ".5")
        if not half and not (negative and exp.isdigit() and int(exp) > 0):
            continue
        base = _base_start(toks, k)
        if base is None:
            continue
        b0, end = toks[base].start, m.end()
        base_text = code[b0:toks[k - 1].end]
        if half:
            inner = base_text[1:-1] if base_text.startswith("(") and _closes(base_text) else base_text
            power = f"sqrt({inner})"
        else:
            power = base_text if int(exp) == 1 else f"{base_text}**{int(exp)}"
        if not negative:
            pieces.append((b0, end, power))
            continue
        before = base - 1
        if before >= 0 and toks[before].text in ("*", "/"):
            op = "/" if toks[before].text == "*" else "*"
            gap = " " if code[toks[before].end:toks[before].end + 1] == " " else ""
            pieces.append((toks[before].start, end, f"{op}{gap}{power}"))
        else:
            pieces.append((b0, end, f"(1/{power})"))
    if not pieces:
        return None
    for a, b, text in sorted(pieces, reverse=True):
        code = code[:a] + text + code[b:]
    return Respelling(code, None, None, WHY["power"])


def _closes(text: str) -> bool:
    """Whether the bracket that opens `text` closes at its end."""
    depth = 0
    for k, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return k == len(text) - 1
    return False


def _base_start(toks, k: int) -> int | None:
    """The first token of the operand before `**` at index k (a name, number or bracket)."""
    j = k - 1
    if j < 0:
        return None
    if toks[j].kind in ("name", "num"):
        return j
    if toks[j].text != ")":
        return None
    depth = 0
    while j >= 0:
        if toks[j].text == ")":
            depth += 1
        elif toks[j].text == "(":
            depth -= 1
            if depth == 0:
                if j > 0 and toks[j - 1].kind == "name" and toks[j - 1].end == toks[j].start:
                    # a call: sqrt(D)
                    return j - 1
                return j
        j -= 1
    return None


# ------------------------------------------------------------------ numbers for sizes

def number_runs(answer: str) -> list[tuple[int, int]]:
    """(start, end) of each number expression in `answer` that stands where a size goes:
    a whole argument or a whole dim of a shape made of numbers only (`64`, `512/8`),
    not an axis (`transpose 1 2`) and not part of an expression with dims (`4*D`)."""
    toks = lex(answer)
    out = []
    op_name = None
    k, depth_sq = 0, 0
    while k < len(toks):
        t = toks[k]
        if t.text == "->":
            op_name = None
        elif t.kind == "name" and op_name is None:
            op_name = t.text
        if t.text == "[":
            depth_sq += 1
        elif t.text == "]":
            depth_sq -= 1
        if t.kind == "num" or (t.text == "(" and k + 1 < len(toks) and
                               toks[k + 1].kind in ("num", "op")):
            j = _run_end(toks, k)
            run = toks[k:j]
            prev = toks[k - 1] if k else None
            nxt = toks[j] if j < len(toks) else None
            numeric = run and all(x.kind == "num" or x.text in ARITH | {"(", ")"} for x in run) \
                and any(x.kind == "num" for x in run) and _balanced(run)
            alone = (prev is None or prev.text not in ARITH) and \
                (nxt is None or nxt.text not in ARITH and nxt.text != "(")
            sized = depth_sq > 0 or op_name not in AXIS_OPS
            if numeric and alone and sized and not (prev is not None and prev.text == "-"):
                out.append((run[0].start, run[-1].end))
            k = max(j, k + 1)
            continue
        k += 1
    return out


def _run_end(toks, k: int) -> int:
    """The end of a run of number tokens joined by operators (spaces do not end it; two
    numbers side by side are two arguments)."""
    j, depth = k, 0
    while j < len(toks):
        t = toks[j]
        if t.kind == "num":
            if j > k and toks[j - 1].kind == "num":
                break
        elif t.text == "(":
            depth += 1
        elif t.text == ")":
            if depth == 0:
                break
            depth -= 1
        elif t.text not in ARITH:
            break
        j += 1
    while j > k and toks[j - 1].text in ARITH:
        j -= 1
    return j


def _balanced(run) -> bool:
    depth = 0
    for t in run:
        depth += t.text == "("
        depth -= t.text == ")"
        if depth < 0:
            return False
    return depth == 0


def number_value(text: str):
    """The exact value of a number expression (`512/8` -> 64), read by the parser; None if
    it is not one."""
    from ..checker import dims as dimlib
    from ..syntax.diagnostics import ShapeError
    from ..syntax.nodes import DimDecl

    try:
        spec = parse(f"dim _n = {text}\n")
        node = spec.statements[0]
        if not isinstance(node, DimDecl) or node.value is None:
            return None

        def no_names(n):
            raise ShapeError("E002", "a name", span=n.span)
        e = dimlib.build(node.value, no_names, allow_real=True)
        return e if e.is_number else None
    except (ParseFailure, ShapeError, RecursionError, ValueError, TypeError,
            ZeroDivisionError, IndexError):
        return None
