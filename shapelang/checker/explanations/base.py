"""One code's explanation: the shape of the data in this package."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Explanation:
    means: str     # what the code means (markdown; may show one-line examples)
    matters: str   # why it matters
    wrong: str     # a complete spec that gets this code
    right: str     # the same spec, corrected
