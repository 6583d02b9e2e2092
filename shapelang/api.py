"""The public Python API: check, trace, generate code and grade.

Everything a notebook, an editor plugin or another tool needs, without
importing the stages' private modules. Each function returns a documented
object of its stage:

- `check(text)` / `check_file(path)` -> `CheckedSpec` (shapelang.checker.ir): the
  checked IR with `ok`, `diagnostics` (a list of `Diagnostic` data), the
  bindings' steps and the totals. It never raises on bad input: syntax errors
  are diagnostics too.
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

from .checker.checker import check_file as _check_file
from .checker.checker import check_text as _check_text
from .checker.ir import CheckedSpec
from .codegen.naming import CodegenError
from .render import html as _html  # noqa: F401  (gives CheckedSpec its notebook picture)
from .syntax.diagnostics import Diagnostic

__all__ = [
    "CheckedSpec",
    "CodegenError",
    "Diagnostic",
    "check",
    "check_file",
    "codegen",
    "grader",
    "render_check",
    "run",
    "to_json",
    "trace",
]


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


def explanation(code: str) -> str | None:
    """What `shapelang explain CODE` prints for a diagnostic code, or None for an unknown code."""
    from .checker.explanations import text
    from .syntax.diagnostics import CODES

    return text(code, CODES[code]) if code in CODES else None


def operation_names() -> list[str]:
    """Every operation a spec can write, from the checker's operation table."""
    from .checker.ops import TABLE

    return sorted(TABLE)
