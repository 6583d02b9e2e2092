"""`check`/`trace --format sarif|github`: all files' findings in one report for CI."""
from __future__ import annotations

import sys

from .. import api


def ci_command(args) -> int:
    from .common import fails, read_spec

    status = 0
    findings = []
    for path in args.files:
        spec = read_spec(path)
        if spec is None:
            return 2
        if fails(spec, args.strict):
            status = 1
        findings.append((path, list(spec.diagnostics)))
    sys.stdout.write(api.report(findings, args.format))
    return status
