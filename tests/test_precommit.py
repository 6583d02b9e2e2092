"""The repository's pre-commit hooks, run by pre-commit itself on a throwaway repository.

pre-commit installs this checkout at its HEAD commit into a fresh virtualenv (lark and
sympy from the package index, no torch), so the hooks tested are the committed ones.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOOD = "dim B\ndim D\nexample B=2, D=8\n\ninput x: [B, D]\ny: x -> linear 2*D   # wider\n"
BAD = "dim B\ndim D\nexample B=2, D=8\n\ninput x: [B, D]\nparam W: [B, B]\ny: x @ W\n"
MESSY = "dim B\ninput x :[B]\n"


def _git(*args, cwd):
    return subprocess.run(["git", *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def head() -> str:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    r = _git("rev-parse", "HEAD", cwd=ROOT)
    if r.returncode != 0:
        pytest.skip("the project checkout is not a git repository: pre-commit needs a commit")
    if _git("cat-file", "-e", "HEAD:.pre-commit-hooks.yaml", cwd=ROOT).returncode != 0:
        pytest.skip("HEAD has no .pre-commit-hooks.yaml yet: commit it first")
    return r.stdout.strip()


def _pre_commit() -> list[str]:
    exe = shutil.which("pre-commit")
    if exe is None:
        pytest.skip("pre-commit is not installed (the `ci` extra)")
    return [exe]


# pre-commit builds a fresh virtualenv with the project in it (about 25 s): the exhaustive tier
@pytest.mark.exhaustive
def test_hooks_on_a_temporary_repository(tmp_path, head):
    cmd = _pre_commit()
    repo = tmp_path / "repo"
    repo.mkdir()
    assert _git("init", "-q", cwd=repo).returncode == 0
    (repo / "good.shape").write_text(GOOD)
    (repo / "bad.shape").write_text(BAD)
    (repo / "messy.shape").write_text(MESSY)
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {ROOT.as_posix()}\n  rev: {head}\n"
        "  hooks:\n  - id: shapelang-check\n  - id: shapelang-fmt\n")
    _git("add", ".", cwd=repo)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    r = subprocess.run([*cmd, "run", "--all-files", "--color", "never"], check=False, cwd=repo, env=env,
                       capture_output=True, text=True, timeout=280)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "shapelang check" in out and "Failed" in out, out
    assert "bad.shape:7:" in out and "E101" in out, out     # the finding, with its place
    assert "good.shape: ok" in out and "good.shape:6:" not in out, out   # the good one passed
    # the fmt hook rewrote the messy file in place, as ruff-format does
    assert (repo / "messy.shape").read_text() == "dim B\ninput x: [B]\n"
    assert (repo / "good.shape").read_text() == GOOD.replace("2*D   #", "2*D #")
    r = subprocess.run([*cmd, "run", "shapelang-check", "--files", "good.shape", "--color",
                        "never"], check=False, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "Passed" in r.stdout, r.stdout + r.stderr
