"""The public Python API: the one door to every stage.

Everything a notebook, an editor plugin, another tool — and shapelang's own outer packages
(cli, lsp, serve, notebook; a test holds them to it) — needs, without importing a stage's
modules. Nothing heavy is imported with this module: each function and name loads its stage
when first used, so `shapelang --help` stays fast and `check` loads only the checker.

Checking and showing (lark and sympy only, never torch):
- `check(text)` / `check_file(path)` -> `CheckedSpec`: the checked IR with `ok`, `diagnostics`
  (`Diagnostic` data), the bindings' steps and the totals. Bad input never raises: syntax errors
  are diagnostics too.
- `render(spec, format, command)`: one spec in an output format (`formats(command)` lists them:
  text, json, html, svg); `report(findings, format)`: one report for many files (sarif, github);
  `trace(spec)`, `render_check(spec)`, `to_json(spec)`, `trace_fragment(spec)`,
  `diagnostic_text(d, path, source)`, `write_lines(lines, stream, colour)`.
- `explain(code)` / `explanations()`: what a diagnostic code means; `CODES`: every code.
- `format_spec(text)`: the canonical layout (`FormatError`, `LayoutBug`).
- `parse(text)`: the syntax tree with recovery (`nodes`, `Span`), for editors; `operations()`:
  every operation the language has; `shape_text`, `example_shape`, `example_number`, `types_of`,
  `dtype_suffix`: how shapes and sizes are written.
- `LIMITS`: the bounds untrusted text is held to.

Code (`codegen` needs no torch; `run` and `import_module` do):
- `codegen(spec)` -> `Generated` (`CodegenError`); `run(spec, sizes)` -> `Report` (`SizesError`);
  `import_module(...)` -> an `Imported` spec (`ImportFailure`, `UsageError`).

Teaching: `grader(exercise, solution)` -> `Grader` (`SubmissionResult`), `make_exercise(text)`
(`ExerciseError`), and the result writers (`text_report`, `result_json`, `gradescope_json`,
`prairielearn_json`, `notebook_json`).
"""
from __future__ import annotations

import importlib

# name -> (module, attribute or None for the module itself), loaded on first use
_LAZY: dict[str, tuple[str, str | None]] = {
    # data
    "CheckedSpec": ("shapelang.checker.ir", "CheckedSpec"),
    "Stale": ("shapelang.checker.session", "Stale"),
    "Diagnostic": ("shapelang.syntax.diagnostics", "Diagnostic"),
    "CODES": ("shapelang.syntax.diagnostics", "CODES"),
    "Span": ("shapelang.syntax.nodes", "Span"),
    "nodes": ("shapelang.syntax.nodes", None),
    "LIMITS": ("shapelang.syntax.limits", None),
    "RenderOptions": ("shapelang.render.formats", "Options"),
    # errors
    "CodegenError": ("shapelang.codegen.naming", "CodegenError"),
    "SizesError": ("shapelang.codegen.runner", "SizesError"),
    "FormatError": ("shapelang.fmt", "FormatError"),
    "LayoutBug": ("shapelang.fmt", "LayoutBug"),
    "ExerciseError": ("shapelang.teaching.exercise", "ExerciseError"),
    "ImportFailure": ("shapelang.importer", "ImportFailure"),
    "UsageError": ("shapelang.importer", "UsageError"),
    # results
    "Generated": ("shapelang.codegen.generator", "Generated"),
    "Report": ("shapelang.codegen.runner", "Report"),
    "Grader": ("shapelang.teaching.grader", "Grader"),
    "SubmissionResult": ("shapelang.teaching.results", "SubmissionResult"),
    # showing
    "trace_fragment": ("shapelang.render.html", "trace_fragment"),
    "trace_live": ("shapelang.render.html", "trace_live"),
    "PICTURE_CSS": ("shapelang.render.style", "CSS"),
    "diagnostic_text": ("shapelang.render.text", "diagnostic_text"),
    "diagnostic_json": ("shapelang.render.json", "diagnostic_json"),
    "json_text": ("shapelang.render.json", "to_json"),
    "shape_text": ("shapelang.render.common", "shape_text"),
    "example_shape": ("shapelang.render.common", "example_shape"),
    "example_number": ("shapelang.render.common", "example_number"),
    "types_of": ("shapelang.render.common", "types_of"),
    "dtype_suffix": ("shapelang.checker.dtypes", "suffix"),
    "dtype_spellings": ("shapelang.checker.dtypes", "spellings"),
    "format_spec": ("shapelang.fmt", "format_text"),
    # code
    "write_atomic": ("shapelang.codegen.generator", "write_atomic"),
    "parse_sizes": ("shapelang.codegen.runner", "parse_sizes"),
    "resolve_sizes": ("shapelang.codegen.runner", "resolve_sizes"),
    "run_spec": ("shapelang.codegen.runner", "run_spec"),
    "report_text": ("shapelang.codegen.runner", "report_text"),
    "report_json": ("shapelang.codegen.runner", "report_json"),
    "torch_available": ("shapelang.codegen.runner", "_import_torch"),
    "import_module": ("shapelang.importer", "import_module"),
    "parse_kwargs": ("shapelang.importer.load", "parse_kwargs"),
    # teaching
    "make_exercise": ("shapelang.teaching.exercise", "make"),
    "find_solution": ("shapelang.teaching.results", "find_solution"),
    "read_text": ("shapelang.teaching.results", "read_text"),
    "write_output": ("shapelang.teaching.results", "write_output"),
    "text_report": ("shapelang.teaching.results", "text_report"),
    "result_json": ("shapelang.teaching.results", "result_json"),
    "gradescope_json": ("shapelang.teaching.results", "gradescope_json"),
    "prairielearn_json": ("shapelang.teaching.results", "prairielearn_json"),
    "score_value": ("shapelang.teaching.results", "score_value"),
    "scan_upload": ("shapelang.teaching.results", "scan"),
    "Visibility": ("shapelang.teaching.results", "Visibility"),
    "VISIBILITIES": ("shapelang.teaching.results", "VISIBILITIES"),
    "MAX_ENTRIES": ("shapelang.teaching.results", "MAX_ENTRIES"),
    "notebook_json": ("shapelang.teaching.notebook", "notebook_json"),
    "notebook_parts": ("shapelang.teaching.notebook", "parts_of"),
    "describe_part": ("shapelang.teaching.notebook", "describe_part"),
}

__all__ = [*_LAZY, "CheckSession", "check", "check_file", "codegen", "explain", "explanations", "for_learners", "is_exercise",  # noqa: PLE0604
                  "format_info", "formats", "formats_help", "grader", "operations", "operation_names", "parse", "render", "render_check",
                  "report", "run", "to_json", "trace", "write_lines"]


def __getattr__(name: str):
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(entry[0])
    value = module if entry[1] is None else getattr(module, entry[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


# -- checking ----------------------------------------------------------------------------

def _html_picture(spec) -> str:
    """A notebook's picture of a checked spec; the HTML renderer is loaded on first use
    (importing it registers itself in this hook's place)."""
    from .render import html

    return html.trace_fragment(spec)


def _notebook_picture() -> None:
    """Gives CheckedSpec its notebook picture (`_repr_html_`) without loading the renderer
    before a picture is drawn."""
    from .checker.ir import CheckedSpec

    if CheckedSpec.html_renderer is None:
        CheckedSpec.html_renderer = staticmethod(_html_picture)


def check(text: str, path: str = "<input>"):
    """Check spec text; the result holds every finding as data (`spec.diagnostics`).
    An exercise, or one being filled in, is checked in exercise mode (`for_learners`)."""
    from .checker.checker import check_text

    _notebook_picture()
    return for_learners(check_text(text, path))


def check_file(path: str):
    """Read and check a `.shape` file (OSError if it cannot be read)."""
    from .checker.checker import check_file as _check_file

    _notebook_picture()
    return for_learners(_check_file(path))


def for_learners(spec):
    """`spec` in exercise mode when its text is an exercise (it has blanks or `# ?name:`
    directives): no help or fix that would fill a blank in, or edit a line of the
    exercise; the blank's hint instead (shapelang.teaching.guard). Any other spec is
    returned as it is. `check`, `check_file` and `CheckSession` apply it."""
    # blanks, `# ?name:` lines and the exercise's first line all hold a `?`: without one,
    # the spec is no exercise and the teaching stage is not loaded. A session answers a
    # recent text again with the same spec: it is guarded once.
    if "?" in spec.source and not getattr(spec, "for_learners", False):
        from .teaching.guard import guard

        spec.diagnostics = guard(spec.diagnostics, spec.source)
        spec.for_learners = True
    return spec


class CheckSession:
    """A document checked after every edit (the language server, `serve`'s worker, the
    notebook magic): what `check(text, path)` gives, with the parse of unchanged statements
    kept between edits (shapelang.checker.session), and in exercise mode as `check` is.
    `stale()` turning true stops a check with `Stale`."""

    def __init__(self, path: str = "<input>", **options):
        from .checker.session import CheckSession as _Session

        self._session = _Session(path, **options)

    def check(self, text: str, path: str | None = None, *, stale=None):
        _notebook_picture()
        return for_learners(self._session.check(text, path, stale=stale))

    def __getattr__(self, name):
        return getattr(self._session, name)


def parse(text: str, path: str = "<input>"):
    """The syntax tree of spec text, recovering after errors: (tree or None, diagnostics,
    the spans of the statements skipped)."""
    from .syntax.parser import parse_recovering

    return parse_recovering(text, path)


def operations() -> dict:
    """Every operation of the language: name -> its table entry (OpDef)."""
    from .checker.ops.table import TABLE

    return dict(TABLE)


def operation_names() -> list[str]:
    """Every operation a spec can write, sorted."""
    return sorted(operations())


# -- showing -----------------------------------------------------------------------------

def formats(command: str = "check") -> list[str]:
    """The output formats `command` (check or trace) offers."""
    from .render.formats import choices

    return choices(command)


def formats_help(command: str = "check") -> str:
    from .render.formats import help_text

    return help_text(command)


def format_info(name: str):
    """The registry entry of an output format (`per_run`, `coloured`, `help`, `commands`)."""
    from .render.formats import FORMATS

    return FORMATS[name]


def render(spec, format: str = "text", command: str = "check", options=None):
    """One checked spec in a per-file format (text, json, html, svg): a string, or lines with
    colour roles for `text` (print them with `write_lines`)."""
    from .render.formats import render as _render

    return _render(format, spec, command, options)


def report(findings, format: str) -> str:
    """One report (sarif, github) for (path, diagnostics) pairs of many files."""
    from .render.formats import report as _report

    return _report(format, findings)


def write_lines(lines, stream, colour: str = "auto") -> None:
    """Lines with colour roles (from `render(..., "text")`) to a stream: colour "always",
    "never", or "auto" (a terminal, unless NO_COLOR is set)."""
    from .render import color

    color.write(lines, stream, color.wants_color(colour, stream))


def render_check(spec) -> str:
    """The diagnostics as `shapelang check` prints them (carets, notes, help)."""
    from .render import text

    return text.check_text(spec)


def trace(spec, *, width: int = 100, example_only: bool = False) -> str:
    """The step-by-step shape table as `shapelang trace` prints it, fitted to `width`
    characters (0: no limit); `example_only`: one column of shapes at the example sizes."""
    from .render import table

    return table.trace_text(spec, width=width, example_only=example_only)


def to_json(spec, trace: bool = False) -> dict:
    """The machine-readable result of `check --format json` (or `trace` with trace=True)."""
    from .render import json

    return json.spec_json(spec, trace)


def explain(code: str, examples: bool = True) -> str | None:
    """What a diagnostic code means, with a wrong and a right example (None: no such code);
    `examples=False` leaves the examples out (for an exercise, see `is_exercise`)."""
    from .checker.explanations import text
    from .syntax.diagnostics import CODES

    return text(code, CODES[code], examples) if code in CODES else None


def is_exercise(text: str) -> bool:
    """Whether spec text is an exercise or a filled one (blanks, `# ?name:` lines or the
    header `exercise make` writes): the surfaces then show nothing that may fill a blank."""
    if "?" not in text:
        return False
    from .teaching.guard import answer_statements

    return bool(answer_statements(text))


def explanations() -> str:
    """Every code with its one-line meaning."""
    from .checker.explanations import listing
    from .syntax.diagnostics import CODES

    return listing(CODES)


# -- code and teaching -------------------------------------------------------------------

def codegen(spec, *, names: str = "dotted", attention: str = "sdpa"):
    """The PyTorch module for a clean spec: a `Generated` with `.source` and `.top_class`.

    names: "dotted" (`__` in a name is a level of the state-dict key) or "flat";
    attention: "sdpa" (recognised attention as one F.scaled_dot_product_attention call)
    or "explicit" (every step written out)."""
    from .codegen.generator import generate

    return generate(spec, names=names, attention=attention)


def run(spec, sizes: dict[str, int] | None = None, *, seed: int = 0):
    """Generate, run on random inputs at `sizes` (default: the example) and compare shapes.

    Raises `SizesError` for sizes that are missing, break an assumption or would build tensors
    too large to run, and `CodegenError` when no module can be written; failures inside the
    module are reported in the `Report`."""
    from .codegen import runner

    return runner.run_spec(spec, runner.resolve_sizes(spec, sizes), seed=seed)


def grader(exercise_path: str, solution_path: str | None = None):
    """A `Grader` for an exercise; `solution_path` defaults to the one beside it."""
    from .teaching.grader import Grader
    from .teaching.results import find_solution, read_text

    solution_path = solution_path or find_solution(exercise_path)
    if solution_path is None:
        raise FileNotFoundError(f"no solution found for {exercise_path}")
    return Grader(read_text(exercise_path), read_text(solution_path), exercise_path, solution_path)
