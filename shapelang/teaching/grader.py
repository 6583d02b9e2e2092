"""Grading: score each blank of an exercise submission against the reference.

Input: an exercise (a `.shape` file with blanks, see shapelang.teaching.exercise), its
reference solution, and submissions. Output: per blank a score and feedback in
the learner's terms, plus findings of the whole-file check, as text, JSON,
Gradescope results.json, PrairieLearn results or one number.

An answer is right when it is *equivalent* to the reference under the
exercise's assumptions, decided on the checked IR: the statement holding the
blank is re-checked with the learner's answer (all other blanks at their
reference answers) and its tensors must have the reference shapes and dtypes,
the same value-changing operations (softmax axis, scale factor, ...), and the
rest of the file must still check. So `D/H`, `Dh` and `D//H` are one answer,
and so are `transpose 1 2`, `transpose 2 1` and `transpose -3 -2`.

The stages, one module each: find the answers in a submission
(shapelang.teaching.exercise), re-check the exercise with them (shapelang.teaching.engines;
values at probe sizes from shapelang.teaching.probe), judge them (shapelang.teaching.judge, in
the words of shapelang.teaching.feedback), report (shapelang.teaching.results). This module
builds the reference once per exercise, runs the stages for each submission
under the wall-clock limit, and holds the `grade` and `exercise make` commands.

Submissions are untrusted: nothing is evaluated, answers only reach the
shapelang parser, and each grading runs under a wall-clock limit. Each
submission is graded in isolation: an error of the grader (or the time limit)
becomes that submission's result, marked `internal_error`, and never stops a
batch; links and special files are not read; notes are capped.
"""
from __future__ import annotations

import errno
import os
import signal
import stat
import threading
import time
from contextlib import contextmanager

from ..syntax.parser import MAX_BYTES, MAX_LINES, ParseFailure
from .answers import reread
from .engines import CACHE_LIMIT, FastEngine, FullEngine, Reference, filled_text
from .exercise import Answer, ExerciseError, extract, load_template
from .feedback import Feedback, with_help
from .judge import Judge, fill_answers
from .notebook import NotebookError, read_limit, submission_text
from .respell import respell
from .results import (
    GRADER_FAILED,
    MAX_NOTES,
    BlankResult,
    SubmissionResult,
    capped,
    clean,
    find_solution,
    gradescope_json,
    prairielearn_json,
    quote,
    result_json,
    text_report,
    visibility_options,
)
from .template import _squash, fill

__all__ = [
    "BlankResult",
    "ExerciseError",
    "Grader",
    "GradingTimeout",
    "SubmissionResult",
    "find_solution",
    "gradescope_json",
    "prairielearn_json",
    "result_json",
    "text_report",
]


MAX_SYNTAX_NOTES = 5          # lines named as not parsing
SYNTAX_NOTES_BYTES = 20_000   # longer submissions (and 4x the exercise) are not parsed whole
SYNTAX_NOTES_SECONDS = 0.3    # of the time limit, at most this for naming those lines


class GradingTimeout(BaseException):
    """Raised by the wall-clock guard (a BaseException, so no `except Exception` eats it)."""


def _error_name(err: BaseException) -> str:
    """What went wrong inside the grader, for the instructor: the kind, not the text
    (which can be long or repeat the submission)."""
    return f"internal {type(err).__name__}"


# ------------------------------------------------------------------ wall-clock guard

@contextmanager
def deadline(seconds: float | None):
    """Raise GradingTimeout in this thread after `seconds` (main thread, Unix only).
    Nests: inside another deadline, the inner one is at most the time the outer one has
    left, and the outer one runs on when the inner one ends."""
    usable = seconds and hasattr(signal, "setitimer") and \
        threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return
    armed = [True]

    def handler(signum, frame):
        if armed[0]:
            raise GradingTimeout()

    old = signal.signal(signal.SIGALRM, handler)
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    start = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, min(seconds, outer_left) if outer_left else seconds)
    try:
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL,
                             max(outer_left - (time.monotonic() - start), 0.001))


# ------------------------------------------------------------------ the grader

class Grader:
    """One exercise, ready to grade any number of submissions."""

    def __init__(self, exercise_text: str, solution_text: str, exercise_path: str = "exercise.shape",
                 solution_path: str = "solution.shape", engine: str | None = None,
                 time_limit: float | None = None):
        try:
            exercise_text, self.visibility = visibility_options(exercise_text)
        except ValueError as err:
            raise ExerciseError(f"{exercise_path}: {err}") from None
        self.tmpl = load_template(exercise_text, exercise_path)
        unknown = sorted(self.visibility.hidden - set(self.tmpl.blanks))
        if unknown:
            raise ExerciseError(f"{exercise_path}: `@hidden` names ?{unknown[0]}, which is not "
                                "a blank of the exercise")
        self.path = exercise_path
        self.options = self.tmpl.options
        self.time_limit = time_limit if time_limit is not None else self.options.time_limit
        self.warnings: list[str] = []
        ext = extract(self.tmpl, solution_text)
        self.ref_answers: dict[str, str | None] = {}
        for name, b in self.tmpl.blanks.items():
            a = ext.answers.get(name)
            if a is not None and a.status == "given":
                self.ref_answers[name] = a.text
            elif b.whole_shape:
                self.ref_answers[name] = None
            else:
                why = a.message if a is not None else "not found"
                raise ExerciseError(f"{solution_path}: no answer for `?{name}` (line {b.line} of "
                                    f"{exercise_path}): {why}")
        for line, msg in ext.notes:
            self.warnings.append(f"{solution_path}:{line}: {msg}")
        self.ref_fills = {}
        for st in self.tmpl.stmts:
            if st.holes:
                self.ref_fills[st.index] = fill_answers(self.tmpl, self.ref_answers, st, {})
        ref_text = filled_text(self.tmpl, self.ref_fills)
        from ..checker.checker import check_text
        ref_check = check_text(ref_text, solution_path)
        if not ref_check.ok:
            d = ref_check.errors()[0]
            raise ExerciseError(f"the exercise filled with the solution's answers does not check: "
                                f"line {d.span.line}: {d.message}")
        fast_ok = engine != "full" and not any(
            st.holes and (st.kind in ("dim", "assume", "example") or st.block is not None)
            for st in self.tmpl.stmts)
        self.engine, self.ref_run = None, None
        if fast_ok:
            # should statement-at-a-time checking fail, or disagree with the whole-file
            # check of the reference, fall back to whole files
            try:
                self.engine = FastEngine(self.tmpl, ref_text, exercise_path)
                self.ref_run = self.engine.run(self.ref_fills)
                if any(r.errors for r in self.ref_run.units):
                    self.engine = None
            except (AttributeError, TypeError, KeyError) as err:
                self.warnings.append(f"using whole-file grading ({type(err).__name__}: {err})")
                self.engine = None
        if self.engine is None:
            self.engine = FullEngine(self.tmpl, ref_text, exercise_path)
            self.ref_run = self.engine.run(self.ref_fills)
        self.ref_env = {}
        for u, r in zip(self.engine.units, self.ref_run.units):
            for n in u.names:
                self.ref_env[n] = r.defs.get(n)
        self.max_score = sum(b.points for b in self.tmpl.blanks.values())
        reference = Reference(self.tmpl, exercise_path, self.ref_answers, self.ref_fills,
                              self.engine, self.ref_run, self.ref_env)
        self.feedback = Feedback(reference, self.options.partial)
        self.judge = Judge(reference, self.feedback)
        self._judged = self.judge.judged          # the memos, for benchmarks to clear
        self._findings = self.judge.findings
        self._respelled: dict = {}                # (statement, its answers) -> rewrite

    # -- grading
    def grade_file(self, path: str) -> SubmissionResult:
        """Grade one file. A link or anything but a regular file is refused (opened with
        O_NOFOLLOW and O_NONBLOCK, so neither a link nor a FIFO is followed or waited on)."""
        link = "the submission is a link; links are not followed, submit the file itself"
        if os.path.islink(path):
            return self.refuse(path, link)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(path, flags)
        except OSError as err:
            return self.refuse(path, link if err.errno == errno.ELOOP else
                               f"cannot read the submission: {err.strerror}")
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return self.refuse(path, "the submission is not a regular file")
            with os.fdopen(fd, "rb", closefd=False) as fh:
                data = fh.read(read_limit(path, MAX_BYTES) + 1)
        except OSError as err:
            return self.refuse(path, f"cannot read the submission: {err.strerror}")
        finally:
            os.close(fd)
        return self.grade_bytes(data, path)

    def grade_bytes(self, data: bytes, path: str = "<submission>") -> SubmissionResult:
        if str(path).endswith(".ipynb"):       # a notebook: its %%shapelang cells are the text
            try:
                return self.grade_text(submission_text(data), path)
            except NotebookError as err:
                return self.refuse(path, str(err))
        if len(data) > MAX_BYTES:
            return self.refuse(path, f"the submission is larger than {MAX_BYTES // 1024} KB; "
                                     "submit the exercise file with your answers filled in")
        if b"\x00" in data:
            return self.refuse(path, "the submission is not a text file")
        return self.grade_text(data.decode("utf-8-sig", errors="replace"), path)

    def refuse(self, path: str, message: str) -> SubmissionResult:
        """A result of 0 points that says why the submission was not graded."""
        res = SubmissionResult(path, 0.0, self.max_score, gradable=False, error=clean(message))
        for b in self.tmpl.blanks.values():
            res.blanks.append(BlankResult(b.name, 0.0, b.points, "not graded", res.error, None,
                                          b.line))
        return res

    def failed(self, path: str, err: BaseException) -> SubmissionResult:
        """The result of a submission on which the grader itself failed."""
        res = self.refuse(path, f"{GRADER_FAILED} ({_error_name(err)})")
        res.internal_error = True
        return res

    def grade_text(self, text: str, path: str = "<submission>") -> SubmissionResult:
        """Grade a submission's text. Never raises: an error of the grader becomes this
        submission's result, marked `internal_error`, and the grader stays usable."""
        try:
            return self._grade_text(text, path)
        except Exception as err:  # noqa: BLE001 - one submission must not stop a batch
            self.engine.reset()
            return self.failed(path, err)

    def _grade_text(self, text: str, path: str) -> SubmissionResult:
        start = time.perf_counter()
        text = text.removeprefix("\ufeff")
        if len(text.encode("utf-8", "replace")) > MAX_BYTES:
            return self.refuse(path, f"the submission is larger than {MAX_BYTES // 1024} KB; "
                                     "submit the exercise file with your answers filled in")
        if sum(1 for ln in text.splitlines() if ln.strip()) > MAX_LINES:
            return self.refuse(path, f"the submission has more than {MAX_LINES} lines")
        res = SubmissionResult(path, 0.0, self.max_score)
        done: dict[str, BlankResult] = {}
        try:
            with deadline(self.time_limit):
                self._grade(text, res, done)
        except GradingTimeout:
            self.engine.reset()
            res.internal_error = True
            res.error = (f"grading stopped after {self.time_limit:g} s, the time limit for one "
                         "submission; the blanks graded until then keep their scores. "
                         f"{GRADER_FAILED}")
        except RecursionError as err:
            self.engine.reset()
            res.internal_error = True
            res.error = f"{GRADER_FAILED} ({_error_name(err)})"
        for b in self.tmpl.blanks.values():
            if b.name not in done:
                done[b.name] = BlankResult(b.name, 0.0, b.points, "not graded",
                                           res.error or "not graded", b.hint, b.line)
        res.blanks = [done[n] for n in self.tmpl.blanks]
        res.score = sum(r.points for r in res.blanks)
        if not any(r.status not in ("missing", "not graded") for r in res.blanks) and \
                res.error is None:
            res.gradable = False
            res.error = "no line of the submission matches a line of the exercise that has a " \
                        "blank; submit the exercise file with the blanks filled in"
        res.notes = capped(res.notes)
        res.findings = capped(res.findings, "findings")
        res.seconds = time.perf_counter() - start
        return res

    def _grade(self, text: str, res: SubmissionResult, done: dict) -> None:
        ext = extract(self.tmpl, text)
        res.notes.extend((ln, clean(m)) for ln, m in ext.notes[:MAX_NOTES + 1])
        hidden_notes = max(0, len(ext.notes) - MAX_NOTES - 1)
        answers: dict[str, Answer] = ext.answers
        written = {n: a.text for n, a in answers.items() if a.status == "given"}
        respelled = self._respell(written)     # graded as shapelang writes them
        respelled.update({n: (a.text, a.respelled) for n, a in answers.items()
                          if a.status == "given" and a.respelled is not None})
        given = {**written, **{n: r[0] for n, r in respelled.items()}}
        wrong_units: set[int] = set()
        unparsed = False
        for st in self.tmpl.stmts:
            blanks = [b for b in self.tmpl.blanks.values() if b.stmt == st.index]
            if not blanks:
                continue
            for b in blanks:
                a = answers.get(b.name) or Answer(None, "missing", None,
                                                  "the line with this blank is missing")
                if a.status != "given":
                    status = "unfilled" if a.status in ("unfilled", "empty") else \
                        "wrong" if a.status == "too long" else "missing"
                    done[b.name] = BlankResult(b.name, 0.0, b.points, status, a.message or status,
                                               b.hint, a.line or b.line)
            here = [b for b in blanks if b.name in given]
            if not here:
                wrong_units.add(self.engine.unit_of_stmt[st.index])
                continue
            verdicts, failed = self._verdicts(st, here, given)
            for b in here:
                if b.name in failed:
                    done[b.name] = BlankResult(
                        b.name, 0.0, b.points, "not graded",
                        f"{GRADER_FAILED} ({_error_name(failed[b.name])}); only this answer "
                        "is affected, the others are graded", None, answers[b.name].line,
                        clean(given[b.name], 200))
            if failed:
                res.internal_error = True       # told to the instructor; the rest is graded
                wrong_units.add(self.engine.unit_of_stmt[st.index])
            for b in here:
                if b.name in failed:
                    continue
                v = verdicts[b.name]
                unparsed = unparsed or v.unparsed
                status = "correct" if v.fraction >= 1 else ("partial" if v.fraction > 0 else "wrong")
                msg = v.message
                if b.name in respelled:
                    msg = self._spelling_note(written[b.name], *respelled[b.name], msg)
                if status != "correct" and self.options.reveal:
                    msg += f" The expected answer: {self._reference_text(b)}."
                done[b.name] = BlankResult(b.name, b.points * v.fraction, b.points, status,
                                           clean(msg) if msg else ("right" if status == "correct"
                                                                   else ""),
                                           b.hint if status != "correct" else None,
                                           answers[b.name].line, clean(written[b.name], 200))
                if status != "correct":
                    wrong_units.add(self.engine.unit_of_stmt[st.index])
        try:
            res.findings.extend(self.judge.whole_file(given, wrong_units, done))
        except Exception as err:  # noqa: BLE001 - the blanks keep their verdicts
            self.engine.reset()
            res.internal_error = True
            res.findings.append((None, (f"the whole file could not be checked: "
                                        f"{GRADER_FAILED} ({_error_name(err)})")))
        if ext.notes or unparsed:    # say which lines do not parse, within a budget
            try:
                with deadline(SYNTAX_NOTES_SECONDS):
                    res.notes[:0] = self._syntax_notes(text)
            except GradingTimeout:   # every blank is graded: only this list is cut short
                res.notes.insert(0, (None, ("the lines that do not parse are not listed: "
                                            "looking for them took too long")))
        if hidden_notes:
            res.notes.append((None, f"and {hidden_notes} more notes"))

    def _verdicts(self, st, here: list, given: dict) -> tuple[dict, dict]:
        """The judge's verdicts for the blanks `here` of one statement, and the blanks on
        which the judge itself failed (name -> the error). A failure judging the answers
        together is retried one blank at a time, each other blank at its reference answer,
        so that one answer the grader cannot judge never costs another its points."""
        try:
            return self.judge.statement(st, {b.name: given[b.name] for b in here}), {}
        except Exception as err:  # noqa: BLE001 - the other blanks are still graded
            self.engine.reset()
            if len(here) == 1:
                return {}, {here[0].name: err}
        verdicts, failed = {}, {}
        for b in here:
            try:
                verdicts.update(self.judge.statement(st, {b.name: given[b.name]}))
            except Exception as err:  # noqa: BLE001 - this blank alone
                self.engine.reset()
                failed[b.name] = err
        return verdicts, failed

    def _respell(self, written: dict) -> dict:
        """Answers shapelang spells differently (`transpose 1, 2`, `softmax(dim=-1)`,
        `linear 2*D + 2*D`, `D*H**-1`): blank name -> (the answer in shapelang, how it
        was rewritten). The statement is rewritten whole and its answers read again."""
        out = {}
        for st in self.tmpl.stmts:
            here = {b.hole: b.name for b in self.tmpl.blanks.values() if b.stmt == st.index}
            if not any(n in written for n in here.values()):
                continue
            repl = {}
            for k, n in here.items():
                text = written.get(n, self.ref_answers.get(n))
                if text is None:
                    break
                repl[k] = text
            else:
                key = (st.index, tuple(sorted(repl.items())))
                hit = self._respelled.get(key)
                if hit is None:
                    r = respell(fill(st, repl))
                    new = reread(self.tmpl, st, r.code) if r is not None else None
                    hit = (r, new or {})
                    if len(self._respelled) > CACHE_LIMIT:
                        self._respelled.clear()
                    self._respelled[key] = hit
                r, new = hit
                for n, text in new.items():
                    if n in written and _squash(text) != _squash(written[n]):
                        out[n] = (text, r)
        return out

    @staticmethod
    def _spelling_note(old: str, new: str, r, message: str) -> str:
        said, shown = (r.said, r.shapelang) if r.said else (old, new)
        note = f"`{said}` is not shapelang: write it as `{shown}` ({r.why})"
        return f"right, but {note}" if not message else \
            f"{message} (your answer was read as `{new}`; {note})"

    def _syntax_notes(self, text: str) -> list:
        """Where the submission as a whole does not parse (its other lines were graded).
        Bounded: a submission much longer than the exercise is not parsed as a whole."""
        from ..syntax.parser import parse_recovering
        text = text.rstrip()
        if len(text) > max(SYNTAX_NOTES_BYTES, 4 * len(self.tmpl.text)) or \
                text.count("\n") >= MAX_LINES:
            return []
        try:
            errors = parse_recovering(text, "submission")[1]
        except ParseFailure as failure:
            errors = [failure.diagnostic]
        return [(d.span.line, clean(f"this line does not parse: {with_help(d)}"))
                for d in errors[:MAX_SYNTAX_NOTES]]

    def _reference_text(self, b) -> str:
        if self.ref_answers.get(b.name):
            return quote(self.ref_answers[b.name])
        st = self.tmpl.stmts[b.stmt]
        t = self.ref_env.get(st.names[0]) if st.names else None
        return f"`{self.feedback.show(t.shape)}`" if t is not None else "(not available)"


# ------------------------------------------------------------------ the command line
