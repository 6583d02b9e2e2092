"""What the commands share: reading and checking the spec a command needs clean."""
from __future__ import annotations

import sys


def read_spec(path: str):
    """The checked spec of a file, or None after saying on stderr why it cannot be read."""
    from ..api import check_file

    try:
        return check_file(path)
    except OSError as err:
        print(f"shapelang: cannot read {path}: {err.strerror}", file=sys.stderr)
        return None


def fails(spec, strict: bool) -> bool:
    """Whether a checked spec makes `check` exit 1: errors, or any finding with --strict."""
    return not spec.ok or bool(strict and spec.diagnostics)


def checked_spec(path: str, *, out=None, refusal: str | None = None):
    """Read and check a spec for a command that needs it clean: the CheckedSpec, or the
    exit code after printing why not (2: unreadable, 1: findings, shown on `out`)."""
    from .. import api

    spec = read_spec(path)
    if spec is None:
        return 2
    if not spec.ok:
        (out or sys.stdout).write(api.render_check(spec))
        if refusal:
            print(refusal, file=sys.stderr)
        return 1
    if spec.diagnostics:   # warnings only
        sys.stderr.write(api.render_check(spec))
    return spec


