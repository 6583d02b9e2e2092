"""Test tiers, shared fixtures and options.

Two tiers (README, "Tests"):
- the default tier, `python -m pytest`: every feature, every command and output format, and a
  sample of each sweep (a few specs of every kind, a share of the fuzz cases, fewer hypothesis
  examples); it runs on every core (pytest-xdist) in a few minutes;
- the exhaustive tier, `python -m pytest --exhaustive`: what the default tier leaves out of each
  sweep (tests marked `exhaustive`) and every hypothesis test at its full example count.
The two together run every case once (the hypothesis tests run in both, at their two counts).
CI runs both (`.ci/run`). tests/tiers.py has the helpers that split a sweep.
"""
from __future__ import annotations

import os

import pytest
import tiers


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite golden files from the current output (review the diff)")
    parser.addoption("--exhaustive", action="store_true", default=False,
                     help="run the exhaustive tier: every case the default tier samples out of a sweep, "
                          "and the hypothesis tests at their full example counts")


def pytest_configure(config):
    config.addinivalue_line("markers", "exhaustive: a case of a sweep that only the exhaustive tier runs")
    if config.getoption("--exhaustive"):
        os.environ[tiers.ENV] = "exhaustive"   # read by tiers.examples() when test modules import


@pytest.hookimpl(trylast=True)   # after hypothesis's plugin has marked its tests
def pytest_collection_modifyitems(config, items):
    exhaustive = config.getoption("--exhaustive")
    keep, drop = [], []
    for item in items:
        marked = item.get_closest_marker("exhaustive") is not None
        wanted = (marked or item.get_closest_marker("hypothesis") is not None) if exhaustive else not marked
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def update_goldens(request) -> bool:
    return request.config.getoption("--update-goldens")


@pytest.fixture(scope="session")
def library_checks():
    """Every spec of the library (specs/, tests/cases/, exercises/solutions/) checked once per
    worker: path -> CheckedSpec (tiers.checked, which modules use directly where they
    parametrize over the library). Tests that only read the result share it."""
    return {p: tiers.checked(p) for p in tiers.LIBRARY}
