"""Every list of operations outside the op table is derived from it (OpDef.moves and the other
fields): a new layout operation reaches the code generator, the runner, the pictures and the
grader's probe through its table entry alone."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from shapelang import api
from shapelang.checker.ops.table import MOVES, TABLE, moving
from shapelang.checker.ops.values import CASTS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "shapelang"
EXERCISE = ROOT / "exercises" / "02_split_heads.shape"
SOLUTION = ROOT / "exercises" / "solutions" / "02_split_heads.shape"

# Literal lists of three or more op names written out outside the op table, per module: none
# is left, and a new one fails the test below (say what rule it is with a field of OpDef
# instead). An `@emitter("a", "b", "c")` counts as a list too: operations share an emitter
# through the table. The one exception is `@`, which has no table entry.
WRITTEN_OUT: dict = {}


# lists whose names are not operations although they spell some: the functions of sizes
# (`sqrt(D)`, `min(A, B)`), written once
NOT_OPERATIONS = {"checker/dims.py": ("sqrt", "min", "max")}


def _op_lists(path: Path, names: set) -> int:
    found = 0
    for node in ast.walk(ast.parse(path.read_text())):
        elts = node.elts if isinstance(node, (ast.Set, ast.List, ast.Tuple)) else \
            node.keys if isinstance(node, ast.Dict) else \
            node.args if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "emitter" else None
        if not elts:
            continue
        ops = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in names]
        if len(ops) >= 3 and len(ops) >= 0.6 * len(elts):
            found += 1
    return found


def test_no_new_literal_list_of_op_names():
    names = set(TABLE) | {d.ir_name for d in TABLE.values()}
    counts = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("checker/ops/"):
            continue
        n = _op_lists(path, names - set(NOT_OPERATIONS.get(rel, ())))
        if n:
            counts[rel] = n
    grown = {k: (v, WRITTEN_OUT.get(k, 0)) for k, v in counts.items() if v > WRITTEN_OUT.get(k, 0)}
    assert not grown, (f"lists of op names written out (found, allowed): {grown}; derive them from "
                       "the op table (shapelang.checker.ops.table.moving, or a new OpDef field)")
    # the ratchet only goes down: lower WRITTEN_OUT when a list is derived
    assert counts == {k: v for k, v in WRITTEN_OUT.items() if v}, counts


def test_every_layout_kind_is_known_and_used():
    assert {d.moves for d in TABLE.values()} - {""} == set(MOVES)
    # aliases move as their originals do
    for d in TABLE.values():
        if d.alias_of:
            assert d.moves in ("", TABLE[d.alias_of].moves), d.name


def test_the_derived_lists_follow_the_table():
    from shapelang.codegen import emit, runner
    from shapelang.render import svg
    from shapelang.teaching import probe, steps

    assert runner.PASS_THROUGH == moving(*MOVES)
    assert {"movedim", "unflatten", "rearrange"} <= probe.LAYOUT and "softmax" not in probe.LAYOUT
    assert steps.FAMILIES["movedim"] == "move" and steps.FAMILIES["unflatten"] == "regroup"
    assert svg.MOVE_OPS == moving("move", "rearrange") and "unflatten" in svg.LAYOUT_OPS
    assert "unflatten" in emit.FOLD and "linear" not in emit.FOLD


@pytest.mark.parametrize("swap", ["transpose 1 2", "movedim 2 1", "permute 0 2 1 3", "transpose -3 -2",
                                  'rearrange "b s h d -> b h s d"'])
def test_every_way_to_swap_two_axes_earns_the_marks(swap):
    """The grader's probe moves elements for every layout op of the table: `movedim 2 1` holds
    the same numbers as `transpose 1 2`, so it earns full marks for that blank."""
    grader = api.grader(str(EXERCISE), str(SOLUTION))
    text = EXERCISE.read_text().replace("?split", "view [B, S, H, Dh]").replace("?swap", swap) \
        .replace("?qh", "[B, H, S, Dh]").replace("?one", "[B, S, Dh]")
    res = grader.grade_text(text)
    assert res.full_marks, api.text_report(res)


def test_a_wrong_move_still_loses_the_marks():
    grader = api.grader(str(EXERCISE), str(SOLUTION))
    text = EXERCISE.read_text().replace("?split", "view [B, S, H, Dh]").replace("?swap", "movedim 3 1") \
        .replace("?qh", "[B, Dh, S, H]")
    assert not grader.grade_text(text).full_marks


FUNCTIONS = sorted(name for name, d in TABLE.items() if d.function)


def test_the_importer_translates_every_function_of_one_tensor():
    pytest.importorskip("torch")
    from shapelang.importer import elementwise

    translated = {k.removeprefix("aten.").removesuffix(".default") for k in elementwise.TABLE}
    renamed = {v: k for k, v in elementwise.RENAMED.items()}
    assert {renamed.get(n, n) for n in FUNCTIONS} <= translated


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_of_one_tensor_written_as_pytorch_gets_its_operation(name):
    """`torch.erf(x)`, `F.selu(x)` in a spec: the fix is the operation of the table entry whose
    `function` it is (and the fixed line checks clean)."""
    call = TABLE[name].function.replace("-", "torch.neg")
    spec = api.check(f"dim B, S\nexample B=2, S=3\ninput x: [B, S]\ny: {call}(x)\n")
    fixes = [d.fix[2] for d in spec.diagnostics if d.fix]
    assert fixes == [f"y: x -> {name}"], api.render_check(spec)
    assert api.check(f"dim B, S\nexample B=2, S=3\ninput x: [B, S]\ny: x -> {name}\n").ok


LEARNED = sorted(name for name, d in TABLE.items() if d.learned and d.rule is not None)


@pytest.mark.parametrize("name", LEARNED)
def test_two_uses_of_a_learned_operation_are_two_layers_to_the_grader(name, tmp_path):
    """`a` and `b` apply the same layer kind to the same input with their own weights: `a + a`
    is not `a + b` (a conv or a group norm counted once was), but `b + a` is."""
    use = TABLE[name].use
    body = "dim B, S, D, F, V\nexample B=2, S=5, D=8, F=16, V=11\ninput x: [B, S, D]\n" \
           f"input ids: [B, S] int\ninput m: [B, 1, S] bool\na: {use}\nb: {use}\n"
    exercise, solution = tmp_path / "ex.shape", tmp_path / "sol.shape"
    exercise.write_text("# Exercise\n" + body + "# ?y: 2 points\ny: ?y\n")
    solution.write_text("# Exercise\n" + body + "# ?y: 2 points\ny: a + b\n")
    grader = api.grader(str(exercise), str(solution))
    text = exercise.read_text()
    assert not grader.grade_text(text.replace("y: ?y", "y: a + a")).full_marks
    assert grader.grade_text(text.replace("y: ?y", "y: b + a")).full_marks


@pytest.mark.parametrize("name", sorted(n for n, d in TABLE.items() if d.normalises))
def test_every_softmax_marks_the_axis_its_weights_sum_over(name):
    """The picture marks the axis a softmax normalises, for every operation the table says
    normalises (softmin as well as softmax)."""
    from shapelang.render.html import trace_html

    spec = api.check(f"dim B, S, D\nexample B=2, S=3, D=4\ninput x: [B, S, D]\ny: x -> {name} 1\n")
    assert spec.ok, api.render_check(spec)
    step = spec.bindings[-1].steps[-1]
    page = trace_html(spec)
    start = page.index(f'data-step="{step.ref}"')
    end = page.find('<div class="step"', start + 1)
    fig = page[start:end if end > 0 else len(page)]
    marks = re.findall(r'<g data-axis="([^"]*)" data-tag="[^"]*">(?:(?!<g data-axis).)*data-mark=', fig)
    assert marks == ["S"], fig


@pytest.mark.parametrize("name", sorted(CASTS) + ["int"])
def test_every_cast_method_written_as_pytorch_gets_its_cast(name):
    """`x.half()` and its kin read as the table's casts; Tensor.int() is int32, not `int`."""
    spec = api.check(f"dim B, S\nexample B=2, S=3\ninput x: [B, S]\ny: x.{name}()\n")
    fixes = [d.fix[2] for d in spec.diagnostics if d.fix]
    assert fixes == [f"y: x -> {name if name != 'int' else 'to int32'}"], api.render_check(spec)


@pytest.mark.parametrize("move", ["transpose 1 2", "movedim 2 1", "swapaxes 1 2", "permute 0 2 1 3"])
def test_the_layout_feedback_knows_every_way_to_move_axes(move):
    """A view and a move in the wrong order: the feedback asks to check the order of the two,
    whichever layout operation of the table moved the axes."""
    from shapelang.teaching.feedback import layout_message

    msg = layout_message("Qh", f"Qh: Q -> view [B, H, S, Dh] -> {move}")
    assert "check which axes are swapped" in msg


def test_generated_names_and_value_pairs_come_from_the_table():
    """The names generated code gives layers and results, and the ops whose PyTorch form
    returns (values, indices), are table fields: a module uses them as the entry says."""
    from shapelang.codegen.steps import CHAIN_SUFFIX, MODULE_OPS

    assert MODULE_OPS == {d.ir_name: d.layer for d in TABLE.values() if d.layer}
    assert {k: v for k, v in CHAIN_SUFFIX.items() if k in TABLE} == \
        {d.ir_name: d.short for d in TABLE.values() if d.short}
    # every op that owns a layer gets one named by its entry
    # every op that owns weights of its own (not a table or a block) names its layer
    assert all(d.layer for d in TABLE.values() if d.learned and d.name not in ("embed", "block", "stack"))
    source = api.codegen(api.check("dim B, S, D\ninput x: [B, S, D]\n"
                                   "y: x -> layernorm -> linear D -> cummax 1\n")).source
    assert f"self.y_{TABLE['layernorm'].layer} = nn.LayerNorm" in source and ".cummax(dim=1)[0]" in source
