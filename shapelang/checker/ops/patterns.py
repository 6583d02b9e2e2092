"""Small pattern languages inside operations: einops `rearrange` and `repeat`, and `einsum`.

Each is parsed into an immutable description (as einops does), cached by its
text. Errors are ValueError with a message for the learner.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_AXIS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\.\.\.|[()]|1")


@dataclass(frozen=True)
class Rearrange:
    left: tuple   # each entry: a tuple of axis names (a group), "..." or ()
    right: tuple


def _side(text: str, right: bool = False) -> tuple:
    tokens = _AXIS.findall(text)
    if "".join(tokens) != "".join(text.split()):
        bad = set("".join(text.split())) - set("".join(tokens))
        raise ValueError(f"unexpected `{min(bad) if bad else text}` in the pattern")
    out, group = [], None
    for tok in tokens:
        if tok == "(":
            if group is not None:
                raise ValueError("groups cannot be nested")
            group = []
        elif tok == ")":
            if group is None:
                raise ValueError("`)` without `(`")
            out.append(tuple(group))
            group = None
        elif tok == "...":
            if group is not None and not right:
                raise ValueError("`...` can stand inside a group only on the right side")
            if group is not None:
                group.append("...")     # `b ... d -> b (...) d`: the ellipsis axes merged
            else:
                out.append("...")
        else:
            item = () if tok == "1" else (tok,)
            if group is not None:
                group.extend(item)
            else:
                out.append(item)
    if group is not None:
        raise ValueError("a `(` is not closed")
    return tuple(out)


@functools.lru_cache(maxsize=256)
def parse_rearrange(pattern: str, repeat: bool = False) -> Rearrange:
    """einops' rearrange pattern; with `repeat`, einops' repeat: the right side may add axes."""
    if pattern.count("->") != 1:
        raise ValueError(f"a {'repeat' if repeat else 'rearrange'} pattern has one `->`, e.g. "
                         + ('"n d -> b n d"' if repeat else '"b s (h d) -> b h s d"'))
    lhs, rhs = pattern.split("->")
    left, right = _side(lhs), _side(rhs, right=True)
    names_l = [a for g in left if g != "..." for a in g]
    names_r = [a for g in right if g != "..." for a in g if a != "..."]
    for names, side in ((names_l, "left"), (names_r, "right")):
        dup = {a for a in names if names.count(a) > 1}
        if dup:
            raise ValueError(f"axis `{min(dup)}` appears twice on the {side} side")
    if repeat and not set(names_l) <= set(names_r):
        missing = sorted(set(names_l) - set(names_r))
        raise ValueError(f"axis `{missing[0]}` appears on the left only; repeat keeps every axis")
    if not repeat and set(names_l) != set(names_r):
        missing = sorted(set(names_l) ^ set(names_r))
        raise ValueError(f"axis `{missing[0]}` appears on one side only; rearrange keeps every axis")
    n_right = sum(1 for g in right if g == "..." or "..." in g)
    if (left.count("...") > 1) or (left.count("...") != n_right):
        raise ValueError("`...` must appear once on both sides or not at all")
    return Rearrange(left, right)


@dataclass(frozen=True)
class Einsum:
    inputs: tuple  # tuple of strings of letters; "." stands for an ellipsis
    output: str


@functools.lru_cache(maxsize=256)
def parse_einsum(equation: str) -> Einsum:
    eq = "".join(equation.split())
    if "->" not in eq:
        raise ValueError("write the output explicitly, e.g. \"bhqd,bhkd->bhqk\"")
    lhs, out = eq.split("->", 1)
    parts = lhs.split(",")
    cleaned = []
    for p in parts + [out]:
        if not re.fullmatch(r"[a-zA-Z]*(\.\.\.)?[a-zA-Z]*", p):
            raise ValueError(f"`{p}` is not a list of index letters")
        cleaned.append(p.replace("...", "."))
    *ins, outp = cleaned
    known = set("".join(ins))
    for ch in outp:
        if ch not in known and ch != ".":
            raise ValueError(f"output index `{ch}` does not appear in any input")
        if outp.count(ch) > 1:
            raise ValueError(f"output index `{ch}` appears twice")
    return Einsum(tuple(ins), outp)
