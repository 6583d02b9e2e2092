"""What every diagnostic code means, for learners: `shapelang explain CODE` prints
one, and docs/diagnostics.md's "Every code explained" section is generated from
all of them (`python -m shapelang.checker.explanations`; a test keeps them equal).

Each explanation says what the code means and why it matters, with a wrong and
a right example: small complete specs. Tests check each wrong example with
`shapelang.check` and require its code, and each right example to give no error
and no warning of that code. Plain data and text only (standard library), so
that reading an explanation needs neither the parser nor the prover.
"""
from __future__ import annotations

from .base import Explanation
from .contracts import CONTRACTS
from .shapes import SHAPES
from .syntax import SYNTAX
from .values import VALUES

__all__ = ["EXPLANATIONS", "Explanation", "listing", "markdown", "text"]

EXPLANATIONS: dict[str, Explanation] = {**SYNTAX, **SHAPES, **VALUES, **CONTRACTS}


def _indent(spec: str) -> str:
    return "\n".join(("    " + line).rstrip() for line in spec.strip("\n").split("\n"))


def text(code: str, title: str, examples: bool = True) -> str:
    """One explanation as `shapelang explain CODE` prints it; without its wrong and right
    examples when `examples` is false (an exercise: an example may be a blank's answer)."""
    e = EXPLANATIONS[code]
    head = [f"{code}: {title}", "", e.means.strip(), "", "Why it matters:", e.matters.strip(), ""]
    if not examples:
        return "\n".join(head)
    return "\n".join(head + [f"Wrong ({code}):", "", _indent(e.wrong), "", "Right:", "",
                             _indent(e.right), ""])


def listing(titles: dict[str, str]) -> str:
    """Every code with its one-line meaning, as `shapelang explain` prints them."""
    lines = [f"{code}  {titles[code]}" for code in titles]
    lines += ["", "Run `shapelang explain CODE` for what a code means, with a wrong and a right example."]
    return "\n".join(lines) + "\n"


def markdown(titles: dict[str, str]) -> str:
    """The "Every code explained" section of docs/diagnostics.md."""
    out = []
    for code, title in titles.items():
        e = EXPLANATIONS[code]
        out += [f"### {code}: {title}", "", e.means.strip(), "", "*Why it matters:* " + e.matters.strip(), "",
                f"Wrong (`{code}`):", "", "```", e.wrong.strip("\n"), "```", "", "Right:", "", "```",
                e.right.strip("\n"), "```", ""]
    return "\n".join(out)
