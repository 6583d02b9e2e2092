"""`python -m shapelang.checker.ops`: print the operation tables of docs/language.md;
`--write`: rewrite them in docs/language.md (of a checkout), between its ops markers;
`--check`: exit 1 when docs/language.md differs from the table."""
import re
import sys
from pathlib import Path

from .table import markdown

DOCS = Path(__file__).resolve().parents[3] / "docs" / "language.md"
BLOCK = re.compile(r"(<!-- ops:begin -->\n)(.*?)(\n<!-- ops:end -->)", re.DOTALL)


def generated(text: str) -> str:
    """docs/language.md's text with its operation tables as the table gives them."""
    return BLOCK.sub(lambda m: m.group(1) + markdown().strip() + m.group(3), text, count=1)


def main(argv: list[str]) -> int:
    if not {"--write", "--check"} & set(argv):
        print(markdown(), end="")
        return 0
    text = DOCS.read_text(encoding="utf-8")
    if not BLOCK.search(text):
        print(f"{DOCS}: the ops:begin/ops:end markers are missing", file=sys.stderr)
        return 1
    new = generated(text)
    if new == text:
        return 0
    if "--check" in argv:
        print(f"{DOCS}: its operation tables differ from the table; run python -m shapelang.checker.ops "
              "--write", file=sys.stderr)
        return 1
    DOCS.write_text(new, encoding="utf-8")
    print(f"rewrote {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
