"""Explanations of the contracts over logical axes (W309-W313): what an operation promises
about the axes it reads, broken where the shapes still agree. The examples follow the test
corpus in tests/provenance/bugs/."""
from __future__ import annotations

from .base import Explanation

_ROPE = """
dim B, S, D, H
dim Dh = D / H
assume D % H == 0
assume Dh % 2 == 0
assume H % 2 == 0
example B=1, S=4, D=64, H=4
input x: [B, S, D]
buffer cos_t: [S, Dh]
buffer sin_t: [S, Dh]
q: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2
"""

_SCORES = """
dim B, S, D
example B=1, S=4, D=8
input x: [B, S, D]
q: x -> linear D
k: x -> linear D
v: x -> linear D
"""

CONTRACTS: dict[str, Explanation] = {
    "W309": Explanation(
        means="""
`conv1d`, `conv2d`, `groupnorm` and `batchnorm` read their channels at axis 1:
`[B, C, L]`, `[B, C, H, W]`. A transformer's activations are `[B, S, D]`, the
features last. Given those as they are, the convolution takes the S tokens for
channels and slides along D; the group norm takes its groups of tokens. Move the
features to axis 1 first and back after:

```
h: x -> conv1d S 3 padding=1                                  # wrong: S channels, sliding along D
h: x -> transpose 1 2 -> conv1d D 3 padding=1 -> transpose 1 2  # right
```""",
        matters="""
The layer learns a filter over the features of one token instead of over time,
and its weights depend on the sequence length; nothing fails while S and D stay
what they were at training time.""",
        wrong="""
dim B, S, D, G
assume S % G == 0
example B=1, S=4, D=8, G=2
input x: [B, S, D]
h: x -> linear D
y: h -> groupnorm G
""",
        right="""
dim B, S, D, G
assume D % G == 0
example B=1, S=4, D=8, G=2
input x: [B, S, D]
h: x -> linear D
y: h -> transpose 1 2 -> groupnorm G -> transpose 1 2
"""),
    "W310": Explanation(
        means="""
rotate_half cuts a vector into two halves and swaps them, one negated, so that
`x * cos + rotate_half(x) * sin` turns each pair (i, i + n/2) by an angle. The
pairs must be the pairs of one head's vector: the halves of the head width Dh,
the axis the cos and sin tables run along. Cut along the heads, or along the
whole width D before the heads are split, and the pairs join values of
different heads:

```
q1, q2: q -> chunk 2 1    # wrong: the halves of the heads
q1, q2: q -> chunk 2 -1   # right: the halves of each head's width
```""",
        matters="""
Positions are no longer encoded as rotations of each head's query and key, so
the attention scores stop depending on the distance between tokens.""",
        wrong=_ROPE + """q1, q2: q -> chunk 2 1
rot: concat(1, -q2, q1)
qr: q * cos_t + rot * sin_t
""",
        right=_ROPE + """q1, q2: q -> chunk 2 -1
rot: concat(-1, -q2, q1)
qr: q * cos_t + rot * sin_t
"""),
    "W311": Explanation(
        means="""
Learned positions are rows of a table: `arange(S) -> embed W_pos` looks up
rows 0 to S - 1. The count must be the length of the axis the positions are
added along, the tokens, and the table must be long enough for it, said with
an `assume`. `arange(B)` counts the sequences of the batch: every token of
sequence b gets the vector of position b, and a batch larger than the table
fails.

```
pos: arange(B) -> embed W_pos -> unsqueeze 1   # wrong: positions of the batch
pos: arange(S) -> embed W_pos                  # right: positions of the tokens
```""",
        matters="""
The tokens of a sequence are not told apart at all, and the model's output for
one sequence depends on where it sits in the batch.""",
        wrong="""
dim B, S, D, V, P
assume S <= P
example B=2, S=4, D=8, V=10, P=16
input ids: [B, S] int
param W_tok: [V, D]
param W_pos: [P, D]
tok: ids -> embed W_tok
pos: arange(B) -> embed W_pos -> unsqueeze 1
x: tok + pos
""",
        right="""
dim B, S, D, V, P
assume S <= P
example B=2, S=4, D=8, V=10, P=16
input ids: [B, S] int
param W_tok: [V, D]
param W_pos: [P, D]
tok: ids -> embed W_tok
pos: arange(S) -> embed W_pos
x: tok + pos
"""),
    "W312": Explanation(
        means="""
Scaled dot-product attention is softmax(mask(scores / sqrt(d))) @ V: the scale
and the mask come before the softmax. After it, the scale makes weights that
add up to 1/sqrt(d) instead of 1, and a -inf mask puts -inf into the weights
(NaN in the output); filling with 0 after the softmax leaves rows that no
longer add up to 1.

```
w: scores -> softmax -1 -> scale 1/sqrt(D)   # wrong
w: scores -> scale 1/sqrt(D) -> softmax -1   # right
```""",
        matters="""
The outputs shrink by the scale (or turn to NaN behind a mask), and the
temperature the softmax should see is never applied.""",
        wrong=_SCORES + """w: q @ (k -> transpose -2 -1) -> softmax -1 -> scale 1/sqrt(D)
o: w @ v
""",
        right=_SCORES + """w: q @ (k -> transpose -2 -1) -> scale 1/sqrt(D) -> softmax -1
o: w @ v
"""),
    "W313": Explanation(
        means="""
A causal mask hides, for query i, the keys after it. `mask M` and `masked_fill
M -inf` hide where M is True, so M is the strict upper triangle: `triu 1`.
`attention`'s mask and `where(M, scores, -inf)` keep where M is True, so there
M is the lower triangle with its diagonal, `tril`. The other triangle hides a
query's own key (or keeps none): some row of the scores is all -inf, and its
softmax is NaN.

```
scores -> mask (full([S, S], true) -> tril)     # wrong: hides the past and the diagonal
scores -> mask (full([S, S], true) -> triu 1)   # right: hides the future
```""",
        matters="""
The first NaN spreads through every later layer and the loss; the rows that do
not turn NaN attend to the future, which the model must not see.""",
        wrong=_SCORES + """w: q @ (k -> transpose -2 -1) -> mask (full([S, S], true) -> tril) -> softmax -1
o: w @ v
""",
        right=_SCORES + """w: q @ (k -> transpose -2 -1) -> mask (full([S, S], true) -> triu 1) -> softmax -1
o: w @ v
"""),
}
