"""`shapelang lsp`: a language server over stdio.

The stage sits on top of the checker and the renderers: it keeps each open
document's text, checks it (cached per version), and turns the checked IR into
the editor's findings, hovers, definitions, references, completions and quick
fixes. Positions cross one boundary, `positions.LineMap`: the language uses
1-based lines and columns in characters, LSP 0-based lines and UTF-16 units.

Needs the `lsp` extra (pygls); `main()` imports it only once the first opened
document's diagnostics are out (fast_start.py).
"""
from __future__ import annotations


def main() -> int:
    import sys

    from .fast_start import FastStart

    start = FastStart(sys.stdin.buffer, sys.stdout.buffer).run()
    from .server import serve

    return serve(start)
