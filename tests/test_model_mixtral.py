"""Mixtral-8x7B written whole as a spec (specs/mixtral_8x7b.shape): the checker's parameter
total is Hugging Face's, and the generated module at reduced sizes computes what a
hand-written reference of HF's MixtralForCausalLM forward (eval) computes with the same
weights, when some expert gets no token and when all do. The routing is sparse: the
router's top-k decides which experts' weights matter."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_model_llama2 import _reference as llama_reference
from torch_shapes import REDUCED, checked, module, outputs_match, same_random_weights

from shapelang.codegen import runner

SPEC = Path(__file__).resolve().parent.parent / "specs" / "mixtral_8x7b.shape"


def _spec():
    return checked(SPEC.read_text(), "mixtral_8x7b.shape")


def test_parameter_total_is_the_published_one():
    spec = _spec()
    assert spec.example_value(spec.total_params) == 46_702_792_704
    values = runner.resolve_sizes(spec, {})
    env = {spec.prover.user[n]: v for n, v in values.items()}
    assert int(spec.total_params.subs(env)) == 46_702_792_704
    # by parts: 2*V*D + D + L*(2*D*D + 2*D*G*Dh + D*E + E*3*D*F + 2*D)
    V, D, G, Dh, E, F, L = 32000, 4096, 8, 128, 8, 14336, 32
    assert 2 * V * D + D + L * (2 * D * D + 2 * D * G * Dh + D * E + E * 3 * D * F + 2 * D) == 46_702_792_704


def test_the_tokens_an_expert_gets_are_a_data_dependent_size():
    spec = _spec()
    p = spec.prover
    sizes = [u for u in p.unbacked if str(u).startswith("N_top_x")]
    assert sizes
    for n in sizes:   # one per check of the Expert block: each is at most K*T and may be 0
        assert p.leq(n, p.unbacked[n]).ok and p.positive(n).status == "refuted"
        assert p.user["K"] in p.unbacked[n].free_symbols or p.unbacked[n].has(p.user["K"])
    trace = __import__("shapelang").trace(spec, width=0)
    assert "[N_top_x, D]" in trace and "index_add 0 top_x" in trace


# ------------------------------------------------------------------ a hand-written reference

def _reference(torch, V, D, H, G, F, E, K, L, eps=1e-5, theta=1e6):
    """HF's MixtralForCausalLM forward in eval mode, written from modeling_mixtral.py."""
    nn = torch.nn
    routed = []   # per layer: the experts that got at least one token

    class ExpertMLP(nn.Module):          # MixtralBlockSparseTop2MLP
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(D, F, bias=False)
            self.w2 = nn.Linear(F, D, bias=False)
            self.w3 = nn.Linear(D, F, bias=False)

        def forward(self, x):
            return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))

    class SparseMoe(nn.Module):          # MixtralSparseMoeBlock
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(D, E, bias=False)
            self.experts = nn.ModuleList(ExpertMLP() for _ in range(E))

        def forward(self, hidden_states):
            b, s, d = hidden_states.shape
            hidden_states = hidden_states.view(-1, d)
            router_logits = self.gate(hidden_states)
            routing_weights = nn.functional.softmax(router_logits, dim=1, dtype=torch.float)
            routing_weights, selected_experts = torch.topk(routing_weights, K, dim=-1)
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
            routing_weights = routing_weights.to(hidden_states.dtype)
            final = torch.zeros((b * s, d), dtype=hidden_states.dtype)
            expert_mask = nn.functional.one_hot(selected_experts, num_classes=E).permute(2, 1, 0)
            routed.append({int(e) for e in selected_experts.flatten()})
            for expert_idx in range(E):
                idx, top_x = torch.where(expert_mask[expert_idx])
                current_state = hidden_states[None, top_x].reshape(-1, d)
                current = self.experts[expert_idx](current_state) * routing_weights[top_x, idx, None]
                final.index_add_(0, top_x, current.to(hidden_states.dtype))
            return final.reshape(b, s, d)

    # MixtralDecoderLayer, MixtralAttention, MixtralRMSNorm and the rotary tables are Llama's
    model = llama_reference(torch, V, D, H, G, F, L, eps=eps, theta=theta, mlp=SparseMoe,
                            mlp_name="block_sparse_moe")
    model.routed = routed
    model.register_forward_pre_hook(lambda _module, _args: routed.clear())
    return model.eval()


def _pairs(ref):
    """The reference's parameters in the generated module's order, by role."""
    out = [ref.embed_tokens.weight]
    for layer in ref.layers:
        a, moe = layer.self_attn, layer.block_sparse_moe
        out += [layer.input_layernorm.weight, a.q_proj.weight, a.k_proj.weight, a.v_proj.weight,
                a.o_proj.weight, layer.post_attention_layernorm.weight, moe.gate.weight]
        for expert in moe.experts:
            out += [expert.w1.weight, expert.w3.weight, expert.w2.weight]
    return out + [ref.norm.weight, ref.lm_head.weight]


def _built(torch, sizes, seed=0):
    model, gen = module(_spec(), f"mixtral_{sizes['E']}_{sizes['L']}", **sizes)
    ref = _reference(torch, **sizes)
    got, want = list(model.parameters()), _pairs(ref)
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    assert len(got) == len(list(ref.parameters()))
    same_random_weights(zip(got, want), seed)
    return model, gen, ref


SOME = {"V": 53, "D": 32, "H": 4, "G": 2, "F": 24, "E": 8, "K": 2, "L": 2}   # 1x3 tokens: <= 6 of 8 experts
ALL = {"V": 61, "D": 48, "H": 6, "G": 3, "F": 40, "E": 4, "K": 2, "L": 1}    # 2x9 tokens: every expert


@pytest.mark.parametrize("sizes, batch, idle", [(SOME, (1, 3), True), (ALL, (2, 9), False)],
                         ids=["some-expert-idle", "every-expert-routed"])
def test_generated_module_matches_the_reference(sizes, batch, idle):
    torch = pytest.importorskip("torch")
    model, gen, ref = _built(torch, sizes)
    # tables built once are buffers outside the state dict: the checkpoint is the parameters
    assert all("persistent=False" in line for line in gen.source.splitlines() if "register_buffer(" in line)
    assert "nn.ModuleList([Expert(cfg) for _ in range(cfg.E)])" in gen.source
    assert "torch.where(" in gen.source and ".index_add(0, " in gen.source
    ids = torch.randint(0, sizes["V"], batch, generator=torch.Generator().manual_seed(3))
    outputs_match(model, ref, ids, (*batch, sizes["V"]))
    # the case the sizes are for: an expert with no token, or every expert with some
    assert any(len(r) < sizes["E"] for r in ref.routed) == idle, ref.routed


def test_only_the_routed_experts_weights_matter():
    torch = pytest.importorskip("torch")
    sizes = {**SOME, "L": 1}
    model, _gen, ref = _built(torch, sizes, seed=1)
    ids = torch.randint(0, sizes["V"], (1, 3), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        before = model(ids)
        ref(ids)
        routed = ref.routed[0]
        idle = sorted(set(range(sizes["E"])) - routed)
        assert idle and routed
        experts = [m for m in model.modules() if type(m).__name__ == "Expert"]
        assert len(experts) == sizes["E"]
        for e in idle:                    # unrouted: their weights change nothing
            for p in experts[e].parameters():
                p.add_(torch.randn_like(p))
        torch.testing.assert_close(model(ids), before, rtol=0, atol=0)
        e = min(routed)                   # a routed one changes the output
        for p in experts[e].parameters():
            p.add_(torch.randn_like(p))
        assert (model(ids) - before).abs().max().item() > 1e-3


def test_reduced_sizes_for_whole_spec_tests_are_listed():
    assert "mixtral_8x7b" in REDUCED
