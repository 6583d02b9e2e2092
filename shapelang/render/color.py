"""Colour for a terminal: roles of text (error, caret, changed axis, …) as rich styles.

Whether to colour is decided here too: `--color always|never`, else (auto) only when the
output is a terminal, `NO_COLOR` is unset or empty (https://no-color.org) and TERM is not
`dumb`. rich (the optional `color` extra) is imported only when colour is written, so plain
output (pipes, files, tests) costs nothing; without rich the text is printed plain, with a
one-line note on stderr when colour was asked for.
"""
from __future__ import annotations

import os
import re
import sys

from .columns import Line

STYLES = {
    "error": "bold red", "warning": "bold yellow", "note": "bold", "help": "bold cyan",
    "gutter": "bold blue", "label": "bold blue",
    "title": "bold", "header": "bold", "rule": "dim", "name": "bold", "changed": "bold magenta",
    "block": "bold cyan", "total": "bold", "dropped": "dim", "summary": "bold",
}

# patterns as strings: compiled (and cached by `re`) on first use, not at import
_HEAD = r"^(.*?:\d+:\d+: )(error|warning)(\[[A-Z]\d+\])?(:)"
_GUTTER = r"^(\s*\d*\s*)(\|)(.*)$"
_FOOT = r"^(\s*)(=) (note|help)(:)"


def diagnostic_lines(text: str) -> list[Line]:
    """The roles in diagnostics as `check` prints them (rustc's layout): the severity and
    code, the gutter, the carets (primary: the severity's colour; `---` secondary labels),
    `note:` and `help:`."""
    out, severity = [], "error"
    for raw in text.split("\n"):
        line = Line(raw)
        m = re.match(_HEAD, raw)
        if m:
            severity = m.group(2)
            line.spans.append((m.start(2), m.end(3) if m.group(3) else m.end(2), severity))
            line.spans.append((m.end(4), len(raw), "summary"))
        elif (g := re.match(_GUTTER, raw)) is not None:
            line.spans.append((g.start(1), g.end(2), "gutter"))
            if not g.group(1).strip():      # no line number: a line of marks and labels
                line.spans += _marks(g.group(3), g.start(3), severity)
        elif (f := re.match(_FOOT, raw)) is not None:
            line.spans.append((f.start(2), f.end(2), "gutter"))
            line.spans.append((f.start(3), f.end(4), f.group(3)))
        out.append(line)
    return out


def _marks(rest: str, at: int, severity: str) -> list:
    """`^^^ label` in the severity's colour, `--- label` (a secondary label) in blue: the
    marks from the start of the line, then the label, in the colour of the mark before it."""
    spans, role, k = [], None, 0
    while k < len(rest):
        if rest[k] == " ":
            k += 1
            continue
        if rest[k] == "|" and not rest[k + 1:k + 2].strip():     # the stem of a label below
            spans.append((at + k, at + k + 1, "label"))
            k += 1
            continue
        mark = re.match(r"\^+|-+(?=[\s^]|$)", rest[k:])
        if mark is None:
            break
        role = severity if mark.group(0).startswith("^") else "label"
        spans.append((at + k, at + k + len(mark.group(0)), role))
        k += len(mark.group(0))
    if role is not None and rest[k:].strip():
        spans.append((at + k, at + len(rest), role))
    return spans


def wants_color(mode: str, stream) -> bool:
    if mode == "always":
        return True
    if mode == "never":
        return False
    if os.environ.get("NO_COLOR", "") != "" or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:      # a closed stream
        return False


_warned: list = []


def write(lines: list[Line], stream, color: bool) -> None:
    """Print the lines, in colour or plain."""
    if color:
        try:
            from rich.console import Console
            from rich.text import Text
        except ImportError:     # colour is the optional `color` extra
            if not _warned:
                _warned.append(True)
                print("shapelang: colour needs rich: pip install 'shapelang[color]' (printing plain text)",
                      file=sys.stderr)
            color = False
    if not color:
        stream.write("".join(line.text + "\n" for line in lines))
        return

    console = Console(file=stream, force_terminal=True, no_color=False, highlight=False,
                      markup=False, emoji=False, soft_wrap=True, width=10_000)
    if console.color_system is None:    # `--color always` where the terminal says it has none
        console = Console(file=stream, force_terminal=True, color_system="standard", no_color=False,
                          highlight=False, markup=False, emoji=False, soft_wrap=True, width=10_000)
    for line in lines:
        text = Text(line.text, no_wrap=True)
        for start, end, role in line.spans:
            if role in STYLES:
                text.stylize(STYLES[role], start, end)
        console.print(text)
    stream.flush()
