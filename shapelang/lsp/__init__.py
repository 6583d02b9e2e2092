"""`shapelang lsp`: a language server over stdio.

The stage sits on top of the checker and the renderers: it keeps each open
document's text, checks it (cached per version), and turns the checked IR into
the editor's findings, hovers, definitions, references, completions and quick
fixes. Positions cross one boundary, `positions.LineMap`: the language uses
1-based lines and columns in characters, LSP 0-based lines and UTF-16 units.

Needs the `lsp` extra (pygls); `main()` imports it only when the server starts.
"""
from __future__ import annotations


def main() -> int:
    from .server import serve

    return serve()
