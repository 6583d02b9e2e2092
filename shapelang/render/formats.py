"""The output formats of `check` and `trace`, in one registry.

Each format is one entry: its name, the line of help the CLI prints, the commands that offer
it, and how it renders. The CLI's `--format` choices, its dispatch, the docs' list of formats
(a test keeps docs/trace.md equal to `markdown()`) and the API's `render`/`report` all read this
table, so a new format is one entry here and its renderer.

Two kinds:
- per file (`text`, `json`, `html`, `svg`): `render(name, spec, command, options)` gives the
  output for one checked spec: a string, or lines with colour roles (`text`);
- per run (`sarif`, `github`): `report(name, findings)` gives one report for every file of a
  command, from (path, diagnostics) pairs.

Renderers are imported when used, so `check` loads only the one it prints with.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Options:
    """What the text trace can be asked for (the CLI's --provenance, --width, --example-only)."""

    provenance: bool = False
    width: int = 100
    example_only: bool = False


@dataclass(frozen=True)
class Format:
    name: str
    help: str
    # per file: (spec, command, Options) -> output; per run: [(path, diagnostics)] -> str
    renderer: Callable = field(repr=False)
    commands: frozenset = frozenset({"check", "trace"})
    per_run: bool = False        # one report for all files (for CI) rather than one per file
    coloured: bool = False       # gives lines with colour roles (terminal output)


def _text(spec, command: str, options: Options):
    if command == "check":
        from .text import check_lines

        return check_lines(spec)
    from . import table

    return table.trace_lines(spec, provenance=options.provenance, width=options.width,
                             example_only=options.example_only)


def _json(spec, command: str, options: Options) -> str:
    from .json import spec_json, to_json

    return to_json(spec_json(spec, command == "trace"))


def _html(spec, command: str, options: Options) -> str:
    from .html import trace_html

    return trace_html(spec)


def _svg(spec, command: str, options: Options) -> str:
    from .html import trace_svg

    return trace_svg(spec)


def _sarif(findings) -> str:
    from .. import __version__
    from .json import to_json
    from .sarif import sarif_log

    return to_json(sarif_log(findings, __version__))


def _github(findings) -> str:
    from .github import github_text
    from .sarif import relative_path

    return github_text([(relative_path(path), diags) for path, diags in findings])


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("text", "for people: diagnostics with carets, or the step-by-step table (the default)",
           _text, coloured=True),
    Format("json", "diagnostics and shapes as JSON, for tools", _json),
    Format("sarif", "one SARIF 2.1.0 log for all the files, for code scanning", _sarif, per_run=True),
    Format("github", "GitHub Actions workflow commands: annotations on a pull request", _github,
           per_run=True),
    Format("html", "a self-contained page with the pictures of every step", _html,
           commands=frozenset({"trace"})),
    Format("svg", "one SVG figure of every step", _svg, commands=frozenset({"trace"})),
)}


def choices(command: str) -> list[str]:
    """The formats a command offers, in the registry's order."""
    return [name for name, f in FORMATS.items() if command in f.commands]


def help_text(command: str) -> str:
    return "; ".join(f"{name}: {FORMATS[name].help}" for name in choices(command))


def _format(name: str, command: str | None = None) -> Format:
    f = FORMATS.get(name)
    if f is None or (command is not None and command not in f.commands):
        offered = ", ".join(choices(command) if command else FORMATS)
        raise ValueError(f"no format {name!r}{f' for {command}' if command else ''} (formats: {offered})")
    return f


def render(name: str, spec, command: str = "check", options: Options | None = None):
    """One checked spec in a per-file format: a string, or colour-role lines for `text`."""
    f = _format(name, command)
    if f.per_run:
        raise ValueError(f"{name} is one report for every file: use report()")
    return f.renderer(spec, command, options or Options())


def report(name: str, findings) -> str:
    """The report of a per-run format for (path, diagnostics) pairs."""
    f = _format(name)
    if not f.per_run:
        raise ValueError(f"{name} renders one spec at a time: use render()")
    return f.renderer(findings)


def markdown() -> str:
    """The table of formats in docs/trace.md."""
    rows = ["| format | commands | what it gives |", "|---|---|---|"]
    rows += [f"| `{name}` | {', '.join(sorted(f.commands))} | {f.help} |" for name, f in FORMATS.items()]
    return "\n".join(rows) + "\n"
