"""`check`/`trace --format sarif|github`: all files' findings in one report for CI."""
from __future__ import annotations

import sys


def ci_command(args) -> int:
    from .. import __version__
    from ..api import check_file
    from ..render.github import github_text
    from ..render.json import to_json
    from ..render.sarif import relative_path, sarif_log

    status = 0
    findings = []
    for path in args.files:
        try:
            spec = check_file(path)
        except OSError as err:
            print(f"shapelang: cannot read {path}: {err.strerror}", file=sys.stderr)
            return 2
        if not spec.ok or (args.strict and spec.diagnostics):
            status = 1
        findings.append((path, list(spec.diagnostics)))
    if args.format == "sarif":
        sys.stdout.write(to_json(sarif_log(findings, __version__)))
    else:
        sys.stdout.write(github_text([(relative_path(p), d) for p, d in findings]))
    return status
