"""The IPython side of `%%shapelang`: register the magic, display what a cell shows."""
from __future__ import annotations

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.display import display

from .cell import CellError, Session, run_cell


@magics_class
class ShapelangMagics(Magics):
    """`%%shapelang [--part N] [--example B=2,S=7] [--codegen] [--strict]`: check the cell as a
    shapelang spec and show its findings with carets and the trace picture."""

    def __init__(self, shell):
        super().__init__(shell)
        self.session = Session()

    @cell_magic
    def shapelang(self, line: str, cell: str):
        try:
            shown = run_cell(line, cell, self.session)
        except CellError as err:
            raise UsageError(f"%%shapelang: {err}") from None
        display({"text/plain": shown.plain, "text/html": shown.html}, raw=True)
        self.shell.user_ns["_shapelang_spec"] = shown.spec
        if shown.failed and "--strict" in line.split():
            raise UsageError("%%shapelang --strict: the spec has findings (shown above)")


def register(ipython) -> None:
    ipython.register_magics(ShapelangMagics)
