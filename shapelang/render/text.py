"""Text renderer: diagnostics with carets, for people (the trace table: table.py).

Nothing here decides anything: it prints what the checker computed. Each line comes with
the roles of its parts (`Line` spans: the severity, the gutter, the marks and their labels,
`note:` and `help:`), set where the line is written, for `shapelang.render.color` to paint;
the plain text is the lines' text alone.
"""
from __future__ import annotations

from ..checker.ir import CheckedSpec
from ..syntax.diagnostics import Diagnostic
from .columns import Line

# ------------------------------------------------------------------ diagnostics

def diagnostic_text(d: Diagnostic, path: str, source: str) -> str:
    """One diagnostic as rustc shows one: the header, each line it points at with `^^^`
    under the primary span and `---` with their text under the secondary labels, then the
    notes and the help."""
    return "\n".join(line.text for line in diagnostic_lines(d, path, source))


def diagnostic_lines(d: Diagnostic, path: str, source: str) -> list[Line]:
    """`diagnostic_text` as `Line`s with the roles of their parts."""
    lines = source.split("\n")
    where = f"{path}:{d.span.line}:{d.span.column}: "
    kind = f"{d.severity}[{d.code}]"
    out = _text(f"{where}{kind}: {d.message}",
                [(len(where), len(where) + len(kind), d.severity),
                 (len(where) + len(kind) + 1, None, "summary")])
    marks = _marks(d, lines)
    if marks:
        rows = sorted(marks)
        pad = " " * len(str(rows[-1]))
        out.append(_gutter(pad, ""))
        prev = None
        for row in rows:
            if prev is not None and row > prev + 1:
                out.append(Line("..."))
            out += _source_line(row, lines[row - 1].rstrip("\r"), marks[row], pad, d.severity)
            prev = row
        prefix = f"{pad} = "
    else:
        prefix = "  = "
    for kind, text in [("note", note) for note in d.notes] + ([("help", d.help)] if d.help else []):
        out += _text(f"{prefix}{kind}: {text}", [(len(prefix) - 2, len(prefix) - 1, "gutter"),
                                                  (len(prefix), len(prefix) + len(kind) + 1, kind)])
    return out


def _text(text: str, spans: list) -> list[Line]:
    """`text` as lines, the spans (end None: the end of the line) on its first line: a
    message or note that runs over several lines is plain text after its first."""
    first, *rest = text.split("\n")
    spans = [(a, len(first) if b is None else b, role) for a, b, role in spans]
    return [Line(first, [s for s in spans if s[0] < s[1] <= len(first)])] + [Line(r) for r in rest]


def _gutter(pad: str, rest: str, row: str = "", spans=()) -> Line:
    """`3 | rest`, or ` | rest` under a source line: the gutter and the roles in `rest`."""
    head = f"{row.ljust(len(pad))} |"
    at = len(head) + 1
    return Line(f"{head} {rest}" if rest else head,
                [(0, len(head), "gutter")] + [(at + a, at + b, role) for a, b, role in spans])


def _marks(d: Diagnostic, lines: list[str]) -> dict[int, list]:
    """Per line: (column, width, primary, text) of what is marked on it."""
    out: dict[int, list] = {}
    primary_text = None
    for span, text in d.labels:
        if span == d.span:
            primary_text = text
    for span, text, primary in [(d.span, primary_text, True)] + \
            [(s, t, False) for s, t in d.labels if s != d.span]:
        if not 0 < span.line <= len(lines):
            continue
        line = lines[span.line - 1].rstrip("\r")
        end = span.end_column if span.end_line == span.line else len(line) + 1
        width = max(1, min(end, len(line) + 1) - span.column)
        out.setdefault(span.line, []).append((span.column, width, primary, text))
    return out


def _source_line(row: int, text: str, items: list, pad: str, severity: str) -> list[Line]:
    """A source line and, under it, its marks: `^` primary (in the severity's colour), `-`
    secondary; the label of the mark that ends last follows the marks, the others hang below
    on `|` lines."""
    anchor = min((c for c, _, p, _ in items if p), default=min(c for c, *_ in items))
    shown, shift = _window(text, anchor)
    placed = []
    for col, width, primary, label in items:
        col -= shift
        if col < 1 or col > len(shown) + 1:
            continue
        placed.append((col, min(width, WINDOW // 2), primary, label))
    out = [_gutter(pad, shown, str(row))]
    if not placed:
        return out
    size = max(c + w for c, w, *_ in placed)
    under = [" "] * (size - 1)
    for col, width, primary, _ in sorted(placed, key=lambda m: not m[2]):   # primary first
        whole = primary or not any(p and c == col and w == width for c, w, p, _ in placed)
        if whole:
            for k in range(col - 1, col - 1 + width):
                under[k] = "^" if primary else "-"
    labelled = sorted((m for m in placed if m[3]), key=lambda m: m[0])
    inline = None
    if labelled and labelled[-1][0] + labelled[-1][1] == size:
        inline = labelled.pop()
    first = "".join(under).rstrip()
    spans = _runs(first, severity)
    if inline:
        spans.append((len(first) + 1, len(first) + 1 + len(inline[3]), _role(inline, severity)))
    out.append(_gutter(pad, first + (f" {inline[3]}" if inline else ""), spans=spans))
    if labelled:
        bars = [" "] * size
        for col, *_ in labelled:
            bars[col - 1] = "|"
        out.append(_gutter(pad, "".join(bars).rstrip(),
                           spans=[(col - 1, col, "label") for col, *_ in labelled]))
        for k in range(len(labelled) - 1, -1, -1):
            col, _, _, label = labelled[k]
            row_chars = [" "] * (col - 1)
            for c2, *_ in labelled[:k]:
                row_chars[c2 - 1] = "|"
            spans = [(c2 - 1, c2, "label") for c2, *_ in labelled[:k]]
            spans.append((col - 1, col - 1 + len(label), _role(labelled[k], severity)))
            out.append(_gutter(pad, "".join(row_chars) + label, spans=spans))
    return out


def _runs(marks: str, severity: str) -> list:
    """The runs of `^` (the severity's colour) and `-` (a secondary label's) in a marks line."""
    out, k = [], 0
    while k < len(marks):
        end = k
        while end < len(marks) and marks[end] == marks[k]:
            end += 1
        if marks[k] != " ":
            out.append((k, end, severity if marks[k] == "^" else "label"))
        k = end
    return out


def _role(mark, severity: str) -> str:
    return severity if mark[2] else "label"


WINDOW = 160   # characters of a source line shown around the caret


def _window(text: str, col: int) -> tuple[str, int]:
    """A long line cut to the part around column `col` (`…` where it is cut), and how many
    columns the shown text is shifted left."""
    if len(text) <= WINDOW:
        return text, 0
    start = max(0, min(col - 1 - WINDOW // 4, len(text) - WINDOW))
    shown = text[start:start + WINDOW]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + WINDOW < len(text) else ""
    return prefix + shown + suffix, start - len(prefix)


def explain_footer(diagnostics) -> str:
    """The closing lines that point at `shapelang explain`, as rustc points at `--explain`."""
    codes = sorted({d.code for d in diagnostics})   # E before W
    if len(codes) == 1:
        kind = "error" if codes[0].startswith("E") else "warning"
        return f"For more about this {kind}, try `shapelang explain {codes[0]}`."
    return (f"Some of these have detailed explanations: {', '.join(codes)}.\n"
            f"For more about one of them, try `shapelang explain {codes[0]}`.")


def check_text(spec: CheckedSpec) -> str:
    return "\n".join(line.text for line in check_lines(spec)) + "\n"


def check_lines(spec: CheckedSpec) -> list[Line]:
    """What `check` prints for one spec, as `Line`s with the roles of their parts: each
    diagnostic, then the count (or `ok`)."""
    out = []
    for d in spec.diagnostics:
        out += diagnostic_lines(d, spec.path, spec.source) + [Line("")]
    n_err = len(spec.errors())
    n_warn = len(spec.diagnostics) - n_err
    if n_err or n_warn:
        out += _text(f"{spec.path}: {n_err} error{'s' if n_err != 1 else ''}, "
                     f"{n_warn} warning{'s' if n_warn != 1 else ''}\n" + explain_footer(spec.diagnostics), [])
    else:
        n_steps = sum(len(b.steps) for b in spec.bindings)
        n_steps += sum(len(b.steps) for insts in spec.blocks.values() for ir in insts
                       for b in ir.bindings)
        out.append(Line(f"{spec.path}: ok ({len(spec.bindings)} bindings, {n_steps} steps proved "
                        "for all sizes that satisfy the assumptions)"))
    return out
