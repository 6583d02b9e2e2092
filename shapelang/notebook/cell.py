"""What a `%%shapelang` cell shows, without IPython: check the text, render the findings
(with their carets) and the trace picture, optionally the generated PyTorch source.

Options (on the magic's line): `--part N` (exercise notebooks: the cell is part N; parts
1..N run so far are checked together), `--example B=2,S=7` (example sizes), `--codegen`,
`--strict` (a warning fails the cell too). Nothing in a cell is evaluated as Python.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from html import escape

from .. import api
from ..api import CheckSession, codegen, render_check

MAX_SIZES = 64
MAX_SIZE = 10**9
MAX_PARTS = 1000
_SIZE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]{0,63})=([0-9]{1,10})$")


class CellError(ValueError):
    """A usage mistake on the magic's line; the message says what to write instead."""


@dataclass
class Options:
    part: int | None = None
    example: dict = field(default_factory=dict)
    codegen: bool = False
    strict: bool = False


def parse_sizes(text: str) -> dict:
    """`B=2,S=7` -> {"B": 2, "S": 7}; bounded, nothing evaluated."""
    out = {}
    items = [t.strip() for t in text.split(",") if t.strip()]
    if len(items) > MAX_SIZES:
        raise CellError(f"--example takes at most {MAX_SIZES} sizes")
    for item in items:
        m = _SIZE.match(item.replace(" ", ""))
        if not m or not 1 <= int(m.group(2)) <= MAX_SIZE:
            raise CellError(f"--example: `{item}` is not NAME=SIZE with a whole number from 1 to "
                            f"{MAX_SIZE:,} (write e.g. --example B=2,S=7)")
        out[m.group(1)] = int(m.group(2))
    return out


def parse_line(line: str) -> Options:
    try:
        words = shlex.split(line)
    except ValueError as err:
        raise CellError(f"cannot read the options: {err}") from None
    opts = Options()
    k = 0
    while k < len(words):
        w = words[k]
        key, eq, value = w.partition("=")
        if key in ("--part", "--example") and not eq:
            if k + 1 >= len(words):
                raise CellError(f"{key} needs a value")
            value, k = words[k + 1], k + 1
        if key == "--part":
            if not value.isdigit() or not 1 <= int(value) <= MAX_PARTS:
                raise CellError(f"--part takes a number from 1 to {MAX_PARTS}")
            opts.part = int(value)
        elif key == "--example":
            opts.example.update(parse_sizes(value))
        elif w == "--codegen":
            opts.codegen = True
        elif w == "--strict":
            opts.strict = True
        else:
            raise CellError(f"unknown option `{w}`; the options are --part N, --example B=2,S=7, "
                            "--codegen, --strict")
        k += 1
    return opts


@dataclass
class Shown:
    plain: str
    html: str
    failed: bool
    spec: object = None


class Session:
    """The parts of an exercise notebook run so far in one kernel."""

    def __init__(self):
        self.parts: dict[int, str] = {}
        # a cell run again after an edit re-parses only what changed; no result is kept, as
        # `--example` sets the example of the spec it is given
        self.checks = CheckSession("<cell>", keep=0)

    def text_for(self, opts: Options, cell: str) -> tuple[str, tuple | None, list]:
        """The text to check, the lines of this cell in it, and the earlier parts not run yet."""
        if opts.part is None:
            return cell, None, []
        self.parts[opts.part] = cell
        missing = [k for k in range(1, opts.part) if k not in self.parts]
        before = "\n\n".join(self.parts[k] for k in range(1, opts.part) if k in self.parts)
        first = before.count("\n") + 3 if before else 1
        text = (before + "\n\n" + cell) if before else cell
        return text, (first, first + cell.count("\n")), missing


def _with_example(text: str, sizes: dict) -> str:
    """The text checked with `--example` sizes: an `example` line after the cell's text (a
    later example line adds to and overrides an earlier one), so the checker itself works at
    those sizes and says so in its errors (`= [2, 4, 5, 16]`, "at the example sizes")."""
    given = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return text + ("" if text.endswith("\n") else "\n") + f"example {given}\n"


def run_cell(line: str, cell: str, session: Session) -> Shown:
    """Check one cell and say what to show. Raises CellError for a mistake on the magic line."""
    opts = parse_line(line)
    text, lines, missing = session.text_for(opts, cell)
    if opts.example:
        text = _with_example(text, opts.example)
    spec = session.checks.check(text)
    unknown = sorted(set(opts.example) - set(spec.dims))
    if unknown:
        raise CellError(f"--example: the spec declares no dim {unknown[0]}; its dims are "
                        + ", ".join(spec.dims))
    shown = spec.diagnostics if lines is None else \
        [d for d in spec.diagnostics if lines[0] <= d.span.line <= lines[1]]
    failed = not spec.ok or (opts.strict and bool(spec.diagnostics))
    plain = [api.diagnostic_text(d, "<cell>", text) for d in shown]
    html = []
    if missing:
        note = "run part " + ", ".join(map(str, missing)) + " first: this part builds on it"
        plain.insert(0, note)
        html.append(f'<p style="color:#b22">{escape(note)}</p>')
    if lines is not None and len(shown) < len(spec.diagnostics):
        n = len(spec.diagnostics) - len(shown)
        note = f"{n} finding{'s' if n != 1 else ''} in other parts"
        plain.append(note)
        html.append(f"<p>{escape(note)}</p>")
    if lines is None:
        plain.append(render_check(spec).rstrip().split("\n\n")[-1])
    elif not shown:
        plain.append("this part checks" if spec.ok else "this part checks; an earlier part has errors")
    html.append(api.trace_fragment(spec, "shapelang", lines))
    if opts.codegen:
        plain_code, html_code = _codegen(spec)
        plain.append(plain_code)
        html.append(html_code)
    return Shown("\n\n".join(plain), "".join(html), failed, spec)


def _codegen(spec) -> tuple[str, str]:
    if not spec.ok:
        text = "no PyTorch code: the spec has errors"
        return text, f"<p>{escape(text)}</p>"
    try:
        source = codegen(spec).source
    except Exception as err:  # noqa: BLE001 - CodegenError and its kin: say why, never a traceback
        text = f"no PyTorch code: {err}"
        return text, f"<p>{escape(text)}</p>"
    return source, ('<details open><summary>generated PyTorch</summary><pre style="font-size:12px">'
                    f"{escape(source)}</pre></details>")
