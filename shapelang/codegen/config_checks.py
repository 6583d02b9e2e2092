"""What a generated config checks when it is built: the conditions under which the checker's
proof holds for the sizes it is given.

A spec that fixes its sizes (`dim D = 768`, `dim H = 12`) is proved at those values, but its
config lets an engineer change them (`Gpt2SmallConfig(D=64, H=4, L=2)`). So the spec is checked
once more with those sizes free (their values kept as the example), and:

- a quotient size (`dim Dh = D / H`) needs its division to be whole: `D % H == 0` is added;
- an error whose proved fix is an assumption (`assume L >= 2`) adds that assumption;
- a size that an error still depends on (its counterexample names it) goes back to its value:
  the config refuses any other (`dim G = 1` of multi-query attention, which `expand` needs);
- an error with no counterexample (a `view` legal only at the fixed values) pins the fewest sizes
  that make the spec check again, one at a time, else all of them; either way the config's
  refusal names the rule (`E106 on line 7`), so a size is never kept fixed silently.

Every assumption that involves config fields only (the spec's own and those found here) is then a
check in the config's `__post_init__`, a ValueError naming the assumption, so a config the proof
does not cover is refused when it is made, not deep inside forward.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from ..checker.checker import check_text
from ..checker.dims import show
from ..syntax.nodes import DimDecl, Example
from ..syntax.parser import parse_recovering
from .naming import Printer, py_str

ROUNDS = 6          # re-checks at most; then every fixed size keeps its value


@dataclass(frozen=True)
class ConfigChecks:
    assumptions: tuple     # (a, cmp, b, text): sympy sides over the spec's dim names
    fixed: tuple           # (name, value): sizes the proof needs at their value
    rules: tuple = ()      # (name, rule): the check that fails at another value (`E106 on line 7`)


def _statements(source: str):
    spec, _errors, _skipped = parse_recovering(source)
    out = []
    for s in spec.statements if spec is not None else ():
        out.extend(s if isinstance(s, (list, tuple)) else [s])
    return out


def _unpinned(source: str, free: dict, extra: list[str]) -> str:
    """The spec with the sizes in `free` declared without their values, the values given in one
    `example` line at the end, and the `extra` assumptions added."""
    lines = source.split("\n")
    example: dict = {}
    cuts = []           # (line, start column, end column) to delete, 1-based columns
    for s in _statements(source):
        if isinstance(s, DimDecl) and s.name in free and s.value is not None \
                and s.span.line == s.span.end_line:
            cuts.append((s.span.line, s.span.column + len(s.name), s.span.end_column))
        elif isinstance(s, Example):
            example.update({i.name: i.value for i in s.items})
            cuts.append((s.span.line, s.span.column, s.span.end_column))
    for line, start, end in sorted(cuts, reverse=True):
        text = lines[line - 1]
        lines[line - 1] = text[:start - 1] + text[end - 1:]
    example.update(free)
    tail = [f"assume {a}" for a in extra]
    if example:
        tail.append("example " + ", ".join(f"{k}={v}" for k, v in example.items()))
    return "\n".join(lines + tail) + "\n"


def _quotients(spec, free: dict) -> list[str]:
    """`D % H == 0` for each size defined as a quotient of sizes (`dim Dh = D / H`)."""
    out = []
    for value in spec.definitions.values():
        num, den = sp.fraction(sp.together(value))
        if den != 1 and num.free_symbols | den.free_symbols and \
                {str(s) for s in num.free_symbols | den.free_symbols} & set(free):
            out.append(f"{show(num)} % {show(den)} == 0")
    return out


def _assume_fixes(spec) -> list[str]:
    """The assumptions that the proved fixes of the errors add."""
    out = []
    for d in spec.errors():
        if d.fix is None:
            return []
        new = [ln.strip().removeprefix("assume ").strip() for ln in d.fix[1].split("\n")
               if ln.strip().startswith("assume ")]
        if not new:
            return []
        out += new
    return out


def _rules(checked, names=None) -> str:
    """The checks that fail, as `E106 on line 7` (those whose counterexample names one of
    `names`, when given)."""
    found = [f"{d.code} on line {d.span.line}" for d in checked.errors()
             if names is None or set(d.counterexample or ()) & names]
    return ", ".join(dict.fromkeys(found)) or "a check"


MAX_SINGLE_PINS = 6   # re-checks that look for the one size an error without a counterexample needs


@lru_cache(maxsize=64)
def _find(source: str, path: str, free_items: tuple) -> tuple[tuple, dict, dict]:
    base = check_text(source, path)
    free = dict(free_items)
    extra: list[str] = []
    rules: dict = {}
    for _ in range(ROUNDS):
        extra = list(dict.fromkeys(extra + _quotients(base, free)))
        checked = check_text(_unpinned(source, free, extra), path, prove_fixes=True)
        if checked.ok:
            return checked.assumptions, {n: v for n, v in free_items if n not in free}, rules
        more = [a for a in _assume_fixes(checked) if a not in extra]
        if more:
            extra += more
            continue
        named = set()
        for d in checked.errors():
            named |= set(d.counterexample or ()) & set(free)
        if not named:   # no counterexample to go by: the one size whose value makes it check
            for n in sorted(free)[:MAX_SINGLE_PINS]:
                rest = {k: v for k, v in free.items() if k != n}
                again = check_text(_unpinned(source, rest, extra), path, prove_fixes=True)
                if again.ok:
                    rules[n] = _rules(checked)
                    return again.assumptions, {k: v for k, v in free_items if k not in rest}, rules
            named = set(free)    # none alone: every size keeps its value, and says why
            rules.update(dict.fromkeys(named, _rules(checked)))
        else:
            rules.update({n: _rules(checked, {n}) for n in named})
        for n in named:
            del free[n]
        if not free:
            break
    return base.assumptions, dict(free_items), rules


def config_checks(spec, fields: set[str], in_config) -> ConfigChecks:
    """The checks of the config whose size fields are `fields` (dim names); `in_config(name)`:
    the size is a field or computed from fields (a property of the config)."""
    # a fixed size that is no field (`dim Img = 224`, read from the image in forward) is freed
    # too: forward takes any value, and keeping it fixed makes the others unprovable (P <= Img
    # with Img = 224 and P free); the config checks only its own fields
    pinned = tuple((n, int(v)) for n, v in spec.definitions.items() if not v.free_symbols)
    if not any(n in fields for n, _v in pinned):
        pinned = ()
    assumptions, fixed, rules = _find(spec.source, spec.path, pinned) if pinned else (spec.assumptions, {}, {})
    fixed = {n: v for n, v in fixed.items() if n in fields}
    own, seen = [], set()
    for a, cmp, b, stmt in assumptions:
        names = {str(s) for s in sp.sympify(a).free_symbols | sp.sympify(b).free_symbols}
        key = (sp.srepr(sp.sympify(a)), cmp, sp.srepr(sp.sympify(b)))
        if names and all(in_config(n) for n in names) and key not in seen:
            seen.add(key)
            own.append((a, cmp, b, stmt.text))
    return ConfigChecks(tuple(own), tuple(sorted(fixed.items())),
                        tuple((n, rules[n]) for n in sorted(fixed) if n in rules))


NEGATED = {"==": "!=", "!=": "==", "<=": ">", ">=": "<", "<": ">=", ">": "<="}


def post_init(checks: ConfigChecks, py_name) -> list[str]:
    """The config's `__post_init__` lines (none when there is nothing to check); `py_name(name)`:
    the field or property that holds the dim `name`."""
    if not checks.assumptions and not checks.fixed:
        return []
    p = Printer(lambda s: "self." + py_name(str(s)))
    out = ["", "    def __post_init__(self) -> None:",
           '        """Refuse sizes the checker\'s proof does not cover."""']
    for a, cmp, b, text in checks.assumptions:
        names = sorted({str(s) for s in sp.sympify(a).free_symbols | sp.sympify(b).free_symbols})
        shown = ", ".join(f"{n}={{self.{py_name(n)}}}" for n in names)
        text = _plain(text.removeprefix("assume").strip())
        out += [f"        if {p(a)} {NEGATED[cmp]} {p(b)}:"]
        out += _raise(f"{text} is needed ({shown}): ", "the shapes are proved under it")
    rules = dict(checks.rules)
    for name, value in checks.fixed:
        field = py_name(name)
        why = f" ({rules[name]} fails at another)" if name in rules else ""
        out += [f"        if self.{field} != {value}:"]
        out += _raise(f"{name} == {value} is needed ({name}={{self.{field}}}): ",
                      f"the shapes are proved for that value only{why}")
    return out


def _plain(text: str) -> str:
    """Spec text inside an f-string: its braces doubled."""
    return text.replace("{", "{{").replace("}", "}}")


def _raise(head: str, tail: str) -> list[str]:
    """`raise ValueError(f"...")`, laid out as `ruff format` lays it out, in two strings
    when one is longer than a line."""
    one = f"            raise ValueError(f{py_str(head + tail)})"
    if len(one) <= 88:
        return [one]
    whole = f"                f{py_str(head + tail)}"
    if len(whole) <= 88:
        return ["            raise ValueError(", whole, "            )"]
    return ["            raise ValueError(", f"                f{py_str(head)}",
            f"                {py_str(tail)}", "            )"]
