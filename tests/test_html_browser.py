"""The HTML trace in a real browser (Debian's chromium, driven by selenium): every spec's page
loads without console errors, draws every binding, and its axis boxes neither overlap nor
leave the page."""
from __future__ import annotations

from pathlib import Path

import pytest
from browser import console_errors, require, session
from tiers import checked as shared_check
from tiers import sample

import shapelang
from shapelang.render.html import trace_html

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.shape"))

webdriver = require()

# "expand all", pressed until every binding is open: under load the driver can hand back the
# page before its script has wired the button, and the steps of a closed binding still report
# boxes (where they would be drawn), which then sit on top of each other.
EXPAND = """
const b = document.querySelector('[data-toggle="open"]');
if (location.href !== arguments[0] || document.readyState !== 'complete' || b === null) return false;
b.click();
return document.querySelectorAll('.shapelang-trace details:not([open])').length === 0;
"""

GEOMETRY = """
const where = r => { const b = r.closest('[data-binding]'); return b ? b.getAttribute('data-binding') : '?'; };
const rects = Array.from(document.querySelectorAll('rect.axis'));
const boxes = rects.map(r => Object.assign(r.getBoundingClientRect().toJSON(), {binding: where(r)}));
const page = document.documentElement.scrollWidth;
const out = {boxes: boxes.length, empty: 0, outside: 0, overlaps: [], pageWidth: page,
             viewWidth: window.innerWidth, bindings: []};
boxes.sort((a, b) => a.top - b.top || a.left - b.left);
for (let i = 0; i < boxes.length; i++) {
  const a = boxes[i];
  if (a.width <= 0 || a.height <= 0) out.empty++;
  if (a.left < 0 || a.right > page + 0.5) out.outside++;
  for (let j = i + 1; j < boxes.length && boxes[j].top < a.bottom; j++) {
    const b = boxes[j];
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (w > 0.5 && h > 0.5) out.overlaps.push([a.binding, b.binding]);
  }
}
document.querySelectorAll('[data-binding]').forEach(e => {
  const r = e.getBoundingClientRect();
  const fig = e.querySelector('svg rect.axis');
  out.bindings.push([e.getAttribute('data-binding'), r.width > 0 && r.height > 0 && fig !== null &&
                     fig.getBoundingClientRect().width > 0]);
});
return out;
"""


@pytest.fixture(scope="module")
def driver():
    yield from session(webdriver)


def _names(spec) -> set:
    names = {d.name for d in spec.decls} | {", ".join(b.names) for b in spec.bindings}
    for insts in spec.blocks.values():
        for ir in insts:
            names |= {d.name for d in ir.params + ir.buffers} | {", ".join(b.names) for b in ir.bindings}
    return names


def _load(driver, spec, tmp_path, name):
    page = tmp_path / f"{name}.html"
    page.write_text(trace_html(spec), encoding="utf-8")
    driver.get_log("browser")                     # forget what earlier pages logged
    driver.get(page.as_uri())
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30, poll_frequency=0.05).until(lambda d: d.execute_script(EXPAND, page.as_uri()))
    got = driver.execute_script(GEOMETRY)
    return got, console_errors(driver)


@pytest.mark.parametrize("path", sample(SPECS, every=8))
def test_spec_page_in_the_browser(driver, path, tmp_path):
    spec = shared_check(path)
    got, errors = _load(driver, spec, tmp_path, path.stem)
    assert errors == []
    drawn = dict(got["bindings"])
    missing = _names(spec) - {n for n, ok in drawn.items() if ok}
    assert not missing, f"not drawn: {sorted(missing)}"
    assert got["boxes"] > 0 and got["empty"] == 0
    assert got["overlaps"] == [], (
        f"{len(got['overlaps'])} pairs of axis boxes overlap, first in {got['overlaps'][:3]}")
    assert got["outside"] == 0 and got["pageWidth"] <= got["viewWidth"]


def test_a_page_with_errors_and_hostile_text(driver, tmp_path):
    evil = "</pre><script>console.error('injected')</script>"
    text = (f"# {evil}\ndim B\ndim S\nexample B=2, S=3\ninput X: [B, S, 8]\n"
            f"Y: X -> linear 16  # {evil}\nZ: Y -> view [B, S, 3, 5]\nW: Y -> gelu\n")
    spec = shapelang.check(text, "bad.shape")
    got, errors = _load(driver, spec, tmp_path, "bad")
    assert errors == []
    assert {"X", "Y", "W"} <= {n for n, ok in got["bindings"] if ok}
    shown = driver.execute_script(
        "const d = document.querySelector('[data-line=\"7\"]'); return d ? d.innerText : null;")
    assert shown and "Z: Y -> view [B, S, 3, 5]" in shown and "^" in shown
