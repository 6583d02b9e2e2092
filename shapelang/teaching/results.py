"""Results of grading and their output formats.

Input: a SubmissionResult (per blank a score and feedback, the whole-file
findings, notes for the learner). Output: a text report, JSON, Gradescope's
results.json or PrairieLearn's results; plus the file helpers of the command
line (finding the solution and the submissions, writing output atomically).

Everything printed that came from a submission goes through `clean` first.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BlankResult",
    "SubmissionResult",
    "clean",
    "find_solution",
    "gradescope_json",
    "prairielearn_json",
    "result_json",
    "submission_files",
    "text_report",
]


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

    @property
    def full_marks(self) -> bool:
        return self.gradable and self.score >= self.max_score - 1e-9


# ------------------------------------------------------------------ text safety

_UNSAFE = None


def clean(text: str, limit: int = 2000) -> str:
    """Text from a submission made safe to print: no control characters, bounded length."""
    global _UNSAFE
    if _UNSAFE is None:
        import re
        _UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
    if _UNSAFE.search(text) is None:
        return text if len(text) <= limit else text[: limit - 3] + "..."
    out = []
    for ch in text:
        o = ord(ch)
        if ch in "\n\t" or (o >= 32 and not 127 <= o < 160 and o not in (0x2028, 0x2029)):
            out.append(ch)
        else:
            out.append(f"\\x{o:02x}" if o < 256 else f"\\u{o:04x}")
    s = "".join(out)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def quote(text: str, limit: int = 80) -> str:
    """A learner's answer for a message: on one line, cleaned, in backquotes."""
    return "`" + clean(" ".join(text.split()), limit) + "`"



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
            out.append(head)
            continue
        out.append(head + (f": {b.feedback}" if b.feedback else ""))
        if b.hint:
            out.append(f"              hint: {clean(b.hint)}")
    for line, msg in res.findings:
        out.append(f"  whole file, line {line}: {msg}")
    for line, msg in res.notes:
        out.append(f"  note{f', line {line}' if line else ''}: {msg}")
    return "\n".join(out) + "\n"


def result_json(res: SubmissionResult) -> dict:
    return {
        "file": res.path, "score": score_value(res.score), "max_score": score_value(res.max_score),
        "gradable": res.gradable, "error": res.error,
        "blanks": [{"name": b.label, "line": b.line, "points": score_value(b.points),
                    "max_points": score_value(b.max_points), "status": b.status, "feedback": b.feedback,
                    "hint": b.hint, "answer": b.answer} for b in res.blanks],
        "whole_file": [{"line": ln, "message": m} for ln, m in res.findings],
        "notes": [{"line": ln, "message": m} for ln, m in res.notes],
        "seconds": round(res.seconds, 4),
    }


def gradescope_json(res: SubmissionResult, title: str | None = None) -> dict:
    tests = []
    for b in res.blanks:
        output = b.feedback if b.status != "correct" else "right"
        if b.answer is not None:
            output = f"your answer: {quote(b.answer)}\n{output}"
        if b.hint:
            output += f"\nhint: {b.hint}"
        tests.append({"name": f"{b.label}" + (f" (line {b.line})" if b.line else ""),
                      "score": score_value(b.points), "max_score": score_value(b.max_points),
                      "status": "passed" if b.status == "correct" else "failed",
                      "output": output, "visibility": "visible"})
    tests.append({"name": "whole file checks with your answers", "score": 0, "max_score": 0,
                  "status": "failed" if res.findings else "passed",
                  "output": "\n".join(f"line {ln}: {m}" for ln, m in res.findings) or
                  "every step checks", "visibility": "visible"})
    summary = f"{score_value(res.score)}/{score_value(res.max_score)} points" + \
        (f" on {title}" if title else "")
    if res.error:
        summary += f"\n{res.error}"
    if res.notes:
        summary += "\n" + "\n".join(f"note{f' (line {ln})' if ln else ''}: {m}"
                                    for ln, m in res.notes)
    return {"score": score_value(res.score), "output": summary, "tests": tests,
            "visibility": "visible", "stdout_visibility": "hidden",
            "execution_time": round(res.seconds, 3)}


def prairielearn_json(res: SubmissionResult) -> dict:
    out = {
        "gradable": res.gradable,
        "score": round(res.score / res.max_score, 6) if res.max_score and res.gradable else 0.0,
        "message": res.error or f"{score_value(res.score)}/{score_value(res.max_score)} points",
        "output": text_report(res),
        "tests": [{"name": b.label, "description": b.hint or "",
                   "points": score_value(b.points), "max_points": score_value(b.max_points),
                   "message": b.feedback if b.status != "correct" else "right",
                   "output": f"your answer: {quote(b.answer)}" if b.answer is not None else ""}
                  for b in res.blanks],
    }
    if not res.gradable:
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


def submission_files(paths: list[str], exclude: set[str], pattern: str = "*.shape") -> list[str]:
    """The files given, and those matching `pattern` in the folders given (not hidden ones)."""
    out = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for f in sorted(path.rglob(pattern)):
                if f.is_file() and str(f.resolve()) not in exclude and \
                        not any(part.startswith(".") for part in f.relative_to(path).parts):
                    out.append(str(f))
        elif path.is_file():
            out.append(str(path))
        else:
            raise FileNotFoundError(p)
    return out


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

