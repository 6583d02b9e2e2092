"""`exercise make`: the student version of a solution.

In a solution, a tag `# ?split = view [B, S, H, Dh]; 2 points; hint: ...` marks
the text that becomes the blank `?split` (on the next statement, or on its own
line when written after the code). The solution is read by the parser; the tag's
text is found among the statement's tokens as the grammar's lexer reads them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .template import (
    _TAG,
    BlankInfo,
    ExerciseError,
    Line,
    Stmt,
    _squash,
    lex,
    parse_fields,
    split_comment,
    split_lines,
    statements_of,
)

_OPEN, _CLOSE = "([", ")]"


def _short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


@dataclass
class Tag:
    name: str
    answer: str
    info: BlankInfo
    line: int           # line of the tag comment
    trailing: bool


def _needles(text: str) -> set[str]:
    return {_squash(text)} if len(_squash(text)) >= 3 else set()


# an axis answer said in words: `-1` is "the last" axis
POSITIONS = {0: ("first",), 1: ("second",), 2: ("third",), 3: ("fourth",), -1: ("last",),
             -2: ("second-to-last", "second to last", "penultimate", "last but one")}


def _says_position(answer: str, hint: str) -> bool:
    """Whether a hint names the axis that an axis answer (`-1`, `3`) is."""
    try:
        k = int(answer.strip())
    except ValueError:
        return False
    return any(re.search(rf"\b{re.escape(w)}\b", hint.lower()) for w in POSITIONS.get(k, ()))


def make(solution_text: str, path: str = "<solution>", all_shapes: bool = False):
    """The student version of a solution. Returns (exercise text, warnings for the author)."""
    from ..checker.checker import check_text

    spec = check_text(solution_text, path)
    if not spec.ok:
        from ..render import text as render
        raise ExerciseError(f"{path} does not check, so it cannot be a solution:\n\n"
                            + render.check_text(spec))
    lines = split_lines(solution_text)
    stmts = statements_of(solution_text, path, lines)
    tags = _read_tags(lines, path)
    if not tags and not all_shapes:
        raise ExerciseError(f"{path} has no `# ?name = answer` tags; tag the items to blank, "
                            "or use --all-shapes")
    # statement each tag applies to
    by_line = {}
    for st in stmts:
        for no in range(st.line, st.end_line + 1):
            by_line[no] = st
    edits = []          # (line, col_start, line_end, col_end, replacement)
    needles: dict[str, set[str]] = {}
    names_used = {t.name for t in tags}
    directive_for: dict[int, str] = {}   # tag line -> directive text
    for tag in tags:
        where = f"{path}:{tag.line}"
        st = by_line.get(tag.line) if tag.trailing else \
            next((s for s in stmts if s.line > tag.line), None)
        if st is None:
            raise ExerciseError(f"{where}: the tag `?{tag.name}` is not followed by a statement")
        want = [t.text for t in lex(tag.answer)]
        if not want:
            raise ExerciseError(f"{where}: the tag `?{tag.name}` gives no answer text")
        toks = lex(st.code)
        hits = [k for k in range(len(toks) - len(want) + 1)
                if [t.text for t in toks[k:k + len(want)]] == want]
        if not hits:
            raise ExerciseError(f"{where}: `{tag.answer}` does not occur in line {st.line} "
                                f"(`{_short(st.code)}`)")
        if tag.info.occurrence is not None:
            if not 1 <= tag.info.occurrence <= len(hits):
                raise ExerciseError(f"{where}: `{tag.answer}` occurs {len(hits)} time(s) in line "
                                    f"{st.line}, not {tag.info.occurrence}")
            k = hits[tag.info.occurrence - 1]
        elif len(hits) > 1:
            raise ExerciseError(f"{where}: `{tag.answer}` occurs {len(hits)} times in line "
                                f"{st.line}; add `; occurrence N` to choose one")
        else:
            k = hits[0]
        first, last = toks[k], toks[k + len(want) - 1]
        if st.kind in ("input", "param", "buffer") and len(want) > 2 and \
                (want[0], want[-1]) == ("[", "]") and _one_group(want):
            # a declaration's whole shape: the grammar has no blank for it, so the blank
            # goes inside the brackets (`param W: [?w]`, answered `D, D`)
            first, last = toks[k + 1], toks[k + len(want) - 2]
        l1, c1 = st.position(first.start)
        l2, c2 = st.position(last.end)
        for e in edits:
            if (l1, c1) < (e[2], e[3]) and (e[0], e[1]) < (l2, c2):
                raise ExerciseError(f"{where}: the tag `?{tag.name}` overlaps the blank `{e[4]}`")
        edits.append((l1, c1, l2, c2, f"?{tag.name}"))
        needles[tag.name] = _needles(tag.answer) | _context_needles(st, toks, k, k + len(want))
        parts = [f"{_fmt_points(tag.info.points)}"]
        if tag.info.hint:
            parts.append(f"hint: {tag.info.hint}")
        directive_for[tag.line] = f"# ?{tag.name}: " + "; ".join(parts)
    inserts: dict[int, list[str]] = {}
    if all_shapes:
        _all_shapes(spec, stmts, lines, edits, inserts, needles, names_used)
    for tag in tags:
        if tag.info.hint and _says_position(tag.answer, tag.info.hint):
            raise ExerciseError(f"{path}:{tag.line}: the hint for `?{tag.name}` gives the "
                                "answer away (it names the axis)")
        for needle in needles.get(tag.name, ()):
            if tag.info.hint and needle in _squash(tag.info.hint):
                raise ExerciseError(f"{path}:{tag.line}: the hint for `?{tag.name}` gives the "
                                    "answer away")
    warnings = []
    out_lines = _apply(lines, edits, inserts, directive_for, needles, warnings)
    text = "\n".join(out_lines)
    if not text.endswith("\n"):
        text += "\n"
    header = "# Exercise: replace every blank `?name` with your answer. Points and hints are " \
             "in the `# ?name:` lines.\n"
    text = header + text
    _verify(text, path)
    tagged = {t.name for t in tags}
    for name, ns in needles.items():
        if name not in tagged:
            continue
        for st in statements_of(text, path):
            if any(n and n in _squash(st.code) for n in ns if len(n) >= 5):
                warnings.append(f"the answer to `?{name}` also appears in the exercise's code "
                                f"(`{_short(st.code)}`)")
                break
    return text, warnings


def _one_group(tokens: list) -> bool:
    """Whether `[ ... ]` is one bracket group (not `[B] + [D]`)."""
    depth = 0
    for i, t in enumerate(tokens):
        depth += t in _OPEN
        depth -= t in _CLOSE
        if depth == 0 and i < len(tokens) - 1:
            return False
    return True


def _fmt_points(p: float) -> str:
    n = int(p) if p == int(p) else p
    return f"{n} point" + ("" if n == 1 else "s")


def _read_tags(lines: list[Line], path: str) -> list[Tag]:
    tags, seen = [], set()
    for ln in lines:
        if ln.comment is None:
            continue
        m = _TAG.match(ln.comment)
        if not m:
            continue
        where = f"{path}:{ln.no}"
        name, rest = m.group(1), m.group(2)
        if name in seen:
            raise ExerciseError(f"{where}: the tag `?{name}` is used twice")
        seen.add(name)
        answer, _, fields = rest.partition(";")
        info = parse_fields(fields, where, allow_occurrence=True)
        tags.append(Tag(name, answer.strip(), info, ln.no, bool(ln.code.strip())))
    return tags


def _context_needles(st: Stmt, toks: tuple, a: int, b: int) -> set[str]:
    """The construct around a blanked item, filled in: a shape literal or an operation."""
    depth, k = 0, a - 1
    while k >= 0:
        t = toks[k]
        if t.text in _CLOSE:
            depth += 1
        elif t.text in _OPEN:
            if depth == 0:
                break
            depth -= 1
        k -= 1
    if k >= 0:     # inside brackets: the whole bracket group
        depth, e = 0, k
        while e < len(toks):
            if toks[e].text in _OPEN:
                depth += 1
            elif toks[e].text in _CLOSE:
                depth -= 1
                if depth == 0:
                    break
            e += 1
        return {_squash(st.code[toks[k].start:toks[min(e, len(toks) - 1)].end])}
    s = a
    while s > 0 and toks[s - 1].text not in ("->", ":"):
        s -= 1
    e = b
    while e < len(toks) and toks[e].text != "->":
        e += 1
    text = st.code[toks[s].start:toks[e - 1].end]
    return {_squash(text)} if len(_squash(text)) >= 3 and (s, e) != (a, b) else set()


def _all_shapes(spec, stmts, lines, edits, inserts, needles, names_used) -> None:
    """`expect name: ?name` after every top-level binding (or blank an existing expect)."""
    types = {}
    for b in spec.bindings:
        for n, t in zip(b.names, b.types):
            types[n] = t
    expects = {st.names[0]: st for st in stmts if st.kind == "expect" and st.block is None
               and st.names}
    for st in stmts:
        if st.kind != "binding" or st.block is not None:
            continue
        for name in st.names:
            if name not in types:
                continue
            hole = name if name not in names_used else f"{name}_shape"
            while hole in names_used:
                hole += "_"
            names_used.add(hole)
            shape = types[name].shape
            ns = {_squash("[" + ", ".join(str(d) for d in shape) + "]")}
            vals = [spec.example_value(d) for d in shape]
            if spec.example and all(v is not None and v == int(v) for v in vals):
                ns.add(_squash("[" + ", ".join(str(int(v)) for v in vals) + "]"))
            needles[hole] = ns
            ex = expects.get(name)
            if ex is not None:
                toks = lex(ex.code)
                colon = next(i for i, t in enumerate(toks) if t.text == ":")
                first, last = toks[colon + 1], toks[-1]
                l1, c1 = ex.position(first.start)
                l2, c2 = ex.position(last.end)
                edits.append((l1, c1, l2, c2, f"?{hole}"))
                needles[hole] |= {_squash(ex.code[first.start:last.end])}
            else:
                indent = lines[st.line - 1].text[:len(lines[st.line - 1].text) -
                                                  len(lines[st.line - 1].text.lstrip())]
                inserts.setdefault(st.end_line, []).append(f"{indent}expect {name}: ?{hole}")


def _apply(lines, edits, inserts, directive_for, needles, warnings) -> list[str]:
    text = [ln.text for ln in lines]
    drop: set[int] = set()
    for l1, c1, l2, c2, rep in sorted(edits, reverse=True):
        if l1 == l2:
            text[l1 - 1] = text[l1 - 1][:c1] + rep + text[l1 - 1][c2:]
        else:
            text[l1 - 1] = text[l1 - 1][:c1] + rep + text[l2 - 1][c2:]
            drop.update(range(l1 + 1, l2 + 1))
    all_needles = {n for ns in needles.values() for n in ns if n}
    out = []
    for ln, cur in zip(lines, text):
        if ln.no in drop:
            continue
        code, comment = split_comment(cur)
        if ln.no in directive_for:
            if code.strip():
                out.append(code)
                indent = cur[:len(cur) - len(cur.lstrip())]
                out.insert(len(out) - 1, indent + directive_for[ln.no])
            else:
                out.append(cur[:len(cur) - len(cur.lstrip())] + directive_for[ln.no])
        elif comment is not None and (comment.startswith("#!") or
                                      any(n in _squash(comment) for n in all_needles)):
            if not comment.startswith("#!"):
                warnings.append(f"line {ln.no}: dropped a comment that gives an answer away")
            if code.strip():
                out.append(code)
        else:
            out.append(cur)
        out.extend(inserts.get(ln.no, ()))
    return out


def _verify(text: str, path: str) -> None:
    from ..checker.checker import check_text

    spec = check_text(text, path)
    bad = [d for d in spec.errors() if d.code != "E116"]
    if bad:
        d = bad[0]
        raise ExerciseError(f"the exercise made from {path} does not check apart from its "
                            f"blanks: line {d.span.line}: {d.message} (a tag blanks something "
                            "that is not an answer: a name, a keyword, part of a word?)")
