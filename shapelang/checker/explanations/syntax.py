"""Explanations of the codes about the text itself (E001-E005) and the example (W201)."""
from __future__ import annotations

from .base import Explanation

SYNTAX: dict[str, Explanation] = {
    "E001": Explanation(
        means="""
The line is not shapelang: a bracket does not close, an operation's arguments
are written the Python way, or a word is missing. The statement is skipped and
the rest of the file is still checked, so every broken line is reported at
once. PyTorch spellings are named and translated:
`K.T` is `K -> transpose -2 -1`, `x.view(B, S, D)` is `x -> view [B, S, D]`,
`softmax(dim=-1)` is `softmax -1`, `transpose 1, 2` is `transpose 1 2`,
`torch.matmul(Q, K)` is `Q @ K`, `x[:, None, :k]` is
`x -> unsqueeze 1 -> slice 2 0 k`, `-> nn.Linear(D, F)` is `-> linear F`, and
`Q = ...` is `Q: ...`.""",
        matters="""
Nothing on a broken line is checked, and names it defines are unknown to the
lines after it, so a syntax error hides the shape errors behind it.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 2*D)
Z: X.transpose(1, 2)
""",
        right="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 2*D
Z: X -> transpose 1 2
"""),
    "E002": Explanation(
        means="""
A name is used that no `dim`, `input`, `param`, `buffer` or binding above it
defines. Names are case-sensitive, and a binding can only use the ones defined
before it. The help suggests the closest name that exists. An operation written
as PyTorch's functional call (`softmax(x, -1)`, `attention(q, k, v)`) is E002
too: operations take the piped tensor, so the help proposes `x -> softmax -1`.""",
        matters="""
An unknown size cannot be proved equal to anything, so every step that uses it
would fail; the typo is the one thing to fix.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 2*Dm
""",
        right="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 2*D
"""),
    "E003": Explanation(
        means="""
Two statements define the same name: two bindings, a binding and an input, a
dim declared twice (`dim d_k` and later `dim d_k = d_model / h`) or two blocks.
shapelang names are single assignments, like the nodes of a graph.""",
        matters="""
A reader (and the checker) could not tell which of the two tensors a later line
means. Give each step its own name: `h1`, `h2`, or what the step computes.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 2*D
Y: X -> linear D
""",
        right="""
dim B, S, D
input X: [B, S, D]
up: X -> linear 2*D
down: up -> linear D
"""),
    "E004": Explanation(
        means="""
The input is beyond the limits that keep checking fast: a file over 256 KB,
brackets nested more than 64 deep, a number with more than 18 digits, or an
exponent over 16. No real model needs these; they guard against runaway
input.""",
        matters="""
The checker proves facts for all sizes with a computer algebra system; bounding
the input keeps every check quick and every message readable.""",
        wrong="""
dim B, S, D
dim V = 1234567890123456789012
input X: [B, S, D]
""",
        right="""
dim B, S, D
dim V = 50257
input X: [B, S, D]
"""),
    "E005": Explanation(
        means="""
A size must be a whole number built from dims and integers with
`+ - * / // % **`, `sqrt`, `min` and `max`. A decimal such as `2.5*D`, or a tensor where a
size belongs, is not a size. Decimals are fine where a value is meant
(`scale 0.5`, `dropout 0.1`).""",
        matters="""
A tensor with 2.5·D features does not exist; the checker refuses it where it is
written instead of failing somewhere later.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 2.5*D
""",
        right="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 2*D
"""),
    "W201": Explanation(
        means="""
The `example` line does not give every dim a value. Dims derived with
`dim X = ...` are computed; every other dim needs a number there. Without one the trace
has no example column for the shapes that use it, and counterexamples cannot be
checked against your sizes.""",
        matters="""
The example sizes are what the trace, `run` and the generated smoke test use;
a missing one makes them guess or skip.""",
        wrong="""
dim B, S, D
example B=2, S=4
input X: [B, S, D]
""",
        right="""
dim B, S, D
example B=2, S=4, D=64
input X: [B, S, D]
"""),
}
