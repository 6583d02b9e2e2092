"""Exercises: the file format, finding answers in a submission, `exercise make`.

An exercise is a `.shape` file with blanks (`?` or `?name`) plus comment
directives the grammar ignores; its reference solution is a separate, complete
`.shape` file. The format is described in exercises/README.md:

    # @title: Splitting the heads             file options (title, reveal,
    # @reveal: no                              partial, time limit)
    # ?split: 2 points; hint: cut D into H pieces       one line per blank
    Qh: Q -> ?split -> transpose 1 2

In a solution, a tag `# ?split = view [B, S, H, Dh]; 2 points; hint: ...`
marks the text that `exercise make` turns into the blank `?split` (on the next
statement, or on its own line when written after the code).

Nothing here evaluates submission text: answers are located with a small
tokenizer and a bounded matcher, and only ever reach the shapelang parser.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

MAX_ANSWER = 300          # characters in one answer
MAX_STATEMENT = 4000      # characters in one statement of a submission
MATCH_BUDGET = 20000      # matcher steps per statement

OPTION_NAMES = {"title", "reveal", "partial", "time limit"}


class ExerciseError(Exception):
    """The exercise or solution is not usable (an author's mistake, not a student's)."""


# ------------------------------------------------------------------ lines and statements

@dataclass
class Line:
    no: int                 # 1-based
    text: str
    code: str               # the text before a comment, right-stripped
    comment: str | None     # from `#` to the end of the line


def split_comment(text: str) -> tuple[str, str | None]:
    """Code and comment of one line; `#` inside a quoted pattern is not a comment."""
    i = text.find("#")
    if i < 0:
        return text.rstrip(), None
    if '"' not in text[:i]:
        return text[:i].rstrip(), text[i:]
    in_str = False
    for i, ch in enumerate(text):
        if ch == '"':
            in_str = not in_str
        elif ch == "#" and not in_str:
            return text[:i].rstrip(), text[i:]
    return text.rstrip(), None


def split_lines(text: str) -> list[Line]:
    out = []
    for i, raw in enumerate(text.split("\n")):
        raw = raw.rstrip("\r")
        code, comment = split_comment(raw)
        out.append(Line(i + 1, raw, code, comment))
    return out


@dataclass(frozen=True)
class Tok:
    kind: str     # hole | str | arrow | num | name | op | ch
    text: str
    start: int    # offsets into the statement's code
    end: int
    ws: bool      # whitespace before it


_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<str>"[^"\n]*")
  | (?P<hole>\?[A-Za-z0-9_]*)
  | (?P<arrow>->)
  | (?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*'?)
  | (?P<op>//|\*\*|==|!=|<=|>=)
  | (?P<ch>.)
""", re.VERBOSE | re.DOTALL)


_TOKEN_CACHE: dict = {}


def tokenize(code: str) -> tuple:
    """Tokens of one statement (cached: most lines of a submission are the exercise's)."""
    hit = _TOKEN_CACHE.get(code)
    if hit is not None:
        return hit
    toks, ws = [], False
    for m in _TOKEN.finditer(code):
        kind = m.lastgroup
        if kind == "ws":
            ws = True
            continue
        toks.append(Tok(kind, m.group(), m.start(), m.end(), ws))
        ws = False
    toks = tuple(toks)
    if len(code) <= 2000:
        if len(_TOKEN_CACHE) > 20000:
            _TOKEN_CACHE.clear()
        _TOKEN_CACHE[code] = toks
    return toks


@dataclass
class Stmt:
    index: int
    line: int                 # first line
    end_line: int
    code: str                 # code of all its lines joined with single spaces
    segments: list            # (offset in code, line no, column offset in that line)
    tokens: list
    kind: str                 # binding | expect | input | param | buffer | dim | assume |
    #                           example | block | end | return | other
    block: int | None = None  # index of the `block` statement it belongs to

    def position(self, offset: int) -> tuple[int, int]:
        """(line, column offset) in the file of an offset into `code`."""
        k = bisect.bisect_right([s[0] for s in self.segments], offset) - 1
        start, line, col = self.segments[max(k, 0)]
        return line, col + offset - start

    @property
    def holes(self) -> list[Tok]:
        return [t for t in self.tokens if t.kind == "hole"]

    @property
    def names(self) -> tuple:
        """The names a binding defines (`q, k, v:`), or the name an expect checks."""
        toks = self.tokens
        if self.kind == "binding":
            out = []
            for t in toks:
                if t.text == ":":
                    break
                if t.kind == "name":
                    out.append(t.text)
            return tuple(out)
        if self.kind == "expect" and len(toks) > 1:
            return (toks[1].text,)
        if self.kind in ("input", "param", "buffer", "block") and len(toks) > 1:
            return (toks[1].text,)
        return ()


_KINDS = {"dim", "assume", "example", "input", "param", "buffer", "expect", "block", "end",
          "return"}


def statements(lines: list[Line]) -> list[Stmt]:
    """Logical statements: a line, plus the following lines that start with `->`."""
    out: list[Stmt] = []
    block = None
    for ln in lines:
        code = ln.code
        stripped = code.strip()
        if not stripped:
            continue
        lead = len(code) - len(code.lstrip())
        if stripped.startswith("->") and out and out[-1].kind not in ("block", "end"):
            st = out[-1]
            st.segments.append((len(st.code) + 1, ln.no, lead))
            st.code += " " + stripped
            st.end_line = ln.no
            continue
        first = re.match(r"[A-Za-z_]\w*", stripped)
        word = first.group() if first else ""
        kind = word if word in _KINDS else ("binding" if ":" in stripped else "other")
        st = Stmt(len(out), ln.no, ln.no, stripped, [(0, ln.no, lead)], [], kind)
        if kind == "block":
            block = st.index
        elif block is not None:
            st.block = block
            if kind == "end":
                block = None
        out.append(st)
    for st in out:
        st.tokens = tokenize(st.code)
    return out


def normalized(code: str) -> str:
    return " ".join(t.text for t in tokenize(code))


# ------------------------------------------------------------------ directives

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
    token: int         # token index in that statement
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


def load_template(text: str, path: str = "<exercise>") -> Template:
    lines = split_lines(text)
    stmts = statements(lines)
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
    blanks: dict[str, Blank] = {}
    anon = 0
    for st in stmts:
        for k, t in enumerate(st.tokens):
            if t.kind != "hole":
                continue
            name = t.text[1:]
            if not name:
                anon += 1
                while str(anon) in blanks or str(anon) in infos:
                    anon += 1
                name = str(anon)
            if name in blanks:
                raise ExerciseError(f"{path}:{st.line}: the blank `?{name}` appears twice; "
                                    "give each blank its own name")
            whole = st.kind == "expect" and k == len(st.tokens) - 1 and k >= 2 and \
                st.tokens[k - 1].text == ":"
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


# ------------------------------------------------------------------ finding answers

_INFIX = {"*", "/", "+", "%", "//", "**", "@"}
_OPEN, _CLOSE = "([", ")]"


class _Budget(Exception):
    pass


def match_statement(tmpl: list[Tok], sub: list[Tok], budget: int = MATCH_BUDGET):
    """Token spans of `sub` answering each hole of `tmpl`, or None if the fixed text differs.

    A hole followed by fixed text ends where that text appears at bracket depth 0
    (the shortest choice that lets the rest match); two holes in a row are split at
    whitespace, as operation arguments are. The work is bounded by `budget`.
    """
    steps = [0]

    def tick():
        steps[0] += 1
        if steps[0] > budget:
            raise _Budget

    def ends(j, nxt):
        if nxt is None:
            yield len(sub)
            return
        depth = 0
        k = j
        if nxt.kind == "hole":
            while k < len(sub):
                tick()
                t = sub[k]
                if k > j and depth == 0 and t.ws and sub[k - 1].text not in _INFIX | {"-"} \
                        and t.text not in _INFIX:
                    break
                if t.text in _OPEN:
                    depth += 1
                elif t.text in _CLOSE:
                    depth -= 1
                    if depth < 0:
                        break
                k += 1
            yield k
            return
        while k < len(sub):
            tick()
            t = sub[k]
            if depth == 0 and t.text == nxt.text:
                yield k
            if t.text in _OPEN:
                depth += 1
            elif t.text in _CLOSE:
                depth -= 1
                if depth < 0:
                    return
            k += 1

    def go(i, j):
        tick()
        if i == len(tmpl):
            return [] if j == len(sub) else None
        t = tmpl[i]
        if t.kind != "hole":
            if j < len(sub) and sub[j].text == t.text:
                return go(i + 1, j + 1)
            return None
        nxt = tmpl[i + 1] if i + 1 < len(tmpl) else None
        for k in ends(j, nxt):
            rest = go(i + 1, k)
            if rest is not None:
                return [(j, k)] + rest
        return None

    try:
        return go(0, 0)
    except (_Budget, RecursionError):
        return None


@dataclass
class Answer:
    text: str | None          # the learner's answer, whitespace collapsed
    status: str               # given | unfilled | empty | missing | changed | too long
    line: int | None = None   # line in the submission
    message: str | None = None


@dataclass
class Extraction:
    answers: dict                              # blank name -> Answer
    notes: list = field(default_factory=list)  # (line, message) for the learner
    matched: int = 0                           # template statements found


def _head(st: Stmt) -> tuple:
    """What identifies a statement for a learner: `Qh:`, `expect Qh`, `input X`."""
    toks = st.tokens
    if st.kind == "binding":
        k = next((i for i, t in enumerate(toks) if t.text == ":"), len(toks))
        return tuple(t.text for t in toks[:k + 1])
    return tuple(t.text for t in toks[:2])


def extract(tmpl: Template, sub_text: str) -> Extraction:
    """Locate the answer to every blank of `tmpl` in a submission, line by line."""
    sub = statements(split_lines(sub_text))
    out = Extraction({})
    used: set[int] = set()
    explained: set[int] = set()
    by_head: dict[tuple, list[Stmt]] = {}
    for s in sub:
        by_head.setdefault(_head(s), []).append(s)
    pos = 0
    for st in tmpl.stmts:
        holes = [k for k, t in enumerate(st.tokens) if t.kind == "hole"]
        order = list(range(pos, len(sub))) + list(range(min(pos, len(sub))))
        found = None
        for q in order:
            if q in used:
                continue
            cand = sub[q]
            if len(cand.code) > MAX_STATEMENT:
                continue
            if not holes:
                if [t.text for t in cand.tokens] == [t.text for t in st.tokens]:
                    found = (q, None)
                    break
                continue
            if cand.tokens[:1] and st.tokens[:1] and cand.tokens[0].text != st.tokens[0].text \
                    and st.tokens[0].kind != "hole":
                continue
            spans = match_statement(st.tokens, cand.tokens)
            if spans is not None:
                found = (q, spans)
                break
        if found is None:
            alike = _missing(tmpl, st, holes, by_head, used, out)
            if alike is not None:
                explained.add(alike.index)
            continue
        q, spans = found
        used.add(q)
        pos = q + 1
        out.matched += 1
        if spans is None:
            continue
        cand = sub[q]
        for k, (a, b) in zip(holes, spans):
            name = _blank_name(tmpl, st, k)
            out.answers[name] = _answer(cand, a, b)
    for q, s in enumerate(sub):
        if q not in used and q not in explained:
            out.notes.append((s.line, "this line is not part of the exercise, so it was not "
                                      "graded" if not s.holes else
                              "this line has a blank that is not in the exercise"))
    return out


def _blank_name(tmpl: Template, st: Stmt, k: int) -> str:
    for b in tmpl.blanks.values():
        if b.stmt == st.index and b.token == k:
            return b.name
    raise KeyError(k)


def _answer(cand: Stmt, a: int, b: int) -> Answer:
    line = cand.position(cand.tokens[a].start)[0] if a < len(cand.tokens) else cand.line
    if a == b:
        return Answer(None, "empty", line, "the blank was deleted and nothing written in its place")
    text = " ".join(cand.code[cand.tokens[a].start:cand.tokens[b - 1].end].split())
    if len(text) > MAX_ANSWER:
        return Answer(None, "too long", line,
                      f"the answer is longer than {MAX_ANSWER} characters; answers are short")
    if b - a == 1 and cand.tokens[a].kind == "hole":
        return Answer(None, "unfilled", line, "the blank is not filled in")
    return Answer(text, "given", line)


def _missing(tmpl, st, holes, by_head, used, out):
    """Explain a statement of the exercise that the submission lacks; returns the
    submission statement that looks like a changed version of it, if any."""
    head = _head(st)
    alike = [s for s in by_head.get(head, []) if s.index not in used] if head else []
    if not holes:
        line = alike[0].line if alike else None
        what = "was changed" if alike else "is missing"
        out.notes.append((line, (f"the exercise line `{_short(st.code)}` {what}; it was graded "
                                 "as written in the exercise")))
        return alike[0] if alike else None
    long = [s for s in alike if len(s.code) > MAX_STATEMENT]
    for k in holes:
        name = _blank_name(tmpl, st, k)
        if long:
            out.answers[name] = Answer(None, "too long", long[0].line,
                                       f"line {long[0].line} is too long to grade (more than "
                                       f"{MAX_STATEMENT} characters)")
        elif alike:
            out.answers[name] = Answer(None, "changed", alike[0].line,
                                       "the text around this blank was changed, so the answer "
                                       f"could not be found; keep the exercise line as it was: "
                                       f"`{_short(st.code)}`")
        else:
            out.answers[name] = Answer(None, "missing", None,
                                       f"the line with this blank (`{_short(st.code)}`) is "
                                       "missing from the submission")
    return alike[0] if alike else None


def _short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def fill(st: Stmt, answers: dict[int, str]) -> str:
    """The statement's code with the holes at token indices `answers` replaced."""
    code = st.code
    for k in sorted(answers, reverse=True):
        t = st.tokens[k]
        code = code[:t.start] + answers[k] + code[t.end:]
    return code


# ------------------------------------------------------------------ exercise make

@dataclass
class Tag:
    name: str
    answer: str
    info: BlankInfo
    line: int           # line of the tag comment
    trailing: bool


def _needles(text: str) -> set[str]:
    return {_squash(text)} if len(_squash(text)) >= 3 else set()


def _squash(text: str) -> str:
    """Text compared for leaks: no whitespace, round brackets as square ones."""
    return "".join(text.split()).replace("(", "[").replace(")", "]")


def make(solution_text: str, path: str = "<solution>", all_shapes: bool = False):
    """The student version of a solution. Returns (exercise text, warnings for the author)."""
    from ..checker.checker import check_text

    spec = check_text(solution_text, path)
    if not spec.ok:
        from ..render import text as render
        raise ExerciseError(f"{path} does not check, so it cannot be a solution:\n\n"
                            + render.check_text(spec))
    lines = split_lines(solution_text)
    stmts = statements(lines)
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
        want = [t.text for t in tokenize(tag.answer)]
        if not want:
            raise ExerciseError(f"{where}: the tag `?{tag.name}` gives no answer text")
        hits = [k for k in range(len(st.tokens) - len(want) + 1)
                if [t.text for t in st.tokens[k:k + len(want)]] == want]
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
        first, last = st.tokens[k], st.tokens[k + len(want) - 1]
        l1, c1 = st.position(first.start)
        l2, c2 = st.position(last.end)
        for e in edits:
            if (l1, c1) < (e[2], e[3]) and (e[0], e[1]) < (l2, c2):
                raise ExerciseError(f"{where}: the tag `?{tag.name}` overlaps the blank `{e[4]}`")
        edits.append((l1, c1, l2, c2, f"?{tag.name}"))
        needles[tag.name] = _needles(tag.answer) | _context_needles(st, k, k + len(want))
        parts = [f"{_fmt_points(tag.info.points)}"]
        if tag.info.hint:
            parts.append(f"hint: {tag.info.hint}")
        directive_for[tag.line] = f"# ?{tag.name}: " + "; ".join(parts)
    inserts: dict[int, list[str]] = {}
    if all_shapes:
        _all_shapes(spec, stmts, lines, edits, inserts, needles, names_used)
    for tag in tags:
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
        for st in statements(split_lines(text)):
            if any(n and n in _squash(st.code) for n in ns if len(n) >= 5):
                warnings.append(f"the answer to `?{name}` also appears in the exercise's code "
                                f"(`{_short(st.code)}`)")
                break
    return text, warnings


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


def _context_needles(st: Stmt, a: int, b: int) -> set[str]:
    """The construct around a blanked item, filled in: a shape literal or an operation."""
    toks = st.tokens
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
                colon = next(i for i, t in enumerate(ex.tokens) if t.text == ":")
                first, last = ex.tokens[colon + 1], ex.tokens[-1]
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
