"""The package shows the pipeline: stages import only the stages below them, no
module imports itself back through others, and no module grows past 500 lines.

Every import counts, including the ones inside functions: a lazy import is still
a dependency a reader has to follow.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "shapelang"

# stage -> the stages it may import (besides itself)
ALLOWED = {
    "syntax": set(),
    "checker": {"syntax"},
    "render": {"syntax", "checker"},
    "fmt": {"syntax"},
    "codegen": {"syntax", "checker"},
    # PyTorch -> spec: beside codegen (it generates the spec's module to prove the import faithful)
    "importer": {"syntax", "checker", "codegen"},
    "teaching": {"syntax", "checker", "render"},
    "api": {"syntax", "checker", "render", "fmt", "codegen", "importer", "teaching"},
    # the outer packages go through the door (shapelang.api) and nothing else of the stages;
    # the CLI starts the language server and the playground
    "lsp": {"api"},
    "serve": {"api"},
    "cli": {"api", "lsp", "serve"},
    "notebook": {"api"},
    "__init__": {"api", "notebook"},
    "__main__": {"cli"},
}
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(["shapelang", *parts])] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The shapelang modules that module `name` imports, anywhere in its body."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in modules]
            # `from . import patterns` imports the submodule, not the package's own names
            targets = subs if subs else [mod]
        else:
            continue
        for t in targets:
            if t in modules and t != name:
                found.add(t)
    return found


def _stage(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


GRAPH = {name: _imports(name, path, _modules()) for name, path in _modules().items()}


def test_the_graph_is_not_empty():
    # guards the test itself: a broken walk would find no imports and pass everything
    assert "shapelang.checker.checker" in GRAPH
    assert "shapelang.syntax.parser" in GRAPH["shapelang.checker.checker"]
    assert "shapelang.api" in GRAPH["shapelang.cli.codegen"]


OUTER = ("cli", "lsp", "serve", "notebook")


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _stage(m) in OUTER))
def test_the_outer_packages_use_only_the_api(module):
    """cli, lsp, serve and notebook reach the stages through `shapelang.api` alone: a private
    helper of another stage (render.common, teaching.results...) is not a dependency
    they may take, so a stage can be rearranged behind the door."""
    stage = _stage(module)
    wrong = sorted(t for t in GRAPH[module]
                   if _stage(t) not in (stage, "api", "__init__") and _stage(t) not in ALLOWED[stage])
    assert not wrong, f"{module} imports {wrong}: add what it needs to shapelang.api and use that"


def test_the_api_door_opens_onto_real_names():
    """Every name the API loads lazily exists, in a stage the API may depend on."""
    from shapelang import api

    for name, (module, attr) in api._LAZY.items():
        assert _stage(module) in ALLOWED["api"], (name, module)
        if _stage(module) == "importer":
            continue        # imports torch; checked where torch is (tests/test_import_*)
        assert getattr(api, name) is not None, name
    assert set(api.__all__) >= set(api._LAZY) and len(set(api.__all__)) == len(api.__all__)
    for name in api.__all__:
        if api._LAZY.get(name, ("",))[0].startswith("shapelang.importer"):
            continue
        assert hasattr(api, name), name


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_stages_import_only_lower_stages(module):
    stage = _stage(module)
    wrong = sorted(t for t in GRAPH[module]
                   if _stage(t) != stage and _stage(t) not in ALLOWED.get(stage, set())
                   and not (stage != "__init__" and t == "shapelang"))
    assert not wrong, f"{module} ({stage}) imports {wrong}: that points up the pipeline"


def test_no_import_circles():
    # Tarjan's strongly connected components over the module graph
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            # a package importing its own submodules (its __init__ re-exports) is not a circle
            real = [m for m in comp if not any(o.startswith(m + ".") for o in comp)]
            if len(real) > 1:
                circles.append(sorted(comp))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_is_over_500_lines(module):
    n = len(_modules()[module].read_text().splitlines())
    assert n <= MAX_LINES, f"{module} has {n} lines: split it by responsibility"


def test_every_package_is_shipped():
    """A non-editable install (CI's) ships only the packages pyproject.toml lists."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(["shapelang", *p.parent.relative_to(PACKAGE).parts])
             for p in PACKAGE.rglob("__init__.py")}
    assert found <= listed, f"add to pyproject.toml's packages: {sorted(found - listed)}"


def test_the_grade_command_names_gradescopes_visibilities():
    from shapelang.cli.grade import VISIBILITIES as CLI
    from shapelang.teaching.results import VISIBILITIES

    assert CLI == VISIBILITIES


def test_check_and_trace_never_reach_the_importer():
    """The importer imports torch: nothing `check` or `trace` loads may lead to it."""
    roots = [m for m in GRAPH if _stage(m) in ("syntax", "checker", "render", "api", "fmt")]
    seen, todo = set(), list(roots)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += GRAPH.get(m, ())
    assert not [m for m in seen if _stage(m) == "importer"]
    assert any(_stage(m) == "importer" for m in GRAPH), "the importer package is missing"


def test_help_imports_no_stage():
    """`shapelang --help` builds the parser only: no checker, no grader, no sympy."""
    import subprocess
    import sys

    code = ("import sys; from shapelang.cli import _parser; _parser(); "
            "print(sorted(m for m in sys.modules if m.startswith(('sympy', 'lark', 'shapelang.teaching', "
            "'shapelang.checker', 'shapelang.importer', 'torch'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_the_docs_list_every_format_and_every_api_name():
    """docs/trace.md's table of formats is the registry's; docs/architecture.md names every
    public name of the API."""
    from shapelang import api
    from shapelang.render.formats import markdown

    docs = PACKAGE.parent / "docs"
    assert markdown() in (docs / "trace.md").read_text(), "regenerate with render.formats.markdown()"
    arch = (docs / "architecture.md").read_text()
    missing = [name for name in api.__all__ if f"`{name}" not in arch]
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_the_cli_offers_exactly_the_registered_formats():
    from shapelang.cli import _parser
    from shapelang.render.formats import FORMATS

    for command in ("check", "trace"):
        sub = _parser()._subparsers._group_actions[0].choices[command]
        (fmt,) = [a for a in sub._actions if "--format" in a.option_strings]
        assert fmt.choices == [n for n, f in FORMATS.items() if command in f.commands]
        assert all(FORMATS[n].help in fmt.help for n in fmt.choices)


def test_the_packages_names_are_the_packages():
    """`from shapelang import render` is the render package even though the API has a
    `render` function (`shapelang.api.render`)."""
    import subprocess
    import sys

    code = ("import shapelang, types; from shapelang import render, codegen; "
            "print(isinstance(render, types.ModuleType), isinstance(codegen, types.ModuleType), "
            "callable(shapelang.check))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]
    stages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} | {"api"}
    import shapelang
    assert stages == set(shapelang._STAGES)
_OUTSIDE = ("import sys, json; from shapelang.cli import main; main({argv!r}); "
            "print(json.dumps([sorted(m for m in sys.modules if m.startswith('shapelang.') "
            "and not m.startswith(('shapelang.checker.', 'shapelang.syntax.', 'shapelang.grammars'))), "
            "'sympy' in sys.modules]))")
# The front door, the API and the renderers `check` prints with: the whole list outside the
# syntax and checker stages (and the grammar's data package, which an installed copy imports)
# that `shapelang check` may load (a lean start, issue 23).
CHECK_LOADS = ["shapelang.api", "shapelang.checker", "shapelang.cli", "shapelang.cli.common",
               "shapelang.cli.explain", "shapelang.cli.grade", "shapelang.cli.importer",
               "shapelang.cli.serve", "shapelang.render", "shapelang.render.color",
               "shapelang.render.columns", "shapelang.render.formats", "shapelang.render.text",
               "shapelang.syntax"]


def _loads(argv, tmp_path):
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _OUTSIDE.format(argv=argv)], check=True, capture_output=True,
                         text=True, cwd=tmp_path).stdout
    return json.loads(out.splitlines()[-1])


def test_check_loads_only_syntax_checker_and_its_renderer(tmp_path):
    """`check` loads no codegen, teaching, importer, HTML or table module; sympy only when a
    spec has sizes to prove (an empty file does not pay its import)."""
    spec = Path(__file__).resolve().parent.parent / "specs" / "mha_self_attention.shape"
    (tmp_path / "empty.shape").write_text("# nothing yet\n")
    assert _loads(["check", str(spec)], tmp_path) == [CHECK_LOADS, True]
    assert _loads(["check", "empty.shape"], tmp_path) == [CHECK_LOADS, False]
    modules, _ = _loads(["trace", str(spec)], tmp_path)
    assert not [m for m in modules if m not in CHECK_LOADS and not m.startswith("shapelang.render.")]
    assert "shapelang.render.html" not in modules


def test_the_docs_name_every_module_of_the_checker():
    """docs/architecture.md's section on the checker's modules names each of its modules and
    subpackages, so the description cannot fall behind a module added or moved."""
    arch = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    section = arch[arch.index("### The checker's modules"):]
    section = section[:section.index("\n#")] if "\n#" in section else section
    checker = PACKAGE / "checker"
    names = [p.name for p in checker.glob("*.py") if p.name != "__init__.py"]
    names += [f"{p.name}/" for p in checker.iterdir() if (p / "__init__.py").exists()]
    missing = [n for n in names if f"`{n}`" not in section]
    assert not missing, f"docs/architecture.md does not describe checker's {missing}"
    assert "`ops/patterns.py`" in section
