"""DeepSeek-V2-Lite written whole as a spec (specs/deepseek_v2_lite.shape): the checker's
parameter total is that of Hugging Face's DeepseekV2ForCausalLM built from the config (a
hand-written reference of modeling_deepseek.py, counted on the meta device at the real
sizes), the MLA shapes are the ones the paper describes, and the generated module at
reduced sizes computes what the reference's forward (eval, eager attention, YaRN rotary
tables, moe_infer routing) computes with the same weights."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch_shapes import REDUCED, checked, module, outputs_match, shape_at

from shapelang import trace

SPEC = Path(__file__).resolve().parent.parent / "specs" / "deepseek_v2_lite.shape"

# config.json of deepseek-ai/DeepSeek-V2-Lite, the fields the forward pass reads
CONFIG = {"vocab_size": 102400, "hidden_size": 2048, "num_hidden_layers": 27, "num_attention_heads": 16,
          "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
          "intermediate_size": 10944, "moe_intermediate_size": 1408, "n_routed_experts": 64,
          "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
          "routed_scaling_factor": 1.0, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
          "rope_scaling": {"factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                           "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}}
# the spec's dims, by config field
FIELDS = {"V": "vocab_size", "D": "hidden_size", "L": "num_hidden_layers", "H": "num_attention_heads",
          "C": "kv_lora_rank", "Dn": "qk_nope_head_dim", "Dr": "qk_rope_head_dim", "Dv": "v_head_dim",
          "F": "intermediate_size", "Fm": "moe_intermediate_size", "E": "n_routed_experts",
          "Es": "n_shared_experts", "K": "num_experts_per_tok"}


def _spec():
    return checked(SPEC.read_text(), "deepseek_v2_lite.shape")


def _config(**sizes) -> dict:
    return {**CONFIG, **{FIELDS[k]: v for k, v in sizes.items() if k in FIELDS}}


# ------------------------------------------------------------------ a hand-written reference

def _reference(torch, cfg: dict):
    """DeepseekV2ForCausalLM in eval mode, written from modeling_deepseek.py (q_lora_rank
    None, eager attention, YaRN rope scaling, greedy softmax top-k, norm_topk_prob False)."""
    nn, F = torch.nn, torch.nn.functional
    D, H, C = cfg["hidden_size"], cfg["num_attention_heads"], cfg["kv_lora_rank"]
    Dn, Dr, Dv = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    Dq, eps, rs = Dn + Dr, cfg["rms_norm_eps"], cfg["rope_scaling"]

    class RMSNorm(nn.Module):                # DeepseekV2RMSNorm
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))
            self.variance_epsilon = eps

        def forward(self, x):
            dtype = x.dtype
            x = x.to(torch.float32)
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
            return self.weight * x.to(dtype)

    def correction_dim(rotations, dim, base, max_pos):     # yarn_find_correction_dim
        return (dim * math.log(max_pos / (rotations * 2 * math.pi))) / (2 * math.log(base))

    def get_mscale(scale, mscale):                          # yarn_get_mscale
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    def yarn_cos_sin(seq_len, base):                        # DeepseekV2YarnRotaryEmbedding
        factor, orig = rs["factor"], rs["original_max_position_embeddings"]
        freq_extra = 1.0 / (base ** (torch.arange(0, Dr, 2, dtype=torch.float32) / Dr))
        freq_inter = 1.0 / (factor * base ** (torch.arange(0, Dr, 2, dtype=torch.float32) / Dr))
        low = max(math.floor(correction_dim(rs["beta_fast"], Dr, base, orig)), 0)
        high = min(math.ceil(correction_dim(rs["beta_slow"], Dr, base, orig)), Dr - 1)
        if low == high:                                     # yarn_linear_ramp_mask
            high += 0.001
        ramp = torch.clamp((torch.arange(Dr // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        inv_freq_mask = 1.0 - ramp
        inv_freq = freq_inter * (1 - inv_freq_mask) + freq_extra * inv_freq_mask
        freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
        _mscale = float(get_mscale(factor, rs["mscale"]) / get_mscale(factor, rs["mscale_all_dim"]))
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos() * _mscale, emb.sin() * _mscale

    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin, position_ids):
        cos, sin = cos[position_ids].unsqueeze(1), sin[position_ids].unsqueeze(1)
        b, h, s, d = q.shape
        q = q.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
        b, h, s, d = k.shape
        k = k.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    class Attention(nn.Module):              # DeepseekV2Attention (eager)
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(D, H * Dq, bias=False)
            self.kv_a_proj_with_mqa = nn.Linear(D, C + Dr, bias=False)
            self.kv_a_layernorm = RMSNorm(C)
            self.kv_b_proj = nn.Linear(C, H * (Dn + Dv), bias=False)
            self.o_proj = nn.Linear(H * Dv, D, bias=False)
            mscale = get_mscale(rs["factor"], rs["mscale_all_dim"])
            self.softmax_scale = Dq ** (-0.5) * mscale * mscale

        def forward(self, x, mask, position_ids, cache=None):
            """`cache`: None, or this layer's [key_states, value_states] of the earlier
            positions (empty at first), which HF's DynamicCache.update grows in place."""
            bsz, q_len, _ = x.shape
            q = self.q_proj(x).view(bsz, q_len, H, Dq).transpose(1, 2)
            q_nope, q_pe = torch.split(q, [Dn, Dr], dim=-1)
            compressed_kv, k_pe = torch.split(self.kv_a_proj_with_mqa(x), [C, Dr], dim=-1)
            k_pe = k_pe.view(bsz, q_len, 1, Dr).transpose(1, 2)
            kv = self.kv_b_proj(self.kv_a_layernorm(compressed_kv)).view(bsz, q_len, H, Dn + Dv)
            k_nope, value_states = torch.split(kv.transpose(1, 2), [Dn, Dv], dim=-1)
            kv_seq_len = q_len + (cache[0].shape[-2] if cache else 0)
            cos, sin = yarn_cos_sin(kv_seq_len, cfg["rope_theta"])
            q_pe, k_pe = apply_rotary_pos_emb(q_pe, k_pe, cos, sin, position_ids)
            query_states = k_pe.new_empty(bsz, H, q_len, Dq)
            query_states[:, :, :, :Dn] = q_nope
            query_states[:, :, :, Dn:] = q_pe
            key_states = k_pe.new_empty(bsz, H, q_len, Dq)
            key_states[:, :, :, :Dn] = k_nope
            key_states[:, :, :, Dn:] = k_pe
            if cache is not None:                           # past_key_value.update
                if cache:
                    key_states = torch.cat([cache[0], key_states], dim=-2)
                    value_states = torch.cat([cache[1], value_states], dim=-2)
                cache[:] = [key_states, value_states]
            w = torch.matmul(query_states, key_states.transpose(2, 3)) * self.softmax_scale + mask
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(query_states.dtype)
            out = torch.matmul(w, value_states).transpose(1, 2).contiguous()
            return self.o_proj(out.reshape(bsz, q_len, H * Dv))

    class MLP(nn.Module):                    # DeepseekV2MLP
        def __init__(self, width):
            super().__init__()
            self.gate_proj = nn.Linear(D, width, bias=False)
            self.up_proj = nn.Linear(D, width, bias=False)
            self.down_proj = nn.Linear(width, D, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class MoEGate(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(cfg["n_routed_experts"], D))

        def forward(self, h):
            logits = F.linear(h.reshape(-1, D).type(torch.float32), self.weight.type(torch.float32))
            scores = logits.softmax(dim=-1, dtype=torch.float32)
            topk_weight, topk_idx = torch.topk(scores, k=cfg["num_experts_per_tok"], dim=-1, sorted=False)
            return topk_idx, topk_weight * cfg["routed_scaling_factor"]   # norm_topk_prob False

    class MoE(nn.Module):                    # DeepseekV2MoE, eval: moe_infer
        def __init__(self):
            super().__init__()
            self.experts = nn.ModuleList(MLP(cfg["moe_intermediate_size"])
                                         for _ in range(cfg["n_routed_experts"]))
            self.gate = MoEGate()
            self.shared_experts = MLP(cfg["moe_intermediate_size"] * cfg["n_shared_experts"])

        def forward(self, hidden_states):
            identity, shape = hidden_states, hidden_states.shape
            topk_ids, topk_weight = self.gate(hidden_states)
            x = hidden_states.view(-1, D)
            cnts = topk_ids.new_zeros((topk_ids.shape[0], len(self.experts)))
            cnts.scatter_(1, topk_ids, 1)
            tokens_per_expert = cnts.sum(dim=0).tolist()
            idxs = topk_ids.view(-1).argsort()
            sorted_tokens = x[idxs // topk_ids.shape[1]]
            outputs, start = [], 0
            for i, n in enumerate(tokens_per_expert):
                if n:
                    outputs.append(self.experts[i](sorted_tokens[start:start + n]))
                start += n
            outs = torch.cat(outputs, dim=0)
            new_x = torch.empty_like(outs)
            new_x[idxs] = outs
            y = (new_x.view(*topk_ids.shape, -1).type(topk_weight.dtype)
                 .mul_(topk_weight.unsqueeze(dim=-1)).sum(dim=1).type(new_x.dtype))
            return y.view(*shape) + self.shared_experts(identity)

    class Layer(nn.Module):                  # DeepseekV2DecoderLayer
        def __init__(self, idx):
            super().__init__()
            self.self_attn = Attention()
            dense = idx < cfg["first_k_dense_replace"]
            self.mlp = MLP(cfg["intermediate_size"]) if dense else MoE()
            self.input_layernorm = RMSNorm(D)
            self.post_attention_layernorm = RMSNorm(D)

        def forward(self, x, mask, position_ids, cache=None):
            x = x + self.self_attn(self.input_layernorm(x), mask, position_ids, cache)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Model(nn.Module):                  # DeepseekV2Model
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(cfg["vocab_size"], D)
            self.layers = nn.ModuleList(Layer(i) for i in range(cfg["num_hidden_layers"]))
            self.norm = RMSNorm(D)

        def forward(self, ids, caches=None):
            bsz, seq = ids.shape
            past = caches[0][0].shape[-2] if caches and caches[0] else 0
            position_ids = torch.arange(past, past + seq).unsqueeze(0)
            x = self.embed_tokens(ids)
            # _prepare_4d_causal_attention_mask (AttentionMaskConverter._make_causal_mask)
            mask = torch.full((seq, seq), torch.finfo(x.dtype).min)
            cond = torch.arange(seq)
            mask.masked_fill_(cond < (cond + 1).view(seq, 1), 0)
            mask = torch.cat([torch.zeros(seq, past), mask], dim=-1)   # past_key_values_length
            mask = mask[None, None, :, :].expand(bsz, 1, seq, past + seq)
            for i, layer in enumerate(self.layers):
                x = layer(x, mask, position_ids, caches[i] if caches is not None else None)
            return self.norm(x)

    class DeepseekV2ForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Model()
            self.lm_head = nn.Linear(D, cfg["vocab_size"], bias=False)

        def forward(self, ids, caches=None):
            """`caches`: None (no cache), or one list per layer, as Attention's `cache`."""
            return self.lm_head(self.model(ids, caches)).float()

    return DeepseekV2ForCausalLM().eval()


# ------------------------------------------------------------------ parameter totals

def test_parameter_total_is_hugging_faces_from_the_config():
    torch = pytest.importorskip("torch")
    spec = _spec()
    with torch.device("meta"):
        ref = _reference(torch, CONFIG)
    total = sum(p.numel() for p in ref.parameters())
    assert total == 15_706_484_224               # "15.7B total parameters"
    assert spec.example_value(spec.total_params) == total
    assert [d.code for d in spec.diagnostics] == []


def test_parameter_total_at_other_sizes_is_the_references():
    torch = pytest.importorskip("torch")
    spec = _spec()
    for sizes in REDUCED["deepseek_v2_lite"]:
        with torch.device("meta"):
            ref = _reference(torch, _config(**sizes))
        env = spec.prover.user_env({k: v for k, v in sizes.items() if k in FIELDS})
        assert env is not None
        assert int(spec.total_params.subs(env)) == sum(p.numel() for p in ref.parameters()), sizes


# ------------------------------------------------------------------ the MLA shapes

def test_the_cache_is_the_latent_and_one_rotary_key_not_the_expanded_keys_and_values():
    spec = _spec()
    mla = spec.blocks["MLA"][0]           # its first call (in the dense layer)
    shapes = {n: tuple(map(str, t.shape)) for b in mla.bindings for n, t in zip(b.names, b.types)}
    assert shapes["compressed_kv"] == ("B", "S", "C") and shapes["k_pe_h"] == ("B", "1", "S", "Dr")
    assert shapes["k_nope"] == ("B", "H", "S", "Dn") and shapes["value_states"] == ("B", "H", "S", "Dv")
    assert shapes["query_states"] == shapes["key_states"] == ("B", "H", "S", "Dq")
    assert shapes["scores"] == ("B", "H", "S", "S") and shapes["out"] == ("B", "H", "S", "Dv")
    assert shape_at(spec, "cos_t", {"B": 1, "S": 8}) == (1, 1, 8, 64)
    # per token and layer, C + Dr = 576 numbers to cache; the expanded keys and values
    # are H*(Dn + Dv) = 4096 wide
    text = trace(spec, width=0)
    for row in ("[B, S, C]", "[B, H, S, Dq]", "[B, 1, S, Dr]", "[B, H, S, Dv]", "[1, 8, 576]",
                "[1, 8, 4096]", "[1, 16, 8, 192]"):
        assert row in text, row


# ------------------------------------------------------------------ the generated module

def _weights(ref):
    """The reference's parameters under the generated module's names."""
    def attn(prefix, a, layer):
        return {f"{prefix}.x2_norm.weight": layer.input_layernorm.weight,
                f"{prefix}.x2.q.weight": a.q_proj.weight,
                f"{prefix}.x2.compressed.weight": a.kv_a_proj_with_mqa.weight,
                f"{prefix}.x2.kv_norm.weight": a.kv_a_layernorm.weight,
                f"{prefix}.x2.kv_linear.weight": a.kv_b_proj.weight,
                f"{prefix}.x2.out_linear.weight": a.o_proj.weight}

    layers = ref.model.layers
    first = layers[0]
    out = {"W_embed": ref.model.embed_tokens.weight, "hidden_norm.weight": ref.model.norm.weight,
           "logits.weight": ref.lm_head.weight, **attn("h0", first.self_attn, first),
           "h0.m.weight": first.post_attention_layernorm.weight, "h0.gate.weight": first.mlp.gate_proj.weight,
           "h0.up.weight": first.mlp.up_proj.weight, "h0.out_linear.weight": first.mlp.down_proj.weight}
    for i, layer in enumerate(layers[1:]):
        p, moe = f"hidden.{i}", layer.mlp
        out.update(attn(p, layer.self_attn, layer))
        out.update({
            f"{p}.out_norm.weight": layer.post_attention_layernorm.weight,
            f"{p}.out_mo_e.logits.weight": moe.gate.weight,
            **{f"{p}.out_mo_e.experts.{e}.{mine}.weight": getattr(expert, theirs).weight
               for e, expert in enumerate(moe.experts)
               for mine, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj"))},
            f"{p}.out_mo_e.sg.weight": moe.shared_experts.gate_proj.weight,
            f"{p}.out_mo_e.su.weight": moe.shared_experts.up_proj.weight,
            f"{p}.out_mo_e.out_linear.weight": moe.shared_experts.down_proj.weight})
    return out


@pytest.mark.parametrize("sizes", REDUCED["deepseek_v2_lite"], ids=["two-moe-layers", "one-moe-layer"])
def test_generated_module_matches_the_reference(sizes):
    torch = pytest.importorskip("torch")
    model, gen = module(_spec(), f"deepseek_{sizes['L']}", **sizes)
    assert "torch.clamp(" in gen.source
    # tables built once are buffers outside the state dict: the checkpoint is the parameters
    assert all("persistent=False" in line for line in gen.source.splitlines() if "register_buffer(" in line)
    ref = _reference(torch, _config(**sizes))
    torch.manual_seed(0)
    with torch.no_grad():
        for q in ref.parameters():
            q.copy_(torch.randn_like(q) * 0.2 + (1.0 if q.dim() == 1 else 0.0))
        want = _weights(ref)
        got = dict(model.named_parameters())
        assert sorted(got) == sorted(want)
        assert sum(p.numel() for p in got.values()) == sum(p.numel() for p in ref.parameters())
        for name, p in got.items():
            p.copy_(want[name])
    ids = torch.randint(0, sizes["V"], (sizes["B"], sizes["S"]))
    out, expected = outputs_match(model, ref, ids, (sizes["B"], sizes["S"], sizes["V"]))
    assert out.dtype == torch.float32
    with torch.no_grad():                 # the eps is honoured: another eps changes the output
        for mod in model.modules():
            if isinstance(mod, torch.nn.RMSNorm):
                mod.eps = 1.0
        assert (model(ids) - expected).abs().max().item() > 1e-3


def test_a_block_called_with_a_size_1_axis_keeps_its_1s_in_the_generated_code():
    # found while writing this spec: Rope called on k_pe [B, 1, S, Dr] binds N = 1, and
    # the generated function printed every 1 of the block as N (`c: [N, N, S, Dr]`)
    pytest.importorskip("torch")
    from shapelang import codegen

    # the module `run` instruments writes one function per call
    source = codegen.generate(_spec(), instrument=True).source
    assert '"""block Rope(t: [B, 1, S, Dr], c: [1, 1, S, Dr], s: [1, 1, S, Dr])."""' in source
    assert '"""block Rope(t: [B, N, S, Dr], c: [1, 1, S, Dr], s: [1, 1, S, Dr])."""' in source
    assert "[N, N, S, Dr]" not in source
    # the module itself, one for both (one definition, one function)
    source = codegen.generate(_spec()).source
    assert source.count('"""block Rope(') == 1 and "[N, N, S, Dr]" not in source


def test_the_html_trace_draws_the_0d_tables():
    # found while writing this spec: YaRN's mscale and correction range are 0-d tensors,
    # which the HTML trace drew as no box at all
    from shapelang.render.html import trace_html

    page = trace_html(_spec())
    for name in ("low", "high", "mscale", "softmax_scale"):
        assert f'data-binding="{name}"' in page, name
    assert page.count("a 0-d tensor: one value, no axes") >= 8


# ------------------------------------------------------------------ the routing

def test_the_routing_is_sparse_an_expert_no_token_picked_does_not_matter():
    torch = pytest.importorskip("torch")
    spec = _spec()
    assert "N_tok" in str(spec.total_flops)          # experts run on their routed tokens only
    sizes = REDUCED["deepseek_v2_lite"][0]
    model, _gen = module(spec, "deepseek_sparse", **sizes)
    moe = model.hidden[0].out_mo_e
    logits = []
    moe.logits.register_forward_hook(lambda _m, _i, out: logits.append(out))
    ids = torch.tensor([[5]])                         # one token: K of the E experts are used
    with torch.no_grad():
        before = model(ids)
        used = set(logits[-1].softmax(-1).topk(sizes["K"], -1).indices.flatten().tolist())
        unused = [e for e in range(sizes["E"]) if e not in used]
        assert len(used) == sizes["K"] and unused
        for e in unused:
            for p in moe.experts[e].parameters():
                p.add_(1.0)
        torch.testing.assert_close(model(ids), before, atol=0, rtol=0)
        for p in moe.experts[min(used)].parameters():
            p.add_(1.0)
        assert (model(ids) - before).abs().max().item() > 1e-3
