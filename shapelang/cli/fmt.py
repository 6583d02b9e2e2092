"""`shapelang fmt`: rewrite specs in the canonical layout, or say which would change."""
from __future__ import annotations

import difflib
import sys
from pathlib import Path

from .. import api


def _targets(names: list[str]) -> list[Path]:
    out: list[Path] = []
    for name in names:
        p = Path(name)
        out.extend(sorted(p.rglob("*.shape")) if p.is_dir() else [p])
    return out


def fmt_command(args) -> int:
    FormatError, LayoutBug, format_text = api.FormatError, api.LayoutBug, api.format_spec
    diagnostic_text = api.diagnostic_text

    status = 0
    changed = 0
    for path in _targets(args.files):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            print(f"shapelang: cannot read {path}: {getattr(err, 'strerror', None) or err}",
                  file=sys.stderr)
            return 2
        try:
            new = format_text(text, str(path))
        except FormatError as err:
            print(diagnostic_text(err.diagnostic, str(path), text), file=sys.stderr)
            print(f"{path}: not formatted: it does not parse", file=sys.stderr)
            status = 1
            continue
        except LayoutBug as err:
            print(f"{path}: not formatted: {err}", file=sys.stderr)
            status = 1
            continue
        if new == text:
            continue
        changed += 1
        if args.diff:
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(keepends=True), new.splitlines(keepends=True),
                f"{path}", f"{path} (formatted)"))
        if args.check:
            print(f"would reformat {path}")
        if not (args.check or args.diff):
            try:
                path.write_text(new, encoding="utf-8")
            except OSError as err:
                print(f"shapelang: cannot write {path}: {err.strerror}", file=sys.stderr)
                return 2
            print(f"reformatted {path}", file=sys.stderr)
    if changed and (args.check or args.diff):
        status = 1
    return status
