"""specs/README.md, the learner's way into the spec library: its index says what every spec
teaches, its reading order names the specs once each (from one head to whole models), and its
parameter table gives the totals the checker computes at each spec's example sizes."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from shapelang import check

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "specs" / "README.md").read_text()
SPECS = sorted(p.stem for p in (ROOT / "specs").glob("*.shape"))


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else len(README)]


def test_the_index_says_what_every_spec_teaches():
    rows = {}
    for line in _section("Index").splitlines():
        m = re.match(r"\| \[(\w+)\.shape\]\(\1\.shape\) \| ([^|]+) \| ([^|]+) \|", line)
        if m:
            rows[m.group(1)] = m.group(3).strip()
    assert sorted(rows) == SPECS
    assert all(len(teaches) > 20 for teaches in rows.values())


def test_the_reading_order_names_specs_once_in_stages():
    order = _section("What to learn first")
    named = re.findall(r"\[(\w+)\]\(\1\.shape\)", order)
    assert set(named) <= set(SPECS) and len(named) == len(set(named)) >= 20
    assert named[0] == "mha_self_attention"          # one head first
    assert named.index("gpt2_small") > named.index("decoder_text_generator")
    stages = re.findall(r"^\d\. \*\*", order, re.MULTILINE)
    assert len(stages) >= 4


def _table() -> dict:
    out = {}
    for line in _section("Parameter totals at the example sizes").splitlines():
        m = re.match(r"\| (\w+)(?: \([^)]*\))? \| ([\d,]+) \|", line)
        if m:
            out[m.group(1)] = int(m.group(2).replace(",", ""))
    return out


@pytest.mark.parametrize("name", SPECS)
def test_the_parameter_table_gives_the_checkers_total(name):
    table = _table()
    assert name in table, f"add {name} to the parameter table"
    spec = check((ROOT / "specs" / f"{name}.shape").read_text(), name)
    assert spec.ok
    assert int(spec.example_value(spec.total_params)) == table[name]
