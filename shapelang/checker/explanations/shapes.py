"""Explanations of the shape errors (E101-E116)."""
from __future__ import annotations

from .base import Explanation

ATTN = """
dim B, S, D, H
dim Dh = D / H
assume D % H == 0
example B=2, S=4, D=64, H=8
input X: [B, S, D]
"""

SHAPES: dict[str, Explanation] = {
    "E101": Explanation(
        means="""
`A @ B` multiplies the last axis of A with the second-to-last axis of B, so
those two sizes must be equal for all sizes your assumptions allow (leading
axes broadcast). The message names both sizes; a counterexample shows sizes
where they differ. The usual causes: `Q @ K` without `K -> transpose -2 -1`,
or a weight written `[out, in]` the way `nn.Linear` stores it. Note that `->`
binds looser than `@`: `Q @ K -> transpose -2 -1` transposes the product, so
write `Q @ (K -> transpose -2 -1)`.""",
        matters="""
PyTorch raises at run time with the sizes of one run; shapelang shows it for
every size before anything runs.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
param W: [4*D, D]
Y: X @ W
""",
        right="""
dim B, S, D
input X: [B, S, D]
param W: [D, 4*D]
Y: X @ W
"""),
    "E102": Explanation(
        means="""
`+ - * /` and masks pair elements by position, as PyTorch broadcasts: from
the last axis backwards, two sizes fit when they are equal or one of them is 1.
The message names the axis and both sizes. If you meant a matrix product,
`*` is the wrong operator: `@` is the matrix product (the help says so when
`@` would check).""",
        matters="""
A residual connection or a mask over the wrong axes is a bug even at sizes
where it happens to broadcast.""",
        wrong="""
dim B, S, D, E
input X: [B, S, D]
input Y: [B, S, E]
Z: X + Y
""",
        right="""
dim B, S, D, E
input X: [B, S, D]
input Y: [B, S, E]
Z: X + (Y -> linear D)
"""),
    "E103": Explanation(
        means="""
`view` and `reshape` keep every element: the product of the new sizes must
equal the product of the old ones for all sizes. Splitting `D` into `H` heads
gives `[B, S, H, D/H]`, not `[B, S, H, D]`. One size may be `-1`, which
PyTorch computes.""",
        matters="""
PyTorch refuses the view at run time; with the wrong sizes written down, the
rest of the spec would be checked against a shape that cannot exist.""",
        wrong=ATTN + "Y: X -> view [B, S, H, D]\n",
        right=ATTN + "Y: X -> view [B, S, H, Dh]\n"),
    "E104": Explanation(
        means="""
`/` between sizes is exact division: the checker must prove the result is a
whole number for every size allowed. `dim Dh = D / H` needs
`assume D % H == 0` (or declare it the other way round: `dim D = H * Dh`). The counterexample
shows sizes where the division leaves a remainder.""",
        matters="""
`D // H` in Python silently drops the remainder, and the heads then cover fewer
than D features; shapelang asks for the assumption that makes the split exact.""",
        wrong="""
dim B, S, D, H
dim Dh = D / H
input X: [B, S, D]
""",
        right="""
dim B, S, D, H
dim Dh = D / H
assume D % H == 0
input X: [B, S, D]
"""),
    "E105": Explanation(
        means="""
An axis number is outside the tensor: a 3-d tensor has axes 0, 1, 2 (or -3,
-2, -1). Also a `slice` or `select` position that can lie past the end of its
axis: `slice 1 0 Ctx` on a sequence of S tokens needs `assume S >= Ctx`.""",
        matters="""
Axis numbers are where PyTorch code silently goes wrong after a reshape changes
the rank; the checker counts them for you.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> transpose 1 3
""",
        right="""
dim B, S, D
input X: [B, S, D]
Y: X -> transpose 1 2
"""),
    "E106": Explanation(
        means="""
`view` never copies, so it can only merge axes that are next to each other in
memory. After `transpose` or `permute` they are not: merging the heads back
with `view` right after `transpose 1 2` is refused, exactly as PyTorch refuses
it. Use `reshape` (which copies when it must), or `contiguous` first.""",
        matters="""
This is PyTorch's "view size is not compatible with input tensor's size and
stride" error, found before the code runs.""",
        wrong=ATTN + "input heads: [B, H, S, Dh]\nmerged: heads -> transpose 1 2 -> view [B, S, D]\n",
        right=ATTN + "input heads: [B, H, S, Dh]\nmerged: heads -> transpose 1 2 -> reshape [B, S, D]\n"),
    "E107": Explanation(
        means="""
An `expect NAME: [..]` line states a shape the checker could not prove for all
sizes. Either the pipeline does something other than you think, or the
expectation is wrong; the message shows both shapes. An expectation written
with numbers (`[1, 4, 512]`) is right only at those sizes: write it with dims.""",
        matters="""
`expect` lines are the spec's own tests; a failing one means the model and its
description disagree.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 2*D
expect Y: [B, S, D]
""",
        right="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 2*D
expect Y: [B, S, 2*D]
"""),
    "E108": Explanation(
        means="""
The `example` sizes break one of your `assume` lines, such as `D=1000, H=12`
with `assume D % H == 0`. The help lists values near yours that satisfy it.""",
        matters="""
The example is what the trace shows and what `run` executes; sizes that your
own assumptions rule out would make both meaningless.""",
        wrong="""
dim B, S, D, H
assume D % H == 0
example B=1, S=4, D=1000, H=12
""",
        right="""
dim B, S, D, H
assume D % H == 0
example B=1, S=4, D=1008, H=12
"""),
    "E109": Explanation(
        means="""
A size can be 0 or negative for some sizes your assumptions allow: `S - 1` is
0 when S is 1. Add the assumption that rules it out (`assume S >= 2`), or
compute the size differently. The help proposes that assumption once adding it
is proved to clear the error (`stack (L - 1) Layer` gives `assume L >= 2`).""",
        matters="""
A tensor with an empty axis makes every later step vacuous, and a negative size
is an error in PyTorch.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> slice 1 1 S
Z: [B, S - 1, D]
""",
        right="""
dim B, S, D
assume S >= 2
input X: [B, S, D]
Y: X -> slice 1 1 S
Z: [B, S - 1, D]
"""),
    "E110": Explanation(
        means="""
An operation got too few or too many arguments, or an argument it does not
know (`softmax` without its axis, `transpose` with one axis). The help shows
the form the operation takes; `docs/language.md` lists them all. A block
without a `return` gets this code too.""",
        matters="""
PyTorch would guess a default (softmax's deprecated implicit axis) or raise;
shapelang asks you to say which axis you mean.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> softmax
""",
        right="""
dim B, S, D
input X: [B, S, D]
Y: X -> softmax -1
"""),
    "E111": Explanation(
        means="""
The name after `->` is neither an operation nor a block defined in the file.
The help suggests the closest operation or block name.""",
        matters="""
Nothing after an unknown operation can be checked, because its output shape is
unknown.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> softmx -1
""",
        right="""
dim B, S, D
input X: [B, S, D]
Y: X -> softmax -1
"""),
    "E112": Explanation(
        means="""
A value of the wrong kind: a tensor where a size is expected (`linear X`),
a size where a tensor is expected, float ids for `embed`, or a mask that is
not `bool`.""",
        matters="""
Tensors and sizes share one expression syntax, so the checker tells them apart
by name and says which one it needed.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear X
""",
        right="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear D
"""),
    "E120": Explanation(
        means="""
PyTorch refuses this operation for the dtype of its input, at every size:
`softmax`, `mean`, `layernorm` and `gelu` need floating-point values, `embed`
needs int ids, `-` and negation refuse bool masks, and `@` needs both operands
of one dtype. Tensors are float (float32) unless declared otherwise
(`input ids: [B, S] int`); dtypes follow PyTorch's type promotion from there
(`ids * 0.5` is float). Cast with `-> to float` where the code casts. The
help writes the line with the cast that makes it valid (`ids -> to float ->
softmax -1`, `1 - (pad -> to float)`), or with `pad -> logical_not` where
`1 - pad` is used as a mask, once that line checks clean.""",
        matters="""
The shapes all fit, so nothing else would flag the line, and the model fails
the first time it runs.""",
        wrong="""
dim B, S
input pad: [B, S] bool
keep: 1 - pad
""",
        right="""
dim B, S
input pad: [B, S] bool
keep: 1 - (pad -> to float)
"""),
    "E113": Explanation(
        means="""
A block is called with a tensor that does not fit its declared input: another
rank, or a size that contradicts one already bound. The dims of a block's
input shape are bound at each call (`x: [B, S, D]` called with `[B, T, D]`
binds S to T), so only the structure has to fit.""",
        matters="""
A block is a function; calling it with the wrong argument is the same mistake
as calling an `nn.Module` with the wrong tensor.""",
        wrong="""
dim B, S, D
input X: [B, S]
block Norm(x: [B, S, D]):
  return x -> layernorm
end
Y: X -> Norm
""",
        right="""
dim B, S, D
input X: [B, S, D]
block Norm(x: [B, S, D]):
  return x -> layernorm
end
Y: X -> Norm
"""),
    "E114": Explanation(
        means="""
`stack N Block` chains N copies of a block, feeding each one's output to the
next, so the block must return the shape it takes. A block that widens or
narrows the features cannot be stacked.""",
        matters="""
The second copy would receive a tensor its weights do not fit: a transformer
layer keeps `[B, S, D]` so that layers can be stacked.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
block Up(x: [B, S, D]):
  return x -> linear 2*D
end
Y: X -> stack 2 Up
""",
        right="""
dim B, S, D
input X: [B, S, D]
block Up(x: [B, S, D]):
  return x -> linear 2*D -> gelu -> linear D
end
Y: X -> stack 2 Up
"""),
    "E115": Explanation(
        means="""
An `assume` that cannot be used: one inside a block (assumptions belong at the
top of the file, where every block sees them), or one that no positive sizes
satisfy (`assume D == 0`, since every dim is at least 1).""",
        matters="""
From an impossible assumption anything can be proved, so the checker refuses it
instead of proving nonsense.""",
        wrong="""
dim B, S, D
assume D == 0
input X: [B, S, D]
""",
        right="""
dim B, S, D
assume D % 2 == 0
input X: [B, S, D]
"""),
    "E116": Explanation(
        means="""
A `?` blank of an exercise is still in the file. Exercises mark what the
student fills in with `?` (or a named blank `?heads`); the checker reports
each one left.""",
        matters="""
A blank has no shape, so nothing after it can be checked or graded.""",
        wrong="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear ?
""",
        right="""
dim B, S, D
input X: [B, S, D]
Y: X -> linear 4*D
"""),
    "W203": Explanation(
        means="""
In Python, and so in PyTorch, `&`, `|` and `^` bind tighter than a comparison:
`q - k < W & m` is `q - k < (W & m)`, not `(q - k < W) & m`. Both compute a
bool mask of the same shape, so nothing fails: the mask is just wrong. The
checker reads the line as PyTorch does and warns where a comparison has an
unparenthesised `&`, `|` or `^` as one side.""",
        matters="""
A sliding-window or padding mask built this way hides the wrong keys; no shape
tells, and the model trains on it. Parentheses say which one is meant.""",
        wrong="""
dim S, W
example S=5, W=3
q: arange(S) -> unsqueeze 1
k: arange(S) -> unsqueeze 0
seen: q - k < W & (k <= q)
""",
        right="""
dim S, W
example S=5, W=3
q: arange(S) -> unsqueeze 1
k: arange(S) -> unsqueeze 0
seen: (q - k < W) & (k <= q)
"""),
    "W202": Explanation(
        means="""
PyTorch computes some sizes with floor division: a convolution with stride s
gives floor((L + 2p - d(k - 1) - 1) / s) + 1 positions, and `arange(0, D, 2)`
gives ceil(D / 2) numbers. When the division is not exact for every allowed
size, the checker keeps the rounded size (written with `floor`) and names the
assumption that makes it exact, such as `assume S % 2 == 0` for a stride-2
convolution over S frames (Whisper's front end).""",
        matters="""
A rounded size equals the simple one (S/2) only for some sizes, so a later
shape written as S/2 cannot be proved; with the assumption it can, and the
generated module asserts it.""",
        wrong="""
dim B, C, S
example B=1, C=8, S=6
input mel: [B, C, S]
h: mel -> conv1d C 3 stride=2 padding=1
""",
        right="""
dim B, C, S
assume S % 2 == 0
example B=1, C=8, S=6
input mel: [B, C, S]
h: mel -> conv1d C 3 stride=2 padding=1
expect h: [B, C, S/2]
"""),
}
