"""Command line: argument parsing and exit codes, nothing else.

Exit codes: 0 clean, 1 findings, 2 usage or I/O error (and for `grade`, 3: the
grader failed on some submission). Each command's work
lives in its stage module; heavy imports (sympy, torch) happen only inside the
command that needs them, so `shapelang --help` starts fast.
"""
from __future__ import annotations

import argparse
import sys

from .. import api

DESCRIPTIONS = {
    "check": """\
Prove every step of each spec for all sizes that satisfy its `assume` lines, and
print each independent error: where (a caret under the failing piece, labels
under the lines that caused it), why (the sizes, a counterexample) and a fix
that has been re-checked before it is shown. A mistake gives one error:
lines that depend on it stay silent. docs/messages.md explains how to read them;
`shapelang explain CODE` explains a code.

Exit status: 0 clean (warnings allowed), 1 errors (or warnings with --strict),
2 usage or I/O error.

example:  shapelang check attention.shape""",
    "trace": """\
Print the step-by-step shape table of a spec: every binding's operations with
the shape in and out, symbolic and at the `example` sizes, and the learned
parameters and multiply-add FLOPs of each step; blocks get a table of their own,
and the totals close it. Errors are reported after the table as `check` does.

Exit status: 0 clean (warnings allowed), 1 errors (or warnings with --strict),
2 usage or I/O error.

example:  shapelang trace specs/mha_self_attention.shape""",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shapelang",
                                description="prove tensor shapes in transformer pipelines")
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_text in (("check", "prove every step of a spec"),
                            ("trace", "print the step-by-step shape table")):
        c = sub.add_parser(name, help=help_text, description=DESCRIPTIONS[name],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        c.add_argument("files", nargs="+", metavar="FILE", help="a .shape spec")
        c.add_argument("--format", choices=api.formats(name), default="text", help=api.formats_help(name))
        c.add_argument("--strict", action="store_true", help="warnings fail too (exit 1)")
        c.add_argument("--color", "--colour", choices=["auto", "always", "never"], default="auto",
                       help="colour the text output (auto: on a terminal, unless NO_COLOR is set)")
        if name == "trace":
            c.add_argument("--provenance", action="store_true",
                           help="add a column: where the elements of each axis come from")
            c.add_argument("--example-only", action="store_true",
                           help="a compact table: one column of shapes, at the example sizes")
            c.add_argument("--width", type=int, metavar="N",
                           help="fit the table in N characters (0: no limit; default: COLUMNS, "
                           "else the terminal's width, else 100)")
            c.add_argument("-o", "--output", metavar="OUT",
                           help="write here instead of stdout (one FILE only)")

    c = sub.add_parser("fmt", help="lay out specs canonically (in place)",
                       description="lay out specs canonically, in place; exit 0 done or nothing to "
                       "do, 1 a file would change (--check/--diff) or does not parse, 2 I/O error")
    c.add_argument("files", nargs="+", metavar="FILE", help="a .shape file or a folder of them")
    c.add_argument("--check", action="store_true",
                   help="change nothing; list the files that would change (exit 1 if any)")
    c.add_argument("--diff", action="store_true",
                   help="change nothing; print the changes as a unified diff (exit 1 if any)")

    c = sub.add_parser("codegen", help="emit a PyTorch module for a checked spec")
    c.add_argument("file", metavar="FILE")
    c.add_argument("-o", "--output", metavar="OUT.py", help="write here instead of stdout")
    c.add_argument("--force", action="store_true", help="overwrite an existing output file")
    c.add_argument("--names", choices=["dotted", "flat"], default="dotted",
                   help="`__` in a spec name is a level of the state-dict key (dotted, the default) or not")
    c.add_argument("--attention", choices=["sdpa", "explicit"], default="sdpa",
                   help="recognised attention as F.scaled_dot_product_attention (default) or written out")

    c = sub.add_parser("run", help="generate, run at example sizes and compare every shape (needs torch)")
    c.add_argument("file", metavar="FILE")
    c.add_argument("--sizes", metavar="B=2,S=7", help="run at these sizes instead of the example")
    c.add_argument("--format", choices=["text", "json"], default="text")

    c = sub.add_parser("exercise", help="exercises for teaching")
    esub = c.add_subparsers(dest="exercise_command", required=True)
    m = esub.add_parser("make", help="make the student version of a solution spec")
    m.add_argument("file", metavar="SOLUTION.shape")
    m.add_argument("-o", "--output", metavar="EXERCISE.shape")
    m.add_argument("--all-shapes", action="store_true",
                   help="ask for the shape after every step")
    m.add_argument("--force", action="store_true")
    m.add_argument("--notebook", action="store_true",
                   help="write a Jupyter notebook (one %%%%shapelang cell per part) instead of a .shape file")

    sub.add_parser("lsp", help="run the language server over stdio (needs the `lsp` extra)",
                   description="a language server over stdio for editors: diagnostics as you type, "
                   "hover, definitions, references, completion and quick fixes")

    from .grade import add_parser as add_grade_parser
    add_grade_parser(sub)
    from .explain import add_parser as add_explain_parser
    add_explain_parser(sub)
    from .serve import add_parser as add_serve_parser
    add_serve_parser(sub)
    from .importer import add_parser as add_import_parser
    add_import_parser(sub)
    return p


def _width(args) -> int:
    """--width, else COLUMNS, else the terminal's width (printing to one), else 100."""
    import os
    import shutil

    if args.width is not None:
        return max(args.width, 0)
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not args.output and sys.stdout.isatty():
        return shutil.get_terminal_size((100, 24)).columns or 100
    return 100


def _check(args) -> int:
    from .common import fails, read_spec

    if api.format_info(args.format).per_run:
        from .ci import ci_command
        return ci_command(args)
    options = api.RenderOptions(provenance=getattr(args, "provenance", False),
                                width=_width(args) if args.command == "trace" else 0,
                                example_only=getattr(args, "example_only", False))
    output = getattr(args, "output", None)
    if output and len(args.files) != 1:
        print("shapelang: -o takes one FILE", file=sys.stderr)
        return 2
    status = 0
    written = []
    for path in args.files:
        spec = read_spec(path)
        if spec is None:
            return 2
        if fails(spec, args.strict):
            status = 1
        written.append(api.render(spec, args.format, args.command, options))
        if not output:
            _write(written.pop(), sys.stdout, args)
    if output:
        try:
            with open(output, "w", encoding="utf-8") as fh:
                _write(written[0], fh, args)
        except OSError as err:
            print(f"shapelang: cannot write {output}: {err.strerror}", file=sys.stderr)
            return 2
    return status


def _write(out, stream, args) -> None:
    """Text as it is; the lines of `check` and `trace` text in colour where wanted."""
    if isinstance(out, str):
        stream.write(out)
        return
    api.write_lines(out, stream, args.color if api.format_info(args.format).coloured else "never")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("check", "trace"):
        return _check(args)
    if args.command == "fmt":
        from .fmt import fmt_command
        return fmt_command(args)
    if args.command == "codegen":
        from .codegen import codegen_command
        return codegen_command(args)
    if args.command == "run":
        from .codegen import run_command
        return run_command(args)
    if args.command == "lsp":
        return _lsp()
    if args.command == "serve":
        from .serve import command as serve_command
        return serve_command(args)
    if args.command == "import":
        from .importer import command as import_command
        return import_command(args)
    if args.command == "explain":
        from .explain import command as explain_command
        return explain_command(args)
    from .grade import command
    return command(args)


def _lsp() -> int:
    try:
        import pygls  # noqa: F401
    except ImportError:
        print("shapelang: the language server needs pygls: pip install 'shapelang[lsp]'", file=sys.stderr)
        return 2
    from ..lsp import main as lsp_main
    return lsp_main()


def entry() -> None:
    """The console script: run, flush, and leave without tearing down sympy's caches.

    Interpreter shutdown costs 0.1-0.2 s after sympy has been imported; nothing is
    left to clean up once the output is flushed.
    """
    import gc
    import os

    argv = sys.argv[1:]
    if argv[:1] in (["check"], ["trace"]):
        # A short process: a check frees its objects by reference counting, so the collector
        # would only walk sympy's objects again and again (about 50 ms of a 48-layer check;
        # bench/RESULTS.md). `main()` called as a function leaves the collector alone.
        gc.disable()
    try:
        status = main(argv)
        for stream in (sys.stdout, sys.stderr):
            if not stream.closed:   # `shapelang lsp` closes stdout when the client says exit
                stream.flush()
    except BrokenPipeError:   # `shapelang trace big.shape | head`: the reader has gone
        os._exit(0)
    os._exit(status)


if __name__ == "__main__":
    entry()
