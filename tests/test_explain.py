"""`shapelang explain`: every code has an explanation whose wrong example really gets
that code and whose right example really does not, and docs/diagnostics.md shows
exactly these explanations."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from shapelang import check, render_check
from shapelang.checker.explanations import EXPLANATIONS, markdown
from shapelang.syntax.diagnostics import CODES

DOCS = Path(__file__).resolve().parent.parent / "docs" / "diagnostics.md"


def test_every_code_has_an_explanation_and_nothing_else_has_one():
    assert set(EXPLANATIONS) == set(CODES)


@pytest.mark.parametrize("code", sorted(CODES))
def test_the_wrong_example_gets_the_code_and_the_right_one_does_not(code):
    e = EXPLANATIONS[code]
    wrong = check(e.wrong, f"{code}-wrong.shape")
    assert code in [d.code for d in wrong.diagnostics], render_check(wrong)
    right = check(e.right, f"{code}-right.shape")
    assert right.ok, render_check(right)
    assert code not in [d.code for d in right.diagnostics], render_check(right)
    for field in (e.means, e.matters):
        assert field.strip() and "TODO" not in field


def test_docs_section_is_generated_from_the_explanations():
    text = DOCS.read_text()
    m = re.search(r"<!-- explanations:begin -->\n(.*?)\n<!-- explanations:end -->", text, re.DOTALL)
    assert m, "docs/diagnostics.md lost its explanations:begin/explanations:end markers"
    assert m.group(1).strip() == markdown(CODES).strip(), \
        "docs/diagnostics.md is out of date: run `python -m shapelang.checker.explanations` and paste its output"


def test_docs_table_lists_every_code():
    table = DOCS.read_text().split("<!-- explanations:begin -->")[0]
    for code in CODES:
        assert f"| {code} |" in table, code


def run(*args):
    return subprocess.run([sys.executable, "-m", "shapelang", *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_explain_prints_the_explanation_with_both_examples():
    out = run("explain", "E104")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("E104: size is not always a whole number\n")
    for line in EXPLANATIONS["E104"].wrong.strip().split("\n") + ["Wrong (E104):", "Right:"]:
        assert line in out.stdout
    assert "assume D % H == 0" in out.stdout.split("Right:")[1]


def test_explain_accepts_lower_case_and_bare_numbers():
    assert run("explain", "w303").stdout == run("explain", "W303").stdout
    assert run("explain", "101").stdout.startswith("E101: ")


def test_explain_alone_lists_every_code():
    out = run("explain")
    assert out.returncode == 0
    for code, title in CODES.items():
        assert f"{code}  {title}" in out.stdout


def test_explain_an_unknown_code_is_a_usage_error_with_a_suggestion():
    out = run("explain", "E190")
    assert out.returncode == 2
    assert "E190" in out.stderr and "shapelang explain" in out.stderr


def test_the_check_footer_names_codes_that_explain_knows(tmp_path):
    spec = tmp_path / "x.shape"
    spec.write_text(EXPLANATIONS["E101"].wrong + EXPLANATIONS["E102"].wrong.split("\n", 1)[1]
                    .replace("dim B, S, D, E\n", ""))
    out = run("check", str(spec))
    assert out.returncode == 1
    codes = re.findall(r"try `shapelang explain (\w+)`", out.stdout)
    assert codes and all(c in EXPLANATIONS for c in codes), out.stdout
    assert out.stdout.rstrip().endswith(f"try `shapelang explain {codes[0]}`.")
