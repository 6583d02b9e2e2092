"""Text that fits a width: cells wrapped at spaces, tables that leave out columns in a set
order when they cannot fit otherwise, and the roles of spans of text (for colour).

A `Line` is plain text plus spans `(start, end, role)`; `shapelang.render.color` turns roles
into colours, and the plain text is what every other output uses.
"""
from __future__ import annotations

from functools import lru_cache

MIN_WIDTH = 40       # narrower widths are treated as this
GAP = "  "
GLUE = set("@+-*/|;>=,")   # a token made of these sticks to the one before (`x +`, `kh ->`)


class Line:
    """Plain text and the roles of its parts: spans (start, end, role)."""
    __slots__ = ("spans", "text")

    def __init__(self, text: str, spans=None):
        self.text, self.spans = text, list(spans or [])


class Cell:
    __slots__ = ("spans", "text")

    def __init__(self, text: str = "", spans=()):
        self.text, self.spans = text, tuple(spans)


class Column:
    __slots__ = ("floor", "header", "key")

    def __init__(self, key: str, header: str, floor: int = 0):
        self.key, self.header = key, header
        self.floor = floor       # wrap no narrower than this when it can be helped


@lru_cache(maxsize=4096)
def _tokens(text: str, brackets: str = "[") -> tuple[tuple[int, int], ...]:
    """Words split at spaces outside `[...]` (and the other `brackets`); operator-only words
    stick to the one before."""
    out: list[list[int]] = []
    depth, start = 0, None
    closing = {"[": "]", "(": ")"}
    for i, ch in enumerate(text + " "):
        if ch in brackets:
            depth += 1
        elif ch in (closing[b] for b in brackets):
            depth = max(0, depth - 1)
        if ch == " " and (depth == 0 or i == len(text)):
            if start is not None:
                if out and set(text[start:i]) <= GLUE:
                    out[-1][1] = i
                else:
                    out.append([start, i])
                start = None
        elif start is None and ch != " ":
            start = i
    return tuple((s, e) for s, e in out)


def _pieces(text: str, s: int, e: int, width: int) -> list[tuple[int, int]]:
    """A word longer than the width, cut after a `, ` where possible, else anywhere."""
    out = []
    while e - s > width:
        cut = text.rfind(", ", s, s + width + 1)
        if cut > s:
            out.append((s, cut + 1))
            s = cut + 2
        else:
            out.append((s, s + width))
            s += width
    out.append((s, e))
    return out


@lru_cache(maxsize=4096)
def wrap(text: str, width: int, brackets: str = "[") -> tuple[tuple[int, int], ...]:
    """The ranges of `text` that make its lines at most `width` wide (0: one line), broken
    at spaces outside brackets where it can be."""
    if width <= 0 or len(text) <= width:
        return ((0, len(text)),)
    lines: list[tuple[int, int]] = []
    cur = None
    for ts, te in _tokens(text, brackets):
        if te - ts <= width:
            pieces = [(ts, te)]
        elif brackets != "[":     # a long bracketed formula: broken inside its brackets
            pieces = [(ts + a, ts + b) for a, b in wrap(text[ts:te], width)]
        else:
            pieces = _pieces(text, ts, te, width)
        for ps, pe in pieces:
            if cur is not None and pe - cur[0] <= width:
                cur = (cur[0], pe)
            else:
                if cur is not None:
                    lines.append(cur)
                cur = (ps, pe)
    if cur is not None:
        lines.append(cur)
    return tuple(lines) or ((0, 0),)


def _clip(spans, s: int, e: int, shift: int) -> list:
    out = []
    for a, b, role in spans:
        a, b = max(a, s), min(b, e)
        if a < b:
            out.append((a - s + shift, b - s + shift, role))
    return out


def wrap_line(text: str, width: int, spans=(), indent: str = "  ") -> list[Line]:
    """One line of prose or a formula, wrapped with a hanging indent."""
    if width <= 0 or len(text) <= width:
        return [Line(text, list(spans))]
    first = wrap(text, width, "[(")[0]
    out = [Line(text[first[0]:first[1]], _clip(spans, first[0], first[1], 0))]
    rest_start = first[1]
    while rest_start < len(text) and text[rest_start] == " ":
        rest_start += 1
    rest = text[rest_start:]
    for s, e in wrap(rest, width - len(indent), "[("):
        out.append(Line(indent + rest[s:e], _clip(spans, s + rest_start, e + rest_start, len(indent))))
    return out


# ------------------------------------------------------------------ tables

def _natural(col: Column, rows) -> int:
    return max([len(col.header)] + [len(r[col.key].text) for r in rows if col.key in r])


def _soft(col: Column, rows) -> int:
    """The narrowest the column gets by wrapping between words (and no narrower than its floor)."""
    words = [e - s for r in rows if col.key in r for s, e in _tokens(r[col.key].text)]
    words += [len(w) for w in col.header.split()]
    return max(max(words, default=1), min(_natural(col, rows), col.floor))


class _Sizes:
    """The natural and the narrowest wrapped width of each column of one table."""

    def __init__(self, columns: list[Column], rows):
        self.nat = {c.key: _natural(c, rows) for c in columns}
        self.soft = {c.key: _soft(c, rows) for c in columns}


def _allocate(cols: list[Column], sizes: _Sizes, width: int, priority: list[str]) -> list[int] | None:
    """Column widths that fit `width`, or None when wrapping between words is not enough.
    Spare room goes to the columns in `priority` order, each up to its natural width."""
    nat = [sizes.nat[c.key] for c in cols]
    budget = width - len(GAP) * (len(cols) - 1)
    if width <= 0 or sum(nat) <= budget:
        return nat
    widths = [sizes.soft[c.key] for c in cols]
    if sum(widths) > budget:
        return None
    spare = budget - sum(widths)
    order = sorted(range(len(cols)), key=lambda k: priority.index(cols[k].key)
                   if cols[k].key in priority else len(priority))
    for k in order:
        give = min(spare, nat[k] - widths[k])
        widths[k] += give
        spare -= give
    return widths


def _squeeze(cols: list[Column], sizes: _Sizes, width: int) -> list[int]:
    """The last resort: the widest columns cut narrower, words broken."""
    widths = [sizes.soft[c.key] for c in cols]
    budget = width - len(GAP) * (len(cols) - 1)
    while sum(widths) > budget and max(widths) > 3:
        widths[widths.index(max(widths))] -= 1
    return widths


def _render(cols: list[Column], rows, widths: list[int]) -> list[Line]:
    header = {c.key: Cell(c.header, ((0, len(c.header), "header"),)) for c in cols}
    rule = {c.key: Cell("-" * w, ((0, w, "rule"),)) for c, w in zip(cols, widths)}
    out = []
    for row in [header, rule] + rows:
        pieces = []
        for c, w in zip(cols, widths):
            cell = row.get(c.key, Cell())
            pieces.append([(cell.text[s:e], _clip(cell.spans, s, e, 0)) for s, e in wrap(cell.text, w)])
        for k in range(max(len(p) for p in pieces)):
            text, spans, x = "", [], 0
            for p, w in zip(pieces, widths):
                if k < len(p):
                    part, sp = p[k]
                    text = text.ljust(x) + part
                    spans += [(a + x, b + x, role) for a, b, role in sp]
                x += w + len(GAP)
            out.append(Line(text.rstrip(), spans))
    return out


def fit_tables(tables: list[list[dict]], columns: list[Column], width: int, drop: list[str],
               priority: list[str]) -> tuple[list[list[Line]], list[str]]:
    """Lay out tables that share their columns within `width` (0: no limit). Columns in
    `drop` are left out in that order, the same in every table, until each table fits by
    wrapping between words; the keys left out come back with the lines."""
    width = 0 if not width else max(width, MIN_WIDTH)
    sizes = [_Sizes(columns, rows) for rows in tables]
    for k in range(len(drop) + 1):
        cols = [c for c in columns if c.key not in drop[:k]]
        widths = [_allocate(cols, size, width, priority) for size in sizes]
        if all(w is not None for w in widths):
            return [_render(cols, rows, w) for rows, w in zip(tables, widths)], drop[:k]
    cols = [c for c in columns if c.key not in drop]
    return [_render(cols, rows, _squeeze(cols, size, width)) for rows, size in zip(tables, sizes)], list(drop)


def plain(lines: list[Line]) -> str:
    return "".join(line.text + "\n" for line in lines)
