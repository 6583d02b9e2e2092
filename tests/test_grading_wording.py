"""What the grader says about the upload itself, and the exercise notebook's headings:

- an upload of a notebook and a `.shape` file is "2 exercise files", not "2 .shape files";
- grading the reference solution file itself says why it is not graded;
- a notebook part's heading lists its blanks in the order they are written.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from shapelang import cli
from shapelang.teaching.notebook import describe_part, notebook_json, parts_of

ROOT = Path(__file__).resolve().parent.parent / "exercises"
NAME = "02_split_heads"


def _course(tmp_path: Path) -> Path:
    d = tmp_path / "course"
    (d / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / f"{NAME}.shape", d / f"{NAME}.shape")
    shutil.copy(ROOT / "solutions" / f"{NAME}.shape", d / "solutions" / f"{NAME}.shape")
    return d / f"{NAME}.shape"


def _gradescope(tmp_path: Path, ex: Path, *subs) -> dict:
    out = tmp_path / "results.json"
    cli.main(["grade", str(ex), *map(str, subs), "--format", "gradescope", "-o", str(out)])
    return json.loads(out.read_text())


def test_an_upload_of_a_notebook_and_a_spec_is_not_called_two_shape_files(tmp_path):
    ex = _course(tmp_path)
    upload = tmp_path / "upload"
    upload.mkdir()
    (upload / "exercise.ipynb").write_text(notebook_json(ex.read_text()))
    (upload / "scratch.shape").write_text(ex.read_text())
    got = _gradescope(tmp_path, ex, upload)
    assert got["score"] == 0
    assert "2 .shape files" not in got["output"]
    assert "2 exercise files (.shape files and notebooks)" in got["output"]
    assert "`exercise.ipynb`" in got["output"] and "`scratch.shape`" in got["output"]
    (upload / "scratch.shape").unlink()
    (upload / "other.ipynb").write_text(notebook_json(ex.read_text()))
    assert "2 notebooks" in _gradescope(tmp_path, ex, upload)["output"]


def test_grading_the_reference_solution_says_why_it_is_skipped(tmp_path, capsys):
    ex = _course(tmp_path)
    solution = ex.parent / "solutions" / f"{NAME}.shape"
    got = _gradescope(tmp_path, ex, solution)
    assert "reference solution" in got["output"] and "no .shape file" not in got["output"]
    assert cli.main(["grade", str(ex), str(solution)]) == 2
    assert "reference solution, which is not graded" in capsys.readouterr().err
    copy = tmp_path / "mine.shape"
    shutil.copy(solution, copy)               # a copy is graded: full marks
    assert cli.main(["grade", str(ex), str(copy)]) == 0


def test_notebook_headings_name_the_blanks_in_the_order_they_are_written():
    for ex in sorted(ROOT.glob("*.shape")):
        text = ex.read_text()
        order = [m for m in __import__("re").findall(r"\?[A-Za-z_]\w*",
                 "\n".join(line.split("#", 1)[0] for line in text.split("\n")))]
        got = [b for part in parts_of(text) for b in describe_part(part)[0]]
        assert got == order, ex.name
    nb = json.loads(notebook_json((ROOT / f"{NAME}.shape").read_text()))
    heads = [c["source"][0] for c in nb["cells"] if c["cell_type"] == "markdown"
             and c["source"][0].startswith("### Part")]
    assert "fill `?split`, `?swap`, `?qh`" in heads[0], heads
