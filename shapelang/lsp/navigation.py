"""Go to definition and find references, from the document's symbol index."""
from __future__ import annotations

from .. import api
from .documents import Analysis


def definition(an: Analysis, line: int, col: int) -> api.Span | None:
    occ = an.index.at(line, col)
    sym = an.index.resolve(occ) if occ is not None else None
    return sym.span if sym is not None else None


def references(an: Analysis, line: int, col: int, include_declaration: bool = True) -> list[api.Span]:
    occ = an.index.at(line, col)
    sym = an.index.resolve(occ) if occ is not None else None
    if sym is None:
        return []
    return [o.span for o in an.index.references(sym)
            if include_declaration or o.symbol is None]
