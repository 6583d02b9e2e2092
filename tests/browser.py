"""The real browser of the browser tests: Debian's chromium and chromium-driver, driven by
selenium. A test module calls `webdriver = require()` at import (the module is skipped, with
the reason, where selenium or the browser is missing) and takes the `driver` fixture from
`session(webdriver)`."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--window-size=1200,900")


def require():
    """selenium's webdriver module, or skip the calling test module saying what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="the browser tests need selenium "
                                    "(pip install '.[test]')")
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        pytest.skip("the browser tests need Debian's chromium and chromium-driver "
                    "(apt-get install chromium chromium-driver)", allow_module_level=True)
    return webdriver


def session(webdriver, size: str = "1200,900"):
    """A headless chromium with its console log kept (a generator for a fixture); skips when
    the browser cannot start here."""
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f if not f.startswith("--window-size") else f"--window-size={size}")
    profile = tempfile.mkdtemp(prefix="shapelang-chromium-")
    opts.add_argument(f"--user-data-dir={profile}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        d = webdriver.Chrome(service=Service(DRIVER), options=opts)
    except Exception as err:  # noqa: BLE001 - a browser that cannot start is a skip, not a failure
        shutil.rmtree(profile, ignore_errors=True)
        pytest.skip(f"chromium does not start here: {str(err).splitlines()[0]}")
    try:
        yield d
    finally:
        d.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver) -> list:
    """The console's errors since the last call (reading the log empties it)."""
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
