"""What one entry of the operation table holds (shapelang.checker.ops.table gathers them)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class OpDef:
    name: str
    usage: str                      # how it is written, e.g. "transpose A B"
    doc: str                        # one line for docs/language.md
    rule: Callable | None           # (checker context, tensor, Args) -> Result; None: the checker's own
    flops: str = ""                 # what the FLOP count is; empty: none
    emitter: str | None = None      # its emitter's registered name in shapelang.codegen.registry
                                    # (default: its name; `rmsnorm` names `layernorm`'s to share it)
    family: str = "values"          # docs section: layout, values, combine, blocks
    provenance: str | None = None   # key in shapelang.checker.provenance's rules (None: unknown)
    kwargs: tuple = ()              # keywords it takes besides its positional ones (`eps`, `bias`)
    positional: tuple = ()          # names of its positional arguments, each may be given as `name=`
    dtype: str | Callable | None = None   # its dtype rule (shapelang.checker.dtypes; None: by name)
    reduces: bool = False           # it takes an axis away (kept as size 1 with `keepdim`)
    axes: bool = False              # its whole-number arguments are axes or counts, never sizes
    alias_of: str | None = None     # the IR operation it is another name of (`swapaxes`: transpose)
    values: tuple = ()              # the keys of its resolved arguments that change values (grading)
    # the parameters of its PyTorch method of the same name, in order: `dim`; `keepdim?` may be
    # left out; `dim=0`: PyTorch's default, which shapelang needs written; `*shape`: sizes or
    # axes as several arguments or one list. `()`: a method with none; None: not recorded
    pytorch: tuple | None = None
    # how it moves elements without computing new ones (every stage's list of layout ops is
    # derived from this, through table.moving): regroup (view, flatten...: the same order in
    # new axes), move (transpose, permute: axes reordered), rearrange (both), copy, broadcast,
    # repeat, pick (one part of an axis), cut (into several tensors), join; "": it computes
    moves: str = ""
    # one valid use, on `x: [B, S, D]` (float), `ids: [B, S]` (int) or `m: [B, 1, S]` (bool),
    # with the sizes F and V (`v, y: ..` when it gives two tensors); empty: `x -> NAME`. The
    # tests run every operation through it (keywords, every dtype against PyTorch).
    example: str = ""
    # the PyTorch function of one tensor it is, with no other argument (`torch.tanh`, `F.relu`;
    # `-` for neg): the code generator writes it, and `torch.tanh(x)` in a spec reads as it
    function: str = ""
    learned: bool = False           # it owns learned weights: each use is another layer
    # its result depends on its inputs alone: False where it draws random numbers (dropout,
    # attention's dropout_p) or runs code the checker cannot see (opaque)
    pure: bool = True
    # its result has the sizes the spec writes in it (`view [B, S, H, Dh]`): shown as written,
    # not as the declared dims they equal
    as_written: bool = False
    normalises: bool = False        # a softmax along its axis (softmax, softmin; log_softmax's log)
    pair: bool = False              # along an axis PyTorch gives (values, indices); it is the values
    # the names generated code gives it: the stem of the attribute of a layer it owns (`ln` for
    # layernorm's nn.LayerNorm), and the suffix of the variable holding its result (`proj`)
    layer: str = ""
    short: str = ""
    # it orders or chooses the entries along its axis by comparing them (sort, topk, argmax,
    # median...): PyTorch gives the positions it chose, as indices
    ranks: bool = False
    # over several axes it is itself once per axis (sum, mean, amax, a p-norm for p != 0; not var,
    # median): the importer writes `x.sum((1, 2))` as `sum 2 -> sum 1`
    composes: bool = False
    # what becomes of the input axes it sums products over, in the pictures' words: "contracted"
    # (linear, einsum, attention), "looked up" (embed: the rows of its table); empty: none
    contracts: str = ""
    # the statistic of its axis it is, for normalisations: "mean", "var" (std too: a spread),
    # "sum"; `x - mean`, `x / std` read as centring and scaling
    statistic: str = ""
    # the axis of its result that holds features, a width of the spec's layers (-1: linear,
    # embed, layernorm; a convolution's channels, -2 for conv1d); None: no width
    features: int | None = None

    @property
    def emitter_key(self) -> str:
        return self.emitter or self.alias_of or self.name

    @property
    def ir_name(self) -> str:
        """The operation name in the checked IR (an alias is its original's)."""
        return self.alias_of or self.name

    @property
    def use(self) -> str:
        """`example`, or `x -> NAME` when the operation needs no argument."""
        return self.example or f"x -> {self.name}"
