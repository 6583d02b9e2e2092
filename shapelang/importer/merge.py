"""Import, one block per module class: the blocks of one class that differ only in sizes
become one block with those sizes as its parameters.

The scopes write one block per distinct text, so a class called at two widths comes back
as `Mlp` (`linear 4*D`) and `Mlp_2` (`linear F`). Here the blocks of one class are compared
token by token; where they differ only in size expressions, each distinct column of sizes
becomes a name: a size of the block's input shapes a name the inputs bind at each call
(`x: [B, S, W]`, declared once with `dim W`), another size a size parameter of the block
(`dim W2` in its signature), which each call gives (`Mlp(W2=4*D)`). The merged text reads
exactly as each original at its call's sizes, so the weights mapping is unchanged; the
caller keeps the merged spec only when it checks clean.
"""
from __future__ import annotations

import re

TOKENS = re.compile(r"->|[A-Za-z0-9_.]+(?:[*/][A-Za-z0-9_.]+)*|\s+|.")
NAME = re.compile(r"block (\w+)\(")
PART = re.compile(r"[*/]")


def _size_word(tok: str, names: set) -> bool:
    """A size written as one word (`4*D`, `Dh`, `D/H`, `24`) over `names` and numbers."""
    parts = PART.split(tok)
    return all(p.isdigit() or p in names for p in parts)


def _fresh(taken: set) -> str:
    name = next(n for n in ["W"] + [f"W{k}" for k in range(2, 999)] if n not in taken)
    taken.add(name)
    return name


def merge_blocks(block_lines: list[str], lines: list[str], dims: set, fixed: set,
                 bound: dict) -> tuple[list[str], list[str]] | None:
    """`block_lines` (each block's text, then "") and the body `lines` with the blocks of each
    class merged where they differ only in sizes; None when nothing merges. `dims`: every size
    name; `fixed`: the fixed ones a call may give; `bound` gets `name -> note` for each name an
    input binds (the caller declares it with `dim`)."""
    blocks = [b for b in block_lines if b]
    taken = set(dims) | {w for t in blocks + lines for w in re.findall(r"\w+", t)}
    shared: dict[tuple, str] = {}        # (sizes, bound by an input) -> name: one name per column
    merged = False
    for base in [NAME.match(b).group(1) for b in blocks]:
        names = [NAME.match(b).group(1) for b in blocks]
        group = [n for n in names if n == base or re.fullmatch(rf"{re.escape(base)}_\d+", n)]
        if base not in names or len(group) < 2:
            continue
        texts = [blocks[names.index(n)] for n in group]
        result = _merge(base, group, texts, dims, fixed, taken, bound, shared)
        if result is None:
            continue
        text, keywords = result
        merged = True
        first = names.index(group[0])
        blocks = [text if i == first else b for i, b in enumerate(blocks) if names[i] not in group[1:]]
        for n, kw in zip(group, keywords):
            blocks = [_calls(b, n, base, kw) for b in blocks]
            lines = [_calls(line, n, base, kw) for line in lines]
    if not merged:
        return None
    return [x for b in blocks for x in (b, "")], lines


def _merge(base, group, texts, dims, fixed, taken, bound, shared):
    toks = [TOKENS.findall(t[len("block " + n):]) for n, t in zip(group, texts)]
    if len({len(t) for t in toks}) != 1:
        return None
    sig_end = next(i for i, t in enumerate(toks[0]) if "\n" in t)
    params: dict[tuple, tuple[str, bool]] = {}
    out = []
    for i, column in enumerate(zip(*toks)):
        if len(set(column)) == 1:
            out.append(column[0])
            continue
        in_sig = i < sig_end
        if all(c.isdigit() for c in column) or not all(_size_word(c, dims if in_sig else fixed) for c in column):
            return None
        if column not in params:
            if not in_sig and any(not _size_word(c, fixed) for c in column):
                return None
            if (column, in_sig) not in shared:
                shared[column, in_sig] = _fresh(taken)
            params[column] = (shared[column, in_sig], in_sig)
        out.append(params[column][0])
    text = "".join(out)
    head, rest = text.split("\n", 1)
    given = [(name, column) for column, (name, in_sig) in params.items() if not in_sig]
    if not head.endswith("):"):
        return None
    head = head[:-2] + "".join(f", dim {name}" for name, _ in given) + "):"
    for column, (name, in_sig) in params.items():
        if in_sig:
            bound[name] = " or ".join(dict.fromkeys(column))
    keywords = [[f"{name}={column[j]}" for name, column in given] for j in range(len(group))]
    return f"block {base}{head}\n{rest}", keywords


def _calls(text: str, name: str, base: str, keywords: list[str]) -> str:
    """The calls of block `name` in `text` as calls of `base` with `keywords`."""
    def call(m):
        args = [a.strip() for a in (m.group(1) or "").split(",") if a.strip()] + keywords
        return base + (f"({', '.join(args)})" if args else "")
    out = []
    for line in text.split("\n"):
        if not line.startswith("block "):
            line = re.sub(rf"\b{re.escape(name)}\b(?:\(([^()]*)\))?", call, line)
        out.append(line)
    return "\n".join(out)
