"""Exercises as Jupyter notebooks, and notebook submissions back into exercise text.

`exercise_notebook` cuts an exercise into parts at its blank lines (a part ends after a
paragraph with a blank `?name`) and writes one `%%shapelang --part N` code cell per part,
each after a markdown cell with that part's prose and hints. The code cells joined by the
blank lines they were cut at give back the exercise text exactly, so `submission_text`
reads a filled notebook as the filled exercise: it takes the sources of the `%%shapelang`
code cells only (never outputs, never other cells; nothing is run), within size caps.
"""
from __future__ import annotations

import json
import re

from ..syntax.comments import code_of

NOTEBOOK_MAX_BYTES = 4 * 1024 * 1024    # a notebook with its cell outputs
MAX_CELLS = 1000
MAGIC = "%%shapelang"
_BLANK = re.compile(r"\?[A-Za-z_][A-Za-z0-9_]*")
_HINT = re.compile(r"^#\s*\?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")


class NotebookError(ValueError):
    """A notebook that cannot be read as a submission; the message says why."""


def _code_of(line: str) -> str:
    return code_of(line)


def parts_of(text: str) -> list[str]:
    """The exercise cut at blank lines into parts that join back with "\\n\\n"; every part but
    the last ends with a paragraph that holds a blank."""
    parts, current = [], []
    for para in text.split("\n\n"):
        current.append(para)
        if any(_BLANK.search(_code_of(line)) for line in para.split("\n")):
            parts.append("\n\n".join(current))
            current = []
    if current:
        if parts and not "".join(current).strip():
            parts[-1] += "\n\n" + "\n\n".join(current)
        else:
            parts.append("\n\n".join(current))
    return parts


def describe_part(part: str) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """What a part asks: its blanks (`?name`, in the order they are written), its prose (the comment lines that are
    not directives) and the hints of its blanks, (name, text) from `# ?name: ...` lines."""
    prose, hints = [], []
    for line in part.split("\n"):
        s = line.strip()
        m = _HINT.match(s)
        if m:
            hints.append((m.group(1), m.group(2)))
        elif s.startswith("#") and not s.startswith("# @") and not s.startswith("# Exercise:"):
            prose.append(s.lstrip("#").strip())
    blanks = list(dict.fromkeys(b for line in part.split("\n") for b in _BLANK.findall(_code_of(line))))
    return blanks, [p for p in prose if p], hints


def _markdown(part: str, number: int, total: int) -> str:
    blanks, prose, hints = describe_part(part)
    head = f"### Part {number} of {total}"
    if blanks:
        head += ": fill " + ", ".join(f"`{b}`" for b in blanks)
    out = [head, "", " ".join(prose)] if prose else [head]
    if hints:
        out += ["", *(f"- `?{name}`: {text}" for name, text in hints)]
    return "\n".join(out).strip() + "\n"


def _cell(kind: str, source: str, number: int) -> dict:
    cell = {"cell_type": kind, "id": f"cell-{number}", "metadata": {},
            "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def exercise_notebook(text: str, title: str = "") -> dict:
    """The exercise as a notebook (nbformat 4): one `%%shapelang` cell per part."""
    if not title:
        m = re.search(r"^#\s*@title:\s*(.+)$", text, re.MULTILINE)
        title = m.group(1).strip() if m else ""
    parts = parts_of(text)
    intro = (f"# {title}\n\n" if title else "") + (
        "Replace every blank `?name` in the code cells with your answer and run the cells: each "
        "cell checks the spec up to its part and draws the trace. Run the cells in order; "
        "grade the saved notebook with `shapelang grade`.\n")
    cells = [_cell("markdown", intro, 0), _cell("code", "%load_ext shapelang", 1)]
    for k, part in enumerate(parts, 1):
        cells.append(_cell("markdown", _markdown(part, k, len(parts)), 2 * k))
        cells.append(_cell("code", f"{MAGIC} --part {k}\n{part}", 2 * k + 1))
    return {"cells": cells, "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}


def notebook_json(text: str, title: str = "") -> str:
    return json.dumps(exercise_notebook(text, title), indent=1, ensure_ascii=False) + "\n"


def _source(cell) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        if not all(isinstance(s, str) for s in src):
            raise NotebookError("a cell's source is not text")
        return "".join(src)
    if not isinstance(src, str):
        raise NotebookError("a cell's source is not text")
    return src


def _part_number(first_line: str):
    m = re.search(r"--part[ =](\d{1,4})\b", first_line)
    return int(m.group(1)) if m else None


def submission_text(data: bytes) -> str:
    """The exercise text a notebook submission holds: its `%%shapelang` code cells, in part
    order (cells without a part number in notebook order), joined by blank lines."""
    if len(data) > NOTEBOOK_MAX_BYTES:
        raise NotebookError(f"the notebook is larger than {NOTEBOOK_MAX_BYTES // (1024 * 1024)} MB; "
                            "clear its outputs and submit it again")
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise NotebookError("the file is not a Jupyter notebook (not JSON)") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("the file is not a Jupyter notebook (no list of cells)")
    if len(cells) > MAX_CELLS:
        raise NotebookError(f"the notebook has more than {MAX_CELLS} cells")
    found = []
    for k, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = _source(cell)
        first, _, rest = src.partition("\n")
        if first.strip().startswith(MAGIC):
            part = _part_number(first)
            found.append((part if part is not None else 10**6, k, rest))
    if not found:
        raise NotebookError("the notebook has no `%%shapelang` cell; submit the exercise notebook "
                            "with your answers filled in")
    found.sort()
    return "\n\n".join(rest for _, _, rest in found)


def read_limit(path: str, default: int) -> int:
    """How many bytes of a submission to read: more for a notebook, which carries outputs."""
    return NOTEBOOK_MAX_BYTES if str(path).endswith(".ipynb") else default
