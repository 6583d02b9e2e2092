"""Where the compiled grammar is cached between processes: a folder only this user can write.

lark reads its cache file back with pickle, so a file another user could plant (the shared
temp folder) would run their code in ours; the cache lives under $XDG_CACHE_HOME instead,
and where that folder is not private the grammar is built in every process. The parser's own
tables (tokens.describe) are kept there too, as JSON, so that a process whose text parses
never imports lark; a damaged or stale file is made again, never trusted.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from shapelang.syntax import grammar, tokens

pytestmark = pytest.mark.skipif(os.name != "posix", reason="owners and modes are POSIX's")


def test_the_cache_is_a_file_in_a_private_folder_under_the_users_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = grammar.cache_file(grammar.grammar_text(), "1.0")
    folder = tmp_path / "shapelang"
    assert os.path.dirname(path) == str(folder)
    assert folder.stat().st_mode & 0o077 == 0
    # another grammar or lark version: another file, so that versions side by side do not
    # rebuild each other's
    assert grammar.cache_file(grammar.grammar_text() + "\n", "1.0") != path
    assert grammar.cache_file(grammar.grammar_text(), "1.1") != path


def test_a_folder_others_can_write_or_that_cannot_be_made_means_no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "shapelang").mkdir(mode=0o700)
    os.chmod(tmp_path / "shapelang", 0o777)
    assert grammar.cache_file(grammar.grammar_text(), "1.0") is False
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert grammar.cache_file(grammar.grammar_text(), "1.0") is False


def test_a_fresh_process_writes_the_cache_there_and_the_next_one_parses_the_same(tmp_path):
    code = ("from shapelang.syntax.parser import parse; "
            "print(repr(parse('dim B, D\\ninput x: [B, D]\\ny: x -> linear 2*D\\n').statements))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           check=True).stdout
    names = sorted(p.name.split("-")[0] for p in (tmp_path / "shapelang").iterdir())
    assert names == ["parser", f"tables{tokens.FORMAT}"]
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           check=True).stdout
    assert first == again and "Binding" in first


def test_the_exercise_templates_lexer_keeps_its_own_file_in_the_private_folder(tmp_path):
    """The template lexer is a second lark parser of the same grammar (other options): it gets a
    file of its own there, so the two never overwrite each other's tables, and none in the shared temp folder."""
    code = ("from shapelang.syntax.parser import parse; from shapelang.teaching import template; "
            "parse('dim B\\n'); print(template.statement_end().pattern)")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip()
    names = sorted(p.name.split("-")[0] for p in (tmp_path / "shapelang").iterdir())
    assert names == ["parser", f"tables{tokens.FORMAT}", "template"]


_PARSE = ("import sys; from shapelang.syntax.parser import parse_recovering; "
          "spec, diagnostics, _ = parse_recovering({text!r}); "
          "print(repr(spec.statements), [d.message for d in diagnostics], 'lark' in sys.modules)")
_CLEAN = "dim B, S, D\ninput x: [B, S, D]\nh: x -> linear 3*D -> view [B, S, 3, D]  # qkv\n"


def _parse_in_a_process(tmp_path, text: str) -> str:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", _PARSE.format(text=text)], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()


def _tables_file(tmp_path):
    (path,) = (tmp_path / "shapelang").glob(f"tables{tokens.FORMAT}-*.json")
    return path


def test_text_that_parses_needs_no_lark_once_the_tables_are_stored(tmp_path):
    """The first process reads the tables out of lark's parser and stores them; the next one
    parses from the stored tables alone, to the same nodes; a syntax error still gets lark's
    diagnostic (lark is imported for it)."""
    first = _parse_in_a_process(tmp_path, _CLEAN)
    assert first.endswith("True") and "Binding" in first
    assert _tables_file(tmp_path).stat().st_mode & 0o077 == 0
    again = _parse_in_a_process(tmp_path, _CLEAN)
    assert again.endswith("False") and again.removesuffix("False") == first.removesuffix("True")
    broken = _parse_in_a_process(tmp_path, _CLEAN + "y: x -> -> softmax -1\n")
    assert "unexpected `->`" in broken and broken.endswith("True")


@pytest.mark.parametrize("damage", ["flipped", "cut", "stale", "json", "moved"])
def test_damaged_or_stale_tables_are_made_again_not_trusted(tmp_path, damage):
    """A file whose checksum fails, cut short, or that names a callback the parser does not
    have (another version's) is ignored: the nodes are lark's, and a good file replaces it."""
    want = _parse_in_a_process(tmp_path, _CLEAN)
    path = _tables_file(tmp_path)
    good = path.read_bytes()
    digest, body = good.split(b"\n", 1)
    if damage == "flipped":
        data = digest + b"\n" + body.replace(b'"call"', b'"cell"', 1)
    elif damage == "cut":
        data = digest + b"\n" + body[: len(body) // 2]
    else:
        if damage == "moved":           # a parser state's move to a state the table lacks
            tables = json.loads(body)
            moves = next(row for _, row in tables["table"] if any(type(v) is int for v in row.values()))
            moves[next(k for k, v in moves.items() if type(v) is int)] = 10 ** 6
            body = json.dumps(tables, separators=(",", ":")).encode()
        else:
            body = body.replace(b'"binding"', b'"no_such_rule"') if damage == "stale" else b"[1, 2]"
            assert damage == "json" or b"no_such_rule" in body
        data = hashlib.sha256(body).hexdigest().encode() + b"\n" + body     # checksum fits
    path.write_bytes(data)
    got = _parse_in_a_process(tmp_path, _CLEAN)
    assert got.removesuffix("True") == want.removesuffix("True")
    assert path.read_bytes() == good                                       # made good again
    assert _parse_in_a_process(tmp_path, _CLEAN).endswith("False")
