"""The table of operations is the one place an operation is described: the docs are
generated from it, every entry has a shape rule or is handled by the checker, and
every entry has an emitter in the code generator."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from shapelang.checker.ops import RULES, TABLE
from shapelang.checker.ops.table import markdown
from shapelang.codegen import emit

DOCS = Path(__file__).resolve().parent.parent / "docs" / "language.md"


def test_docs_operation_tables_are_generated_from_the_table():
    text = DOCS.read_text()
    m = re.search(r"<!-- ops:begin -->\n(.*?)\n<!-- ops:end -->", text, re.DOTALL)
    assert m, "docs/language.md lost its ops:begin/ops:end markers"
    assert m.group(1).strip() == markdown().strip(), \
        "docs/language.md is out of date: run `python -m shapelang.checker.ops --write`"
    ops_main = importlib.import_module("shapelang.checker.ops.__main__")
    assert ops_main.generated(text) == text
    assert ops_main.main(["--check"]) == 0


def test_every_operation_is_documented():
    generated = markdown()
    for d in TABLE.values():
        first = d.usage.split("|")[0].strip()
        assert f"`{first}`" in generated or f"`{d.name}`" in generated, d.name


def test_every_operation_has_exactly_one_registered_emitter():
    """Emitters register by the table's emitter names: every entry's name is registered, every
    registered name belongs to an entry (or to one of the checker's operators), and the mapping
    the code generator reads is derived from the two."""
    from shapelang.codegen import registry

    keys = {d.emitter_key for d in TABLE.values()}
    assert keys <= set(registry.REGISTERED), sorted(keys - set(registry.REGISTERED))
    assert set(registry.REGISTERED) == keys | registry.OPERATORS, \
        sorted(set(registry.REGISTERED) - keys - registry.OPERATORS)
    assert emit.EMITTERS is registry.EMITTERS
    assert set(emit.EMITTERS) == {d.ir_name for d in TABLE.values()} | registry.OPERATORS
    for d in TABLE.values():
        assert emit.EMITTERS[d.ir_name] is registry.REGISTERED[d.emitter_key], d.name
        # a shared emitter is named after a group, or after an operation that uses it itself
        if d.emitter in TABLE:
            assert TABLE[d.emitter].emitter_key == d.emitter, d.name


def test_every_dtype_rule_an_entry_names_exists():
    from shapelang.checker import dtypes

    named = {d.dtype for d in TABLE.values() if isinstance(d.dtype, str)}
    assert named <= set(dtypes.RULES), sorted(named - set(dtypes.RULES))


def test_an_emitter_for_no_operation_or_a_second_one_is_refused():
    from shapelang.codegen.registry import emitter

    with pytest.raises(LookupError, match="frobnicate"):
        emitter("frobnicate")(lambda o: [])
    with pytest.raises(LookupError, match="linear"):
        emitter("linear")(lambda o: [])


def test_the_checker_accepts_exactly_the_table():
    from shapelang import check

    for name, d in TABLE.items():
        if d.rule is None:
            continue
        assert RULES[name] is d.rule
    spec = check("dim B, S\ninput X: [B, S]\nY: X -> frobnicate 1\n")
    assert [x.code for x in spec.diagnostics] == ["E111"]
