"""Splitting a sweep between the default tier and the exhaustive one (see tests/conftest.py).

- `sample(items, ...)`: parameters for a sweep over many specs (or cases): the sampled ones run in
  the default tier, the rest carry the `exhaustive` mark. Every item runs in exactly one tier.
- `sweep(full, part)`: for a test that loops over N generated cases itself: a `part` parameter
  (default tier) and a `full` one (exhaustive tier).
- `examples(n)`: a hypothesis example count: n in the exhaustive tier, a tenth (at least 10, at most n)
  in the default one.

What each sweep samples is chosen, not drawn: SAMPLE_SPECS covers every kind of spec the
library has (blocks and stacks, a decoding step with a cache, convolutions and patches, einsum
and rearrange, mixture of experts, cross-attention, windows and rolls, the PyTorch-layout
specs), and `sample` adds every k-th of the rest so that a change anywhere in the list is seen.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

ENV = "SHAPELANG_TEST_TIER"
ROOT = Path(__file__).resolve().parent.parent

LIBRARY = (sorted((ROOT / "specs").glob("*.shape")) + sorted((ROOT / "specs" / "pytorch").glob("*.shape"))
           + sorted((ROOT / "tests" / "cases").glob("*.shape"))
           + sorted((ROOT / "exercises" / "solutions").glob("*.shape")))

# one spec of each kind; the default tier always runs these
SAMPLE_SPECS = frozenset({
    "mha_self_attention",     # the textbook's heads: view, transpose, softmax, merge
    "gpt2_small",             # blocks, stack, tied embedding, fused qkv
    "llama2_7b_step",         # a decoding step: cache, rotary, GQA, positions
    "mixtral_8x7b",           # mixture of experts: router, topk, gather/scatter
    "whisper_tiny",           # conv1d front end, cross-attention, sinusoids
    "swin_tiny",              # windows, roll, slice step, relative position index
    "t5_small",               # relative position buckets, encoder-decoder
    "vit_patch_embedding",    # conv2d patches, rearrange
    "deepseek_v2_lite",       # latent attention, einsum, allow-acknowledged warnings
    "multihead_attention",    # PyTorch's own layout (specs/pytorch)
    "sizes",                  # tests/cases: derived sizes and assumptions
    "02_split_heads",         # an exercise solution
})


@functools.cache
def checked(path) -> object:
    """A library spec checked once per test process (every test module of a worker shares
    it; the result is only read)."""
    from shapelang import check_file

    return check_file(str(path))


def exhaustive() -> bool:
    return os.environ.get(ENV) == "exhaustive"


def _name(item) -> str:
    return Path(item).stem if isinstance(item, (str, Path)) else str(item)


def sample(items, *, every: int = 8, always=SAMPLE_SPECS, ids=None) -> list:
    """`items` as pytest parameters: those named in `always` and every `every`-th of the others
    run in the default tier; the others are marked `exhaustive`."""
    out = []
    rest = 0
    for item in items:
        name = _name(item)
        chosen = name in always
        if not chosen:
            chosen = rest % every == 0
            rest += 1
        marks = () if chosen else (pytest.mark.exhaustive,)
        out.append(pytest.param(item, marks=marks, id=ids(item) if ids else name))
    return out


def sweep(full: int, part: int) -> list:
    """Case counts for a test that makes its own cases: `part` by default, `full` exhaustively."""
    return [pytest.param(part, id=f"sample-{part}"),
            pytest.param(full, id=f"all-{full}", marks=pytest.mark.exhaustive)]


def examples(n: int) -> int:
    """A hypothesis example count: n in the exhaustive tier, n // 10 (at least 10, at most n) by
    default."""
    return n if exhaustive() else min(n, max(10, n // 10))
