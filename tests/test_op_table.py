"""The table of operations is the one place an operation is described: the docs are
generated from it, every entry has a shape rule or is handled by the checker, and
every entry has an emitter in the code generator."""
from __future__ import annotations

import re
from pathlib import Path

from shapelang.checker.ops import RULES, TABLE
from shapelang.checker.ops.table import markdown
from shapelang.codegen import emit

DOCS = Path(__file__).resolve().parent.parent / "docs" / "language.md"


def test_docs_operation_tables_are_generated_from_the_table():
    text = DOCS.read_text()
    m = re.search(r"<!-- ops:begin -->\n(.*?)\n<!-- ops:end -->", text, re.DOTALL)
    assert m, "docs/language.md lost its ops:begin/ops:end markers"
    assert m.group(1).strip() == markdown().strip(), \
        "docs/language.md is out of date: run `python -m shapelang.checker.ops` and paste its output"


def test_every_operation_is_documented():
    generated = markdown()
    for d in TABLE.values():
        first = d.usage.split("|")[0].strip()
        assert f"`{first}`" in generated or f"`{d.name}`" in generated, d.name


def test_every_operation_has_an_emitter():
    emitters = getattr(emit, "EMITTERS", None) or emit.STEPS
    missing = [d.name for d in TABLE.values()
               if d.emitter_key not in emitters and d.emitter_key != "unary"]
    assert not missing, f"operations without an emitter: {missing}"


def test_the_checker_accepts_exactly_the_table():
    from shapelang import check

    for name, d in TABLE.items():
        if d.rule is None:
            continue
        assert RULES[name] is d.rule
    spec = check("dim B, S\ninput X: [B, S]\nY: X -> frobnicate 1\n")
    assert [x.code for x in spec.diagnostics] == ["E111"]
