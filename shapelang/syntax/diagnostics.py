"""Diagnostics as data: what went wrong, where, and how to fix it.

Every finding of the parser or the checker is a `Diagnostic`; renderers in
the render stage (shapelang.render) turn them into text or JSON. Codes and their one-line meanings live
in one registry (`CODES`), so that documentation and tests can list them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .nodes import Span

CODES: dict[str, str] = {
    "E001": "syntax error",
    "E002": "unknown name",
    "E003": "name defined twice",
    "E004": "input too large or too deeply nested",
    "E005": "not a size expression",
    "E101": "matmul operands do not fit",
    "E102": "shapes do not broadcast",
    "E103": "element counts differ",
    "E104": "size is not always a whole number",
    "E105": "axis out of range",
    "E106": "view is not possible for this memory layout",
    "E107": "expected shape does not hold",
    "E108": "example sizes break an assumption",
    "E109": "size is not always positive",
    "E110": "wrong arguments for an operation",
    "E111": "unknown operation",
    "E112": "wrong kind of value",
    "E113": "block input does not fit",
    "E114": "stacked block changes the shape",
    "E115": "assumption cannot be used",
    "E116": "an exercise blank is not filled in",
    "E120": "a dtype the operation does not take",
    "W201": "example is missing sizes",
    "W202": "a size is rounded down for some sizes (floor division)",
    "W203": "a comparison of a `&`, `|` or `^` (Python's precedence binds them first)",
    "W301": "an axis is made of parts of different axes (heads mixed with tokens)",
    "W302": "pieces of an axis merged back out of order",
    "W303": "a softmax's weights summed or picked along an axis other than the one they add up to 1 along",
    "W304": "normalisation statistics along an axis other than the features, or mean and variance along different axes",
    "W305": "causal mask on scores whose query and key lengths are unrelated",
    "W306": "scores scaled by a size other than the one they contracted",
    "W307": "elementwise op or product between tensors whose same-sized axes, or pieces of an axis, are swapped",
    "W308": "a bias added to attention scores that is the same for every key (softmax cancels it)",
    "W309": "channels and positions swapped: a conv or a channel norm reads channels at axis 1 of features-last data",
    "W310": "a rotation (rotate_half) along an axis its angle tables do not run along, or across heads",
    "W311": "positions counted by a size the lookup table does not cover (arange of the wrong length)",
    "W312": "the scale or a mask applied after the softmax instead of before it",
    "W313": "a mask that hides its own diagonal or keeps no key for a query (a row of -inf: NaN)",
}


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    help: str | None = None
    notes: tuple[str, ...] = ()
    counterexample: dict[str, int] | None = None
    severity: str = "error"
    fixes: tuple = ()     # candidate rewrites ((Span, text), ...): shown only once re-checked clean
    fix: tuple | None = None   # the proved rewrite: (Span, text, the whole rewritten line)
    # secondary places, as rustc shows them under the source: ((Span, text), ...), e.g. the
    # shape under each operand, "first declared here", "`mu` loses its last axis here"
    labels: tuple = ()

    def __post_init__(self):
        assert self.code in CODES, self.code


@dataclass
class ShapeError(Exception):
    """Raised by a shape rule; the checker turns it into a Diagnostic.

    `span` narrows the location (an argument, an operand); when None the
    checker uses the span of the whole operation.
    """

    code: str
    message: str
    help: str | None = None
    notes: tuple[str, ...] = ()
    counterexample: dict[str, int] | None = None
    span: Span | None = None
    extra: list = field(default_factory=list)
    fixes: tuple = ()   # candidate rewrites ((Span, text), ...), proved by re-checking before shown
    labels: tuple = ()  # secondary labelled spans ((Span, text), ...)
    # dtype refusals (E120): the casts that would make the step valid, ((operand, dtype), ...);
    # operand 0 or 1 of a binary operation, or "input" for a pipeline operation
    casts: tuple = ()

    def at(self, span: Span) -> Diagnostic:
        return Diagnostic(self.code, self.message, self.span or span, self.help,
                          tuple(self.notes), self.counterexample, fixes=tuple(self.fixes),
                          labels=tuple(self.labels))
