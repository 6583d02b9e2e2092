"""Complex rotary embeddings (Meta's Llama code, DeepSeek-V3: view_as_complex, polar,
view_as_real) written with real operations, as docs/language.md shows: the pairwise rotation
gives the complex form's numbers in its layout, and HF's rotate-half form after moving the
evens first gives them permuted the same way for queries and keys, so the same scores."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from torch_shapes import module

from shapelang import check, render_check

torch = pytest.importorskip("torch")
DOCS = (Path(__file__).resolve().parent.parent / "docs" / "language.md").read_text()
SIZES = {"B": 2, "S": 5, "H": 3, "Dh": 8}

ROTATE_HALF = """\
xh: x -> unflatten -1 [Dh/2, 2] -> transpose -1 -2 -> reshape [B, S, H, Dh] # allow W302
x1, x2: xh -> chunk 2 -1
emb: concat(-1, freqs, freqs) -> unsqueeze 1
half: xh * (emb -> cos) + concat(-1, -x2, x1) * (emb -> sin)
"""


def _documented() -> str:
    """The spec of the docs' section, as a learner would copy it."""
    section = DOCS[DOCS.index("## Complex rotary embeddings"):]
    return re.search(r"```\n(.*?)```", section, re.DOTALL).group(1)


def _complex(x, freqs):
    """The reference: Meta's apply_rotary_emb for one tensor."""
    cis = torch.polar(torch.ones_like(freqs), freqs)[:, None, :]          # [S, 1, Dh/2] complex
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * cis).flatten(3)


def test_real_pairs_and_rotate_half_give_the_complex_rotation():
    spec = check(_documented() + ROTATE_HALF)
    assert spec.ok and not spec.diagnostics, render_check(spec)
    model, _gen = module(spec, "complex_rotary", **SIZES)
    g = torch.Generator().manual_seed(0)
    B, S, H, Dh = SIZES.values()
    q, k = torch.randn(B, S, H, Dh, generator=g), torch.randn(B, S, H, Dh, generator=g)
    theta = 1.0 / 10000.0 ** (torch.arange(0, Dh, 2).float() / Dh)
    freqs = torch.outer(torch.arange(S).float(), theta)
    got_q, got_k = model(q, freqs), model(k, freqs)
    want_q, want_k = _complex(q, freqs), _complex(k, freqs)
    torch.testing.assert_close(got_q["out"], want_q)
    evens_first = want_q.unflatten(-1, (Dh // 2, 2)).transpose(-1, -2).reshape(B, S, H, Dh)
    torch.testing.assert_close(got_q["half"], evens_first)
    scores = torch.einsum("bshd,bthd->bhst", want_q, want_k)
    torch.testing.assert_close(torch.einsum("bshd,bthd->bhst", got_q["half"], got_k["half"]), scores)
    # the layouts must agree: queries rotate-half, keys pairwise give other scores
    assert (torch.einsum("bshd,bthd->bhst", got_q["half"], got_k["out"]) - scores).abs().max() > 1e-3
