"""Golden files: a spec in, its expected text and JSON out, beside it.

tests/golden/NAME.shape -> NAME.check.txt, NAME.check.json
specs/NAME.shape        -> NAME.trace (the shape table a learner reads)
Run `python -m pytest --update-goldens` to rewrite them, then review the diff.
"""
import json
from pathlib import Path

import pytest
from tiers import sample

from shapelang import render
from shapelang.checker.checker import check_text

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = sorted((ROOT / "tests" / "golden").glob("*.shape"))
SPECS = sorted((ROOT / "specs").glob("*.shape"))


def compare(path: Path, actual: str, update: bool):
    if update or not path.exists():
        path.write_text(actual)
        if not update:
            pytest.fail(f"{path.name} did not exist; written, review and commit it")
    assert actual == path.read_text(), f"{path.name} differs; rerun with --update-goldens and review"


@pytest.mark.parametrize("spec", GOLDEN, ids=lambda p: p.stem)
def test_check_goldens(spec, update_goldens):
    rel = spec.relative_to(ROOT).as_posix()
    checked = check_text(spec.read_text(), rel)
    compare(spec.with_suffix(".check.txt"), render.check_text(checked), update_goldens)
    compare(spec.with_suffix(".check.json"), render.to_json(render.spec_json(checked, False)),
            update_goldens)


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_spec_trace_goldens(spec, update_goldens):
    rel = spec.relative_to(ROOT).as_posix()
    checked = check_text(spec.read_text(), rel)
    assert checked.ok, render.check_text(checked)
    compare(spec.with_suffix(".trace"), render.trace_text(checked), update_goldens)


@pytest.mark.parametrize("spec", sample(GOLDEN + SPECS, every=6, always={p.stem for p in GOLDEN}))
def test_json_schema(spec):
    """The documented schema: shapes read back with sympy given the dims as symbols."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    checked = check_text(spec.read_text(), spec.name)
    out = json.loads(render.to_json(render.spec_json(checked, True)))
    assert set(out) >= {"file", "ok", "diagnostics", "bindings"}
    for d in out["diagnostics"]:
        assert d["severity"] in ("error", "warning")
        for key in ("code", "message", "line", "column", "end_line", "end_column", "help",
                    "counterexample"):
            assert key in d
    names = {n: sympy.Symbol(n, positive=True, integer=True) for n in checked.dims}
    for b in out["bindings"]:
        assert {"name", "line", "shape", "example", "steps"} <= set(b)
        for s in b["steps"]:
            assert {"op", "line", "column", "shape", "example"} <= set(s)
            for dim in s["shape"]:
                parse_expr(dim, local_dict=names)  # our own output, read back as documented
            if s["example"] is not None and checked.example:
                want = [checked.example_value(parse_expr(d, local_dict=names)) for d in s["shape"]]
                assert s["example"] == want
