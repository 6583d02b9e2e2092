"""The dataflow overview at the top of a picture: the spec's inputs and bindings as a small
graph (Q, K and V branching from X, meeting in the scores, merged, added back), each node a
link to its steps.

Read from the checked IR only (each step's inputs). Laid out in layers, top to bottom: a
node sits one layer below the lowest of the nodes it reads, and within a layer nodes keep
the order of the file (a simple layered layout; the graphs are small and mostly chains, so
no crossing minimisation is needed to read them). Parameters and buffers are left out:
they belong to the steps that use them.
"""
from __future__ import annotations

from html import escape

from .svg import text_width

MIN_BINDINGS = 4        # drawn for specs with more than 3 bindings
NODE_H = 24
ROW_H = 52
GAP = 14


def anchor(name: str) -> str:
    """The id of a binding's block on the page (the overview links to it)."""
    return "binding-" + "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def graph(spec) -> tuple[list, list]:
    """Nodes (name, kind) in file order and edges (from, to) between them."""
    inputs = [d.name for d in spec.decls if d.kind == "input"]
    owner = {}
    for b in spec.bindings:
        for s in b.steps:
            owner[s.ref] = ", ".join(b.names)
    nodes = [(n, "input") for n in inputs] + [(", ".join(b.names), "binding") for b in spec.bindings]
    edges = []
    for b in spec.bindings:
        me = ", ".join(b.names)
        for s in b.steps:
            for r in s.inputs:
                src = owner.get(r, owner.get(r.split(".")[0], r if r in inputs else None))
                if src is not None and src != me and (src, me) not in edges:
                    edges.append((src, me))
    return nodes, edges


def overview_svg(spec) -> str:
    """The overview as one SVG in its own block, or "" for a spec of 3 bindings or fewer."""
    fig = overview_figure(spec)
    return f'<div class="overview">{fig[0]}</div>' if fig else ""


def overview_figure(spec) -> tuple | None:
    """The overview as (svg, width, height), or None for a spec of 3 bindings or fewer."""
    if len(spec.bindings) < MIN_BINDINGS:
        return None
    nodes, edges = graph(spec)
    names = [n for n, _ in nodes]
    layer = {}
    for n in names:          # file order is a topological order: a binding reads earlier names
        layer[n] = 1 + max((layer[a] for a, b in edges if b == n and a in layer), default=-1)
    rows: dict[int, list] = {}
    for n in names:
        rows.setdefault(layer[n], []).append(n)
    where, width = {}, 0
    for k, row in sorted(rows.items()):
        x = 8
        for n in row:
            w = text_width(n) + 20
            where[n] = (x, 28 + k * ROW_H, w)
            x += w + GAP
        width = max(width, x)
    height = 28 + len(rows) * ROW_H
    kinds = dict(nodes)
    parts = ['<text x="8" y="16" class="cap">dataflow: each binding below the ones it reads</text>']
    for a, b in edges:
        xa, ya, wa = where[a]
        xb, yb, wb = where[b]
        x1, y1, x2, y2 = xa + wa / 2, ya + NODE_H, xb + wb / 2, yb
        mid = (y1 + y2) / 2
        parts.append(f'<path d="M{x1:.0f} {y1} C{x1:.0f} {mid:.0f} {x2:.0f} {mid:.0f} {x2:.0f} {y2 - 4}" '
                     f'marker-end="url(#arrow)" data-edge="{escape(a)}->{escape(b)}"/>')
    for n in names:
        x, y, w = where[n]
        parts.append(f'<a href="#{anchor(n)}" data-node="{escape(n)}" data-kind="{kinds[n]}">'
                     f'<rect x="{x}" y="{y}" width="{w:.0f}" height="{NODE_H}" rx="{12 if kinds[n] == "input" else 4}"/>'
                     f'<text x="{x + w / 2:.0f}" y="{y + 16}" text-anchor="middle">{escape(n)}</text></a>')
    width = max(width, text_width("dataflow: each binding below the ones it reads") + 16)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="flow" '
            f'viewBox="0 0 {width:.0f} {height}" width="{width:.0f}" height="{height}" role="img" '
            'aria-label="dataflow between the bindings">'
            '<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
            'orient="auto"><path d="M0 0L8 4L0 8z" class="head"/></marker></defs>'
            + "".join(parts) + "</svg>", width, height)
