"""Sizes that PyTorch rounds down: the length of a strided convolution, of `arange`
with a step. Exact when the division is provably whole; otherwise the floor, with a
warning (W202) that names the assumption making it exact, as Whisper's stride-2
convolution needs an even number of frames."""
from __future__ import annotations

from ...syntax.diagnostics import Diagnostic
from ..advice import causes
from ..lazysympy import sympy as sp
from ..polys import cancel_by_number


def floor_div(c, num, den, span, what: str, offset=0) -> sp.Expr:
    """num // den as PyTorch computes it (`offset` is added to the size shown in messages)."""
    q = cancel_by_number(num, den)
    if c.prover.whole(q, search=False).ok:   # (only whether it is proved matters here)
        return q
    const, rest = sp.expand(num).as_coeff_Add()
    if not const.is_Integer:
        const, rest = sp.Integer(0), num
    exact = None
    if den.is_Integer:
        exact = cancel_by_number(rest, den) + sp.floor(const / den)
    elif const and c.prover.positive(den).ok and \
            c.prover.leq(abs(const) + (1 if const > 0 else 0), den, search=False).ok:
        # a size as the divisor (a stride S): -S <= const < S gives floor(const / S) = -1 or 0
        exact = cancel_by_number(rest, den) + (-1 if const < 0 else 0)
    if exact is not None and c.prover.whole(cancel_by_number(rest, den), search=False).ok:
        return exact   # (k*den + const) // den: whole part plus the constant's floor
    out = sp.floor(q)
    shown = out + offset
    rest_text = c.sz(rest) if rest.is_Symbol else f"({c.sz(rest)})"
    den_text = c.sz(den) if den.is_Atom else f"({c.sz(den)})"
    relation = f"{rest_text} % {den_text} == 0"
    help = f"add `assume {relation}` if that holds" + \
        (f": {what} is then {c.sz(exact + offset)}" if exact is not None else "")
    c.report(Diagnostic("W202", f"{what} is {c.sz(shown)}: PyTorch rounds the division down, and it "
                        "is not exact for every allowed size, so a later shape must be written with "
                        "the same rounding", span, help, severity="warning",
                        fixes=causes.assume_line(c, relation, "if that holds, say so" + (
                            f" ({what} is then {c.sz(exact + offset)})" if exact is not None else ""))))
    return out
