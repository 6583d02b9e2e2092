"""Exercise mode: what `check`, the language server, `serve` and the notebook magic show
for an exercise, or for an exercise being filled in.

A file is an exercise when it has blanks (`?name` in its code), blank directives
(`# ?name: 2 points; hint: ...`, which a learner's filled copy keeps) or the first line
`exercise make` writes (then every `expect` is taken for a blank, as `--all-shapes` makes
them). Then:

- a help that would write code (a proved fix, or `write it as ...`) on a statement that
  holds a blank would fill that blank in: it is replaced by the blank's own hint, and the
  fix is dropped;
- a help or fix that edits any other line is dropped: that line is part of the exercise,
  and the learner may not edit it (the help says which blanks to look at instead);
- an `expect` whose shape is a blank is answered without the computed shape (that shape
  is the blank's answer): the message says the shape written for the blank is not the
  tensor's, and gives the hint.

Everything else (codes, spans, messages that describe the learner's own answer) is kept,
so exercise mode never says more about a blank than the grader does. The blanks are found
in the text itself (no solution is needed): a directive belongs to the statement after it,
as `exercise make` writes it.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from .template import _BLANK_DIRECTIVE, ExerciseError, parse_fields, split_comment

_HOLE = re.compile(r"\?([A-Za-z0-9_]*)")
# the first line `exercise make` writes: with it, every `expect` is a blank (`--all-shapes`
# writes no directives)
HEADER = "# Exercise: replace every blank"
_CODE = re.compile(r"`[^`]+`")


@dataclass
class AnswerStmt:
    first: int                 # 1-based lines of a statement that holds blanks
    last: int
    blanks: list               # (name, hint or None)
    expect: bool               # an `expect` statement: its shape is (part of) an answer


def answer_statements(text: str) -> list[AnswerStmt]:
    """The statements of an exercise (or a filled one) that hold its blanks; [] when the text
    is not an exercise. Read from the lines, so a file that does not parse is read too."""
    lines = text.split("\n")
    made = any(line.startswith(HEADER) for line in lines[:50])
    out: list[AnswerStmt] = []
    pending: list = []             # directives waiting for their statement
    k = 0
    while k < len(lines):
        code, comment = split_comment(lines[k].rstrip("\r"))
        if not code.strip():
            m = _BLANK_DIRECTIVE.match(comment.strip()) if comment else None
            if m:
                try:
                    hint = parse_fields(m.group(2), "", False).hint
                except ExerciseError:
                    hint = None
                pending.append((m.group(1), hint))
            k += 1
            continue
        first, last, depth = k, k, _depth(code)
        joined = code
        j = k + 1
        while j < len(lines):          # continuation lines: `-> ...`, or inside brackets
            nxt = split_comment(lines[j].rstrip("\r"))[0]
            if not nxt.strip():
                if depth > 0:
                    j += 1
                    continue
                break
            if depth > 0 or nxt.lstrip().startswith("->"):
                depth += _depth(nxt)
                joined += " " + nxt
                last = j
                j += 1
                continue
            break
        holes = [m.group(1) for m in _HOLE.finditer(joined)]
        expect = joined.lstrip().startswith("expect")
        if pending or holes or (made and expect):
            named = dict(pending)
            names = list(named) + [h for h in holes if h and h not in named]
            out.append(AnswerStmt(first + 1, last + 1, [(n, named.get(n)) for n in names]
                                  or [("", None)], expect))
        pending = []
        k = last + 1
    return out


def _depth(code: str) -> int:
    return sum(code.count(c) for c in "([") - sum(code.count(c) for c in ")]")


def _where(stmts: list[AnswerStmt], line: int) -> AnswerStmt | None:
    return next((s for s in stmts if s.first <= line <= s.last), None)


def _hints(stmts: list[AnswerStmt]) -> str:
    parts = []
    for s in stmts:
        for name, hint in s.blanks:
            label = f"`?{name}`" if name else "the blank"
            parts.append(f"hint for {label}: {hint}" if hint else
                         f"look again at your answer to {label}")
    return "; ".join(dict.fromkeys(parts))


def _names(stmts: list[AnswerStmt]) -> str:
    names = dict.fromkeys(f"`?{n}`" if n else "the blank" for s in stmts for n, _ in s.blanks)
    return ", ".join(names)


def _spans(d) -> list:
    out = [d.span]
    if d.fix is not None:
        out.append(d.fix[0])
    out += [f[0] for f in d.fixes]
    out += [sp for sp, _ in d.labels]
    return out


def guard(diagnostics: list, text: str) -> list:
    """The diagnostics of `text` as exercise mode shows them (unchanged when `text` is not
    an exercise)."""
    stmts = answer_statements(text)
    if not stmts:
        return diagnostics
    return [_guarded(d, stmts) for d in diagnostics]


def _guarded(d, stmts: list[AnswerStmt]):
    own = _where(stmts, d.span.line)
    touched = [s for s in (_where(stmts, sp.line) for sp in _spans(d)) if s is not None]
    if own is not None and own.expect and d.code == "E107":
        name = f"`{d.message.split('`')[1]}`" if d.message.count("`") >= 2 else "the tensor"
        blanks = _names([own])
        deps = [s for s in touched if s is not own]
        message = f"{name}, as your answers compute it, does not have the shape written " \
                  f"for {blanks}"
        if deps:
            message += f": look again at {_names(deps)} and at {blanks}"
        labels = tuple((sp, f"{name} is computed here, from your answers")
                       for sp, _ in d.labels if _where(stmts, sp.line) is not None)
        return dataclasses.replace(
            d, message=message, notes=(), labels=labels, counterexample=None, fix=None,
            fixes=(), help=_hints([own]))
    writes_code = d.fix is not None or bool(d.fixes) or (d.help and _CODE.search(d.help))
    if not writes_code:
        if own is not None and d.severity == "error" and d.code != "E116":
            extra = _hints([own])
            return dataclasses.replace(d, help=f"{d.help}; {extra}" if d.help else extra)
        if d.code == "E116" and own is not None:
            hint = next((h for n, h in own.blanks if h and f"`?{n}`" in d.message), None)
            if hint:
                return dataclasses.replace(d, help=f"replace it with your answer; hint: {hint}")
        return d
    if touched:
        whose = [own] if own is not None else list(dict.fromkeys(id(s) for s in touched))
        near = [own] if own is not None else [s for s in stmts if id(s) in whose]
        where = "" if own is not None else \
            "this line is part of the exercise; change your answers instead: "
        return dataclasses.replace(d, fix=None, fixes=(),
                                   help=f"{where}{_hints(near)}")
    return dataclasses.replace(d, fix=None, fixes=(), help=None)
