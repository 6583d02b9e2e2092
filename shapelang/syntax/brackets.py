"""Brackets and quotes in one line of text, for the rewrites that work on text: the checker's
PyTorch habits and spellings (spec text, `"` strings) and the code generator's layout (Python
text, `'` and `"` strings with backslash escapes). One scanner, so every one of them agrees on
what is at the top level."""
from __future__ import annotations

OPEN, CLOSE = "([{", ")]}"


def scan(text: str, quotes: str = '"', escapes: bool = False):
    """(index, char, depth, quoted) for every character of `text`. `depth`: the brackets around
    it outside strings, a bracket counting as outside its own pair (both brackets of a top-level
    pair are at depth 0); `quoted`: inside a string, its quotes included."""
    depth, quote, k, n = 0, None, 0, len(text)
    while k < n:
        c = text[k]
        if quote is not None:
            yield k, c, depth, True
            if escapes and c == "\\" and k + 1 < n:
                k += 1
                yield k, text[k], depth, True
            elif c == quote:
                quote = None
        elif c in quotes:
            quote = c
            yield k, c, depth, True
        elif c in OPEN:
            yield k, c, depth, False
            depth += 1
        elif c in CLOSE:
            depth -= 1
            yield k, c, depth, False
        else:
            yield k, c, depth, False
        k += 1


def pieces(text: str, separators: tuple[str, ...], quotes: str = '"',
           escapes: bool = False) -> list[tuple[int, int]]:
    """(start, end) of the pieces of `text` between its top-level separators (outside brackets
    and strings); a separator may be longer than a character (`->`)."""
    out, start, skip = [], 0, -1
    for k, _c, depth, quoted in scan(text, quotes, escapes):
        if k <= skip or quoted or depth != 0:
            continue
        sep = next((s for s in separators if text.startswith(s, k)), None)
        if sep is not None:
            out.append((start, k))
            start, skip = k + len(sep), k + len(sep) - 1
    out.append((start, len(text)))
    return out


def closing(text: str, start: int, quotes: str = '"', escapes: bool = False) -> int:
    """The index of the bracket that closes the one at `start`, or -1."""
    for k, c, depth, quoted in scan(text[start:], quotes, escapes):
        if not quoted and depth == 0 and c in CLOSE:
            return start + k
    return -1


def last_opening(text: str, quotes: str = '"', escapes: bool = False) -> int | None:
    """Where the bracket that the last closing bracket of `text` closes opens."""
    stack, found = [], None
    for k, c, _depth, quoted in scan(text, quotes, escapes):
        if quoted:
            continue
        if c in OPEN:
            stack.append(k)
        elif c in CLOSE:
            found = stack.pop() if stack else None
    return found
