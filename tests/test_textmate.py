"""The VS Code TextMate grammar (editors/vscode): op names from the table, and the
scopes VS Code itself gives the specs (vscode-textmate with Oniguruma, run by node)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from shapelang.checker.ops import TABLE

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"
GRAMMAR = VSCODE / "syntaxes" / "shapelang.tmLanguage.json"
SPECS = sorted((ROOT / "specs").rglob("*.shape")) + sorted((ROOT / "exercises").glob("*.shape"))
KEYWORDS = {"dim", "assume", "example", "input", "param", "buffer", "expect", "block",
            "return", "end"}


def _op_alternatives() -> list[set[str]]:
    found = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("match", "begin"):
                m = re.search(r"\((?:\?:)?((?:[a-z_0-9]+\|){5,}[a-z_0-9]+)\)", node.get(key, ""))
                if m and "softmax" in m.group(1).split("|"):   # not the dtype names
                    found.append(set(m.group(1).split("|")))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(GRAMMAR.read_text()))
    return found


def test_grammar_op_names_are_the_table():
    alternatives = _op_alternatives()
    assert len(alternatives) >= 2
    for names in alternatives:
        assert names == set(TABLE), (f"missing: {sorted(set(TABLE) - names)}, "
                                     f"extra: {sorted(names - set(TABLE))}")


def test_the_grammars_lists_are_generated_from_the_table(monkeypatch):
    """The word lists in the grammar are written by `python -m shapelang.lsp.textmate` from the
    op table and the dtype spellings: the file on disk is that output, and a new table entry
    (here a made-up `softcap`) reaches all three op lists and no other."""
    from shapelang import api
    from shapelang.lsp import textmate

    text = GRAMMAR.read_text()
    assert textmate.generate(text) == text, "run: python -m shapelang.lsp.textmate"
    assert textmate.main(["--check"]) == 0
    real = api.operations()
    monkeypatch.setattr(api, "operations", lambda: {**real, "softcap": real["tanh"]})
    grown = textmate.generate(text)
    assert grown.count("softcap") == len(_op_alternatives()) == 3
    assert "bfloat16|float16|float32|float64|double|float|" in grown


def test_extension_manifest_points_at_its_files():
    pkg = json.loads((VSCODE / "package.json").read_text())
    assert pkg["contributes"]["languages"][0]["extensions"] == [".shape"]
    for entry in pkg["contributes"]["grammars"] + pkg["contributes"]["languages"]:
        key = "path" if "path" in entry else "configuration"
        assert (VSCODE / entry[key]).exists()
    assert "shapelang" in (VSCODE / "extension.js").read_text()
    assert pkg["contributes"]["configuration"]["properties"]["shapelang.server.command"][
        "default"] == ["shapelang", "lsp"]
    conf = json.loads((VSCODE / "language-configuration.json").read_text())
    assert conf["comments"]["lineComment"] == "#"
    assert ["[", "]"] in conf["brackets"] and ["(", ")"] in conf["brackets"]


def _tokenize(files: list[Path]) -> dict:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the grammar test runs VS Code's tokenizer in node")
    if not (VSCODE / "node_modules" / "vscode-textmate").exists():
        pytest.skip("vscode-textmate is not installed: run `npm ci` in editors/vscode")
    r = subprocess.run(["node", "test/tokenize.js", str(GRAMMAR), *map(str, files)], check=False, cwd=VSCODE,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


SAMPLE = ('  q, k: x -> linear 3*D -> chunk 2 -1   # fused\n'
          'input ids: [B, S] int\n'
          'expect y: ?shape\n'
          'dim Dh = D / H # head\n'
          'z: einsum("bhqd,bhkd->bhqk", q, k) -> MyBlock\n'
          'block Mlp(h: [B, S, D], dim Fh):\n')


def _scope(tokens, text: str) -> str:
    hits = [scopes[-1] for t, scopes in tokens if t.strip() == text]
    assert hits, (text, tokens)
    return hits[0].removesuffix(".shapelang")


def test_sample_scopes(tmp_path):
    f = tmp_path / "sample.shape"
    f.write_text(SAMPLE)
    lines = _tokenize([f])[str(f)]
    assert _scope(lines[0], "q, k") == "variable.other.definition"
    assert _scope(lines[0], "->") == "keyword.operator.arrow"
    assert _scope(lines[0], "linear") == "support.function.op"
    assert _scope(lines[0], "3") == "constant.numeric"
    assert _scope(lines[0], "-1") == "constant.numeric"
    assert _scope(lines[0], "# fused") == "comment.line.number-sign"
    assert _scope(lines[1], "input") == "keyword.other.declaration"
    assert _scope(lines[1], "[") == "punctuation.definition.shape.begin"
    assert _scope(lines[1], "S") == "entity.name.type.dim"
    assert _scope(lines[1], "int") == "storage.type.dtype"
    assert _scope(lines[2], "?shape") == "variable.other.hole"
    assert _scope(lines[3], "Dh") == "entity.name.type.dim"
    assert _scope(lines[4], "einsum") == "support.function.op"
    assert _scope(lines[4], '"bhqd,bhkd->bhqk"') == "string.quoted.double"
    assert _scope(lines[4], "MyBlock") == "entity.name.function.block"
    assert _scope(lines[5], "dim") == "keyword.other.dim"          # a block's size parameter
    assert _scope(lines[5], "Fh") == "entity.name.type.dim"


def test_every_spec_tokenizes_with_the_right_scopes():
    """Scopes checked against the language's own lexer: comments, arrows, ops, keywords."""
    import lark

    from shapelang.syntax.parser import grammar_text

    lexer = lark.Lark(grammar_text(), parser="lalr")
    result = _tokenize(SPECS)
    checked = 0
    for path in SPECS:
        text = path.read_text()
        lines = result[str(path)]
        scope_at = []
        for tokens in lines:
            row = []
            for t, scopes in tokens:
                row += [scopes[-1]] * len(t)
            scope_at.append(row)
        prev = None
        for tok in lexer.lex(text, dont_ignore=True):
            if tok.type in ("_NL", "CONTINUATION"):
                prev = None
                continue
            if tok.type.startswith("__IGNORE"):
                continue
            scope = scope_at[tok.line - 1][tok.column - 1]
            where = f"{path.name}:{tok.line}:{tok.column} {tok.value!r}"
            if tok.type == "COMMENT":
                assert scope.startswith("comment.line"), where
            elif tok.value == "->":
                assert scope.startswith("keyword.operator.arrow"), where
            elif prev == "->" and tok.value in TABLE:
                assert scope.startswith("support.function.op"), where
            elif tok.value in KEYWORDS and prev is None:
                assert scope.startswith("keyword.other"), where
            elif tok.type == "HOLE":
                assert scope.startswith("variable.other.hole"), where
            elif tok.type == "STRING":
                assert scope.startswith("string.quoted"), where
            checked += 1
            prev = prev if tok.type == "COMMENT" else tok.value
        assert len(lines) >= text.count("\n")
    assert checked > 3000


def test_the_extension_packages_without_a_warning(tmp_path):
    """`npm run package` (vsce) gives a vsix with the bundled client, the grammar and the licence,
    no warning, and nothing of the sources, tests or node_modules; the bundle loads in node and
    exports activate/deactivate."""
    import zipfile

    if shutil.which("node") is None:
        pytest.skip("node is not installed: the extension is packaged with vsce, run by node")
    if not (VSCODE / "node_modules" / ".bin" / "vsce").exists():
        pytest.skip("vsce is not installed: run `npm ci` in editors/vscode")
    out = tmp_path / "shapelang.vsix"
    r = subprocess.run(["npx", "--no-install", "vsce", "package", "--allow-missing-repository", "-o", str(out)], check=False,
                       cwd=VSCODE, capture_output=True, text=True, timeout=300)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log
    assert "WARNING" not in log, log
    names = set(zipfile.ZipFile(out).namelist())
    assert {"extension/dist/extension.js", "extension/syntaxes/shapelang.tmLanguage.json",
            "extension/package.json", "extension/LICENSE.txt"} <= names, names
    assert not [n for n in names if "node_modules" in n or "/test/" in n or n.endswith((".gitignore", ".map"))]
    pkg = json.loads((VSCODE / "package.json").read_text())
    assert pkg["main"] == "./dist/extension.js"
    r = subprocess.run(["node", "test/bundle.js", "dist/extension.js"], cwd=VSCODE, capture_output=True, check=False,
                       text=True, timeout=60)
    assert json.loads(r.stdout) == {"activate": "function", "deactivate": "function"}, r.stderr
def test_the_playground_colours_with_the_same_grammar():
    """`shapelang serve` ships a copy of the grammar (the editors folder is not installed)."""
    served = ROOT / "shapelang" / "serve" / "static" / "shapelang.tmLanguage.json"
    assert served.read_bytes() == GRAMMAR.read_bytes(), \
        "run: python -m shapelang.lsp.textmate (it writes both copies)"
