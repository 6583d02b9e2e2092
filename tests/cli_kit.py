"""The command line called in-process: `main(argv)` with its streams captured, in a folder.

For tests where the process boundary is not what they check. Tests of exit codes as a shell
sees them, import hygiene, colour on a TTY, the language server's stdio and `serve` keep real
subprocesses. Modules that a command imported from the folder (`shapelang import models:GPT`)
are forgotten afterwards, so that the next test's folder is read afresh."""
from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args, cwd: Path | str | None = None) -> Result:
    from shapelang.cli import main

    out, err = io.StringIO(), io.StringIO()
    before_modules, before_path = set(sys.modules), list(sys.path)
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exit_:   # argparse's usage errors
                code = exit_.code if isinstance(exit_.code, int) else 2
    finally:
        os.chdir(here)
        sys.path[:] = before_path
        if cwd is not None:
            folder = str(Path(cwd).resolve())
            for name in set(sys.modules) - before_modules:
                origin = getattr(sys.modules[name], "__file__", None) or ""
                if origin.startswith(folder):
                    del sys.modules[name]
    return Result(code, out.getvalue(), err.getvalue())
