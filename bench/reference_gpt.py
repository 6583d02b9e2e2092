"""The reference model for the torch.export comparison: a plain nanoGPT-style
GPT written as an nn.Module, the same model bench/specgen.py writes as a spec.

Token embedding, the positional table sliced to the sequence length, pre-norm
blocks (fused qkv linear, head split, scaled scores, causal mask, softmax, head
merge, output projection, residual; 4*D MLP with GELU, residual), a final
layernorm and a tied LM head. No dropout: export runs in eval mode and the spec
has none either.

`export_gpt` proves it the way PyTorch does: torch.export.export with the
batch and sequence dims marked dynamic (torch.export.Dim), which traces the
model once and keeps a sympy-backed shape environment of guards. Export time
depends on the number of operations, not on the widths, so the benchmark uses
tiny widths by default (bench/__main__.py checks that claim once with GPT-2
widths).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int = 12
    n_head: int = 4
    n_embd: int = 64
    vocab_size: int = 512
    block_size: int = 64     # context window (Ctx in the spec)


TINY = GPTConfig()
GPT2_WIDTHS = GPTConfig(n_head=12, n_embd=768, vocab_size=50257, block_size=1024)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, cfg.block_size, cfg.block_size),
                             persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hd = C // self.n_head
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Parameter(torch.zeros(cfg.block_size, cfg.n_embd))
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)

    def forward(self, idx):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe[:T]
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return x @ self.wte.weight.t()     # tied LM head


def make_model(n_layer: int, cfg: GPTConfig = TINY) -> GPT:
    cfg = GPTConfig(n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size, cfg.block_size)
    torch.manual_seed(0)
    return GPT(cfg).eval()


def example_input(cfg: GPTConfig, batch: int = 2, seq: int = 8) -> torch.Tensor:
    return torch.randint(0, cfg.vocab_size, (batch, seq))


def export_gpt(model: GPT, idx: torch.Tensor | None = None):
    """torch.export.export with dynamic batch and sequence dims; returns the ExportedProgram."""
    cfg = model.cfg
    if idx is None:
        idx = example_input(cfg)
    batch = torch.export.Dim("batch", min=1, max=1024)
    # max is one below the context: slicing the Ctx-row tables to T makes export
    # guard T != Ctx (a full-length slice is a different graph), so the range stops short.
    seq = torch.export.Dim("seq", min=2, max=cfg.block_size - 1)
    with torch.no_grad():
        return torch.export.export(model, (idx,), dynamic_shapes={"idx": {0: batch, 1: seq}})


def graph_ops(ep) -> int:
    """call_function nodes in the exported graph: torch's own operation count."""
    return sum(1 for n in ep.graph.nodes if n.op == "call_function")
