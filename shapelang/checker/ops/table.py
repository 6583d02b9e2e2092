"""The table of operations: one entry per operation of the language.

An entry holds everything the stages need to know about an operation: how it
is written (its arguments), its shape rule (which also computes parameters and
multiply-add FLOPs), a line for the docs, what its FLOPs count, the name of its
emitter in the code generator (registered under that name with
shapelang.codegen.registry's `@emitter`, so that the checker never imports codegen), and its axis-provenance rule when
it has one. docs/language.md's operation table is generated from here
(`python -m shapelang.checker.ops`), and a test keeps the two equal.

Adding an operation: one entry (here, or in the `ENTRIES` of the module of its
family: reductions, pointwise, arrange, norms) with its rule, plus its emitter. The
lists other stages keep of operations (the reductions, the ones whose numbers are axes,
the arguments that change values, the PyTorch spellings) come from the entries' flags.
"""
from __future__ import annotations

from .. import dtypes
from . import (
    arrange,
    attention,
    combine,
    conv,
    indexing,
    norms,
    pointwise,
    pooling,
    reductions,
    reshaping,
    tables,
    values,
)
from .args import Args
from .opdef import OpDef

# the activations and math functions of one tensor: the PyTorch function each is (`-` for neg)
# and its dtype rule (shapelang.checker.dtypes)
UNARY = {"relu": ("F.relu", "no_bool"), "gelu": ("F.gelu", "float_only"), "silu": ("F.silu", "float_only"),
         "tanh": ("torch.tanh", "to_float"), "sigmoid": ("torch.sigmoid", "to_float"),
         "exp": ("torch.exp", "to_float"), "sqrt": ("torch.sqrt", "to_float"), "rsqrt": ("torch.rsqrt", "to_float"),
         "log": ("torch.log", "to_float"), "abs": ("torch.abs", "no_bool"),
         "softplus": ("F.softplus", "float_only"), "neg": ("-", "negate"), "square": ("torch.square", "square")}
UNARY_KWARGS = {"gelu": ("approximate",)}
CASTS = values.CASTS   # Tensor.float() and its kin: the dtype each casts to
CASTS_DOC = "Tensor.float() and its kin: cast to float32, float16, bfloat16, float64, int64, bool"

_ENTRIES = [
    # layout: the same elements, moved or regrouped
    OpDef("view", "view [S1, S2, ..]", "a new shape for the same elements; one size may be `-1`; must be "
          "legal for the tensor's strides (else use `reshape` or `contiguous` first)", reshaping.view,
          family="layout", provenance="regroup", moves="regroup",
          example="x -> view [B, S, D]", pytorch=("*shape",), as_written=True),
    OpDef("reshape", "reshape [S1, S2, ..]", "as `view`, copying when the strides do not allow a view",
          reshaping.reshape, family="layout", emitter="view", provenance="regroup", moves="regroup",
          example="x -> reshape [B, S, D]", pytorch=("*shape",), as_written=True),
    OpDef("transpose", "transpose A B", "swaps two axes", reshaping.transpose, family="layout",
          provenance="permute", positional=("dim0", "dim1"), axes=True, moves="move",
          example="x -> transpose 1 2", pytorch=("dim0", "dim1"), short='t'),
    OpDef("permute", "permute A B C ..", "reorders all axes", reshaping.permute, family="layout",
          provenance="permute", axes=True, moves="move",
          example="x -> permute 0 2 1", pytorch=("*dims",), short='p'),
    OpDef("unsqueeze", "unsqueeze A", "inserts an axis of size 1 at A", reshaping.unsqueeze,
          family="layout", provenance="unsqueeze", positional=("dim",), axes=True, pytorch=('dim',), moves="regroup",
          example="x -> unsqueeze 1"),
    OpDef("squeeze", "squeeze A", "removes axis A, which must be 1 (without A: every axis that is 1)",
          reshaping.squeeze, family="layout", provenance="squeeze", positional=("dim",), axes=True, pytorch=('dim?',), moves="regroup",
          example="x -> unsqueeze 1 -> squeeze 1"),
    OpDef("movedim", "movedim A B", "moves axis A to position B, keeping the order of the others",
          reshaping.movedim, family="layout", provenance="permute", positional=("source", "destination"), axes=True, pytorch=('source', 'destination'), moves="move",
          example="x -> movedim 2 0"),
    OpDef("flatten", "flatten A B", "merges axes A..B into one (`flatten A`: to the end)",
          reshaping.flatten, family="layout", provenance="regroup", positional=("start_dim", "end_dim"), axes=True, pytorch=('start_dim=0', 'end_dim?'), moves="regroup",
          example="x -> flatten 1"),
    OpDef("expand", "expand [S1, S2, ..]", "broadcasts size-1 axes to the sizes given; `-1` keeps an axis",
          reshaping.expand, family="layout", provenance="expand", moves="broadcast",
          example="x -> expand [B, S, D]", pytorch=("*size",), as_written=True),
    OpDef("repeat_interleave", "repeat_interleave N A", "repeats each element of axis A N times",
          reshaping.repeat_interleave, family="layout", provenance="repeat", positional=("repeats", "dim"), pytorch=('repeats', 'dim'), moves="repeat",
          example="x -> repeat_interleave 2 1"),
    OpDef("rearrange", 'rearrange "b s (h d) -> b h s d" h=H',
          "einops' rearrange; several sizes as `h=H, d=Dk`", reshaping.rearrange, family="layout",
          provenance="rearrange", moves="rearrange",
          example='x -> rearrange "b s d -> b d s"'),
    OpDef("contiguous", "contiguous", "copies into a contiguous layout", values.contiguous,
          family="layout", provenance="same", moves="copy", pytorch=(), short='c'),
    # values: the same shape, new values
    OpDef("softmax", "softmax A [dtype=float32]", "softmax along axis A (computed in `dtype` when "
          "given)", values.softmax, normalises=True, provenance="same", positional=("dim",), kwargs=("dtype",), axes=True, values=('dim', 'dtype'), pytorch=('dim', 'dtype?'),
          example="x -> softmax -1", dtype="softmax"),
    OpDef("log_softmax", "log_softmax A [dtype=float32]", "log of softmax along axis A",
          values.softmax, emitter="softmax", normalises=True, provenance="same", positional=("dim",), kwargs=("dtype",), axes=True, values=('dim', 'dtype'), pytorch=('dim', 'dtype?'),
          example="x -> log_softmax -1", dtype="softmax"),
    OpDef("scale", "scale S", "multiplies by a scalar size expression, e.g. `scale 1/sqrt(Dk)`",
          values.scale, provenance="same", values=('factor',), pytorch=('factor',),
          example="x -> scale 0.5", dtype="scale"),
    OpDef("mask", "mask causal | mask M", "causal mask on the last two axes, or masked_fill where the "
          "boolean M is True (out of place: the input and M broadcast together)", values.mask, provenance="same", axes=True, values=('kind',),
          example="x -> transpose 1 2 -> mask m", dtype="mask"),
    OpDef("dropout", "dropout P", "zeroes elements with probability P while training", values.dropout,
          provenance="same", positional=("p",), axes=True, values=('p',), pytorch=('p',),
          example="x -> dropout 0.1", dtype="float_only", layer='drop', pure=False),
    *[OpDef(name, name, "elementwise", values.elementwise, emitter="unary", provenance="same",
            kwargs=UNARY_KWARGS.get(name, ()), values=UNARY_KWARGS.get(name, ()), function=function, dtype=dtype)
      for name, (function, dtype) in UNARY.items()],
    OpDef("to", "to DTYPE", "casts to a dtype: `to float`, `to bfloat16`, `to int` (see Dtypes)",
          values.cast, emitter="cast", provenance="same", positional=("dtype",), values=('dtype',),
          example="x -> to bfloat16", pytorch=("dtype",)),
    OpDef("type_as", "type_as T", "casts to the dtype (and device) of the tensor T: "
          "`cos -> type_as x` is HF's `cos.to(x.dtype)`, so a table built in float32 meets "
          "bfloat16 activations in their dtype", values.cast, emitter="cast", provenance="same", values=('dtype',),
          example="ids -> type_as x"),
    *[OpDef(name, name, f"Tensor.{name}(): casts to {dtype}", values.cast, emitter="cast", provenance="same")
      for name, dtype in CASTS.items()],
    OpDef("opaque", 'opaque "what" [S1, S2, ..]', "an operation shapelang does not model, kept with "
          "the shape it gives (float; `int` or `bool` after the shape); `shapelang import` writes it "
          "for what it cannot translate, and code generation refuses it",
          values.opaque, pure=False,
          example='x -> opaque "f" [B, S, D]'),
    OpDef("layernorm", "layernorm [eps=1e-05] [bias=false]", "normalises the last axis; learned "
          "gamma and beta (2*D parameters, D without bias, none with `elementwise_affine=false`)",
          values.norm, learned=True, provenance="norm", kwargs=("eps", "bias", "elementwise_affine"), axes=True, values=('bias', 'eps', 'affine'), dtype="norm", features=-1, layer='ln', short='ln'),
    OpDef("rmsnorm", "rmsnorm [eps=1e-06]", "RMS-normalises the last axis; learned gamma (D "
          "parameters); eps defaults to the dtype's machine epsilon, as in nn.RMSNorm",
          values.norm, emitter="layernorm", learned=True, provenance="norm", kwargs=("eps", "elementwise_affine"), axes=True, values=('eps', 'affine'), dtype="norm", features=-1, layer='norm', short='norm'),
    OpDef("sum", "sum A [keepdim]", "sums over axis A (kept as size 1 with `keepdim`)",
          values.reduce, emitter="reduce", provenance="reduce", positional=("dim",), kwargs=("keepdim",), reduces=True, axes=True, values=('dim', 'keepdim'), pytorch=('dim', 'keepdim?'),
          example="x -> sum -1", dtype="sum", composes=True, statistic="sum"),
    OpDef("mean", "mean A [keepdim]", "mean over axis A", values.reduce, emitter="reduce",
          provenance="reduce", positional=("dim",), kwargs=("keepdim",), reduces=True, axes=True, values=('dim', 'keepdim'), pytorch=('dim', 'keepdim?'),
          example="x -> mean -1", dtype="float_only", composes=True, statistic="mean"),
    OpDef("var", "var A [keepdim] [correction=0]", "variance over axis A (`correction=0`: the "
          "biased one)", values.reduce, emitter="reduce", provenance="reduce", positional=("dim",),
          kwargs=("keepdim", "correction"), reduces=True, axes=True, values=('dim', 'keepdim', 'correction'), pytorch=('dim', 'keepdim?'),
          example="x -> var -1", dtype="float_only", statistic="var"),
    OpDef("amax", "amax A [keepdim]", "maximum over axis A", values.reduce, emitter="reduce",
          provenance="reduce", positional=("dim",), kwargs=("keepdim",), reduces=True, axes=True, values=('dim', 'keepdim'), pytorch=('dim', 'keepdim?'),
          example="x -> amax -1", dtype="same", composes=True),
    OpDef("select", "select A I", "picks position I of axis A (the axis goes)", values.select,
          provenance="select", positional=("dim", "index"), axes=True, values=('dim', 'index'), moves="pick",
          example="x -> select 1 0"),
    OpDef("slice", "slice A START END [step=K]", "keeps positions START..END-1 of axis A (every K-th "
          "with `step=K`: ceil((END - START) / K) of them)", values.slice_,
          provenance="slice", positional=("dim", "start", "end"), kwargs=("step",), axes=True, values=('dim', 'start', 'end', 'step'), moves="pick",
          example="x -> slice 1 0 S"),
    # combine: learned maps and several tensors
    OpDef("linear", "linear OUT [bias=false] [dtype=bfloat16]", "nn.Linear on the last axis; "
          "in-features inferred; `dtype` of its weights (float32 by default)",
          combine.linear, flops="out elements × in-features", family="combine", learned=True, provenance="linear",
          positional=("out_features",), kwargs=("bias", "dtype"), values=('bias', 'dtype'),
          example="x -> linear F", dtype="learned", contracts="contracted", features=-1, layer='linear', short='proj'),
    OpDef("embed", "embed W | embed V D", "token ids [..] with a table W: [V, D] give [.., D]; "
          "`embed V D` owns its table (`dtype=` of the table, `padding_idx=`)", combine.embed, learned=True,
          family="combine", provenance="embed", kwargs=("dtype", "padding_idx"), values=('dtype', 'padding_idx'),
          example="ids -> embed V D", dtype="embed", contracts="looked up", features=-1, short='emb'),
    OpDef("concat", "concat A T1 T2 ..", "joins the piped tensor with T1, T2, .. along axis A",
          combine.concat, family="combine", provenance="concat", axes=True, values=('dim',), moves="join",
          example="x -> concat -1 x"),
    OpDef("split", "split S A | split [S1, S2, ..] A", "cuts axis A into pieces of size S (or the "
          "sizes given), bound to several names", combine.split, family="combine", provenance="split",
          positional=("split_size", "dim"), axes=True, values=('dim',), pytorch=('split_size_or_sections', 'dim=0'), moves="cut",
          example="x -> split D -1"),
    OpDef("chunk", "chunk N A", "cuts axis A into N equal pieces", combine.chunk, family="combine",
          provenance="split", positional=("chunks", "dim"), axes=True, values=('dim', 'chunks'), pytorch=('chunks', 'dim=0'), moves="cut",
          example="x -> chunk 1 -1"),
    OpDef("einsum", 'einsum "bhqd,bhkd->bhqk" K', "the piped tensor is the first operand",
          combine.einsum, flops="product of all index sizes", family="combine", provenance="einsum",
          example='x -> einsum "bsd->bds"', contracts="contracted"),
    # blocks
    OpDef("block", "Block | Block(A, B)", "applies a block; the piped tensor is its first input",
          None, family="blocks", provenance="block", learned=True, values=('block',)),
    OpDef("stack", "stack N Block | stack N Block(A)", "N copies of a block, each with its own weights; "
          "`first=Dense`: layer 0 is another block; `shared=true`: one set of weights applied N times "
          "(ALBERT); an input with a leading axis of N is handed out one "
          "slice per layer (copy e of a stack of experts gets mask[e]), and a block's results after the "
          "first are collected into [N, ..] (`h, ks: x -> stack N Block(past)`)",
          None, family="blocks", provenance="block", learned=True, kwargs=("first", "shared"), values=('block', 'count', 'sliced')),
]

# operations of whole layers, tables and masks computed in the spec (rules in their own modules)
_ENTRIES += [
    OpDef("attention", "attention K V [M]", "scaled dot-product attention of the piped queries "
          "[.., L, E] with keys [.., S, E] and values [.., S, Ev], giving [.., L, Ev]; keywords as "
          "PyTorch's: `attn_mask=M` (bool: True takes part), `is_causal=true`, `scale=S`, "
          "`enable_gqa=true`, `dropout_p=P`", attention.attention,
          flops="batch × L × S × (E + Ev)", family="combine", provenance="attention",
          kwargs=("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"), dtype="attention",
          example="x -> attention x x", contracts="contracted", short='attn', pure=False),
    OpDef("conv1d", "conv1d OUT K", "nn.Conv1d on [B, C, L] (or [C, L]): [B, OUT, L'] with L' = "
          "floor((L + 2p - d(K - 1) - 1) / s) + 1; keywords `stride=`, `padding=` (a size, "
          '`"same"`, `"valid"`), `dilation=`, `groups=`, `bias=false`, `dtype=` of the weights (float32 by default); OUT*C/groups*K (+ OUT) parameters',
          conv.conv, emitter="conv", learned=True, flops="out elements × C/groups × K", family="combine", provenance="conv",
          kwargs=("stride", "padding", "dilation", "groups", "bias", "dtype"), dtype="learned",
          example="x -> transpose 1 2 -> conv1d F 3 padding=1", features=-2, layer='conv', short='conv'),
    OpDef("conv2d", "conv2d OUT K", "nn.Conv2d on [B, C, H, W]: K, `stride=`, `padding=`, "
          "`dilation=` are sizes or pairs `[KH, KW]`; each spatial size as for `conv1d`",
          conv.conv, emitter="conv", learned=True, flops="out elements × C/groups × KH × KW", family="combine", provenance="conv",
          kwargs=("stride", "padding", "dilation", "groups", "bias", "dtype"), dtype="learned",
          example="x -> unsqueeze 1 -> conv2d 2 [1, 1]", features=-3, layer='conv', short='conv'),
    OpDef("index_select", "index_select A idx", "the entries of axis A at the int indices idx [N]: "
          "axis A becomes N", indexing.index_select, family="indexing", provenance="index",
          example="x -> index_select 0 arange(B)", short='sel'),
    OpDef("gather", "gather A idx", "torch.gather: int indices with the input's rank (no dim larger than "
          "the input's, except A) give a result of their shape", indexing.gather, family="indexing", provenance="index",
          example="x -> gather -1 (ids -> unsqueeze -1)", short='g'),
    OpDef("take_along_dim", "take_along_dim idx A", "torch.take_along_dim: indices along axis A; the "
          "other axes broadcast", indexing.take_along_dim, family="indexing", provenance="index",
          example="x -> take_along_dim (ids -> unsqueeze -1) -1", short='g'),
    OpDef("topk", "topk K A", "the K largest entries along axis A and their int indices (two tensors: "
          "`vals, idx: x -> topk K -1`); K may be a size, proved at most the axis", indexing.topk,
          family="indexing", provenance="index", dtype="values_and_indices",
          example="v, y: x -> topk 1 -1", ranks=True),
    OpDef("one_hot", "one_hot V", "int class indices [..] give int [.., V]", indexing.one_hot,
          family="indexing", provenance="one_hot",
          example="ids -> one_hot V", short='oh'),
    OpDef("index_add", "index_add A idx src [alpha=S]", "torch.index_add: adds the rows of src "
          "[.., N, ..] into the input at the int indices idx [N] along axis A; the input's shape",
          indexing.index_add, family="indexing", provenance="write", kwargs=("alpha",), values=('dim', 'alpha'),
          example="x -> index_add 0 arange(B) x", short='acc'),
    OpDef("scatter_add", "scatter_add A idx src", "torch.scatter_add: adds src[i] at position idx[i] "
          "of axis A; idx, src and the input have one rank, idx no larger than src (nor than the "
          "input off axis A)", indexing.scatter_add, emitter="scatter", family="indexing", provenance="write", values=('dim',),
          example="x -> scatter_add -1 (ids -> unsqueeze -1) x", short='acc'),
    OpDef("scatter", "scatter A idx src", "torch.scatter: writes src (a tensor or a number) at the "
          "int indices idx along axis A; rules as `scatter_add`", indexing.scatter_add, emitter="scatter", family="indexing", provenance="write", values=('dim', 'value'),
          example="x -> scatter -1 (ids -> unsqueeze -1) 0.5", short='sc'),
    OpDef("nonzero", "nonzero [as_tuple=true] | where(M)", "the indices of the nonzero entries: "
          "[N, rank] int, or one [N] int per axis (`as_tuple=true`, and `where(M)` as torch.where); "
          "N depends on the values: a fresh size, 0 <= N <= numel (see Data-dependent sizes)",
          indexing.nonzero, family="indexing", provenance="data", kwargs=("as_tuple",), values=('as_tuple',),
          example="ids -> nonzero", short='nz'),
    OpDef("masked_select", "masked_select M", "the entries where the bool M (broadcast with the "
          "input) is True, as a vector [N]; N is a fresh data-dependent size", indexing.masked_select,
          family="indexing", provenance="data",
          example="x -> masked_select (x > 0)", short='sel'),
    OpDef("arange", "arange(END) | arange(START, END, STEP)", "the whole numbers START..END-1 (int; "
          "float with a decimal argument such as `arange(0.0, D, 2)`): ceil((END - START) / STEP) "
          "elements", tables.call_only, family="tables", provenance="new",
          kwargs=("dtype",),
          example="arange(S)", short='pos'),
    OpDef("linspace", "linspace(START, END, N)", "N evenly spaced floats from START to END",
          tables.call_only, family="tables", provenance="new",
          kwargs=("dtype",),
          example="linspace(0, 1, S)"),
    OpDef("zeros", "zeros([S1, S2, ..])", "a float tensor of zeros", tables.call_only, emitter="full",
          family="tables", provenance="new",
          kwargs=("dtype",),
          example="zeros([S, S])"),
    OpDef("ones", "ones([S1, S2, ..])", "a float tensor of ones", tables.call_only, emitter="full",
          family="tables", provenance="new",
          kwargs=("dtype",),
          example="ones([S])"),
    OpDef("full", "full([S1, S2, ..], V)", "a tensor filled with V (`true`/`false`: bool, a whole "
          "number: int, else float; `-inf` allowed)", tables.call_only, family="tables", provenance="new",
          kwargs=("dtype",),
          example="full([S, 1], 2)", short='table'),
    OpDef("where", "where(M, A, B) | where A B", "A where the bool M is True, else B (tensors or "
          "numbers; the shapes broadcast)", tables.where, family="tables", provenance="where",
          example="x > 0 -> where x 0", short='w'),
    OpDef("outer", "outer(A, B) | outer B", "the outer product of two vectors [N] and [M]: [N, M]",
          tables.outer, flops="N × M", family="tables", provenance="outer",
          example="arange(S) -> outer arange(D)", short='outer'),
    OpDef("triu", "triu [K]", "keeps the upper triangle of the last two axes, from diagonal K "
          "(default 0; a size expression, e.g. `triu (P + 1)`)", tables.triangle, emitter="triangle", family="tables",
          provenance="same"),
    OpDef("tril", "tril [K]", "keeps the lower triangle of the last two axes, up to diagonal K",
          tables.triangle, emitter="triangle", family="tables", provenance="same",
          example="x -> tril 1"),
    OpDef("sin", "sin", "elementwise sine (a float dtype keeps its dtype; int and bool give float32)",
          tables.trig, emitter="math", family="tables", provenance="same", dtype="to_float",
          function="torch.sin"),
    OpDef("cos", "cos", "elementwise cosine (as `sin`)", tables.trig, emitter="math", family="tables",
          provenance="same", dtype="to_float", function="torch.cos"),
    OpDef("pow", "pow E", "raises each element to the scalar power E (the same as `** E`)",
          tables.power, family="tables", dtype="power",
          example="x -> pow 2"),
    OpDef("meshgrid", "meshgrid(A, B, ..) | meshgrid B ..", "torch.meshgrid(.., indexing=\"ij\"): vectors "
          "[N1], [N2], .. give as many tensors of [N1, N2, ..], the k-th varying along axis k (bound to "
          "several names: `gy, gx: meshgrid(ys, xs)`)", tables.meshgrid, family="tables",
          provenance="meshgrid",
          example="gy, gx: arange(S) -> meshgrid arange(D)"),
    OpDef("repeat", 'repeat "n d -> b n d" b=B', "einops' repeat: a rearrange whose right side may add "
          "axes (their sizes given), the tensor copied along them", reshaping.repeat, family="layout", emitter="rearrange",
          provenance="rearrange",
          example='x -> repeat "b s d -> b s r d" r=2'),
    OpDef("stack_tensors", "stack_tensors(A, T1, T2, ..) | stack_tensors A T1 ..", "torch.stack: tensors "
          "of one shape joined along a new axis A (`stack N Block` repeats a block instead)",
          combine.stack_tensors, family="combine", provenance="stack_tensors",
          example="x -> stack_tensors -1 x", short='st'),
]

# elementwise minimum and maximum, clamp, and the reductions that go with amax
_ENTRIES += [
    OpDef("minimum", "minimum(A, B) | minimum B", "the smaller of two tensors element by element "
          "(the shapes broadcast, the dtypes promote; `min(A, B)` of two tensors is the same)",
          tables.extremum, family="tables", provenance="where", pytorch=('other',),
          example="x -> minimum (x -> amin -1 keepdim)"),
    OpDef("maximum", "maximum(A, B) | maximum B", "the larger of two tensors element by element "
          "(`max(A, B)` of two tensors is the same)", tables.extremum, family="tables",
          provenance="where", pytorch=('other',),
          example="x -> maximum (x -> amax -1 keepdim)"),
    OpDef("clamp", "clamp [min=LO] [max=HI]", "bounds each element by LO below and HI above "
          "(numbers or tensors that broadcast; `clamp LO HI` also)", tables.clamp, family="tables",
          provenance="where", kwargs=("min", "max"),
          example="x -> clamp min=0 max=1"),
    OpDef("logical_not", "logical_not", "True where the input is False (or 0), as a bool tensor: "
          "the opposite of a mask", values.elementwise, emitter="math", family="tables", provenance="same",
          example="x > 0 -> logical_not", dtype="bool", function="torch.logical_not"),
    OpDef("amin", "amin A [keepdim]", "minimum over axis A", values.reduce, emitter="reduce",
          provenance="reduce", positional=("dim",), kwargs=("keepdim",), reduces=True, pytorch=('dim', 'keepdim?'),
          example="x -> amin -1", dtype="same", composes=True),
    OpDef("max", "max A [keepdim]", "torch.max over axis A: the maxima and their int indices (two "
          "tensors: `vals, idx: x -> max -1`; for the maxima alone use `amax`)", values.reduce, emitter="reduce",
          positional=("dim",), kwargs=("keepdim",), reduces=True,
          example="v, y: x -> max -1", ranks=True),
    OpDef("min", "min A [keepdim]", "torch.min over axis A: the minima and their int indices (two "
          "tensors; for the minima alone use `amin`)", values.reduce, emitter="reduce",
          positional=("dim",), kwargs=("keepdim",), reduces=True,
          example="v, y: x -> min 0 keepdim", ranks=True),
]

# rounding, as YaRN's rotary tables need it
_ENTRIES += [
    OpDef("floor", "floor", "rounds each element down (float stays float, int stays int)",
          tables.rounding, emitter="math", family="tables", provenance="same", function="torch.floor"),
    OpDef("ceil", "ceil", "rounds each element up (float stays float, int stays int)",
          tables.rounding, emitter="math", family="tables", provenance="same", function="torch.ceil"),
]

# the families added since, each module with its rules and entries
_ENTRIES += reductions.ENTRIES + pointwise.ENTRIES + arrange.ENTRIES + norms.ENTRIES

# pooling and resizing, as CNN backbones (ResNet) and upsampling decoders need them
_ENTRIES += pooling.ENTRIES

TABLE: dict[str, OpDef] = {d.name: d for d in _ENTRIES}


def moving(*kinds: str) -> frozenset:
    """The IR names of the operations that move elements in one of these ways (OpDef.moves):
    every list of layout operations outside this table is derived here."""
    return frozenset(d.ir_name for d in TABLE.values() if d.moves and d.moves in kinds)


MOVES = ("regroup", "move", "rearrange", "copy", "broadcast", "repeat", "pick", "cut", "join")

# the operations a pipeline step may name (blocks are looked up by the checker)
RULES = {name: d.rule for name, d in TABLE.items() if d.rule is not None}

def apply(c, op, x):
    """One operation on tensor `x`: its shape rule, then no keyword left unread, then its dtypes."""
    d = TABLE[op.name]
    args = Args(c, op, x, d)
    result = d.rule(c, x, args)
    args.finish()
    return dtypes.apply(c, d, x, args, result)


FAMILIES = {"layout": "Layout: the same elements, moved or regrouped",
            "values": "Values: the same shape, new values",
            "combine": "Combining tensors and learned maps",
            "tables": "Tables and masks computed in the spec (comparisons `< <= > >= == !=` of "
                      "tensors give bool tensors)",
            "indexing": "Indexing with tensors of int indices",
            "pooling": "Pooling and resizing (channels first, as nn.Conv2d)",
            "blocks": "Blocks"}


def markdown() -> str:
    """The operation tables of docs/language.md."""
    out = []
    for family, title in FAMILIES.items():
        out += [f"**{title}**", "", "| operation | what it does | keywords | FLOPs |",
                "| --- | --- | --- | --- |"]
        rows, seen = [], set()
        for d in _ENTRIES:
            if d.family != family:
                continue
            keywords = ", ".join(f"`{k}=`" for k in d.positional + d.kwargs)
            for group, doc in ((UNARY, "elementwise"), (CASTS, CASTS_DOC)):
                if d.name in group:
                    if id(group) in seen:
                        break
                    seen.add(id(group))
                    keywords = ", ".join(f"{n}: `{k}=`" for n in group for k in UNARY_KWARGS.get(n, ()))
                    rows.append(f"| {', '.join(f'`{n}`' for n in group)} | {doc} | {keywords} | |")
                    break
            else:
                usage = " / ".join(f"`{u.strip()}`" for u in d.usage.split("|"))
                rows.append(f"| {usage} | {d.doc} | {keywords} | {d.flops} |")
        out += rows + [""]
    return "\n".join(out)
