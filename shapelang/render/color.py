"""Colour for a terminal: roles of text (error, caret, changed axis, …) as rich styles.

The renderers say what each part of a line is (`Line` spans with roles: render/text.py for
diagnostics, render/table.py for the trace); this module only paints the roles, and never
reads the text to find them.

Whether to colour is decided here too: `--color always|never`, else (auto) only when the
output is a terminal, `NO_COLOR` is unset or empty (https://no-color.org) and TERM is not
`dumb`. rich (the optional `color` extra) is imported only when colour is written, so plain
output (pipes, files, tests) costs nothing; without rich the text is printed plain, with a
one-line note on stderr when colour was asked for.
"""
from __future__ import annotations

import os
import sys

from .columns import Line

STYLES = {
    "error": "bold red", "warning": "bold yellow", "note": "bold", "help": "bold cyan",
    "gutter": "bold blue", "label": "bold blue",
    "title": "bold", "header": "bold", "rule": "dim", "name": "bold", "changed": "bold magenta",
    "block": "bold cyan", "total": "bold", "dropped": "dim", "summary": "bold",
}


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
