"""Results of grading and their output formats.

Input: a SubmissionResult (per blank a score and feedback, the whole-file
findings, notes for the learner). Output: a text report, JSON, Gradescope's
results.json or PrairieLearn's results; plus the file helpers of the command
line (finding the solution, finding the submissions without following links,
writing output atomically).

Everything printed that came from a submission goes through `clean` first, and
a submission's notes are capped (`MAX_NOTES`, then "and N more").
"""
from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "GRADER_FAILED",
    "MAX_NOTES",
    "VISIBILITIES",
    "BlankResult",
    "SubmissionResult",
    "Upload",
    "Visibility",
    "capped",
    "clean",
    "find_solution",
    "gradescope_json",
    "prairielearn_json",
    "result_json",
    "scan",
    "text_report",
    "visibility_options",
]

MAX_NOTES = 20           # notes (and whole-file findings) shown per submission
GRADER_FAILED = ("the grader failed on this file: this is a fault of the grader, not a "
                 "mistake in your file; please tell your instructor, who can regrade it")


@dataclass
class BlankResult:
    name: str
    points: float
    max_points: float
    status: str          # correct | partial | wrong | unfilled | missing | not graded
    feedback: str = ""
    hint: str | None = None
    line: int | None = None
    answer: str | None = None

    @property
    def label(self) -> str:
        return f"?{self.name}"


@dataclass
class SubmissionResult:
    path: str
    score: float
    max_score: float
    gradable: bool = True
    blanks: list = field(default_factory=list)
    findings: list = field(default_factory=list)   # whole-file check, (line, message)
    notes: list = field(default_factory=list)      # (line, message)
    error: str | None = None                       # why nothing (more) could be graded
    seconds: float = 0.0
    internal_error: bool = False                   # the grader failed (not the learner):
    #   with `error` set, on the whole submission; without, on single answers or the
    #   whole-file check only (their blanks say so, every other blank is graded)

    @property
    def full_marks(self) -> bool:
        return self.gradable and not self.internal_error and \
            self.score >= self.max_score - 1e-9


# ------------------------------------------------------------------ text safety

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e"
                     "\u2066-\u2069\ufeff]")


def clean(text: str, limit: int = 2000) -> str:
    """Text from a submission made safe to print: control, invisible and
    direction-changing characters escaped, bounded length."""
    if _UNSAFE.search(text) is not None:
        text = _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256
                           else f"\\u{ord(m.group()):04x}", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quote(text: str, limit: int = 80) -> str:
    """A learner's answer for a message: on one line, cleaned, as a Markdown code span
    (backquotes in the answer get a longer fence, so they cannot end the span)."""
    t = clean(" ".join(text.split()), limit)
    if "`" not in t:
        return f"`{t}`"
    fence = "`" * (max(len(run) for run in re.findall("`+", t)) + 1)
    return f"{fence} {t} {fence}"


def capped(items: list, what: str = "notes", limit: int = MAX_NOTES) -> list:
    """The first `limit` (line, message) items, then one saying how many were left out."""
    if len(items) <= limit:
        return items
    return items[:limit] + [(None, f"and {len(items) - limit} more {what}")]


# ------------------------------------------------------------------ output formats

def score_value(x: float):
    """Points as shown: whole numbers without `.0`."""
    return int(x) if float(x).is_integer() else round(x, 4)


def text_report(res: SubmissionResult) -> str:
    out = [f"{clean(res.path)}: {score_value(res.score)}/{score_value(res.max_score)} points"]
    if res.error:
        out.append(f"  {res.error}")
    marks = {"correct": "[ok]     ", "partial": "[partial]", "wrong": "[wrong]  ",
             "unfilled": "[empty]  ", "missing": "[missing]", "not graded": "[skipped]"}
    for b in res.blanks:
        where = f" (line {b.line})" if b.line else ""
        head = f"  {marks.get(b.status, b.status)} {b.label}{where}: {score_value(b.points)}/{score_value(b.max_points)}"
        if b.status == "correct":
            out.append(head + (f": {b.feedback}" if b.feedback not in ("", "right") else ""))
            continue
        out.append(head + (f": {b.feedback}" if b.feedback else ""))
        if b.hint:
            out.append(f"              hint: {clean(b.hint)}")
    for line, msg in res.findings:
        out.append(f"  whole file{f', line {line}' if line else ''}: {msg}")
    for line, msg in res.notes:
        out.append(f"  note{f', line {line}' if line else ''}: {msg}")
    return "\n".join(out) + "\n"


def result_json(res: SubmissionResult) -> dict:
    return {
        "file": res.path, "score": score_value(res.score), "max_score": score_value(res.max_score),
        "gradable": res.gradable, "error": res.error, "internal_error": res.internal_error,
        "blanks": [{"name": b.label, "line": b.line, "points": score_value(b.points),
                    "max_points": score_value(b.max_points), "status": b.status, "feedback": b.feedback,
                    "hint": b.hint, "answer": b.answer} for b in res.blanks],
        "whole_file": [{"line": ln, "message": m} for ln, m in res.findings],
        "notes": [{"line": ln, "message": m} for ln, m in res.notes],
        "seconds": round(res.seconds, 4),
    }


VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


@dataclass(frozen=True)
class Visibility:
    """When Gradescope shows the results, in its own terms (the `visibility` fields of
    results.json): `results` for the submission as a whole and every test that is not
    hidden, `hidden_tests` for the blanks named in `hidden`."""
    results: str = "visible"
    hidden: frozenset = frozenset()          # blank names, without `?`
    hidden_tests: str = "after_due_date"

    def __post_init__(self):
        for v in (self.results, self.hidden_tests):
            if v not in VISIBILITIES:
                raise ValueError(f"unknown visibility `{v}`; the visibilities are "
                                 + ", ".join(VISIBILITIES))

    def of(self, blank: str | None) -> str:
        return self.hidden_tests if blank in self.hidden else self.results


_VISIBILITY_OPTION = re.compile(r"^[ \t]*#[ \t]*@[ \t]*(visibility|hidden|hidden[ _-]visibility)"
                                r"[ \t]*:(.*)$", re.IGNORECASE | re.MULTILINE)


def visibility_options(text: str) -> tuple[str, Visibility]:
    """Gradescope's visibility from an exercise's comments (`# @visibility: V`,
    `# @hidden: ?a ?b`, `# @hidden visibility: V`), and the text with those lines
    emptied to `#` (so line numbers stay). Raises ValueError for a bad value."""
    found: dict[str, str] = {}

    def take(m: re.Match) -> str:
        key = re.sub(r"[ _-]", " ", m.group(1).lower())
        value = m.group(2).strip()
        if key != "hidden" and value not in VISIBILITIES:
            raise ValueError(f"line {text.count(chr(10), 0, m.start()) + 1}: bad value "
                             f"`{value}` for `@{key}`; the visibilities are "
                             + ", ".join(VISIBILITIES))
        found[key] = value
        return "#"

    rest = _VISIBILITY_OPTION.sub(take, text)
    hidden = frozenset(n.lstrip("?") for n in found.get("hidden", "").replace(",", " ").split())
    return rest, Visibility(found.get("visibility", "visible"), hidden,
                            found.get("hidden visibility", "after_due_date"))


def _md_lines(lines: list) -> str:
    """Lines as Markdown paragraphs (a single newline would join them)."""
    return "\n\n".join(x for x in lines if x)


def gradescope_json(res: SubmissionResult, title: str | None = None,
                    visibility: Visibility | None = None) -> dict:
    """Gradescope's results.json: one test per blank, one (0 points) for the whole file.
    Messages are Markdown (`output_format` "md"): code in backquotes, one paragraph each."""
    vis = visibility or Visibility()
    tests = []
    for b in res.blanks:
        output = [f"your answer: {quote(b.answer)}" if b.answer is not None else "",
                  b.feedback if b.status != "correct" else (b.feedback or "right"),
                  f"hint: {b.hint}" if b.hint else ""]
        tests.append({"name": f"{b.label}" + (f" (line {b.line})" if b.line else ""),
                      "score": score_value(b.points), "max_score": score_value(b.max_points),
                      "status": "passed" if b.status == "correct" else "failed",
                      "output": _md_lines(output), "output_format": "md",
                      "visibility": vis.of(b.name)})
    tests.append({"name": "whole file checks with your answers", "score": 0, "max_score": 0,
                  "status": "failed" if res.findings else "passed",
                  "output": _md_lines([f"line {ln}: {m}" if ln else m for ln, m in res.findings])
                  or "every step checks", "output_format": "md",
                  "visibility": vis.of(None)})
    summary = [f"{score_value(res.score)}/{score_value(res.max_score)} points"
               + (f" on {title}" if title else ""), res.error or ""]
    summary += [f"note{f' (line {ln})' if ln else ''}: {m}" for ln, m in res.notes]
    return {"score": score_value(res.score), "output": _md_lines(summary),
            "output_format": "md", "test_output_format": "md", "tests": tests,
            "visibility": vis.results, "stdout_visibility": "hidden",
            "execution_time": round(res.seconds, 3)}


def prairielearn_json(res: SubmissionResult) -> dict:
    # a failure confined to some answers leaves the submission gradable: those answers
    # say why they earned nothing, the others are graded
    gradable = res.gradable and not (res.internal_error and res.error is not None)
    out = {
        "gradable": gradable,
        "score": round(res.score / res.max_score, 6) if res.max_score and gradable else 0.0,
        "message": res.error or f"{score_value(res.score)}/{score_value(res.max_score)} points",
        "output": text_report(res),
        "tests": [{"name": b.label, "description": b.hint or "",
                   "points": score_value(b.points), "max_points": score_value(b.max_points),
                   "message": b.feedback if b.status != "correct" else (b.feedback or "right"),
                   "output": f"your answer: {quote(b.answer)}" if b.answer is not None else ""}
                  for b in res.blanks],
    }
    if not gradable:
        out["format_errors"] = [res.error or "the submission could not be graded"]
    return out


# ------------------------------------------------------------------ files

def find_solution(exercise_path: str) -> str | None:
    """`NAME.shape` -> `solutions/NAME.shape` beside it, or `NAME.solution.shape`."""
    p = Path(exercise_path)
    for cand in (p.parent / "solutions" / p.name, p.with_name(p.stem + ".solution.shape")):
        if cand.is_file():
            return str(cand)
    return None


MAX_ENTRIES = 10_000                      # files and folders looked at in one scan
SKIPPED_FOLDERS = {"__MACOSX", "__pycache__", "node_modules"}
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "__init__.py")
LINK = "it is a link, and links are not followed; submit the file itself"


@dataclass
class Upload:
    """What the paths given hold. `files`: regular files that `match`; `others`: other
    regular files; `refused`: (path, why) for links (to files or folders, never followed),
    special files and files that resolve outside the folder given, where they would be
    submissions; `stray`: the other links. Hidden files and
    folders, copies of a Python project (a folder with pyproject.toml, setup.py or
    __init__.py) and the excluded files are left out."""
    files: list = field(default_factory=list)
    others: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    stray: list = field(default_factory=list)     # links that would not be submissions


def _is_project(folder: str) -> bool:
    return any(os.path.lexists(os.path.join(folder, m)) for m in PROJECT_MARKERS)


def scan(paths: list[str], exclude: set[str], match=lambda rel: rel.endswith(".shape")) -> Upload:
    """Find submissions in `paths` (files or folders) without following any link inside
    them (a folder given may itself be a link: the grader's caller chose it). `exclude`: resolved paths of files and folders that are never submissions.
    Raises FileNotFoundError for a path that does not exist, OverflowError for a folder
    with more than MAX_ENTRIES entries."""
    up = Upload()
    seen = 0
    for p in paths:
        if os.path.islink(p) and not os.path.isdir(p):   # a folder given is the grader's
            up.refused.append((p, LINK))
            continue
        if not os.path.lexists(p):
            raise FileNotFoundError(p)
        if not os.path.isdir(p):
            _add_file(up, p, os.path.basename(p), os.path.dirname(os.path.abspath(p)), exclude,
                      lambda rel: True)
            continue
        root = os.path.realpath(p)
        for folder, dirs, names in os.walk(p, followlinks=False):
            keep = []
            for d in sorted(dirs):
                full = os.path.join(folder, d)
                if d.startswith(".") or d in SKIPPED_FOLDERS:
                    continue
                if os.path.islink(full):
                    up.refused.append((full, LINK))
                elif os.path.realpath(full) not in exclude and not _is_project(full):
                    keep.append(d)
            dirs[:] = keep
            seen += len(names) + len(dirs)
            if seen > MAX_ENTRIES:
                raise OverflowError(p)
            for n in sorted(names):
                if not n.startswith("."):
                    full = os.path.join(folder, n)
                    _add_file(up, full, os.path.relpath(full, p), root, exclude, match)
    return up


def _add_file(up: Upload, full: str, rel: str, root: str, exclude: set[str], match) -> None:
    st = os.lstat(full)
    real = os.path.realpath(full)
    wanted = match(rel)
    if real in exclude and not stat.S_ISLNK(st.st_mode):
        return
    if stat.S_ISLNK(st.st_mode):
        if wanted or rel.endswith(".shape"):
            up.refused.append((full, LINK))
        else:   # not a submission, but a one-file upload refuses it too
            up.stray.append((full, LINK))
    elif not stat.S_ISREG(st.st_mode):
        if wanted:
            up.refused.append((full, "it is not a regular file"))
    elif os.path.commonpath([real, root]) != root:
        up.refused.append((full, "it resolves to a file outside the submission"))
    elif wanted:
        up.files.append(full)
    else:
        up.others.append(full)


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def write_output(path: str | None, text: str) -> None:
    """Write to `path` atomically (a reader never sees half a file), or to stdout."""
    if path is None:
        sys.stdout.write(text)
        return
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
