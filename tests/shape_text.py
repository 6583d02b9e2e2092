"""Reading answers' shape text in the grading tests."""
from __future__ import annotations


def dims_of(shape: str) -> list[str] | None:
    """The top-level dims of `[a, b, c]`, or None for anything else."""
    if not (shape.startswith("[") and shape.endswith("]")):
        return None
    out, depth, cur = [], 0, ""
    for ch in shape[1:-1]:
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()]
