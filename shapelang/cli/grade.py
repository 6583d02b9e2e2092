"""`shapelang exercise make` and `shapelang grade`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..teaching.exercise import ExerciseError, make
from ..teaching.grader import Grader
from ..teaching.results import (
    SubmissionResult,
    find_solution,
    gradescope_json,
    prairielearn_json,
    read_text,
    result_json,
    score_value,
    submission_files,
    text_report,
    write_output,
)


def command(args) -> int:
    if getattr(args, "command", None) == "exercise" or getattr(args, "exercise_command", None):
        return _make_cli(args)
    return _grade_cli(args)


def _make_cli(args) -> int:
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
    try:
        write_output(args.output, out)
    except OSError as err:
        print(f"shapelang: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return 2
    return 0


def _grade_cli(args) -> int:
    solution = args.solution or find_solution(args.exercise)
    if solution is None:
        print(f"shapelang: no solution found for {args.exercise} (looked for "
              "solutions/NAME.shape and NAME.solution.shape beside it); pass --solution",
              file=sys.stderr)
        return 2
    try:
        grader = Grader(read_text(args.exercise), read_text(solution), args.exercise, solution)
    except OSError as err:
        print(f"shapelang: cannot read {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
    except ExerciseError as err:
        print(f"shapelang: the exercise cannot be graded: {err}", file=sys.stderr)
        return 2
    for w in grader.warnings:
        print(f"shapelang: note: {w}", file=sys.stderr)
    exclude = {str(Path(args.exercise).resolve()), str(Path(solution).resolve())}
    try:
        files = submission_files(args.submissions, exclude)
    except FileNotFoundError as err:
        print(f"shapelang: no such file or folder: {err.args[0]}", file=sys.stderr)
        return 2
    fmt = args.format
    if fmt in ("gradescope", "prairielearn"):
        if not files:       # an upload without a .shape file: try what is there
            files = submission_files(args.submissions, exclude, "*")[:20]
        res = _one_submission(grader, files, args.exercise)
        results = [res]
        obj = gradescope_json(res, grader.options.title) if fmt == "gradescope" \
            else prairielearn_json(res)
        out = json.dumps(obj, indent=2) + "\n"
    else:
        if not files:
            print("shapelang: no .shape submissions found", file=sys.stderr)
            return 2
        results = [grader.grade_file(f) for f in files]
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
        print(f"shapelang: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return 2
    return 0 if all(r.full_marks for r in results) else 1


def _one_submission(grader: Grader, files: list[str], exercise_path: str) -> SubmissionResult:
    """Gradescope and PrairieLearn grade one submission: pick the file to grade."""
    if not files:
        return grader._reject("(no file)", "the submission contains no .shape file; upload "
                                           "the exercise file with your answers filled in")
    same = [f for f in files if Path(f).name == Path(exercise_path).name]
    if len(same) == 1:
        return grader.grade_file(same[0])
    if len(files) == 1:
        return grader.grade_file(files[0])
    best = max((grader.grade_file(f) for f in files), key=lambda r: (r.gradable, r.score))
    best.notes.append((None, ("the submission has several .shape files; graded the one that "
                              "scored best")))
    return best
