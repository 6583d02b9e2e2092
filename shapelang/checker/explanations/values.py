"""Explanations of where values come from (W301-W308): shapes that all check while the
numbers end up in the wrong places. The wrong and right examples follow the test corpus in
tests/provenance/ (bugs/ and their fixed twins)."""
from __future__ import annotations

from .base import Explanation

# The attention heads most examples start from: projections split into heads.
_HEADS = """
dim B, S, D, H
dim Dh = D / H
assume D % H == 0
example B=1, S=4, D=512, H=8
input x: [B, S, D]
param W_q: [D, D]
param W_k: [D, D]
param W_v: [D, D]
q: x @ W_q -> view [B, S, H, Dh] -> transpose 1 2
k: x @ W_k -> view [B, S, H, Dh] -> transpose 1 2
v: x @ W_v -> view [B, S, H, Dh] -> transpose 1 2
"""

VALUES: dict[str, Explanation] = {
    "W301": Explanation(
        means="""
`view` and `reshape` keep the numbers in their order; they only cut that
order in new places. `[B, S, D]` is S rows of D features each, so reading it as
`[B, H, S, Dh]` makes "head 0" out of the first few tokens, not out of the
first Dh features of every token. Cut D first, then move the heads:

```
q: x @ W_q -> view [B, H, S, Dh]                    # wrong: heads made of token positions
q: x @ W_q -> view [B, S, H, Dh] -> transpose 1 2   # right
```

Transposing first does not help: `transpose 1 2 -> reshape [B, H, S, Dh]`
cuts the features-first layout `[B, D, S]` into heads, so the rows of a head
are strips of feature values across the tokens (`view` refuses this layout;
switching to `reshape` only hides the problem). The same happens with a fused
projection (`view [3, B, H, S, Dh]` instead of
`view [B, S, 3, H, Dh] -> permute 2 0 3 1 4`) and with RoPE's halves taken as `reshape [B, H, 2, S, Dh/2]`
instead of `view [B, H, S, 2, Dh/2]`.
`rearrange "b s (h d) -> b h s d"`, `reshape [B, S, H, Dh] -> permute 0 2 1 3`
and `view [B, S, H, -1] -> transpose -3 -2` are all right.""",
        matters="""
The heads are then made of a few whole tokens each instead of a slice of every
token's features: attention runs, every shape checks, and the model learns from
scrambled inputs.""",
        wrong="""
dim B, S, D, H
dim Dh = D / H
assume D % H == 0
example B=1, S=4, D=512, H=8
input x: [B, S, D]
param W_q: [D, D]
param W_k: [D, D]
param W_v: [D, D]
q: x @ W_q -> view [B, H, S, Dh]
""",
        right="""
dim B, S, D, H
dim Dh = D / H
assume D % H == 0
example B=1, S=4, D=512, H=8
input x: [B, S, D]
param W_q: [D, D]
param W_k: [D, D]
param W_v: [D, D]
q: x @ W_q -> view [B, S, H, Dh] -> transpose 1 2
"""),
    "W302": Explanation(
        means="""
Merging heads is the split done backwards: the heads must sit right before
their width Dh (`[B, S, H, Dh]`) before H and Dh are joined into D. From
`[B, H, S, Dh]`, a plain `reshape [B, S, D]` glues several tokens of one head
into one row; `contiguous` does not help, and neither does the wrong transpose
(`transpose 2 3`, or `transpose -1 -2` when you meant `-3 -2`):

```
merged: heads -> reshape [B, S, D]                   # wrong
merged: heads -> transpose 1 2 -> reshape [B, S, D]  # right (or: -> transpose 1 2 -> flatten 2)
```""",
        matters="""
The output projection then mixes rows that belong to different tokens, and nothing
fails: the loss just stays higher than it should.""",
        wrong=_HEADS + """scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh) -> softmax -1
heads: scores @ v
merged: heads -> reshape [B, S, D]
""",
        right=_HEADS + """scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh) -> softmax -1
heads: scores @ v
merged: heads -> transpose 1 2 -> reshape [B, S, D]
"""),
    "W303": Explanation(
        means="""
A softmax makes weights that add up to 1 along one axis; the step that uses
them as weights (`@ v`, an einsum, a weighted sum, a top-k) must sum or pick
along that same axis. In `q @ (k -> transpose -2 -1)` the columns are the keys,
and `weights @ v` sums over them, so the softmax goes over the last axis:
`softmax -2` normalises over the queries and `softmax 1` over the heads. The
contract is checked where the weights are used, not by the look of the scores:
a softmax over axis -2 of scores laid out keys-first, or Slot Attention's
softmax over the slots followed by a renormalisation over the inputs, is right.

```
weights: scores -> softmax -2   # wrong: over the queries
weights: scores -> softmax -1   # right (softmax 3 on [B, H, S, S] is the same)
```""",
        matters="""
The weights of each query no longer sum to 1 over the keys, so every output is a
wrongly weighted mix of values; scores [B, H, S, S] are square, so no shape shows
it.""",
        wrong=_HEADS + """scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh)
weights: scores -> softmax -2
heads: weights @ v
""",
        right=_HEADS + """scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh)
weights: scores -> softmax -1
heads: weights @ v
"""),
    "W304": Explanation(
        means="""
A normalisation divides a tensor by its own statistics: the mean and the
variance of one normalisation run along one axis (a certain mistake when they
do not). Layer norm and RMS norm take them per token, over that token's D
features; `mean 1 keepdim` on `[B, S, D]` used to normalise x averages each
feature over the sentence instead, and `mean -2 keepdim` is the same counted
from the end. That can be the design (RevIN and instance norm take each
channel's statistics over time): the warning then says what the spec does, and
`# allow W304: <why>` on the line says it is meant. A mean that only pools
(appended to every token, not subtracted) is no normalisation and is not
checked. After a transpose the features are no longer last, so take the
statistics over the axis they moved to:

```
mu: x -> mean 1 keepdim    # wrong: one mean per feature, over the tokens
mu: x -> mean -1 keepdim   # right: one mean per token

xt: x -> transpose 1 2     # [B, D, S]
mu: xt -> mean -1 keepdim  # wrong: over the tokens
mu: xt -> mean 1 keepdim   # right: the features are axis 1 here
```

`layernorm` and `rmsnorm` always normalise the last axis, so they belong
before the transpose:

```
mixed: x -> transpose 1 2 -> layernorm -> linear S   # wrong: normalises each feature over the tokens
mixed: x -> layernorm -> transpose 1 2 -> linear S   # right
```""",
        matters="""
Statistics over the tokens leak information between positions (a causal model can
then see the future through the mean) and do not normalise each token.""",
        wrong="""
dim B, S, D
example B=1, S=4, D=512
input x: [B, S, D]
mu: x -> mean 1 keepdim
centred: x - mu
sigma2: centred -> square -> mean -1 keepdim
out: centred / (sigma2 + 1e-5 -> sqrt)
""",
        right="""
dim B, S, D
example B=1, S=4, D=512
input x: [B, S, D]
mu: x -> mean -1 keepdim
centred: x - mu
sigma2: centred -> square -> mean -1 keepdim
out: centred / (sigma2 + 1e-5 -> sqrt)
"""),
    "W305": Explanation(
        means="""
A causal mask hides the keys that come after the query's own position, which
only makes sense when queries and keys are positions of the same sequence. In
cross-attention the scores are `[B, H, St, Sc]`: target tokens against context
tokens, whose positions cannot be compared. Every target token may read the
whole context:

```
weights: scores -> mask causal -> softmax -1   # wrong on [B, H, St, Sc]
weights: scores -> softmax -1                  # right
```""",
        matters="""
The first target tokens are then cut off from most of the context, and when the
target is longer than the context some rows are masked entirely.""",
        wrong="""
dim B, Sc, St, D, H
dim Dh = D / H
assume D % H == 0
example B=1, Sc=4, St=6, D=512, H=8
input target: [B, St, D]
input memory: [B, Sc, D]
param W_q: [D, D]
param W_k: [D, D]
param W_v: [D, D]
q: target @ W_q -> view [B, St, H, Dh] -> transpose 1 2
k: memory @ W_k -> view [B, Sc, H, Dh] -> transpose 1 2
v: memory @ W_v -> view [B, Sc, H, Dh] -> transpose 1 2
scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh)
weights: scores -> mask causal -> softmax -1
heads: weights @ v
""",
        right="""
dim B, Sc, St, D, H
dim Dh = D / H
assume D % H == 0
example B=1, Sc=4, St=6, D=512, H=8
input target: [B, St, D]
input memory: [B, Sc, D]
param W_q: [D, D]
param W_k: [D, D]
param W_v: [D, D]
q: target @ W_q -> view [B, St, H, Dh] -> transpose 1 2
k: memory @ W_k -> view [B, Sc, H, Dh] -> transpose 1 2
v: memory @ W_v -> view [B, Sc, H, Dh] -> transpose 1 2
scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh)
weights: scores -> softmax -1
heads: weights @ v
"""),
    "W306": Explanation(
        means="""
The scale `1/sqrt(X)` keeps the spread of a dot product of X numbers at about
1, so X must be the width the score's dot product runs over: the head width
Dh after a head split, not the model width D, the number of heads H, or the
number of keys. When the head is as wide as the model (one head, no split),
`1/sqrt(D)` is right; `1/sqrt(D/H)` is the same as `1/sqrt(Dh)`.

```
scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(D)    # wrong: each head's dot product is Dh wide
scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh)   # right
```""",
        matters="""
With the wrong scale the softmax is too flat or too peaked (by a factor of sqrt(H)
for `1/sqrt(D)`), which slows or destabilises training without any error.""",
        wrong=_HEADS + """scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(D) -> softmax -1
heads: scores @ v
""",
        right=_HEADS + """scores: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh) -> softmax -1
heads: scores @ v
"""),
    "W307": Explanation(
        means="""
`+ - * /` pair elements by position. Two `[B, S, S]` tensors can be added even
when one has queries in its rows and the other keys, or a square grid
`[B, P, P, C]` can be added to its own transpose: the sizes match, the
meanings do not. Keep both operands in the same layout:

```
w: w0 + (w0 -> transpose 1 2) -> scale 0.5   # wrong: row i mixes "i looks at j" with "j looks at i"
out: x + mixed                               # wrong when mixed is the grid transposed (axial attention)
out: x + (mixed -> transpose 1 2)            # right: back to rows before columns
```

The same holds for the pieces of one axis, in `@` and `attention` too. Keys whose
G heads are repeated to the H query heads with `repeat_interleave Nrep 1` (heads
G·Nrep, Hugging Face's repeat_kv) and values tiled with `unsqueeze 1 -> expand
[B, Nrep, G, S, Dh] -> reshape [B, H, S, Dh]` (heads Nrep·G) both have H heads,
but query head h then takes its keys from key/value head h // Nrep and its values
from head h % G: repeat both the same way.""",
        matters="""
The sum pairs element (i, j) with element (j, i): sizes match only because both
lengths are equal, and the result means nothing.""",
        wrong="""
dim B, S, D, Dk
example B=1, S=4, D=512, Dk=64
input x: [B, S, D]
param W_q: [D, Dk]
param W_k: [D, Dk]
q: x @ W_q
k: x @ W_k
w0: q @ (k -> transpose 1 2) -> scale 1/sqrt(Dk) -> softmax -1
w: w0 + (w0 -> transpose 1 2) -> scale 0.5
""",
        right="""
dim B, S, D, Dk
example B=1, S=4, D=512, Dk=64
input x: [B, S, D]
param W_q: [D, Dk]
param W_k: [D, Dk]
q: x @ W_q
k: x @ W_k
w0: q @ (k -> transpose 1 2) -> scale 1/sqrt(Dk) -> softmax -1
w: w0 + w0 -> scale 0.5
"""),
    "W308": Explanation(
        means="""
A bias added to attention scores `[B, H, S, S]` (a position bias such as ALiBi
or T5's, or a padding mask as a float) must vary along the keys, the last axis
that the softmax normalises. A bias laid out along the queries, `[H, S, 1]` or a
mask `[B, 1, S, 1]`, shifts every score of a query's row by the same amount,
and softmax(s + c) = softmax(s): the bias is silently a no-op.

```
alibi: outer(slopes, arange(S)) -> unsqueeze 2   # wrong: [H, S, 1], constant along the keys
alibi: outer(slopes, arange(S)) -> unsqueeze 1   # right: [H, 1, S], one value per key
```""",
        matters="""
The model runs and trains, but without its position bias (or its padding mask):
no error, no NaN, only a model that cannot tell positions apart.""",
        wrong=_HEADS + """slopes: 2.0 ** (-8.0 * arange(1, H + 1) / H)
alibi: outer(slopes, arange(S)) -> unsqueeze 2
scores: (q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh)) + alibi -> softmax -1
""",
        right=_HEADS + """slopes: 2.0 ** (-8.0 * arange(1, H + 1) / H)
alibi: outer(slopes, arange(S)) -> unsqueeze 1
scores: (q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh)) + alibi -> softmax -1
"""),
}
