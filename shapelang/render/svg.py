"""One step of the checked IR as an SVG figure: the tensor drawn as its axes.

The convention (see docs/html.md): a tensor is a row of boxes, one per axis, outermost
first, each labelled with the axis's size as the spec names it and its example value.
An axis keeps its colour from step to step (the colour of the logical axis its elements
come from, read from the axis provenance). What the step changes is drawn in red and named
(split, merged, moved, new, broadcast); axes that disappear (contracted, reduced) follow
in dashed boxes. A split is drawn as the cut axis in slices (D cut into H slices of Dh),
a swap of two axes as a small grid before and after, and attention scores as a query × key
grid. Every piece of spec text is escaped: specs are untrusted.
"""
from __future__ import annotations

import math
import re
from html import escape

from ..checker import dims as dimlib
from ..checker.ops import TABLE
from ..checker.ops.table import moving
from .common import example_number, notation

BOX_H = 46
GAP = 8
MAX_CELLS = 12          # cells drawn per side of a grid; larger sizes are elided
PALETTE = (210, 30, 120, 280, 0, 170, 50, 330, 250, 90, 190, 15)
LIGHT = (88, 80, 74, 68)    # lightness of a whole axis and of pieces 1, 2, 3+ deep
CHAR_W = 7.4                # a generous width of one character of 12 px text
LAYOUT_OPS = moving("regroup", "rearrange")
MOVE_OPS = moving("move", "rearrange")
REDUCE_OPS = {name for name, d in TABLE.items() if d.reduces} | {"select"}
# the operations that sum products over an axis (OpDef.contracts), and `@`
CONTRACT_OPS = {name for name, d in TABLE.items() if d.contracts} | {"matmul"}
# the operations that normalise along an axis as softmax does
SOFTMAX_OPS = {name for name, d in TABLE.items() if d.normalises}


class Colours:
    """One hue per logical axis (the root atom of its provenance), in order of first use."""

    def __init__(self):
        self.hues: dict[str, int] = {}

    def hue(self, root: str) -> int:
        if root not in self.hues:
            self.hues[root] = PALETTE[len(self.hues) % len(PALETTE)]
        return self.hues[root]

    def fill(self, axis) -> str:
        """The light fill of an axis's box: a whole axis palest, its pieces darker by depth
        (light enough that #111 text on it keeps a 4.5:1 contrast)."""
        if axis.root is None:
            return "hsl(0, 0%, 92%)"
        return f"hsl({self.hue(axis.root)}, 70%, {LIGHT[min(axis.depth, 3)]}%)"

    def paint(self, axis) -> str:
        """The fill attributes of a box or cell in the axis's colour: the light fill (a figure
        on its own) and the hue and shade the dark scheme's style sheet reads."""
        if axis.root is None:
            return f' fill="{self.fill(axis)}" data-shade="none"'
        return (f' fill="{self.fill(axis)}" data-shade="{min(axis.depth, 3)}" '
                f'style="--h:{self.hue(axis.root)}"')


class Axis:
    """One axis to draw: its size as written, example value, provenance and what changed."""
    __slots__ = ("atoms", "depth", "ex", "root", "size", "tag")

    def __init__(self, size: str, ex, atoms: tuple, root, depth: int, tag: str = ""):
        self.size, self.ex, self.atoms, self.root, self.depth, self.tag = size, ex, atoms, root, depth, tag

    @property
    def label(self) -> str:
        return "·".join(self.atoms) if self.atoms else "1"


def _root(atom):
    """The logical axis a (piece of an) atom was cut from, and a shade: 0 for a whole axis,
    1 + its position among the pieces for a piece."""
    shade = 0
    if getattr(atom, "parent", None) is not None:
        shade = 1 + atom.index
    while getattr(atom, "parent", None) is not None:
        atom = atom.parent
    return atom.label, shade


def axes_of(spec, shape, tp, size_of=None) -> list[Axis]:
    """The axes of a tensor of `shape` with provenance `tp` (None where unknown);
    `size_of(d)`, if given, gives an axis's (text, example value) (a caller's cache)."""
    out = []
    for k, d in enumerate(shape):
        size, ex = size_of(d) if size_of is not None else (dimlib.show(d, notation(spec)), example_number(spec, d))
        prov = tp.axes[k] if tp is not None and k < len(tp.axes) else None
        if prov is None:
            atoms, root, depth = (size,), size, 0
        elif not prov:
            atoms, root, depth = (), None, 0
        else:
            atoms = tuple(a.label for a in prov)
            root, depth = _root(prov[0])
        out.append(Axis(size, ex, atoms, root, depth))
    return out


def _split_source(ins: list, axis: Axis):
    for a in ins:
        if len(a.atoms) > len(axis.atoms) and set(axis.atoms) <= set(a.atoms):
            return a
    return None


# how an axis whose size a step changes in place was changed, by the way the step moves
# elements (OpDef.moves); an operation that takes its axis away (select) tags none
_RESIZED = {"broadcast": "broadcast", "repeat": "repeated", "join": "concatenated", "pick": "sliced",
            "cut": "split"}
RESIZE_WORDS = {name: _RESIZED[d.moves] for name, d in TABLE.items()
                if d.moves in _RESIZED and name not in REDUCE_OPS}


def _regrouped(op, first, a):
    """The tag of output axis `a` of a regrouping step, and the input axis it was cut from."""
    if not a.atoms:
        return ("new" if op == "unsqueeze" else ""), None
    same_root = [b for b in first if b.root is not None and b.root == a.root]
    if len(a.atoms) > 1 or len(same_root) > 1 and all(b.depth > a.depth for b in same_root):
        return "merged", None
    src = _split_source(first, a)
    if src is None and len(same_root) == 1 and same_root[0].depth < a.depth:
        src = same_root[0]
    if src is not None:
        return "split", src if op in LAYOUT_OPS and not src.tag else None
    return "new", None


def _groups(first: list[Axis], out: list[Axis]) -> dict | None:
    """For a view: which output axes come from splitting one input axis and which from merging
    several, matched by their sizes as PyTorch's view matches them (runs of axes whose products
    agree, size-1 axes on their own); None where a size is unknown. Output index -> tag."""
    a = [x.ex for x in first if x.ex != 1]
    b = [(k, x.ex) for k, x in enumerate(out) if x.ex != 1]
    if any(not isinstance(v, int) for v in a) or any(not isinstance(v, int) for _, v in b):
        return None
    tags, i, j = {}, 0, 0
    while i < len(a) and j < len(b):
        pa, pb, si, sj = a[i], b[j][1], i, j
        while pa != pb:
            if pa < pb and i + 1 < len(a):
                i += 1
                pa *= a[i]
            elif pb < pa and j + 1 < len(b):
                j += 1
                pb *= b[j][1]
            else:
                return None
        if j > sj:          # one input axis (or a run) became several output axes
            tags.update({b[k][0]: "split" if i == si else "regrouped" for k in range(sj, j + 1)})
        elif i > si:
            tags[b[j][0]] = "merged"
        i, j = i + 1, j + 1
    return tags


def changes(op: str, ins: list[list[Axis]], out: list[Axis]) -> tuple[list, list, Axis | None]:
    """Tag the output axes the step changes; return (out, gone axes, the axis that was cut)."""
    first = ins[0] if ins else []
    cut = None
    gone = []
    if op in LAYOUT_OPS or op in MOVE_OPS:
        pos_in = [a.atoms for a in first]
        for k, a in enumerate(out):
            if a.atoms in pos_in:
                if op in MOVE_OPS and (k >= len(pos_in) or pos_in[k] != a.atoms):
                    a.tag = "moved"
                continue
            a.tag, src = _regrouped(op, first, a)
            cut = cut or src
        if op in LAYOUT_OPS and any(a.tag == "new" and a.ex != 1 for a in out):
            # the provenance lost the thread (sizes bound at a block call): a view moves no
            # element, so an axis it makes is a piece or a merge of the input's, never new
            by_size = _groups(first, out) or {}
            for k, a in enumerate(out):
                if a.tag == "new" and k in by_size:
                    a.tag = by_size[k]
    elif op in ("add", "sub", "mul", "div", "mask", "where") or op.startswith("binary"):
        for axes in ins:
            shift = len(out) - len(axes)
            for k, a in enumerate(out):
                j = k - shift
                if (j < 0 or axes[j].ex == 1 and a.ex != 1 or axes[j].size == "1" and a.size != "1"):
                    a.tag = "broadcast"
    elif op in RESIZE_WORDS:
        for k, a in enumerate(out):
            if k < len(first) and (first[k].size != a.size):
                a.tag = RESIZE_WORDS[op]
    elif op in ("linear", "matmul") and first and out:
        # the product sums over the last axis of the left operand; a learned map (a 2-D weight)
        # gives the last axis new features
        gone.append(Axis(first[-1].size, first[-1].ex, first[-1].atoms, first[-1].root,
                         first[-1].depth, "contracted"))
        if op == "linear" or len(ins) > 1 and len(ins[1]) == 2:
            out[-1].tag = "new"
        return out, gone, None
    elif op not in ("block", "stack"):
        seen = {a.atoms for axes in ins for a in axes}
        for a in out:
            if a.atoms and a.atoms not in seen:
                a.tag = "new"
    kept = {a.atoms for a in out}
    if op in CONTRACT_OPS or op in REDUCE_OPS:
        word = TABLE[op].contracts if op in TABLE and TABLE[op].contracts else "contracted" \
            if op in CONTRACT_OPS else "indexed" if op == "select" else "reduced"
        for axes in ins:
            for a in axes:
                if a.atoms not in kept and a.atoms and all(a.atoms != g.atoms for g in gone):
                    gone.append(Axis(a.size, a.ex, a.atoms, a.root, a.depth, word))
    return out, gone, cut


def pretty(size: str) -> str:
    """A size as the text trace's formulas read: `·` for a product, `²` for a square."""
    return _POWER.sub(lambda m: m.group(1).translate(_SUPERSCRIPT), size.replace("**", "^")).replace("*", "·")


_POWER = re.compile(r"\^(\d+)")
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def text_width(s: str) -> float:
    return CHAR_W * len(s)


def _box_width(a: Axis) -> int:
    text = max(len(pretty(a.size)), len(str(a.ex or "")))
    ex = a.ex if isinstance(a.ex, int) and a.ex > 1 else 2
    return int(min(150, max(52, 8 * min(text, 17) + 20, 7 * len(a.tag) + 12, 40 + 9 * math.log2(ex))))


def _text(x, y, s, cls="", anchor="middle") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="{anchor}"{c}>{escape(str(s))}</text>'


def _boxes(axes, x, y, colours, gone=False, marks=None) -> tuple[list, int]:
    parts = []
    for k, a in enumerate(axes):
        w = _box_width(a)
        stroke = ' class="axis changed"' if a.tag else ' class="axis"'
        dash = ' stroke-dasharray="5 3"' if gone else ""
        size = pretty(a.size)
        title = f"{size} = {a.ex}" if a.ex is not None else size
        if a.size == "[]":
            title = "a 0-d tensor: one value, no axes"
        elif a.label != a.size:
            title += f"; elements from {pretty(a.label)}"
        mark = (marks or {}).get(k)
        parts.append(f'<g data-axis="{escape(pretty(a.label))}" data-tag="{a.tag}"><title>{escape(title)}</title>'
                     f'<rect{stroke} x="{x}" y="{y}" width="{w}" height="{BOX_H}" rx="4"'
                     f'{colours.paint(a)}{dash}/>'
                     + _text(x + w / 2, y + 19, size if len(size) <= 17 else size[:16] + "…", "size")
                     + _text(x + w / 2, y + 36, a.ex if a.ex is not None else "?", "ex")
                     + (_text(x + w / 2, y + BOX_H + 15, a.tag, "tag") if a.tag else "")
                     + (f'<g class="mark" data-mark="{escape(mark)}"><path d="M{x + 3} {y + BOX_H + 20} '
                        f'h{w - 6}" class="mark"/>' + _text(x + w / 2, y + BOX_H + 33, mark, "mark")
                        + "</g>" if mark else "") + "</g>")
        x += max(w, text_width(mark) if mark else 0) + GAP
    return parts, x


def _bar(whole: Axis, pieces: list, x, y, colours, merged=False) -> tuple[list, int, int]:
    """A split or a merge as a bar of slices: D split into H slices of Dh, or H slices of Dh
    merged back into D."""
    n = pieces[0].ex if pieces and isinstance(pieces[0].ex, int) else 2
    shown = max(1, min(n, 16))
    names = " × ".join(pretty(p.size) for p in pieces)
    cap = f"{names} merged into {pretty(whole.size)}" if merged else f"{pretty(whole.size)} split into {names}"
    more = f" (first {shown} of {n})" if shown < n else ""
    last = pieces[-1].ex if pieces[-1].ex is not None else "?"
    note = f"{pretty(pieces[0].size)}={n} slices of {pretty(pieces[-1].size)}={last}{more}"
    width = max(320, text_width(cap), text_width(note))
    w = 320 / shown
    parts = [f'<g class="bar" data-bar="{"merge" if merged else "split"}">', _text(x, y - 6, cap, "cap", "start")]
    for k in range(shown):
        piece = pieces[-1] if k % 2 == 0 else pieces[0]
        parts.append(f'<rect class="slice" x="{x + k * w:.1f}" y="{y}" width="{w:.1f}" height="18"'
                     f'{colours.paint(piece)}/>')
    parts.append(_text(x, y + 32, note, "note", "start"))
    parts.append("</g>")
    return parts, int(width) + 8, 40


def _grid(rows: Axis, cols: Axis, x, y, colours, title: str, names=("", ""), masked=None,
          caption: str = "") -> tuple[list, int, int]:
    """A rows × cols grid of cells (at most MAX_CELLS a side), each row led by a cell in the row
    axis's colour. `masked(i, j)`, when given, says which cells a mask hides (drawn dark and
    crossed: the causal triangle). Every label lies inside the width returned."""
    nr = rows.ex if isinstance(rows.ex, int) else 4
    nc = cols.ex if isinstance(cols.ex, int) else 4
    sr, sc = max(1, min(nr, MAX_CELLS)), max(1, min(nc, MAX_CELLS))
    cell = 12
    row_label = f"{names[0]}{pretty(rows.size)} ({nr})"
    col_label = f"{names[1]}{pretty(cols.size)} ({nc})"
    left = int(text_width(row_label)) + cell + 12      # the row label ends before the row cells
    gx = x + left
    parts = [f'<g class="grid" data-rows="{escape(pretty(rows.label))}" data-cols="{escape(pretty(cols.label))}">',
             _text(x, y, title, "cap", "start"),
             _text(gx, y + 16, col_label, "note", "start")]
    hidden = 0
    for i in range(sr):
        parts.append(f'<rect x="{gx - cell}" y="{y + 22 + i * cell}" width="{cell - 3}" '
                     f'height="{cell - 1}"{colours.paint(rows)}/>')
        for j in range(sc):
            off = masked is not None and masked(i, j)
            hidden += off
            paint = ' class="masked" fill="#4a4a52"' if off else colours.paint(cols)
            parts.append(f'<rect x="{gx + j * cell}" y="{y + 22 + i * cell}" width="{cell - 1}" '
                         f'height="{cell - 1}"{paint}/>')
    parts.append(_text(x, y + 30 + sr * cell / 2, row_label, "note", "start"))
    height = 22 + sr * cell + 8
    notes = ([f"dark: masked (-inf), a query sees no later key ({hidden} of {sr * sc} shown)"]
             if masked is not None else []) + ([caption] if caption else [])
    for k, note in enumerate(notes):
        parts.append(_text(x, y + height + 10 + 16 * k, note, "note", "start"))
    height += 16 * len(notes) + (4 if notes else 0)
    parts.append("</g>")
    width = max(left + sc * cell + 8, text_width(title), left + text_width(col_label),
                *(text_width(n) for n in notes))
    return parts, int(width) + 8, height


def _swapped(ins, out):
    """The two axes a transpose swapped, as (before pair, after pair), or None."""
    if not ins or len(ins[0]) != len(out):
        return None
    moved = [k for k, a in enumerate(out) if a.tag == "moved"]
    if len(moved) != 2:
        return None
    i, j = moved
    return (ins[0][i], ins[0][j]), (out[i], out[j])


def _scores(tp, out):
    """Attention scores: the last axis is the key axis of the product (not a feature axis)."""
    if tp is None or tp.keys is None or len(out) < 2 or not tp.axes or tp.axes[-1] != tp.keys:
        return None
    if any(getattr(a, "feature", False) for a in tp.keys):
        return None
    return out[-2], out[-1]


def _merged(ins, out):
    """The axis a view merged and the input axes it merged (H, Dh -> D), or None."""
    first = ins[0] if ins else []
    for a in out:
        if a.tag != "merged":
            continue
        pieces = [b for b in first if b.atoms and b.atoms != a.atoms and (
            set(b.atoms) <= set(a.atoms) or b.root is not None and b.root == a.root and b.depth > a.depth)]
        if len(pieces) >= 2:
            return a, pieces
    return None


def _causal(detail, rows: Axis, cols: Axis):
    """Which cells of the grid a causal mask hides: key j after query i (aligned at the end
    when there are more keys than queries, as with a cache)."""
    nr = rows.ex if isinstance(rows.ex, int) else 4
    nc = cols.ex if isinstance(cols.ex, int) else 4
    shift = nc - nr if nc >= nr else 0
    return lambda i, j: j > i + shift


def step_svg(spec, op: str, ins: list, out: list, tp, colours: Colours, gone=(), cut=None,
             dtype: str | None = None, detail=None) -> tuple:
    """The figure of one step: its output axes (changed ones tagged), gone axes, and a picture of
    a split or merge, a swap, attention scores or a causal mask where the step has one; the axis
    a softmax normalises is marked. A dtype other than the default float32 (`bool`, `int`,
    `float16`) is written after the boxes. A 0-d result (a scalar such as YaRN's mscale) is one
    box with no size: `[]`, one value."""
    detail = detail or {}
    marks = {}
    if op in SOFTMAX_OPS and isinstance(detail.get("dim"), int) and out:
        marks[detail["dim"] % len(out)] = "sums to 1 along here"
    parts, x = _boxes(out or [Axis("[]", 1, (), None, 0)], 4, 4, colours, marks=marks)
    if dtype and dtype != "float":
        parts.append(f'<g class="dtype" data-dtype="{escape(dtype)}"><title>dtype: {escape(dtype)}</title>'
                     + _text(x + 6, 4 + BOX_H / 2 + 4, dtype, "dtype", "start") + "</g>")
        x += 12 + 8 * len(dtype)
    if gone:
        parts.append(_text(x + 4, 4 + BOX_H / 2 + 4, "gone:", "note", "start"))
        more, x = _boxes(gone, x + 48, 4, colours, gone=True)
        parts += more
    width, height = x, BOX_H + (40 if marks else 26)
    extras = []
    if cut is not None:
        pieces = [a for a in out if a.tag == "split"]
        if pieces:
            extras.append(_bar(cut, pieces, 0, 6, colours))
    merge = _merged(ins, out) if op in LAYOUT_OPS else None
    if merge is not None:
        extras.append(_bar(merge[0], merge[1], 0, 6, colours, merged=True))
    swap = _swapped(ins, out) if op in MOVE_OPS else None
    if swap is not None:
        (a, b), (c, d) = swap
        pic1, w1, h1 = _grid(a, b, 0, 0, colours, "before")
        pic2, w2, h2 = _grid(c, d, 0, 0, colours, "after")
        extras.append((['<g transform="translate(0,0)">'] + pic1 + ["</g>",
                       f'<g transform="translate({w1 + 16},0)">'] + pic2 + ["</g>"], w1 + w2 + 16,
                       max(h1, h2)))
    sc = _scores(tp, out)
    title, names = "scores: query × key", ("query ", "key ")
    causal = op == "mask" and detail.get("kind") == "causal" and len(out) >= 2
    normalised = len(out) >= 2 and marks.get(len(out) - 1)
    if sc is None and (causal or normalised):
        sc, title, names = (out[-2], out[-1]), "rows × the last axis", ("", "")
    if sc is not None:
        caption = ("each query row sums to 1 over the keys" if names[0] else "each row sums to 1") \
            if normalised else ""
        extras.append(_grid(sc[0], sc[1], 0, 0, colours, title, names,
                            _causal(detail, *sc) if causal else None, caption))
    y = height + 6
    for pic, w, h in extras:
        parts.append(f'<g transform="translate(4,{y + 12})">' + "".join(pic) + "</g>")
        y += h + 16
        width = max(width, w + 8)
    height = y if extras else height
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="fig" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}" role="img">' + "".join(parts) + "</svg>",
            width, height)
