"""`shapelang exercise make` and `shapelang grade`.

Exit codes of `grade`: 0 every submission got full marks; 1 a submission lost
points or was refused; 2 a usage or I/O problem, or an exercise that cannot be
graded; 3 the grader failed on some submission (that submission's result says
so, and every other submission was graded).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .. import api

if TYPE_CHECKING:
    from ..api import SubmissionResult

# Gradescope's visibility values; the parser needs them before anything heavy is imported
# (a test keeps them equal to shapelang.teaching.results.VISIBILITIES)
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")

EXIT_CODES = """\
exit status:
  0  every submission got full marks
  1  a submission lost points or was refused (several .shape files, a link, ...)
  2  usage or I/O problem, or an exercise that cannot be graded
  3  the grader failed on some submission (its result says so; the others were graded)
"""


def add_parser(sub) -> None:
    """The `grade` command's arguments (on the subparsers of `shapelang`)."""
    c = sub.add_parser("grade", help="grade submissions of an exercise", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Grade submissions of an exercise. With --format gradescope "
                       "or prairielearn, the paths given are one learner's upload: it must hold "
                       "exactly one .shape file (or the file named by --file); links are never "
                       "followed.")
    c.add_argument("exercise", metavar="EXERCISE.shape")
    c.add_argument("submissions", nargs="+", metavar="SUBMISSION",
                   help="submission files or folders of them")
    c.add_argument("--solution", metavar="SOLUTION.shape",
                   help="the reference solution (default: beside the exercise)")
    c.add_argument("--format", choices=["text", "json", "gradescope", "prairielearn", "score"],
                   default="text")
    c.add_argument("-o", "--output", metavar="FILE", help="write the result here")
    c.add_argument("--file", metavar="NAME",
                   help="grade only the file with this name (or path inside the upload); "
                        "without it, an upload with several .shape files is refused")
    c.add_argument("--time-limit", metavar="SECONDS", type=float,
                   help="seconds of grading per submission (default: the exercise's "
                        "`@time limit`, else 10)")
    c.add_argument("--visibility", choices=VISIBILITIES,
                   help="gradescope: when learners see the results (default: the exercise's "
                        "`# @visibility`, else visible)")
    c.add_argument("--hidden", metavar="BLANK", action="append", default=[],
                   help="gradescope: a blank whose test is hidden (repeat, or separate "
                        "names by commas or spaces; default: the exercise's `# @hidden`)")
    c.add_argument("--hidden-visibility", choices=VISIBILITIES,
                   help="gradescope: when learners see hidden tests (default: the exercise's "
                        "`# @hidden visibility`, else after_due_date)")


def command(args) -> int:
    if getattr(args, "command", None) == "exercise" or getattr(args, "exercise_command", None):
        return _make_cli(args)
    return _grade_cli(args)


def _make_cli(args) -> int:
    ExerciseError, make = api.ExerciseError, api.make_exercise
    read_text, write_output = api.read_text, api.write_output

    try:
        text = read_text(args.file)
    except OSError as err:
        print(f"shapelang: cannot read {args.file}: {err.strerror}", file=sys.stderr)
        return 2
    if args.output and Path(args.output).exists():
        if Path(args.output).resolve() == Path(args.file).resolve():
            print("shapelang: the output would overwrite the solution", file=sys.stderr)
            return 2
        if not args.force:
            print(f"shapelang: {args.output} exists; use --force to overwrite it", file=sys.stderr)
            return 2
    try:
        out, warnings = make(text, args.file, all_shapes=args.all_shapes)
    except ExerciseError as err:
        print(f"shapelang: {err}", file=sys.stderr)
        return 1
    for w in warnings:
        print(f"shapelang: note: {w}", file=sys.stderr)
    if getattr(args, "notebook", False):
        out = api.notebook_json(out)
    try:
        write_output(args.output, out)
    except OSError as err:
        print(f"shapelang: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return 2
    return 0


def _usage(message: str) -> int:
    print(f"shapelang: {message}", file=sys.stderr)
    return 2


def _grade_cli(args) -> int:
    ExerciseError, Grader, Visibility, MAX_ENTRIES = api.ExerciseError, api.Grader, api.Visibility, api.MAX_ENTRIES
    find_solution, read_text, write_output, scan = api.find_solution, api.read_text, api.write_output, api.scan_upload
    gradescope_json, prairielearn_json, result_json = api.gradescope_json, api.prairielearn_json, api.result_json
    score_value, text_report = api.score_value, api.text_report

    solution = args.solution or find_solution(args.exercise)
    if solution is None:
        return _usage(f"no solution found for {args.exercise} (looked for solutions/NAME.shape "
                      "and NAME.solution.shape beside it); pass --solution")
    if args.time_limit is not None and not 0 < args.time_limit <= 3600:
        return _usage("--time-limit must be a number of seconds between 0 and 3600")
    try:
        grader = Grader(read_text(args.exercise), read_text(solution), args.exercise, solution,
                        time_limit=args.time_limit)
    except OSError as err:
        return _usage(f"cannot read {err.filename}: {err.strerror}")
    except ExerciseError as err:
        return _usage(f"the exercise cannot be graded: {err}")
    hidden = {n.lstrip("?") for arg in args.hidden for n in arg.replace(",", " ").split()}
    unknown = sorted(hidden - set(grader.tmpl.blanks))
    if unknown:
        return _usage(f"--hidden: the exercise has no blank ?{unknown[0]}; its blanks are "
                      + ", ".join(f"?{n}" for n in grader.tmpl.blanks))
    ex_vis = grader.visibility          # the exercise's `# @visibility` lines, if any
    visibility = Visibility(args.visibility or ex_vis.results,
                            frozenset(hidden) if args.hidden else ex_vis.hidden,
                            args.hidden_visibility or ex_vis.hidden_tests)
    for w in grader.warnings:
        print(f"shapelang: note: {w}", file=sys.stderr)
    ex = Path(args.exercise).resolve()
    exclude = {str(ex), str(Path(solution).resolve()), str(ex.parent / "solutions")}
    match = (lambda rel: rel.endswith((".shape", ".ipynb"))) if args.file is None else \
        (lambda rel: rel == args.file or os.path.basename(rel) == args.file)
    try:
        found = scan(args.submissions, exclude, match)
    except FileNotFoundError as err:
        return _usage(f"no such file or folder: {err.args[0]}")
    except OverflowError as err:
        if args.format not in ("gradescope", "prairielearn"):
            return _usage(f"{err.args[0]} holds too many files to look through")
        found = None        # one learner's upload: that learner's result
    except OSError as err:
        return _usage(f"cannot read {err.filename}: {err.strerror}")
    fmt = args.format
    skipped = _skipped(args.submissions, ex, Path(solution).resolve())
    if skipped and found is not None and not found.files and not found.refused and \
            not found.others:
        if fmt not in ("gradescope", "prairielearn"):
            return _usage(skipped)
        found = None
    if fmt in ("gradescope", "prairielearn"):
        results = [_one_submission(grader, found, args.file) if found is not None else
                   grader.refuse("(upload)", skipped or f"the upload holds more than "
                                             f"{MAX_ENTRIES} files; upload only the exercise file")]
        obj = gradescope_json(results[0], grader.options.title, visibility) \
            if fmt == "gradescope" else prairielearn_json(results[0])
        out = json.dumps(obj, indent=2) + "\n"
    else:
        if not found.files and not found.refused:
            what = f"files named {args.file}" if args.file else ".shape submissions"
            return _usage(f"no {what} found")
        graded = {f: grader.grade_file(f) for f in found.files}
        graded.update((p, grader.refuse(p, why)) for p, why in found.refused)
        results = [graded[p] for p in sorted(graded)]
        if fmt == "json":
            out = json.dumps({"exercise": args.exercise, "title": grader.options.title,
                              "max_score": score_value(grader.max_score),
                              "submissions": [result_json(r) for r in results]}, indent=2) + "\n"
        elif fmt == "score":
            if len(results) == 1:
                out = f"{score_value(results[0].score)}\n"
            else:
                out = "".join(f"{score_value(r.score)}\t{r.path}\n" for r in results)
        else:
            out = "\n".join(text_report(r) for r in results)
    try:
        write_output(args.output, out)
    except OSError as err:
        return _usage(f"cannot write {args.output}: {err.strerror}")
    failed = [r for r in results if r.internal_error]
    for r in failed:
        print(f"shapelang: the grader failed on {r.path}; its result says so", file=sys.stderr)
    if failed:
        return 3
    return 0 if all(r.full_marks for r in results) else 1


def _skipped(paths: list, exercise: Path, solution: Path) -> str | None:
    """Why a submission named on the command line is not graded: it is the exercise or its
    reference solution (or the solutions folder), which are never graded as submissions."""
    for p in paths:
        where = Path(p).resolve()
        if where == solution:
            return (f"{p} is the exercise's reference solution, which is not graded as a "
                    "submission; grade a copy of it to try the grader")
        if where == exercise:
            return f"{p} is the exercise itself, which is not graded as a submission"
        if where == exercise.parent / "solutions":
            return (f"{p} is the exercise's solutions folder, which is not graded as "
                    "submissions")
    return None


def _kinds(paths: list) -> str:
    """What the files are: `.shape files`, `notebooks`, or both."""
    nb = sum(str(p).endswith(".ipynb") for p in paths)
    return "notebooks" if nb == len(paths) else ".shape files" if nb == 0 else \
        "exercise files (.shape files and notebooks)"


def _names(paths: list) -> str:
    shown = ", ".join(f"`{Path(p).name}`" for p in paths[:5])
    return shown + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def _one_submission(grader, found, name: str | None) -> SubmissionResult:
    """Gradescope and PrairieLearn grade one upload: exactly one file of it, never the
    best of several, and nothing in an upload that holds a link."""
    links = found.refused + found.stray
    if links:
        path, why = links[0]
        return grader.refuse(path, f"the upload contains {_names([p for p, _ in links])}: {why}")
    if name is not None:
        if len(found.files) == 1:
            return grader.grade_file(found.files[0])
        if not found.files:
            return grader.refuse("(no file)", f"the upload has no file named `{name}`; your "
                                              "instructor asks for that name")
        return grader.refuse("(several files)", f"the upload has several files named "
                                                f"`{name}`: {_names(found.files)}")
    if len(found.files) == 1:
        return grader.grade_file(found.files[0])
    if len(found.files) > 1:
        return grader.refuse("(several files)", (
            f"the upload has {len(found.files)} {_kinds(found.files)} ({_names(found.files)}); "
            "only one "
            "is graded, so upload only the exercise file with your answers filled in"))
    if len(found.others) == 1:      # one file under another name: that is the answer
        return grader.grade_file(found.others[0])
    return grader.refuse("(no file)", "the submission contains no .shape file or notebook; "
                                      "upload the exercise file with your answers filled in")
