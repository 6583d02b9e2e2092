"""The look of the pictures: one style sheet for the HTML trace, the notebook output and the
standalone SVG, light and dark.

Every text colour keeps a contrast of at least 4.5:1 against what it is drawn on (the page, a
box's fill, a diagnostic's tint), in both schemes. The fragment sets its own background, so
a notebook's dark output area never hides dark text; the dark scheme follows the reader's
`prefers-color-scheme`. Boxes carry their hue in `--h` and their shade in `data-shade`
(shapelang.render.svg.Colours.paint): the light fill is an attribute (a figure on its own
keeps it), the dark one comes from here.
"""
from __future__ import annotations

from .svg import LIGHT

DARK = (18, 22, 26, 30)     # lightness of the boxes in the dark scheme, by shade

# (light, dark) for each role
INK = {"text": ("#111", "#eee"), "muted": ("#4d4d4d", "#c4c4c4"), "tag": ("#a61b1b", "#ff9b9b"),
       "dtype": ("#7a3e00", "#f3b37a"), "shape": ("#2a2a55", "#c9cdf5"), "page": ("#fff", "#16171b"),
       "code": ("#f0f0f6", "#2a2b33"), "err": ("#fff4f4", "#3a1d1f"), "warn": ("#fffaf0", "#3a3019"),
       "edge": ("#8a8fa6", "#7d8299"), "masked": ("#4a4a52", "#000")}


def _sheet(scope: str, k: int) -> str:
    c = {role: pair[k] for role, pair in INK.items()}
    shades = "".join(f"{scope} [data-shade=\"{n}\"]{{fill:hsl(var(--h),{40 if k else 70}%,"
                     f"{(DARK if k else LIGHT)[n]}%)}}" for n in range(4))
    return (f"{scope}{{color:{c['text']};background:{c['page']}}}"
            f"{scope} .meta,{scope} .nums{{color:{c['muted']}}}"
            f"{scope} .shape{{color:{c['shape']}}}"
            f"{scope} .op{{background:{c['code']}}}"
            f"{scope} .changed-names{{color:{c['tag']}}}"
            f"{scope} .diag{{background:{c['err']}}}{scope} .diag.warning{{background:{c['warn']}}}"
            f"{scope} svg text{{fill:{c['text']}}}{scope} svg text.note{{fill:{c['muted']}}}"
            f"{scope} svg text.tag,{scope} svg text.mark{{fill:{c['tag']}}}"
            f"{scope} svg path.mark{{stroke:{c['tag']}}}"
            f"{scope} svg text.dtype{{fill:{c['dtype']}}}"
            f"{scope} svg rect.axis{{stroke:{c['edge']}}}{scope} svg rect.masked{{fill:{c['masked']}}}"
            f"{scope} svg.flow path{{stroke:{c['edge']}}}{scope} svg.flow path.head{{fill:{c['edge']}}}"
            f"{scope} svg.flow rect{{fill:{c['code']};stroke:{c['edge']}}}"
            f"{scope} [data-shade=\"none\"]{{fill:{'#3a3a3a' if k else 'hsl(0,0%,92%)'}}}"
            f"{scope} rect.page{{fill:{c['page']}}}"
            f"{scope} .legend span.dim{{background:hsl(var(--h),{40 if k else 70}%,{(DARK if k else LIGHT)[0]}%)}}"
            + shades)


CSS = """
.shapelang-trace{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;
 padding:8px;overflow-wrap:anywhere}
.shapelang-trace h1{font-size:20px;margin:4px 0}
.shapelang-trace .meta{margin:2px 0}
.shapelang-trace details{border-left:3px solid #8a8fa6;margin:6px 0;padding-left:8px}
.shapelang-trace details.block{border-left-color:#a8c}
.shapelang-trace summary{cursor:pointer;font-weight:600}
.shapelang-trace summary .shape,.shapelang-trace .shape{font-family:ui-monospace,Menlo,Consolas,monospace;
 font-weight:400}
.shapelang-trace .step{margin:6px 0 10px 0}
.shapelang-trace .op{font-family:ui-monospace,Menlo,Consolas,monospace;padding:1px 4px}
.shapelang-trace .nums{font-size:13px}
.shapelang-trace .changed-names{font-size:13px}
.shapelang-trace svg.fig{display:block;margin:4px 0}
.shapelang-trace svg text{font:12px system-ui,sans-serif}
.shapelang-trace svg text.size,.shapelang-trace svg text.cap,.shapelang-trace svg text.tag{font-weight:600}
.shapelang-trace svg text.dtype{font-style:italic;font-weight:600}
.shapelang-trace svg rect.axis{stroke-width:1}
.shapelang-trace svg rect.axis.changed{stroke:#c22;stroke-width:3}
.shapelang-trace svg rect.slice{stroke:#fff;stroke-width:1}
.shapelang-trace svg path.mark{stroke-width:2;fill:none}
.shapelang-trace svg.flow path{fill:none;stroke-width:1.5}
.shapelang-trace svg.flow path.head{stroke:none}
.shapelang-trace svg.flow a:hover rect{stroke-width:2}
.shapelang-trace .scroll{overflow-x:auto;max-width:100%}
.shapelang-trace .diag{border:1px solid #e99;padding:4px 8px;margin:6px 0}
.shapelang-trace .diag.warning{border-color:#db8}
.shapelang-trace .diag pre{margin:0;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;
 overflow-wrap:anywhere}
.shapelang-trace .legend span{display:inline-block;padding:1px 6px;margin:2px;border:1px solid #999;
 border-radius:3px;font-size:12px}
.shapelang-trace .legend svg{vertical-align:middle}
.shapelang-trace .decl{margin:3px 0}
.shapelang-trace .unchecked{font-style:italic}
.shapelang-trace .overview{overflow-x:auto;margin:6px 0}
.shapelang-trace button{font-size:12px;margin-right:6px}
""" + _sheet(".shapelang-trace", 0) + "@media (prefers-color-scheme: dark){" + _sheet(".shapelang-trace", 1) + "}"


def svg_style() -> str:
    """The same sheet for an SVG figure standing alone (its root is the scope)."""
    return CSS.replace(".shapelang-trace svg ", ".shapelang-trace ")
