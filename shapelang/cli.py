"""Command line: argument parsing and exit codes, nothing else.

Exit codes: 0 clean, 1 findings, 2 usage or I/O error.
"""
from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shapelang", description="prove tensor shapes in transformer pipelines")
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_text in (("check", "prove every step of a spec"),
                            ("trace", "print the step-by-step shape table")):
        c = sub.add_parser(name, help=help_text)
        c.add_argument("files", nargs="+", metavar="FILE")
        c.add_argument("--format", choices=["text", "json"], default="text")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from . import render
    from .checker import check_text

    status = 0
    for path in args.files:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError as err:
            print(f"shapelang: cannot read {path}: {err.strerror}", file=sys.stderr)
            return 2
        spec = check_text(text, path)
        if not spec.ok:
            status = 1
        if args.format == "json":
            sys.stdout.write(render.to_json(render.spec_json(spec, args.command == "trace")))
        elif args.command == "check":
            sys.stdout.write(render.check_text(spec))
        else:
            sys.stdout.write(render.trace_text(spec))
    return status


if __name__ == "__main__":
    sys.exit(main())
