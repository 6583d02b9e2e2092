"""`shapelang explain [CODE]`: what a diagnostic code means, with a wrong and a right example.

Reads plain data only (no parser, no prover), so it answers at once.
"""
from __future__ import annotations

import sys


def add_parser(sub) -> None:
    c = sub.add_parser("explain", help="explain a diagnostic code, with a wrong and a right example",
                       description="explain a diagnostic code (E101, w303, 104, ...) with a wrong and a "
                                   "right example; without a code, list every code")
    c.add_argument("code", nargs="?", metavar="CODE")


def _normalise(code: str, known) -> str | None:
    code = code.strip().upper()
    if code in known:
        return code
    if code.isdigit():
        for prefix in ("E", "W"):
            if prefix + code.zfill(3) in known:
                return prefix + code.zfill(3)
    return None


def command(args) -> int:
    from .. import api

    CODES = api.CODES
    if args.code is None:
        sys.stdout.write(api.explanations())
        return 0
    code = _normalise(args.code, CODES)
    if code is None:
        import difflib

        close = difflib.get_close_matches(args.code.strip().upper(), list(CODES), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        print(f"shapelang: no code {args.code}{hint} (`shapelang explain` lists them all)", file=sys.stderr)
        return 2
    sys.stdout.write(api.explain(code))
    return 0
