"""Notebooks: `%load_ext shapelang`, the `%%shapelang` cell magic and exercise notebooks,
executed in a real kernel; notebook submissions graded by `shapelang grade`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
nbformat = pytest.importorskip("nbformat", reason="the notebook tests need nbformat (pip install '.[test]')")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need nbclient (pip install '.[test]')")
pytest.importorskip("ipykernel", reason="the notebook tests need ipykernel (pip install '.[test]')")

GOOD = (ROOT / "specs" / "mha_self_attention.shape").read_text()
BAD = """dim B
dim S
dim D
example B=2, S=3, D=8
input X: [B, S, D]
param W: [D, D]
Y: X -> view [B, S, 3, D]
"""


def _execute(cells: list, tmp_path: Path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb


def _outputs(cell) -> tuple[str, str, list]:
    html = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
    plain = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in cell.outputs)
    errors = [o for o in cell.outputs if o.output_type == "error"]
    return html, plain, errors


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "shapelang", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def _fill(nb_path: Path, answers: dict) -> None:
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        for name, answer in answers.items():
            src = src.replace(f": ?{name}", f": {answer}").replace(f"-> ?{name}", f"-> {answer}")
        cell["source"] = src.splitlines(keepends=True)
    nb_path.write_text(json.dumps(nb))


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nb")
    return _execute([
        "%load_ext shapelang",
        "%%shapelang\n" + GOOD,
        "%%shapelang\n" + BAD,
        "%%shapelang --example B=2,S=7 --codegen\n" + GOOD,
        "import shapelang\nshapelang.check('dim B\\nexample B=3\\ninput X: [B, 4]\\nY: X -> linear 5\\n')",
        "%%shapelang --example S=seven\n" + GOOD,
        "%%shapelang --strict\n" + BAD,
    ], tmp)


def test_a_cell_that_checks_shows_the_trace_picture(executed):
    html, plain, errors = _outputs(executed.cells[1])
    assert not errors
    assert "<svg" in html and 'data-step="%' in html
    assert 'data-binding="scores"' in html and "query × key" in html
    assert "ok (" in plain


def test_a_failing_cell_shows_the_diagnostic_with_its_caret_not_a_traceback(executed):
    html, plain, errors = _outputs(executed.cells[2])
    assert not errors, "a spec with errors is shown, the cell does not raise"
    assert "error[" in plain and "^" in plain and "7 | Y: X -> view [B, S, 3, D]" in plain
    assert "Traceback" not in plain and "data-diagnostic=" in html
    assert "7 | Y: X -&gt; view" in html        # the caret block, escaped


def test_example_sizes_and_codegen_options(executed):
    html, plain, errors = _outputs(executed.cells[3])
    assert not errors
    assert "example: B=2, S=7, D=512, H=8" in html
    assert "class " in plain and "nn.Module" in plain      # the generated PyTorch source


def test_a_checked_spec_shows_itself_as_the_picture(executed):
    html, _, errors = _outputs(executed.cells[4])
    assert not errors and "<svg" in html and 'data-binding="Y"' in html


def test_bad_options_are_a_usage_message_without_a_traceback(executed):
    _, plain, errors = _outputs(executed.cells[5])
    assert not errors and "UsageError: %%shapelang: --example: `S=seven`" in plain
    assert "Traceback" not in plain


def test_strict_fails_the_cell_after_showing_the_findings(executed):
    _, plain, _ = _outputs(executed.cells[6])
    assert "^" in plain and "UsageError: %%shapelang --strict" in plain


def test_import_shapelang_loads_neither_ipython_nor_sympy():
    code = "import sys, shapelang; print(sorted(m for m in ('sympy', 'IPython') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.stdout.strip() == "[]", out.stderr


def test_exercise_notebook_filled_and_graded(tmp_path):
    ex = ROOT / "exercises" / "02_split_heads.shape"
    nb_path = tmp_path / "02_split_heads.ipynb"
    made = _cli("exercise", "make", "--notebook", str(ROOT / "exercises" / "solutions" / ex.name),
                "-o", str(nb_path))
    assert made.returncode == 0, made.stderr
    nb = nbformat.read(str(nb_path), as_version=4)
    magic = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%shapelang --part")]
    assert "%load_ext shapelang" in nb.cells[1].source and len(magic) >= 2
    assert any(c.cell_type == "markdown" and "hint" in c.source for c in nb.cells)

    answers = {"split": "view [B, S, H, Dh]", "swap": "transpose 1 2", "qh": "[B, H, S, Dh]",
               "one": "[B, S, Dh]"}
    _fill(nb_path, answers)
    run = _execute([c.source for c in nbformat.read(str(nb_path), as_version=4).cells
                    if c.cell_type == "code"], tmp_path)
    for cell in run.cells:
        assert not _outputs(cell)[2], _outputs(cell)
    assert "<svg" in _outputs(run.cells[-1])[0]        # the last part draws its steps
    nb_path.write_text(nbformat.writes(run))            # graded with its outputs, as saved

    full = _cli("grade", str(ex), str(nb_path), "--format", "score")
    assert full.returncode == 0 and full.stdout.strip() == "7", full.stdout + full.stderr

    wrong = tmp_path / "wrong.ipynb"
    wrong.write_text(nb_path.read_text().replace("transpose 1 2", "transpose 0 1"))
    less = _cli("grade", str(ex), str(wrong), "--format", "json")
    assert less.returncode == 1
    result = json.loads(less.stdout)["submissions"][0]
    assert 0 < result["score"] < 7
    for fmt in ("text", "gradescope", "prairielearn"):
        out = _cli("grade", str(ex), str(wrong), "--format", fmt)
        assert out.returncode == 1 and out.stdout.strip(), (fmt, out.stderr)
