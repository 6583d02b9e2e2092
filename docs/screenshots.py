"""Remake the screenshots of docs/images/ (the README shows them):

    python docs/screenshots.py

Needs selenium and Debian's chromium + chromium-driver, like tests/test_html_browser.py.
Each page is the output of `shapelang trace --format html`, shown from the binding named;
then a spec with a mistake, the notebook output in a dark notebook, and the page of
`shapelang serve` with a mistake typed into its spec.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

import shapelang
from shapelang.render.html import trace_fragment, trace_html
from shapelang.serve.app import start

ROOT = Path(__file__).resolve().parents[1]
SHOTS = (("mha_self_attention", "Qh", 1400), ("cross_attention", "scores", 1100),
         ("gpt2_small", None, 1100))
# a projection one size too wide: the failing view is shown with its sizes and the error whole
MISTAKE = """\
dim B, S
dim D = 64
dim H = 4
dim Dh = D / H
example B=2, S=5
input X: [B, S, D]
Q: X -> linear D -> view [B, S, H, Dh] -> transpose 1 2
K: X -> linear 2*D -> view [B, S, H, Dh] -> transpose 1 2
"""


def main() -> None:
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--no-first-run", "--hide-scrollbars"):
        opts.add_argument(flag)
    profile = tempfile.mkdtemp()
    opts.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=opts)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, binding, height in SHOTS:
                page = Path(tmp) / f"{name}.html"
                page.write_text(trace_html(shapelang.check_file(f"specs/{name}.shape")), encoding="utf-8")
                driver.set_window_size(1000, height)
                driver.get(page.as_uri())
                if binding:
                    driver.execute_script(
                        f"document.querySelector('[data-binding=\"{binding}\"]').scrollIntoView()")
                out = ROOT / "docs" / "images" / f"trace_{name}.png"
                driver.save_screenshot(str(out))
                print(out.relative_to(ROOT))
            shot(driver, Path(tmp) / "mistake.html", trace_html(shapelang.check(MISTAKE, "mistake.shape")),
                 "trace_error.png", 900, scroll="[data-unfinished]")
            dark = ('<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
                    '<style>body{background:#1e1e1e;margin:16px}</style></head><body>'
                    + trace_fragment(shapelang.check_file("specs/mha_self_attention.shape"), "shapelang")
                    + "</body></html>")
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
                "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
            shot(driver, Path(tmp) / "dark.html", dark, "notebook_dark.png", 1100, scroll='[data-binding="scores"]')
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        playground(driver)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def shot(driver, page: Path, html: str, name: str, height: int, scroll: str | None = None) -> None:
    page.write_text(html, encoding="utf-8")
    driver.set_window_size(1000, height)
    driver.get(page.as_uri())
    if scroll:
        driver.execute_script(f"document.querySelector('{scroll}').scrollIntoView()")
        driver.execute_script("window.scrollBy(0, -60)")
    out = ROOT / "docs" / "images" / name
    driver.save_screenshot(str(out))
    print(out.relative_to(ROOT))


def playground(driver) -> None:
    """`shapelang serve` (its own example spec) after `Kt` was typed as `K` in the scores."""
    server = start("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        driver.set_window_size(1400, 1040)
        driver.get(server.url)
        busy = "return document.body.dataset.busy !== '0' || !document.body.dataset.checks"
        while driver.execute_script(busy):
            time.sleep(0.05)
        driver.execute_script("""
            const a = document.querySelector('.editor textarea');
            a.value = a.value.replace('Q @ Kt', 'Q @ K');
            a.dispatchEvent(new Event('input'));""")
        time.sleep(0.5)
        while driver.execute_script("return document.body.dataset.busy !== '0'"):
            time.sleep(0.05)
        driver.execute_script("""
            const r = document.getElementById('right');
            const d = document.querySelector('#picture [data-diagnostic]');
            r.scrollTop += d.getBoundingClientRect().top - r.getBoundingClientRect().top - 420;""")
        out = ROOT / "docs" / "images" / "serve_playground.png"
        driver.save_screenshot(str(out))
        print(out.relative_to(ROOT))
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
