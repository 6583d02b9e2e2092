"""The trace pictures as a reader sees them, in a real browser (Debian's chromium, driven by
selenium), on a desktop (1280 px) and on a phone (390 px, mobile viewport rules), in the light
and the dark scheme: no text of a figure lies outside it, text is drawn at 12 px or more on
the phone, every text keeps a contrast of 4.5:1 against what is behind it, and an error's
text is whole (wrapped, never cut or scrolled away)."""
from __future__ import annotations

from pathlib import Path

import pytest
from browser import console_errors, require, session
from tiers import checked as shared_check
from tiers import sample

import shapelang
from shapelang.render.html import trace_fragment, trace_html

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.shape"))

webdriver = require()

# specs with errors: a matrix product whose inner dims differ, a view that cannot be, long text
ERRORS = {
    "matmul_clash": ("dim B, S, D\nexample B=2, S=5, D=16\ninput X: [B, S, D]\nQ: X -> linear D\n"
                     "K: X -> linear D\nscores: Q @ K -> softmax -1\nout: scores @ X\n"),
    "view_clash": ("dim B, S\ndim D = 64\ndim H = 4\ndim Dh = D / H\ninput X: [B, S, D]\n"
                   "K: X -> linear 2*D -> view [B, S, H, Dh]\nY: X -> softmax -1\n"),
}

EXPAND = """
document.querySelectorAll('.shapelang-trace details').forEach(d => { d.open = true; });
return document.readyState === 'complete';
"""

# What each check measures, in the page: lists of failures (at most 12 each).
MEASURE = """
const scale = window.visualViewport ? window.visualViewport.scale : 1;
const rgba = s => { const m = (s || '').match(/[\\d.]+/g); if (!m) return null;
  return [+m[0], +m[1], +m[2], m.length > 3 ? +m[3] : 1]; };
const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
function htmlBg(e) {
  for (; e && e.nodeType === 1; e = e.parentElement) {
    if (e instanceof SVGElement) continue;
    const c = rgba(getComputedStyle(e).backgroundColor);
    if (c && c[3] > 0.5) return c;
  }
  return rgba(getComputedStyle(document.documentElement).backgroundColor) || [255, 255, 255, 1];
}
function svgBg(t) {
  const r = t.getBoundingClientRect();
  const cx = (r.left + r.right) / 2, cy = (r.top + r.bottom) / 2;
  const svg = t.closest('svg.fig, svg.flow') || t.ownerSVGElement;
  let found = null;
  for (const s of svg.querySelectorAll('rect, path.mark')) {
    if (s.closest('defs, marker') || s.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_PRECEDING) continue;
    const b = s.getBoundingClientRect();
    if (s.tagName === 'rect' && b.left <= cx && cx <= b.right && b.top <= cy && cy <= b.bottom) {
      const f = rgba(getComputedStyle(s).fill);
      if (f && f[3] > 0.5) found = f;
    }
  }
  return found || htmlBg(svg.parentElement);
}
const out = {outside: [], small: [], contrast: [], cut: [], texts: 0};
const push = (list, item) => { if (list.length < 12) list.push(item); };
for (const t of document.querySelectorAll('svg text')) {
  if (t.closest('title, defs')) continue;
  out.texts++;
  const r = t.getBoundingClientRect();
  if (!r.width) continue;
  const fig = t.closest('svg.fig, svg.flow') || t.ownerSVGElement;
  const f = fig.getBoundingClientRect();
  if (r.left < f.left - 1 || r.right > f.right + 1 || r.top < f.top - 1 || r.bottom > f.bottom + 1) {
    push(out.outside, [t.textContent, Math.round(r.left - f.left), Math.round(f.right - r.right)]);
  }
  const px = parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a / window.devicePixelRatio * scale;
  if (px < 11.95) push(out.small, [t.textContent, px]);
  const c = ratio(rgba(getComputedStyle(t).fill), svgBg(t));
  if (c < 4.5) push(out.contrast, [t.textContent, c, getComputedStyle(t).fill, svgBg(t)]);
}
const walker = document.createTreeWalker(document.querySelector('.shapelang-trace'), NodeFilter.SHOW_TEXT);
for (let n = walker.nextNode(); n; n = walker.nextNode()) {
  const e = n.parentElement;
  if (!n.textContent.trim() || e instanceof SVGElement || e.closest('style, script, svg')) continue;
  out.texts++;
  const cs = getComputedStyle(e);
  if (parseFloat(cs.fontSize) * scale < 11.95) push(out.small, [n.textContent.slice(0, 40), parseFloat(cs.fontSize) * scale]);
  const c = ratio(rgba(cs.color), htmlBg(e));
  if (c < 4.5) push(out.contrast, [n.textContent.slice(0, 40), c, cs.color, htmlBg(e)]);
}
for (const d of document.querySelectorAll('.diag')) {
  for (const e of [d, ...d.querySelectorAll('pre')]) {
    if (e.scrollWidth > e.clientWidth + 1) push(out.cut, [d.innerText.slice(0, 60), e.scrollWidth, e.clientWidth]);
  }
}
out.diagnostics = Array.from(document.querySelectorAll('.diag')).map(d => d.innerText.replace(/\\s+/g, ' '));
out.fontScale = scale;
return out;
"""


@pytest.fixture(scope="module")
def driver():
    yield from session(webdriver, "1280,900")


def _show(driver, html: str, tmp_path, width: int, dark: bool):
    page = tmp_path / "page.html"
    page.write_text(html, encoding="utf-8")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})
    driver.get_log("browser")
    driver.get(page.as_uri())
    driver.execute_script(EXPAND)
    return driver.execute_script(MEASURE)


def _assert_readable(got, width: int, dark: bool, errors: list) -> None:
    where = f"at {width} px, {'dark' if dark else 'light'}"
    assert got["texts"] > 0
    assert got["outside"] == [], f"text outside its figure {where}: {got['outside']}"
    if width < 600:
        assert got["small"] == [], f"text under 12 px {where}: {got['small']}"
    assert got["contrast"] == [], f"contrast under 4.5:1 {where}: {got['contrast']}"
    assert got["cut"] == [], f"error text cut {where}: {got['cut']}"
    assert errors == []


CASES = [p.stem for p in SPECS] + list(ERRORS)


@pytest.mark.parametrize("name", sample(CASES, every=30, always=("gpt2_small", "matmul_clash")))
def test_every_picture_is_readable_on_a_desktop_and_a_phone_light_and_dark(driver, tmp_path, name):
    spec = shapelang.check(ERRORS[name], f"{name}.shape") if name in ERRORS else \
        shared_check(ROOT / "specs" / f"{name}.shape")
    html = trace_html(spec)
    for width, dark in ((1280, False), (390, False), (390, True), (1280, True)):
        got = _show(driver, html, tmp_path, width, dark)
        _assert_readable(got, width, dark, console_errors(driver))
        # every diagnostic is there whole: its message and its help, at every width
        for d in spec.diagnostics:
            shown = [t for t in got["diagnostics"] if f"[{d.code}]" in t]
            assert shown, f"{d.code} not shown"
            assert " ".join(d.message.split()) in shown[0]
            if d.help:
                assert " ".join(d.help.split()) in shown[0]


def test_the_phone_reads_the_page_at_its_own_width(driver, tmp_path):
    """The viewport tag: a phone lays the page out at 390 px, not at 980 px scaled down."""
    spec = shared_check(ROOT / "specs" / "mha_self_attention.shape")
    got = _show(driver, trace_html(spec), tmp_path, 390, False)
    assert got["fontScale"] == 1
    assert driver.execute_script("return document.documentElement.clientWidth") == 390


def test_notebook_output_keeps_its_text_readable_on_a_dark_notebook(driver, tmp_path):
    """JupyterLab's and VS Code's dark output areas: the fragment brings its own background."""
    spec = shared_check(ROOT / "specs" / "mha_self_attention.shape")
    html = ('<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
            '<style>body{background:#111;color:#ddd}</style></head><body>'
            + trace_fragment(spec) + "</body></html>")
    for dark in (False, True):
        got = _show(driver, html, tmp_path, 1280, dark)
        _assert_readable(got, 1280, dark, console_errors(driver))
