"""Codegen on hostile input: spec text reaches the generated Python only as safe
identifiers, string literals, escaped docstrings and comments, and finite numbers.

Each test is a reproduction from the issue on hostile input, widened to its class:
every keyword, every nn.Module attribute, every dataclass internal. Modules are
compiled, imported with process-spawning functions patched to fail, built and
run, and every shape is compared with the checker's.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import keyword
import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

from shapelang import codegen, render
from shapelang.checker.checker import check_file, check_text
from shapelang.cli import main
from shapelang.codegen import naming, runner

ROOT = Path(__file__).resolve().parent.parent
BASE = "dim B, D\nexample B=2, D=4\ninput x: [B, D]\n"


class Spawned(Exception):
    pass


def _refuse(*_a, **_k):
    raise Spawned("the generated module tried to run a command")


def import_module_safely(source: str, name: str, monkeypatch) -> dict:
    """Execute generated source with os.system and subprocess patched to fail; its namespace."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # an invalid escape sequence is a warning today
        code = compile(source, f"<{name}>", "exec")
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)      # dataclasses look their module up
    with monkeypatch.context() as m:
        for mod, attr in [(os, "system"), (os, "popen"), (subprocess, "Popen"), (subprocess, "run")]:
            m.setattr(mod, attr, _refuse)
        exec(code, module.__dict__)  # noqa: S102 - the code under test
    return module.__dict__


def functional_alias(source: str) -> str:
    return source.split("import torch.nn.functional as ", 1)[1].split("\n", 1)[0]


def checked(text: str, path: str = "t.shape"):
    spec = check_text(text, path)
    assert spec.ok, render.check_text(spec)
    return spec


def assert_runs(spec) -> None:
    pytest.importorskip("torch")
    rep = runner.run_spec(spec, runner.resolve_sizes(spec))
    assert rep.ok, runner.report_text(rep)


def accepted_names(candidates, template) -> list[str]:
    """The names the language accepts in `template` (some are shapelang's own keywords)."""
    return [n for n in sorted(set(candidates)) if n.isidentifier() and check_text(template(n), "t.shape").ok]


# ------------------------------------------------------------------ 1, 2: file names

FILE_NAMES = [
    'X"""and __import__("os").system("id")or"""Y.shape',
    "a\\N.shape", "b\\x.shape", "c\\u.shape", "q'u\"o\\te.shape", "tri'''ple.shape",
    "new\nline.shape", "car\rriage.shape", "tab\t.shape", "sep\u2028.shape", "bom\ufeff.shape",
    "nul\x00.shape", "end\\", "é→ü.shape",
]


@pytest.mark.parametrize("file_name", FILE_NAMES, ids=range(len(FILE_NAMES)))
def test_a_file_name_never_becomes_code(file_name, monkeypatch):
    spec = checked(BASE + "y: x -> relu\n", file_name)
    for instrument in (False, True):
        gen = codegen.generate(spec, instrument=instrument)
        ns = import_module_safely(gen.source, "hostile_name", monkeypatch)
        assert os.path.basename(file_name) in ns["__doc__"]          # quoted exactly, not run
        assert ns[gen.top_class].__doc__ == f"The whole of {os.path.basename(file_name)}."
        assert gen.module_name.isidentifier() and gen.module_name.isascii()


def test_the_injecting_file_name_from_the_issue(tmp_path, monkeypatch):
    path = tmp_path / 'X"""and __import__("os").system("id")or"""Y.shape'
    path.write_text(BASE + "y: x -> relu\n")
    gen = codegen.generate(check_file(str(path)))
    import_module_safely(gen.source, "hostile_file", monkeypatch)
    tree = ast.parse(gen.source)
    assert isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant)
    assert all(isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef)) for node in tree.body[1:])
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in ("__import__", "exec", "eval")]


# ------------------------------------------------------------------ 3, 4: keywords, builtins, aliases

PYTHON_NAMES = (keyword.kwlist + keyword.softkwlist + [n for n in dir(builtins) if not n.startswith("__")]
                + ["F", "nnf", "nn", "torch", "math", "dataclass", "causal_mask", "_record", "cfg", "self",
                   "layer", "out", "x_input", "Spec", "TConfig", "T"])


def _blocks_spec(names) -> str:
    blocks = "".join(f"block {n}(z: [B, D]):\n  h: z -> linear D -> gelu\n  return h -> softmax -1\nend\n"
                     for n in names)
    calls = "".join(f"y{k}: x -> {n}\n" for k, n in enumerate(names))
    return BASE + blocks + calls + f"s: x -> stack 2 {names[0]}\n"


def test_blocks_named_after_keywords_builtins_and_the_modules_own_names(monkeypatch):
    names = accepted_names(PYTHON_NAMES, lambda n: _blocks_spec([n]))
    assert {"class", "def", "return", "F", "torch", "nn", "print", "match"} <= set(names)
    spec = checked(_blocks_spec(names))
    gen = codegen.generate(spec)
    ns = import_module_safely(gen.source, "hostile_blocks", monkeypatch)
    assert ns[functional_alias(gen.source)].__name__ == "torch.nn.functional"
    assert_runs(spec)


@pytest.mark.parametrize("role", ["dim", "input", "binding", "block input"])
def test_every_python_name_in_every_role(role, monkeypatch):
    def one(n: str) -> str:
        if role == "dim":
            return f"input x{{k}}: [B, {n}]\nparam w{{k}}: [{n}, {n}]\ny{{k}}: x{{k}} @ w{{k}} -> softmax -1 -> gelu\n"
        if role == "input":
            return f"input {n}: [B, D]\ny{{k}}: {n} -> linear D -> softmax -1 -> gelu\n"
        if role == "binding":
            return f"{n}: x -> linear D -> gelu\nz{{k}}: {n} -> softmax -1\nw{{k}}: {n} -> relu\n"
        return (f"block Blk{{k}}({n}: [B, D]):\n  {n}2: {n} -> linear D -> gelu\n  return {n}2 -> softmax -1\n"
                f"end\ny{{k}}: x -> Blk{{k}}\n")

    def head(names) -> str:
        if role != "dim":
            return BASE
        return "dim B\nexample B=2\n" + "".join(f"dim {n}\nexample {n}=3\n" for n in names)

    names = accepted_names(PYTHON_NAMES, lambda n: head([n]) + one(n).format(k=0))
    assert len(names) > 100
    spec = checked(head(names) + "".join(one(n).format(k=k) for k, n in enumerate(names)))
    import_module_safely(codegen.generate(spec).source, "hostile_role", monkeypatch)
    assert_runs(spec)


@pytest.mark.parametrize("text, alias", [
    (BASE + "block F(z: [B, D]):\n  return z -> softmax -1\nend\ny: x -> F\n", "nnf"),
    ("dim B, F\nexample B=2, F=4\ninput x: [B, F]\nnnf: x -> gelu\n", "F"),
    ("dim B, F\nexample B=2, F=4\ninput x: [B, F]\nnnf: x -> view [B, F] -> gelu\n", "nnf_2"),
    (BASE + "F: x -> gelu\nnnf: F -> gelu\n", "nnf_2"),
    (BASE + "F: x -> gelu\nnnf: F -> gelu\nnnf_2: nnf -> softmax -1\n", "nnf_3"),
    (BASE + "y: x -> gelu\n", "F"),
])
def test_the_functional_alias_gives_way_to_any_name(text, alias, monkeypatch):
    spec = checked(text)
    source = codegen.generate(spec).source
    assert f"import torch.nn.functional as {alias}\n" in source
    import_module_safely(source, "hostile_alias", monkeypatch)
    assert_runs(spec)


# ------------------------------------------------------------------ 5, 6, 7: module and dataclass internals

def nn_module_names() -> set[str]:
    nn = pytest.importorskip("torch.nn")
    return set(dir(nn.Module)) | set(dir(nn.Module()))


def test_the_hard_coded_nn_module_names_are_torchs():
    real = {n for n in nn_module_names() if not (n.startswith("__") and n.endswith("__"))}
    assert real == naming.NN_MODULE_ATTRS


def test_params_and_buffers_named_after_nn_module_internals(monkeypatch):
    wanted = nn_module_names() | {"__tbl", "__w__", "_", "cfg", "self"}
    names = accepted_names(wanted, lambda n: BASE + f"param {n}: [D]\ny: x * {n}\n")
    assert {"_version", "_modules", "_parameters", "_buffers", "__init__", "__call__", "__dict__",
            "training", "forward", "state_dict", "register_buffer", "__tbl"} <= set(names)
    text = BASE + "".join(f"{'param' if k % 2 else 'buffer'} {n}: [D]\n" for k, n in enumerate(names))
    text += "".join(f"y{k}: x * {n} -> gelu\n" for k, n in enumerate(names))
    spec = checked(text)
    gen = codegen.generate(spec)
    import_module_safely(gen.source, "hostile_attrs", monkeypatch)
    assert_runs(spec)
    torch = pytest.importorskip("torch")
    _mod, model = runner.build(gen, runner.resolve_sizes(spec))
    assert isinstance(model.training, bool) and callable(model.state_dict) and callable(model.forward)
    assert len(model.state_dict()) == len(names)
    assert isinstance(model(torch.randn(2, 4)), dict)


DATACLASS_NAMES = ["__slots__", "__post_init__", "__qualname__", "__dataclass_fields__", "__dataclass_params__",
                   "__match_args__", "__weakref__", "__module__", "__dict__", "__annotations__", "__init__",
                   "__repr__", "__eq__", "__hash__", "__doc__", "__class__", "__init_subclass__",
                   "__dataclass_self__", "__dataclass_builtins_object__", "MISSING", "KW_ONLY", "_type_B",
                   "_dflt_B", "_return_type", "_HAS_DEFAULT_FACTORY", "_FIELDS", "self", "int", "field",
                   "fields", "property", "object", "__x", "_y"]


def test_dims_named_after_dataclass_and_python_internals(monkeypatch):
    def one(k: int, n: str) -> str:
        return f"input x{k}: [B, {n}]\nparam w{k}: [{n}]\ny{k}: x{k} * w{k}\n"

    names = accepted_names(DATACLASS_NAMES, lambda n: f"dim B, {n}\nexample B=2, {n}=3\n" + one(0, n))
    assert {"__slots__", "__post_init__", "__qualname__", "__dataclass_fields__", "MISSING"} <= set(names)
    text = ("dim B\nexample B=2\n" + "".join(f"dim {n}\nexample {n}={k + 2}\n" for k, n in enumerate(names))
            + "".join(one(k, n) for k, n in enumerate(names)))
    spec = checked(text)
    gen = codegen.generate(spec)
    ns = import_module_safely(gen.source, "hostile_dims", monkeypatch)
    assert [py for _n, py in gen.fields] == [f.name for f in dataclasses.fields(ns[gen.config_class])]
    for _n, py in gen.fields:
        assert not py.startswith("_") and py.isidentifier() and not keyword.iskeyword(py)
    cfg = ns[gen.config_class](**{py: 3 for _n, py in gen.fields})
    assert all(getattr(cfg, py) == 3 for _n, py in gen.fields)
    assert_runs(spec)


# ------------------------------------------------------------------ 8, 9, 10: return, NUL, numbers

def test_a_top_level_binding_named_return(monkeypatch, capsys, tmp_path):
    for text in (BASE + "return: x -> relu\n", BASE + "return: x\n", BASE + "y: x -> gelu\nreturn: y -> relu\n"):
        spec = checked(text)
        import_module_safely(codegen.generate(spec).source, "hostile_return", monkeypatch)
        assert_runs(spec)
    path = tmp_path / "ret.shape"
    path.write_text(BASE + "return: x -> relu\n")
    assert main(["codegen", str(path)]) == 0
    assert "return F.relu(x)" in capsys.readouterr().out


@pytest.mark.parametrize("junk", ["\x00", "\x00\x00x", '"""', "'''", "\\", "\\N{", "\x0b", "\x0c", "\x1b[2J",
                                  "\r", "\u2028", "\u2029", "\x85", "\ufeff", "\x7f"])
def test_comments_with_control_characters_and_quotes(junk, monkeypatch):
    text = BASE + f"# head {junk} comment\ny: x -> linear D # tail {junk}\nz: y -> relu #{junk}\n"
    spec = check_text(text, "t.shape")
    if not spec.ok:          # the language may refuse the character itself: then there is no code
        return
    for instrument in (False, True):
        source = codegen.generate(spec, instrument=instrument).source
        assert "\x00" not in source
        import_module_safely(source, "hostile_comment", monkeypatch)
    assert_runs(spec)


@pytest.mark.parametrize("factor", ["1e300*1e300", "1e308*10", "-1e300*1e300", "1e200**2"])
def test_a_number_beyond_float_is_refused_with_its_line(factor, tmp_path, capsys):
    text = BASE + f"y: x -> scale {factor}\n"
    spec = check_text(text, "t.shape")
    if not spec.ok:          # refused by the checker: as good
        return
    with pytest.raises(codegen.CodegenError, match="line 4"):
        codegen.generate(spec)
    path = tmp_path / "inf.shape"
    path.write_text(text)
    for command in ("codegen", "run"):
        assert main([command, str(path)]) == 1
        err = capsys.readouterr().err
        assert "line 4" in err and "Traceback" not in err and "float" in err


def test_printer_refuses_what_is_not_finite():
    import sympy as sp

    p = naming.Printer(str, real=True)
    for e in (sp.oo, -sp.oo, sp.zoo, sp.nan, sp.Float(1e300) * sp.Float(1e300), sp.Symbol("D") * sp.oo):
        with pytest.raises(codegen.CodegenError):
            p(e)
    assert p(sp.Float(1e300)) == "1e300"   # as ruff format writes it


@pytest.mark.parametrize("step", ["chunk 1 -1", "split [D] -1", "split D -1", "chunk 1 0 -> relu"])
def test_split_and_chunk_into_one_piece_give_a_tensor(step, monkeypatch):
    spec = checked(BASE + f"y: x -> {step}\nz: y -> softmax -1\n")
    source = codegen.generate(spec).source
    import_module_safely(source, "one_piece", monkeypatch)
    assert_runs(spec)
