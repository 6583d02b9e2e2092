"""`shapelang serve` in a real browser (Debian's chromium, driven by selenium), against a real
server: the playground loads without console errors; a mistake typed into the editor shows
its diagnostic on its line, and fixing it clears it and draws every binding; an exercise
filled in the browser gets the score `shapelang grade` gives the same answers, and a wrong
answer shows the grader's feedback."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser import console_errors, require, session
from serve_session import Running

import shapelang
from shapelang.syntax.limits import MAX_BYTES
from shapelang.teaching.exercise import extract, load_template

webdriver = require()

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = ROOT / "exercises" / "02_split_heads.shape"
SOLUTION = ROOT / "exercises" / "solutions" / "02_split_heads.shape"
SPEC = """\
dim B, S, D
example B=2, S=5, D=16
input X: [B, S, D]
Q: X -> linear D
K: X -> linear D
Kt: K -> transpose -2 -1
scores: Q @ Kt -> softmax -1
out: scores @ X
"""
K_LINE = SPEC.index("K: X -> linear D") + len("K: X -> linear ")


@pytest.fixture(scope="module")
def driver():
    yield from session(webdriver)


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve-browser") / "attn.shape"
    path.write_text(SPEC, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def playground(spec_path):
    r = Running(path=str(spec_path))
    yield r
    r.close()


@pytest.fixture(scope="module")
def exercise():
    r = Running(exercise=str(EXERCISE))
    yield r
    r.close()


# ---------------------------------------------------------------------- helpers

def _checks(driver) -> int:
    return int(driver.execute_script("return document.body.dataset.checks || '0'"))


def _settle(driver, after: int) -> None:
    """Wait until the page has checked the text once more than `after` and nothing is pending."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 60, poll_frequency=0.05).until(lambda d: d.execute_script(
        "return document.body.dataset.busy === '0' && "
        "Number(document.body.dataset.checks || 0) > arguments[0]", after))


def _open(driver, server) -> None:
    console_errors(driver)                    # forget what earlier pages logged
    driver.get(server.server.url)
    _settle(driver, 0)


def _type(driver, editor: int, start: int, end: int, keys: str) -> None:
    """Select [start, end) of an editor's text, as a learner would, and type `keys` over it."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    before = _checks(driver)
    driver.execute_script("const a = document.querySelectorAll('.editor textarea')[arguments[0]];"
                          "a.focus(); a.setSelectionRange(arguments[1], arguments[2]);", editor, start, end)
    ActionChains(driver).send_keys(keys or Keys.BACKSPACE).perform()
    _settle(driver, before)


def _texts(driver) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('.editor textarea')).map(a => a.value)")


SHOWN = """
const out = {diags: [], marks: [], status: document.getElementById('status').textContent,
             check: document.getElementById('check-text').textContent, drawn: []};
document.querySelectorAll('#left .diag').forEach(d => {
  const part = d.closest('[data-part]');
  out.diags.push([Number(d.dataset.line), Number(d.dataset.column), d.dataset.code,
                  d.querySelector('pre').textContent, part ? Number(part.dataset.part) : null]);
});
document.querySelectorAll('.gutter .line.error').forEach(s => out.marks.push(Number(s.dataset.line)));
document.querySelectorAll('#picture [data-binding]').forEach(e => {
  const r = e.getBoundingClientRect();
  const fig = e.querySelector('svg rect.axis');
  out.drawn.push([e.getAttribute('data-binding'), r.width > 0 && r.height > 0 && fig !== null]);
});
return out;
"""


# ---------------------------------------------------------------------- the playground

def test_the_playground_loads_without_console_errors(driver, playground, spec_path):
    _open(driver, playground)
    shown = driver.execute_script(SHOWN)
    assert console_errors(driver) == []
    assert shown["diags"] == [] and shown["status"].startswith("ok")
    assert shown["check"] == shapelang.render_check(shapelang.check_file(str(spec_path)))
    assert {"X", "Q", "K", "Kt", "scores", "out"} <= {n for n, ok in shown["drawn"] if ok}
    numbers = driver.execute_script("return document.querySelector('.gutter').textContent")
    assert numbers.split() == [str(k) for k in range(1, SPEC.count("\n") + 2)]


def test_a_typed_mistake_shows_its_diagnostic_and_the_fix_clears_it(driver, playground, spec_path):
    _open(driver, playground)
    _type(driver, 0, K_LINE, K_LINE, "2*")          # K: X -> linear 2*D
    [text] = _texts(driver)
    assert "K: X -> linear 2*D\n" in text
    expected = shapelang.check(text, str(spec_path))
    scores_line = SPEC.split("\n").index("scores: Q @ Kt -> softmax -1") + 1
    assert [(d.span.line, d.code) for d in expected.errors()] == [(scores_line, "E101")]
    shown = driver.execute_script(SHOWN)
    assert [(ln, col, code) for ln, col, code, _, _ in shown["diags"]] == \
        [(d.span.line, d.span.column, d.code) for d in expected.diagnostics]
    assert shown["diags"][0][3].startswith(f"{spec_path}:{scores_line}:")
    assert shown["marks"] == [scores_line]
    assert shown["check"] == shapelang.render_check(expected)
    assert "error" in shown["status"]

    _type(driver, 0, K_LINE, K_LINE + 2, "")        # delete the `2*` again
    assert _texts(driver) == [SPEC]
    shown = driver.execute_script(SHOWN)
    assert shown["diags"] == [] and shown["marks"] == [] and shown["status"].startswith("ok")
    spec = shapelang.check(SPEC, str(spec_path))
    names = {d.name for d in spec.decls} | {", ".join(b.names) for b in spec.bindings}
    drawn = {n for n, ok in shown["drawn"] if ok}
    assert names <= drawn, f"not drawn: {sorted(names - drawn)}"
    assert console_errors(driver) == []


def test_the_editor_colours_wraps_suggests_links_codes_and_shows_the_error(driver, playground):
    from shapelang.checker.ops import TABLE

    _open(driver, playground)
    # colours from the TextMate grammar: keywords, dims and operations get their own classes
    coloured = driver.execute_script("""
        const out = {};
        document.querySelectorAll('.editor .hl span').forEach(s => { (out[s.className] = out[s.className] || []).push(s.textContent); });
        return out;""")
    assert "input" in coloured.get("tk-keyword", []) and "linear" in coloured.get("tk-op", [])
    # typing an operation's first letters offers the operations that start with them
    _type(driver, 0, len(SPEC), len(SPEC), "Z: X -> lin")
    offered = driver.execute_script(
        "return Array.from(document.querySelectorAll('.suggest button')).map(b => b.textContent)")
    starting = sorted((n for n in TABLE if n.startswith("lin")), key=lambda n: (len(n), n))
    assert offered[:len(starting)] == starting and offered[0] == "linear"
    # the unknown operation's code links to its explanation, as `shapelang explain` gives it
    explain = subprocess.run([sys.executable, "-m", "shapelang", "explain", "E111"], capture_output=True,
                             text=True, check=True, timeout=120).stdout
    shown = driver.execute_script("""
        const link = document.querySelector('#left .diag[data-code="E111"] .code-link');
        link.click();
        return [link.textContent, link.closest('details').open,
                link.closest('.diag').querySelector('.explain pre').textContent];""")
    assert shown[0] == "E111" and shown[1] and shown[2] == explain
    # the picture shows the error: scrolled to it, inside the picture's visible part
    where = driver.execute_script("""
        const box = document.getElementById('right').getBoundingClientRect();
        const d = document.querySelector('#picture .diag.error').getBoundingClientRect();
        return [d.top >= box.top - 1, d.top < box.bottom];""")
    assert where == [True, True]
    # a long line wraps: nothing to scroll sideways, and its one number stays beside it
    _type(driver, 0, len(SPEC), len(SPEC) + len("Z: X -> lin"), "W: X -> linear D " + "# words " * 40)
    wrapped = driver.execute_script("""
        const a = document.querySelector('.editor textarea');
        const rows = document.querySelectorAll('.editor .hl .row');
        const last = rows[rows.length - 1].getBoundingClientRect().height;
        const nums = document.querySelectorAll('.gutter .line');
        return [a.scrollWidth <= a.clientWidth + 1, last > 30, nums.length,
                nums[nums.length - 1].getBoundingClientRect().height === last];""")
    assert wrapped == [True, True, SPEC.count("\n") + 1, True]
    assert console_errors(driver) == []


def test_a_text_over_the_size_limit_is_refused_in_the_page(driver, playground):
    _open(driver, playground)
    before = _checks(driver)
    driver.execute_script("""
        const a = document.querySelector('.editor textarea');
        a.value = a.value + '#'.repeat(arguments[0]) + '\\n';
        a.dispatchEvent(new Event('input'));""", MAX_BYTES)
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 60, poll_frequency=0.05).until(
        lambda d: d.execute_script("return document.body.dataset.busy === '0'"))
    status = driver.execute_script("return document.getElementById('status').textContent")
    assert "E004" in status and f"larger than {MAX_BYTES // 1024} KB" in status
    assert _checks(driver) == before
    assert console_errors(driver) == []         # nothing was sent: a 413 would be logged


# ---------------------------------------------------------------------- an exercise

def _answers() -> dict[str, str]:
    tmpl = load_template(EXERCISE.read_text(encoding="utf-8"), str(EXERCISE))
    ext = extract(tmpl, SOLUTION.read_text(encoding="utf-8"))
    return {f"?{n}": a.text for n, a in ext.answers.items()}


def _fill(driver, answers: dict[str, str]) -> None:
    """Type each answer over its blank, wherever the exercise's parts hold it."""
    for blank, answer in answers.items():
        for k, text in enumerate(_texts(driver)):
            m = re.search(rf"{re.escape(blank)}\b(?!:)", text)
            if m:
                _type(driver, k, m.start(), m.end(), answer)
                break
        else:
            raise AssertionError(f"no blank {blank} on the page")


def _grade(driver) -> dict:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script("document.getElementById('grade').removeAttribute('data-score')")
    driver.find_element("id", "grade-button").click()
    WebDriverWait(driver, 60, poll_frequency=0.05).until(lambda d: d.execute_script(
        "return document.getElementById('grade').dataset.score !== undefined"))
    return driver.execute_script("""
const g = document.getElementById('grade');
const rows = {};
g.querySelectorAll('tr[data-blank]').forEach(r => {
  rows[r.dataset.blank] = [r.dataset.status, r.querySelector('.feedback').textContent];
});
return {score: Number(g.dataset.score), max: Number(g.dataset.maxScore), rows: rows,
        report: document.getElementById('grade-report').textContent};""")


def _cli_grade(tmp_path, text: str) -> dict:
    sub = tmp_path / "answers.shape"
    sub.write_text(text, encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "shapelang", "grade", str(EXERCISE), str(sub),
                          "--format", "json"], capture_output=True, text=True, check=False, timeout=120)
    return json.loads(out.stdout)["submissions"][0]


def test_an_exercise_completed_in_the_browser_gets_full_marks(driver, exercise, tmp_path):
    _open(driver, exercise)
    parts = driver.execute_script("return document.querySelectorAll('[data-part]').length")
    assert parts >= 2
    shown = driver.execute_script(SHOWN)
    # the first unfilled blank is reported under the part that holds it
    split_line = EXERCISE.read_text(encoding="utf-8").split("\n").index("Qh: Q -> ?split -> ?swap") + 1
    assert (split_line, "E116", 1) in [(ln, code, part) for ln, _, code, _, part in shown["diags"]]
    _fill(driver, _answers())
    shown = driver.execute_script(SHOWN)
    assert shown["diags"] == [] and shown["status"].startswith("ok")
    got = _grade(driver)
    cli = _cli_grade(tmp_path, "\n\n".join(_texts(driver)))
    assert got["score"] == got["max"] == cli["score"] == cli["max_score"]
    assert {b: s for b, (s, _) in got["rows"].items()} == {b["name"]: "correct" for b in cli["blanks"]}
    assert "points" in got["report"].split("\n", 1)[0]
    assert console_errors(driver) == []


def test_a_wrong_answer_shows_the_graders_feedback(driver, exercise, tmp_path):
    _open(driver, exercise)
    answers = _answers()
    answers["?swap"] = "transpose 1 3"
    answers["?qh"] = "[B, S, H, Dh]"
    _fill(driver, answers)
    got = _grade(driver)
    cli = _cli_grade(tmp_path, "\n\n".join(_texts(driver)))
    assert got["score"] == cli["score"] < got["max"]
    for b in cli["blanks"]:
        status, feedback = got["rows"][b["name"]]
        assert status == b["status"]
        if b["status"] != "correct":
            assert b["feedback"] and feedback.startswith(b["feedback"])
    assert got["rows"]["?swap"][0] == "wrong"
    assert console_errors(driver) == []
