"""`shapelang import` of a Whisper-style audio encoder: conv1d (kernel 3, padding 1), conv1d
with stride 2, GELU, a sinusoidal position table registered as a buffer, pre-norm blocks.

The frames are dynamic: the stride-2 convolution is written for the lengths it divides
(`assume S % 2 == 0`, so its length is S/2), the table's slice to the frames keeps the bound
export found, and the blocks read the frames as a dim bound at each call."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F
from import_kit import floats, round_trip
from test_model_whisper import sinusoids
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.n_head = n_head
        self.query = nn.Linear(n_state, n_state)
        self.key = nn.Linear(n_state, n_state, bias=False)
        self.value = nn.Linear(n_state, n_state)
        self.out = nn.Linear(n_state, n_state)

    def forward(self, x):
        q, k, v = self.query(x), self.key(x), self.value(x)
        q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        a = F.scaled_dot_product_attention(q, k, v)
        return self.out(a.permute(0, 2, 1, 3).flatten(start_dim=2))


class ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.attn = MultiHeadAttention(n_state, n_head)
        self.attn_ln = nn.LayerNorm(n_state)
        self.mlp = nn.Sequential(nn.Linear(n_state, 4 * n_state), nn.GELU(), nn.Linear(4 * n_state, n_state))
        self.mlp_ln = nn.LayerNorm(n_state)

    def forward(self, x):
        x = x + self.attn(self.attn_ln(x))
        return x + self.mlp(self.mlp_ln(x))


class AudioEncoder(nn.Module):
    def __init__(self, n_mels=8, n_ctx=20, n_state=48, n_head=4, n_layer=2):
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = nn.Conv1d(n_mels, n_state, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(n_state, n_state, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(n_ctx, n_state))
        self.blocks = nn.ModuleList([ResidualAttentionBlock(n_state, n_head) for _ in range(n_layer)])
        self.ln_post = nn.LayerNorm(n_state)
        for p in self.parameters():       # not the default init: the norms' weights must matter too
            nn.init.normal_(p, 0.0, 0.3)

    def forward(self, x):       # x: [batch, n_mels, frames]
        x = F.gelu(self.conv1(x))
        x = F.gelu(self.conv2(x))
        x = x.permute(0, 2, 1)
        x = x + self.positional_embedding[: x.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.ln_post(x)


@pytest.fixture(scope="module")
def spec_text(tmp_path_factory):
    make = floats(lambda b, s: [(b, 8, 2 * s)])
    return round_trip(tmp_path_factory.mktemp("whisper"), AudioEncoder(), ["x=2x8x16"], make,
                      sizes_list=((2, 8), (3, 5), (1, 20)))


def test_the_encoder_round_trips_with_its_convolutions_as_steps(spec_text):
    assert "opaque" not in spec_text
    # the mel channels are fixed (export found them so), the frames are the dynamic S
    assert "input x: [B, C, S]" in spec_text
    assert "conv1: x -> conv1d D 3 padding=1 -> gelu" in spec_text
    assert "conv2: conv1 -> conv1d D 3 stride=2 padding=1 -> gelu -> permute 0 2 1" in spec_text


def test_the_stride_and_the_table_give_assumptions(spec_text):
    # the stride-2 length is exact on even frame counts; the table has N rows for S/2 frames
    assert "assume S % 2 == 0" in spec_text
    assert "buffer positional_embedding: [N, D]" in spec_text
    assert "positional_embedding -> slice 0 0 S/2" in spec_text and "assume S/2 <= N" in spec_text


def test_the_blocks_read_the_frames_as_a_dim_of_their_own(spec_text):
    assert "block ResidualAttentionBlock(x: [B, T, D]):" in spec_text
    assert "-> stack 2 ResidualAttentionBlock" in spec_text
    # heads from n_head, their width from the reshape that cuts D into them
    assert "reshape [B, T, H, Dh]" in spec_text and "dim Dh = D / H" in spec_text
    assert "linear 4*D -> gelu" in spec_text


def test_the_module_runs_at_the_lengths_the_spec_allows():
    # odd frame counts: the module rounds its length down as PyTorch does; the spec says S even
    enc = AudioEncoder().eval()
    with torch.no_grad():
        assert enc(torch.randn(1, 8, 15)).shape == (1, 8, 48)
