"""Remake the screenshots of docs/images/ (the README shows them):

    python docs/screenshots.py

Needs selenium and Debian's chromium + chromium-driver, like tests/test_html_browser.py.
Each page is the output of `shapelang trace --format html`, shown from the binding named.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

import shapelang
from shapelang.render.html import trace_html

ROOT = Path(__file__).resolve().parents[1]
SHOTS = (("mha_self_attention", "Qh", 1400), ("cross_attention", "scores", 1100),
         ("gpt2_small", None, 1100))


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
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
