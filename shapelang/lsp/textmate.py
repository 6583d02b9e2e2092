"""The VS Code TextMate grammar's word lists, generated from the op table and the dtypes.

editors/vscode/syntaxes/shapelang.tmLanguage.json holds its patterns by hand, but every
alternation of names in it (the operations after `->`, as a call and as a method; the dtype
names) is written here from the one source of each: `shapelang.api.operations()` and the
dtype spellings. A new operation is one table entry; run

    python -m shapelang.lsp.textmate            # rewrite the grammar's lists (and serve's copy)
    python -m shapelang.lsp.textmate --check    # exit 1 if they are out of date

and tests/test_textmate.py fails while the file and the table disagree.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .. import api

GRAMMAR = Path(__file__).resolve().parents[2] / "editors" / "vscode" / "syntaxes" / "shapelang.tmLanguage.json"
# the playground's copy (`shapelang serve` colours with it; the editors folder is not installed)
SERVED = Path(__file__).resolve().parents[1] / "serve" / "static" / "shapelang.tmLanguage.json"
# a group of six or more bare names: `(a|b|c|d|e|f)` or `(?:...)`
_GROUP = re.compile(r"(\((?:\?:)?)((?:[a-z_0-9]+\|){5,}[a-z_0-9]+)(\))")


def _alternation(names) -> str:
    """Longest first, so that a regex alternation never stops at a prefix (`log` in `log1p`)."""
    return "|".join(sorted(set(names), key=lambda n: (-len(n), n)))


def lists() -> dict[str, str]:
    """What each kind of list must hold: `ops` (every operation) and `dtypes`."""
    return {"ops": _alternation(api.operations()), "dtypes": _alternation(api.dtype_spellings())}


def _kind(names: list[str]) -> str:
    return "dtypes" if "bfloat16" in names and "softmax" not in names else "ops"


def generate(text: str) -> str:
    """The grammar with every list of names replaced by the one it must be."""
    want = lists()

    def fix(value):
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, str):
            return _GROUP.sub(lambda m: m.group(1) + want[_kind(m.group(2).split("|"))] + m.group(3), value)
        return value

    return json.dumps(fix(json.loads(text)), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    new = generate(GRAMMAR.read_text(encoding="utf-8"))
    stale = [p for p in (GRAMMAR, SERVED) if not p.exists() or p.read_text(encoding="utf-8") != new]
    if "--check" in argv:
        for p in stale:
            print(f"{p}: its lists differ from the op table; run python -m shapelang.lsp.textmate",
                  file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(new, encoding="utf-8")
        print(f"rewrote {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
