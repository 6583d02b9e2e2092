"""`shapelang import` on hostile targets: a factory or constructor that raises, a forward
that branches on tensor values, a wrong MODULE:CLASS, example sizes too large to trace.
Each gives one clear message and exit 2: no traceback, nothing written."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_kit import run_cli

ROOT = Path(__file__).resolve().parent.parent

HOSTILE = textwrap.dedent('''
    import torch
    from torch import nn

    NOT_A_MODULE = 3


    def boom(**kw):
        raise RuntimeError("factory exploded")


    def not_a_module():
        return 42


    class BadInit(nn.Module):
        def __init__(self):
            super().__init__()
            raise ValueError("bad config")


    class Branches(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            if x.sum() > 0:
                return self.lin(x)
            return x * 2


    class Lin(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(x)
''')


@pytest.fixture
def folder(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "hostile.py").write_text(HOSTILE)
    return tmp_path


def _import(folder, target, *args, process=False):
    """`shapelang import` in-process, or as a process of its own (`process`): the exit code
    and no traceback must hold for a shell too."""
    if not process:
        return run_cli("import", target, *args, "-o", "out.shape", cwd=folder)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "shapelang", "import", target, *args, "-o", "out.shape"],
                          cwd=folder, capture_output=True, text=True, env=env, timeout=600, check=False)


CASES = {
    "a factory that raises": ("hostile:boom", ["--input", "x=2x4x8"], "factory exploded"),
    "a constructor that raises": ("hostile.py:BadInit", ["--input", "x=2x4x8"], "bad config"),
    "data-dependent control flow": ("hostile:Branches", ["--input", "x=2x4x8"], "values of its inputs"),
    "no such class": ("hostile:Missing", ["--input", "x=2x4x8"], "has no `Missing`"),
    "no such module": ("no_such_module_here:GPT", ["--input", "x=2x4x8"], "cannot import `no_such_module_here`"),
    "no class given": ("hostile", ["--input", "x=2x4x8"], "MODULE:CLASS"),
    "not a module": ("hostile:NOT_A_MODULE", ["--input", "x=2x4x8"], "neither an nn.Module"),
    "a factory returning no module": ("hostile:not_a_module", ["--input", "x=2x4x8"], "not an nn.Module"),
    "huge example sizes": ("hostile:Lin", ["--input", "x=100000x100000x8"], "elements (at most"),
    "sizes the module refuses": ("hostile:Lin", ["--input", "x=2x4x9"], "could not trace"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_targets_exit_2_with_one_clear_message(folder, case):
    target, args, message = CASES[case]
    r = _import(folder, target, *args, process=case == "data-dependent control flow")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = [line for line in r.stderr.splitlines() if line.startswith("shapelang:")]
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not (folder / "out.shape").exists()
