"""HTML renderer: the trace as a picture, a self-contained page (no network access).

`trace_html` gives the page `shapelang trace --format html` writes; `trace_fragment` the same
walk-through as one <div> for notebooks (`CheckedSpec._repr_html_`); `trace_svg` one SVG
figure. Declarations and bindings appear in file order; each binding is a collapsible block
of its steps, each step its output tensor drawn axis by axis (shapelang.render.svg), with
its parameters and FLOPs; a diagnostic sits on the line where it occurs. Nothing is loaded
from the network; every piece of spec text is escaped.
"""
from __future__ import annotations

import base64
import hashlib
from html import escape

from ..checker import dims as dimlib
from ..checker import dtypes
from ..checker.ir import CheckedSpec
from ..checker.lazysympy import sympy as sp
from . import overview, table
from .columns import wrap_line
from .common import example_number, fixed_sizes, notation, shape_text, shapes_in
from .style import CSS, svg_style
from .svg import Colours, axes_of, changes, pretty, step_svg, text_width
from .text import diagnostic_text

SCRIPT = """
document.querySelectorAll('[data-toggle]').forEach(function (b) {
  b.addEventListener('click', function () {
    var open = b.getAttribute('data-toggle') === 'open';
    document.querySelectorAll('.shapelang-trace details').forEach(function (d) { d.open = open; });
  });
});
"""

SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
MAX_OPEN_STEPS = 60     # bindings open by default until this many steps are shown


def _pshape(shape, spec) -> str:
    """A shape as the text trace writes it, in the pictures' notation (`²`, `·`)."""
    return pretty(shape_text(shape, spec))


def _n(spec, e) -> str:
    """A count (parameters, FLOPs, a size argument) as the text trace writes it: the textbook
    formula (`2·D² + 2·D`, by the trace table's own printer) and its value where the sizes
    are known."""
    if e == 0:
        return ""
    n = example_number(spec, e)
    book = spec.__dict__.get("_trace_printer")
    if book is None:
        book = spec.__dict__["_trace_printer"] = table.Printer(spec)
    sym = pretty(book.formula(e))
    if n is None:
        return sym
    return f"{n:,}" if sym == str(n) else f"{sym} = {n:,}"


class _Page:
    """Builds the walk-through of one checked spec."""

    def __init__(self, spec: CheckedSpec, lines: tuple | None = None, lazy: bool = False):
        self.spec = spec
        self.lazy = lazy        # blocks drawn only when opened (block_body), for a live page
        self.deferred: list = []
        self.lines = lines      # (first, last): draw only what is written on these lines
        self.colours = Colours()
        self.types: dict = {}
        self.names: dict = {}       # step ref -> the binding it belongs to
        self.results: dict = {}     # binding name -> the ref of its tensor
        self.open_steps = 0
        self.by_line: dict[int, list] = {}
        for d in spec.diagnostics:
            if lines is not None and not lines[0] <= d.span.line <= lines[1]:
                continue
            self.by_line.setdefault(d.span.line, []).append(d)
        self.placed: set = set()
        self.drawn_blocks: dict = {}    # id(BlockIR) -> line of the call that drew it
        # the layout both outputs share: every figure and diagnostic in page order, as
        # ("figure", heading, svg, width, height) or ("diagnostic", Diagnostic)
        self.pieces: list = []

    def figure(self, heading: str, drawn: tuple, ref: str = "") -> str:
        svg, w, h = drawn
        self.pieces.append(("figure", heading, svg, w, h, ref))
        return f'<div class="scroll">{svg}</div>'    # drawn at its size: text stays readable on a phone

    # -------------------------------------------------------------- pieces
    def diagnostics_at(self, first: int, last: int) -> str:
        out = []
        for line in range(first, last + 1):
            for d in self.by_line.get(line, ()):
                if id(d) not in self.placed:
                    self.placed.add(id(d))
                    self.pieces.append(("diagnostic", d))
                    out.append(self.diagnostic(d))
        return "".join(out)

    def diagnostic(self, d) -> str:
        text = diagnostic_text(d, self.spec.path, self.spec.source)
        return (f'<div class="diag {escape(d.severity)}" data-diagnostic="{escape(d.code)}" '
                f'data-line="{d.span.line}"><pre>{escape(text)}</pre></div>')

    def remember(self, decls, bindings):
        for b in bindings:
            for n, r in zip(b.names, getattr(b, "results", ())):
                self.results[n] = r
            for s in b.steps:
                self.names[s.ref] = ", ".join(b.names)
        for dcl in decls:
            self.types[dcl.name] = (dcl.type.shape, None)
        for b in bindings:
            for s in b.steps:
                tps = s.provenance or ()
                for k, t in enumerate(s.outputs):
                    tp = tps[k] if k < len(tps) else None
                    self.types[f"{s.ref}.{k}"] = (t.shape, tp)
                self.types[s.ref] = (s.out.shape, tps[0] if tps else None)

    def decl(self, dcl, in_block: bool = False) -> str:
        spec = self.spec
        axes = axes_of(spec, dcl.type.shape, None)
        svg = self.figure(f"{dcl.name}: {dcl.kind} {_pshape(dcl.type.shape, spec)}  (line {dcl.span.line})",
                          step_svg(spec, dcl.kind, [], axes, None, self.colours, dtype=dcl.type.dtype), dcl.name)
        n = sp.Integer(1)
        for x in dcl.type.shape:
            n *= x
        params = f' <span class="nums">params {escape(_n(spec, n))}</span>' if dcl.kind == "param" else ""
        kind = dcl.kind + ("" if dcl.type.dtype == "float" else f" {dcl.type.dtype}")
        anchor = "" if in_block else f' id="{escape(overview.anchor(dcl.name))}"'
        return (f'<div class="decl"{anchor} data-binding="{escape(dcl.name)}" data-kind="{escape(dcl.kind)}">'
                f'<b>{escape(dcl.name)}</b> <span class="nums">{escape(kind)}, line {dcl.span.line}</span> '
                f'<span class="shape">{escape(_pshape(dcl.type.shape, self.spec))}</span>{params}{svg}'
                + self.diagnostics_at(dcl.span.line, dcl.span.line) + "</div>")

    def step(self, s) -> str:
        spec = self.spec
        ins = [axes_of(spec, *self.types[r]) for r in s.inputs if r in self.types]
        tps = s.provenance or ()
        blocks = []
        for k, t in enumerate(s.outputs):
            out = axes_of(spec, t.shape, tps[k] if k < len(tps) else None)
            out, gone, cut = changes(s.op, ins, out)
            svg = self.figure(f"{self.names.get(s.ref, '')}: {s.text}  (line {s.span.line})"
                              + (f", output {k + 1}" if len(s.outputs) > 1 else ""),
                              step_svg(spec, s.op, ins, out, tps[k] if k < len(tps) else None,
                                       self.colours, gone, cut, t.dtype, s.detail), s.ref)
            named = [f"{a.tag}: {pretty(a.size)}" for a in out + gone if a.tag]
            label = f"output {k + 1}: " if len(s.outputs) > 1 else ""
            blocks.append(f'<div class="shape">{escape(label)}{escape(_pshape(t.shape, self.spec))}'
                          f'{escape(dtypes.suffix(t.dtype))}</div>'
                          + (f'<div class="changed-names">{escape("; ".join(named))}</div>' if named else "")
                          + svg)
        nums = []
        if s.params != 0:
            nums.append(f"params {_n(spec, s.params)}")
        if s.flops != 0:
            nums.append(f"FLOPs {_n(spec, s.flops)}")
        in_shapes = shapes_in(s.op, [_pshape(self.types[r][0], self.spec) for r in s.inputs if r in self.types])
        return (f'<div class="step" data-step="{escape(s.ref)}" data-op="{escape(s.op)}">'
                f'<span class="op">{escape(s.text)}</span> <span class="nums">line {s.span.line}'
                + (f", from {escape(in_shapes)}" if in_shapes else "") + "</span>"
                + (f' <span class="nums">{escape(", ".join(nums))}</span>' if nums else "")
                + "".join(blocks) + "</div>")

    def binding(self, b, in_block=False) -> str:
        name = ", ".join(b.names)
        shapes = " | ".join(_pshape(t.shape, self.spec) + dtypes.suffix(t.dtype) for t in b.types)
        self.open_steps += len(b.steps)
        opened = " open" if not in_block and self.open_steps <= MAX_OPEN_STEPS else ""
        last = max([b.span.end_line or b.span.line] + [s.span.line for s in b.steps])
        body = "".join(self.step(s) for s in b.steps)
        if not b.steps:     # a name for a tensor computed before (`present_k: k`): draw it as it is
            body = "".join(self.figure(f"{name}  (line {b.span.line})",
                                       step_svg(self.spec, "same", [], axes_of(self.spec, t.shape, None),
                                                None, self.colours)) for t in b.types)
        for s in b.steps:
            if s.block is not None:
                body += self.block(s.block, s)
        anchor = "" if in_block else f' id="{escape(overview.anchor(name))}"'
        return (f'<details class="binding"{opened}{anchor} data-binding="{escape(name)}">'
                f'<summary>{escape(name)} <span class="shape">{escape(shapes)}</span> '
                f'<span class="nums">line {b.span.line}, {len(b.steps)} step'
                f'{"s" if len(b.steps) != 1 else ""}</span></summary>{body}'
                + self.diagnostics_at(b.span.line, last) + "</details>")

    def unfinished(self, u) -> str:
        """A binding the checker stopped at an error: the steps that checked, then the failing
        step with its operands drawn side by side and the clashing axes marked, and the error.
        One the checker skipped (it reads a name an error left without a shape): "not checked"."""
        name = ", ".join(u.names)
        self.remember([], [type("B", (), {"names": u.names, "steps": u.steps})])
        body = "".join(self.step(s) for s in u.steps)
        errors = [d for d in self.by_line.get(u.span.line, ()) if d.code == u.code]
        if errors:
            body += self.operands(errors[0])
        if u.code is None or not errors:
            what = "not checked: it reads a name that an error above left without a shape"
        else:
            what = f"stopped by error[{u.code}] after {len(u.steps)} step{'s' if len(u.steps) != 1 else ''}"
        return (f'<details class="binding unfinished" open id="{escape(overview.anchor(name))}" '
                f'data-binding="{escape(name)}" data-unfinished="{escape(u.code or "")}">'
                f'<summary>{escape(name)} <span class="nums unchecked">line {u.span.line}, {escape(what)}</span>'
                f'</summary>{body}' + self.diagnostics_at(u.span.line, u.span.end_line or u.span.line)
                + "</details>")

    def operands(self, d) -> str:
        """The tensors a failing step read, as the error's labels point at them in the source
        (a name only), side by side; for a matrix product the inner axes that differ are
        marked `clash` (the left's last, the right's second to last)."""
        lines = self.spec.source.split("\n")
        named = []
        for span, _ in d.labels:
            if span.line != span.end_line or not 0 < span.line <= len(lines):
                continue
            text = lines[span.line - 1][span.column - 1:span.end_column - 1].strip("() ")
            ref = self.results.get(text, text)
            if ref in self.types:
                named.append((text, ref))
        if not named:
            return ""
        figs = []
        for k, (name, ref) in enumerate(named):
            axes = axes_of(self.spec, *self.types[ref])
            if d.code == "E101" and len(named) == 2 and len(axes) >= 2 - k:
                axes[-1 - k].tag = "clash"
            figs.append(f'<div class="operand"><span class="nums">{"left" if k == 0 else "right"} operand '
                        f'<b>{escape(name)}</b></span> <span class="shape">'
                        f'{escape(_pshape(self.types[ref][0], self.spec))}</span>'
                        + self.figure(f"{name}: operand of the failing step (line {d.span.line})",
                                      step_svg(self.spec, "same", [], axes, None, self.colours), name)
                        + "</div>")
        return f'<div class="step failing" data-failing="{escape(d.code)}">' + "".join(figs) + "</div>"

    def block(self, ir, call) -> str:
        """A block instance, drawn once (a block called again at the same shapes, or called
        from a block called many times, refers to the drawing: the page stays linear)."""
        spec = self.spec
        if id(ir) in self.drawn_blocks:
            return (f'<div class="nums" data-block-ref="{escape(ir.name)}">block {escape(ir.name)} at these '
                    f'shapes: drawn under line {self.drawn_blocks[id(ir)]}</div>')
        self.drawn_blocks[id(ir)] = call.span.line
        args = ", ".join([f"{d.name}: {_pshape(d.type.shape, self.spec)}" for d in ir.inputs]
                         + [f"{k} = {_n(spec, v)}" for k, v in ir.size_args.items()])
        count = call.detail.get("count")
        times = f" × {dimlib.show(count, notation(self.spec))}" if count is not None else ""
        head = (f'<summary>block {escape(ir.name)}({escape(args)}){escape(times)} <span class="nums">params '
                f'per instance {escape(_n(spec, ir.total_params) or "0")}</span></summary>')
        if self.lazy:       # drawn when the reader opens it (block_body)
            self.deferred.append(ir)
            return (f'<details class="block" data-block="{escape(ir.name)}" '
                    f'data-lazy="{len(self.deferred) - 1}">{head}<div class="nums">drawing…</div></details>')
        return f'<details class="block" data-block="{escape(ir.name)}">{head}{self.block_body(ir)}</details>'

    def drawn(self, line: int, draw, *args) -> tuple:
        """(line, html, the layout pieces it drew): items are drawn in one order and shown in
        line order, and the shared layout follows the order shown."""
        start = len(self.pieces)
        html = draw(*args)
        chunk = self.pieces[start:]
        del self.pieces[start:]
        return line, html, chunk

    def block_body(self, ir) -> str:
        """The declarations and bindings of a block instance, in line order."""
        self.remember(ir.inputs + ir.params + ir.buffers, ir.bindings)
        items = [self.drawn(d.span.line, self.decl, d, True) for d in ir.params + ir.buffers]
        items += [self.drawn(b.span.line, self.binding, b, True) for b in ir.bindings]
        items.sort(key=lambda t: t[0])
        for _, _, chunk in items:
            self.pieces += chunk
        return "".join(html for _, html, _ in items)

    # -------------------------------------------------------------- whole
    def body(self) -> str:
        return "".join(self.items())

    def items(self) -> list[str]:
        """The page's top-level pieces in order: declarations, bindings and the diagnostics
        between them (each piece whole HTML, so a client can keep the ones that did not change)."""
        spec = self.spec
        self.remember(spec.decls, spec.bindings)
        items = [self.drawn(d.span.line, self.decl, d) for d in spec.decls]
        items += [self.drawn(b.span.line, self.binding, b) for b in spec.bindings]
        items += [self.drawn(u.span.line, self.unfinished, u) for u in spec.unfinished]
        items.sort(key=lambda t: t[0])
        if self.lines is not None:
            items = [t for t in items if self.lines[0] <= t[0] <= self.lines[1]]
        html = []
        for line, item, chunk in items:
            html.append(self.diagnostics_before(line))
            html.append(item)
            self.pieces += chunk
        html.append(self.diagnostics_before(None))
        return [h for h in html if h]

    def diagnostics_before(self, line) -> str:
        out = []
        for ln in sorted(self.by_line):
            if line is not None and ln >= line:
                break
            out.append(self.diagnostics_at(ln, ln))
        return "".join(out)

    def facts(self) -> list[str]:
        """The header's lines after the title: the sizes, the status, the totals."""
        spec = self.spec
        given = ", ".join(f"{k}={v}" for k, v in spec.example.items() if k in spec.dims)
        fixed = ", ".join(f"{k}={v}" for k, v in fixed_sizes(spec).items())
        n_err = len(spec.errors())
        n_warn = len(spec.diagnostics) - n_err
        status = "ok: every step proved" if not spec.diagnostics else \
            f"{n_err} error{'s' if n_err != 1 else ''}, {n_warn} warning{'s' if n_warn != 1 else ''}"
        sizes = f"example: {given}" if given else f"fixed sizes: {fixed}; no example for the others" \
            if fixed else "no example sizes: boxes show the symbolic sizes only"
        return [sizes, status, (f"total parameters: {_n(spec, spec.total_params) or '0'}; "
                                f"forward multiply-add FLOPs: {_n(spec, spec.total_flops) or '0'}")]

    def header(self, title: str) -> str:
        sizes, status, totals = self.facts()
        return (f'<h1>{escape(title)}</h1><div class="meta">{escape(sizes)}</div>'
                f'<div class="meta" data-status="{"ok" if self.spec.ok else "error"}">{escape(status)}</div>'
                f'<div class="meta">{escape(totals)}</div>'
                + (overview.overview_svg(self.spec) if self.lines is None else ""))

    def dims(self) -> list:
        """The legend's entries: the logical axes by name (dims, never a number or a formula)."""
        return [(name, h) for name, h in self.colours.hues.items() if name.isidentifier()]

    def legend(self) -> str:
        spans = "".join(f'<span class="dim" style="--h:{h}">{escape(name)}</span>' for name, h in self.dims())
        return (f'<div class="legend">axes: {spans} <span style="border:3px solid #c22">changed by the '
                f'step</span> <span style="border:1px dashed #556">gone (contracted or reduced)</span></div>')


def trace_fragment(spec: CheckedSpec, title: str | None = None, lines: tuple | None = None) -> str:
    """The walk-through as one <div> with its own style and background (for notebooks, light
    or dark); with `lines` (first, last), only the declarations, bindings and diagnostics
    written there."""
    page = _Page(spec, lines)
    body = page.body()
    return (f'<div class="shapelang-trace"><style>{CSS}</style>'
            + page.header(title or f"trace of {spec.path}") + page.legend() + body + "</div>")


def trace_live(spec: CheckedSpec, title: str):
    """For a live page (`serve`): the page object (keep it to draw a block when it is opened,
    `page.block_body(page.deferred[k])`), the head (title, facts, legend) and the top-level
    pieces. Together they are `trace_fragment`, with each block left to draw on opening."""
    page = _Page(spec, lazy=True)
    items = page.items()
    return page, page.header(title) + page.legend(), items


def trace_html(spec: CheckedSpec) -> str:
    """A whole page: no script or style from anywhere else, no fonts, no images to fetch."""
    page = _Page(spec)
    body = page.body()
    title = f"trace of {spec.path}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta name=\"color-scheme\" content=\"light dark\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            f"style-src 'unsafe-inline'; script-src 'sha256-{SCRIPT_HASH}'\">"
            f"<title>{escape(title)}</title><style>body{{margin:0}}{CSS}</style></head><body>"
            f'<div class="shapelang-trace">{page.header(title)}'
            '<div><button type="button" data-toggle="open">expand all</button>'
            '<button type="button" data-toggle="close">collapse all</button></div>'
            f"{page.legend()}{body}</div><script>{SCRIPT}</script></body></html>\n")


SVG_WRAP = 100      # characters of a diagnostic's line in the SVG before it wraps


def trace_svg(spec: CheckedSpec) -> str:
    """One SVG figure of the same layout as the HTML page: the header, the legend, then every
    declaration, step and block step one under another, with the diagnostics, wrapped and
    whole, where they occur."""
    page = _Page(spec)
    page.body()
    parts, y, width = [], 8, 400

    def line(text, cls, x=4, mono=False):
        nonlocal y, width
        parts.append(f'<text class="{cls}" x="{x}" y="{y + 12}"'
                     + (' font-family="monospace" xml:space="preserve"' if mono else "")
                     + f">{escape(text)}</text>")
        y += 18
        width = max(width, x + text_width(text) + 8)

    line(f"trace of {spec.path}", "head")
    for fact in page.facts():
        line(fact, "note")
    x = 4
    parts.append(f'<text class="note" x="4" y="{y + 12}">axes:</text>')
    x = 44
    for name, h in page.dims():
        w = text_width(name) + 12
        if x + w > max(width, 600):
            y, x = y + 22, 44
        parts.append(f'<rect x="{x}" y="{y}" width="{w:.0f}" height="18" rx="3" data-shade="0" '
                     f'style="--h:{h}" fill="hsl({h}, 70%, 88%)"/>'
                     f'<text x="{x + 6}" y="{y + 13}">{escape(name)}</text>')
        x += w + 4
    y += 28
    flow = overview.overview_figure(spec)
    if flow is not None:
        parts.append(flow[0].replace('<svg ', f'<svg x="0" y="{y}" ', 1))
        y += flow[2] + 12
        width = max(width, flow[1] + 8)
    for piece in page.pieces:
        if piece[0] == "figure":
            _, heading, fig, w, h, ref = piece
            parts.append(f'<text class="head" x="4" y="{y + 12}" data-step="{escape(ref)}">'
                         f'{escape(heading)}</text>')
            width = max(width, text_width(heading) + 8, w + 8)
            parts.append(fig.replace('<svg ', f'<svg x="0" y="{y + 18}" ', 1))
            y += h + 30
        else:
            d = piece[1]
            for raw in diagnostic_text(d, spec.path, spec.source).split("\n"):
                for ln in wrap_line(raw, SVG_WRAP, indent="    "):
                    line(ln.text, "tag" if d.severity == "error" else "dtype", mono=True)
            y += 6
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="shapelang-trace" viewBox="0 0 {width:.0f} '
            f'{y + 8}" width="{width:.0f}" height="{y + 8}"><style>{svg_style()}'
            "text.head{font-weight:600}</style>"
            '<rect class="page" width="100%" height="100%" fill="#fff"/>' + "".join(parts) + "</svg>\n")


def register() -> None:
    """Let notebooks show a checked spec as this picture (`CheckedSpec._repr_html_`)."""
    CheckedSpec.html_renderer = staticmethod(trace_fragment)


register()
