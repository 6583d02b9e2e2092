"""Where the compiled grammar is cached between processes: a folder only this user can write.

lark reads its cache file back with pickle, so a file another user could plant (the shared
temp folder) would run their code in ours; the cache lives under $XDG_CACHE_HOME instead,
and where that folder is not private the grammar is built in every process.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shapelang.syntax import grammar

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
    assert next(p.name for p in (tmp_path / "shapelang").iterdir()).startswith("parser-")
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
    assert names == ["parser", "template"]
