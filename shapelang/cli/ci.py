"""`check`/`trace --format sarif|github`: all files' findings in one report for CI."""
from __future__ import annotations

import sys


def ci_command(args) -> int:
    from .. import __version__
    from ..render.github import github_text
    from ..render.json import to_json
    from ..render.sarif import relative_path, sarif_log
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
    if args.format == "sarif":
        sys.stdout.write(to_json(sarif_log(findings, __version__)))
    else:
        sys.stdout.write(github_text([(relative_path(p), d) for p, d in findings]))
    return status
