"""The public Python API: check, trace, generate code and grade.

Everything a notebook, an editor plugin or another tool needs, without
importing the stages' private modules. Each function returns a documented
object of its stage:

- `check(text)` / `check_file(path)` -> `CheckedSpec` (shapelang.checker.ir): the
  checked IR with `ok`, `diagnostics` (a list of `Diagnostic` data), the
  bindings' steps and the totals. It never raises on bad input: syntax errors
  are diagnostics too.
- `CheckSession(path)`: `.check(text, stale=None)` -> the same `CheckedSpec` as
  `check(text, path)`, for a document checked again after each edit (editors,
  the playground, notebooks): unchanged statements are not parsed again, a text
  seen recently is answered at once, and `stale()` turning true stops the check
  with `Stale`.
- `trace(spec)` -> str: the step-by-step table; `render_check(spec)` -> str:
  diagnostics with carets; `to_json(spec, trace=False)` -> dict.
- `codegen(spec)` -> `Generated` (source text and class name); raises
  `CodegenError` when a module cannot be written. Needs no torch.
- `run(spec, sizes=None)` -> `Report`: builds the module and compares every
  shape with the checker's (needs torch).
- `grader(exercise, solution)` -> `Grader`, whose `grade_file(path)` /
  `grade_text(text)` return a `SubmissionResult`.

check and trace import lark and sympy only; torch is imported by `run` alone.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

# `from shapelang import codegen` is the stage's package, as it has always been; its modules
# load on first use, so `check` loads none of them
from . import codegen as _codegen  # noqa: F401
from .checker.checker import check_file as _check_file
from .checker.checker import check_text as _check_text
from .checker.ir import CheckedSpec
from .checker.session import CheckSession, Stale
from .syntax.diagnostics import Diagnostic

if TYPE_CHECKING:
    from .codegen.naming import CodegenError

__all__ = [
    "CheckSession",
    "CheckedSpec",
    "CodegenError",
    "Diagnostic",
    "Stale",
    "check",
    "check_file",
    "codegen",
    "grader",
    "render_check",
    "run",
    "to_json",
    "trace",
]


def __getattr__(name: str):
    """`CodegenError` is loaded on first use: `check` and `trace` load no codegen module."""
    if name == "CodegenError":
        from .codegen.naming import CodegenError

        return CodegenError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _html_picture(spec: CheckedSpec) -> str:
    """A notebook's picture of a checked spec; the HTML renderer is loaded on first use
    (importing it registers itself in this hook's place)."""
    from .render import html

    return html.trace_fragment(spec)


if CheckedSpec.html_renderer is None:   # gives CheckedSpec its notebook picture
    CheckedSpec.html_renderer = staticmethod(_html_picture)


def check(text: str, path: str = "<input>") -> CheckedSpec:
    """Check spec text; the result holds every finding as data (`spec.diagnostics`)."""
    return _check_text(text, path)


def check_file(path: str) -> CheckedSpec:
    """Read and check a `.shape` file (OSError if it cannot be read)."""
    return _check_file(path)


def render_check(spec: CheckedSpec) -> str:
    """The diagnostics as `shapelang check` prints them (carets, notes, help)."""
    from .render import text

    return text.check_text(spec)


def trace(spec: CheckedSpec, *, width: int = 100, example_only: bool = False) -> str:
    """The step-by-step shape table as `shapelang trace` prints it, fitted to `width`
    characters (0: no limit); `example_only`: one column of shapes at the example sizes."""
    from .render import table

    return table.trace_text(spec, width=width, example_only=example_only)


def to_json(spec: CheckedSpec, trace: bool = False) -> dict:
    """The machine-readable result of `check --format json` (or `trace` with trace=True)."""
    from .render import json

    return json.spec_json(spec, trace)


def codegen(spec: CheckedSpec, *, names: str = "dotted", attention: str = "sdpa"):
    """The PyTorch module for a clean spec: a `Generated` with `.source` and `.top_class`.

    names: "dotted" (`__` in a name is a level of the state-dict key) or "flat";
    attention: "sdpa" (recognised attention as one F.scaled_dot_product_attention call)
    or "explicit" (every step written out)."""
    from .codegen.generator import generate

    return generate(spec, names=names, attention=attention)


def run(spec: CheckedSpec, sizes: dict[str, int] | None = None, *, seed: int = 0):
    """Generate, run on random inputs at `sizes` (default: the example) and compare shapes.

    Raises `shapelang.codegen.runner.SizesError` for sizes that are missing, break an
    assumption or would build tensors too large to run, and `CodegenError` when no module
    can be written; failures inside the module are reported in the `Report`."""
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
