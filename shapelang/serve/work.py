"""What the page asks for, computed in the worker process: a check and, for an exercise, a grade.

Each answer is plain JSON-ready data. A check reads the posted bytes exactly as `shapelang
check` reads a file (UTF-8 with replacement characters, universal newlines) and answers with
the text `shapelang check` prints, every diagnostic as data with its rendered block, and the
trace picture of shapelang.render.html. A grade goes through the same `Grader.grade_bytes` as
`shapelang grade` and answers with its text report and its JSON result. Nothing here runs the
text it is given: it only reaches the parser, the checker and the grader.
"""
from __future__ import annotations

import hashlib
import io
import json
import os

from .. import api
from ..api import CheckSession, render_check

SAMPLE = """\
# The playground: edit the spec; its diagnostics and its picture follow as you type.
dim B, S, D, H
dim Dh = D / H
assume D % H == 0
example B=1, S=4, D=512, H=8

input X: [B, S, D]
Q: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2
K: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2
V: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2
Kt: K -> transpose -2 -1
weights: Q @ Kt -> scale 1/sqrt(Dh) -> softmax -1
heads: weights @ V
out: heads -> transpose 1 2 -> reshape [B, S, D] -> linear D
"""


class SetupError(Exception):
    """The file or exercise cannot be served; the message says why (for the command line)."""


def read_as_file(data: bytes) -> str:
    """Bytes as `open(path, encoding="utf-8", errors="replace").read()` gives them."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace").read()


def _read(path: str) -> bytes:
    try:
        if os.path.getsize(path) > api.LIMITS.MAX_BYTES:
            raise SetupError(f"{path} is larger than {api.LIMITS.MAX_BYTES // 1024} KB, the limit of "
                             "`shapelang check`")
        with open(path, "rb") as fh:
            return fh.read(api.LIMITS.MAX_BYTES + 1)
    except OSError as err:
        raise SetupError(f"cannot read {path}: {err.strerror}") from None


class Work:
    """One session's file or exercise, and the answers to the page's requests."""

    def __init__(self, path: str | None = None, exercise: str | None = None,
                 solution: str | None = None):
        self.grader = None
        self.spec = None        # the last check's result, which the picture and blocks are drawn from
        self.version = 0
        self.page = None
        self.parts: list[dict] = []
        self.title = None
        self.session = None   # the page's text between keystrokes: an edit re-parses what changed
        if exercise is not None:
            self._exercise(exercise, solution)
        else:
            self.path = path or "playground.shape"
            self.text = read_as_file(_read(path)) if path else SAMPLE

    def _exercise(self, exercise: str, solution: str | None) -> None:
        ExerciseError, Grader = api.ExerciseError, api.Grader
        describe_part, parts_of, find_solution = api.describe_part, api.notebook_parts, api.find_solution

        self.path = exercise
        self.text = read_as_file(_read(exercise))
        solution = solution or find_solution(exercise)
        if solution is None:
            raise SetupError(f"no solution found for {exercise} (looked for solutions/NAME.shape "
                             "and NAME.solution.shape beside it); pass --solution")
        try:
            self.grader = Grader(self.text, read_as_file(_read(solution)), exercise, solution)
        except ExerciseError as err:
            raise SetupError(f"the exercise cannot be graded: {err}") from None
        self.title = self.grader.options.title
        blanks = self.grader.tmpl.blanks
        first = 1
        for part in parts_of(self.text):
            names, prose, hints = describe_part(part)
            self.parts.append({
                "text": part, "first_line": first, "prose": prose,
                "blanks": [{"name": n, "points": blanks[n[1:]].points if n[1:] in blanks else None}
                           for n in names],
                "hints": [{"name": f"?{n}", "text": t} for n, t in hints]})
            first += part.count("\n") + 2      # parts join with one blank line

    def info(self) -> dict:
        """What the page starts from (for an exercise: its own text, never the solution's)."""
        out = {"mode": "exercise" if self.grader else "spec", "path": self.path,
               "operations": api.operation_names(),
               "title": self.title or f"shapelang: {os.path.basename(self.path)}",
               "limits": {"max_bytes": api.LIMITS.MAX_BYTES, "max_lines": api.LIMITS.MAX_LINES,
                          "max_line_chars": api.LIMITS.MAX_LINE_CHARS}}
        if self.grader:
            out["parts"] = self.parts
            out["max_score"] = api.score_value(self.grader.max_score)
            out["time_limit"] = self.grader.time_limit
        else:
            out["text"] = self.text
        return out

    def time_limit(self, kind: str) -> float | None:
        return self.grader.time_limit if kind == "grade" and self.grader else None

    def answer(self, kind: str, data: bytes) -> dict:
        if kind == "check":
            return self.check(data)
        if kind == "picture":
            return self.picture(data)
        if kind == "block":
            return self.block(data)
        if kind == "grade" and self.grader is not None:
            return self.grade(data)
        raise ValueError(f"unknown request {kind!r}")

    def check(self, data: bytes) -> dict:
        text = read_as_file(data)
        if self.session is None:
            self.session = CheckSession(self.path)
        spec = self.session.check(text)
        self.spec, self.page = spec, None
        self.version += 1
        return {"ok": spec.ok, "text": render_check(spec), "version": self.version,
                # an explanation's examples may be a blank's answer: an exercise gets the meaning only
                "explanations": {d.code: api.explain(d.code, examples=not api.is_exercise(text))
                                 for d in spec.diagnostics},
                "errors": len(spec.errors()), "warnings": len(spec.diagnostics) - len(spec.errors()),
                "diagnostics": [dict(api.diagnostic_json(d), rendered=api.diagnostic_text(d, spec.path, spec.source))
                                for d in spec.diagnostics],
                "bindings": [", ".join(b.names) for b in spec.bindings]}

    def _asked(self, data: bytes) -> dict | None:
        """A picture or block request: JSON naming the check it belongs to; None when that
        check is not the last one (the page asks again after the newer check)."""
        try:
            req = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ValueError("the request is not JSON") from None
        if not isinstance(req, dict) or req.get("version") != self.version or self.spec is None:
            return None
        return req

    def picture(self, data: bytes) -> dict:
        """The trace picture of the last check, sent after its diagnostics. Each top-level piece
        comes with a key (a hash of its HTML); a piece the page says it holds (`have`) comes as
        its key alone, so an answer carries only what changed. Blocks are drawn when opened."""
        req = self._asked(data)
        if req is None:
            return {"stale": True}
        have = {k for k in req.get("have", ()) if isinstance(k, str)}
        self.page, head, items = api.trace_live(self.spec, f"trace of {os.path.basename(self.path)}")
        pieces = [("style", f"<style>{api.PICTURE_CSS}</style>"), ("head", head)] + [(None, h) for h in items]
        out = []
        for name, html in pieces:
            key = (name or "item") + ":" + hashlib.sha1(html.encode("utf-8")).hexdigest()[:16]
            out.append([key, None if key in have else html])
        return {"version": self.version, "pieces": out}

    def block(self, data: bytes) -> dict:
        """One block of the last picture, drawn now that the page opened it."""
        req = self._asked(data)
        if req is None or self.page is None:
            return {"stale": True}
        k = req.get("block")
        if not isinstance(k, int) or not 0 <= k < len(self.page.deferred):
            raise ValueError("no such block in the picture")
        return {"version": self.version, "block": k, "html": self.page.block_body(self.page.deferred[k])}

    def grade(self, data: bytes) -> dict:
        result_json, text_report = api.result_json, api.text_report
        res = self.grader.grade_bytes(data, self.path)
        return {"score": api.score_value(res.score), "max_score": api.score_value(res.max_score),
                "full_marks": res.full_marks, "report": text_report(res), "result": result_json(res)}
