"""Old state-dict keys: a checkpoint saved when every layer was `<binding>_<kind>` (`q_linear`,
`h_ln`, `h_norm`, a block call `attn_causal_self_attention`) loads into today's module through
`shapelang.codegen.legacy.upgrade_state_dict`, with the same outputs."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn

from shapelang import api
from shapelang.codegen import runner
from shapelang.codegen.legacy import legacy_renames, upgrade_state_dict

SPEC = """\
dim B
dim S
dim D
dim H
dim Dh = D / H
assume D % H == 0
example B=2, S=5, D=16, H=2

input x: [B, S, D]

block CausalSelfAttention(x: [B, S, D]):
  qkv: x -> linear 3*D
  q, k, v: qkv -> split D -1
  qh: q -> reshape [B, S, H, Dh] -> transpose 1 2
  kh: k -> reshape [B, S, H, Dh] -> transpose 1 2
  vh: v -> reshape [B, S, H, Dh] -> transpose 1 2
  att: qh @ (kh -> transpose -2 -1) -> scale 1/sqrt(Dh) -> mask causal -> softmax -1
  y: att @ vh -> transpose 1 2 -> reshape [B, S, D]
  proj: y -> linear D
  return proj
end

h: x -> layernorm
attn: h -> CausalSelfAttention
n: attn -> rmsnorm
out: n -> linear D
"""

OLD_KIND = {nn.Linear: "linear", nn.LayerNorm: "ln", nn.RMSNorm: "norm"}


def _old_keys(model) -> dict:
    """The old rule, written from the module itself: every layer `<attribute>_<kind>`, a block
    call `<attribute>_<snake class name>`."""
    rename = {}
    for name, mod in model.named_modules():
        if not name:
            continue
        kind = OLD_KIND.get(type(mod))
        if kind is None and list(mod.parameters(recurse=False)) == [] and type(mod) is not nn.ModuleList:
            kind = "causal_self_attention" if type(mod).__name__ == "CausalSelfAttention" else None
        if kind:
            rename[name] = kind
    old = {}
    for key, value in model.state_dict().items():
        parts = key.split(".")
        for i in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:i])
            if prefix in rename:
                parts[i - 1] = f"{parts[i - 1]}_{rename[prefix]}"
        old[".".join(parts)] = value
    return old


def _loads_after_upgrade(gen, sizes, old_names, x) -> dict:
    """A module saved with seed 1, its state dict under the old names (`old_names`), loaded
    into a fresh module (seed 2): refused as it is, loaded strictly once upgraded, and the
    same outputs as the saved module. Returns the old state dict."""
    _m, saved = runner.build(gen, sizes, seed=1)
    old = old_names(saved)
    _m, fresh = runner.build(gen, sizes, seed=2)
    with pytest.raises(RuntimeError):
        fresh.load_state_dict(old)
    fresh.load_state_dict(upgrade_state_dict(old, fresh))          # strict
    with torch.no_grad():
        torch.testing.assert_close(fresh(x), saved(x), rtol=0, atol=0)
    return old


def test_a_state_dict_saved_under_the_old_names_loads():
    spec = api.check(SPEC, "old.shape")
    assert spec.ok
    old = _loads_after_upgrade(api.codegen(spec), dict(spec.example), _old_keys, torch.randn(2, 5, 16))
    assert "h_ln.weight" in old and "attn_causal_self_attention.qkv_linear.weight" in old and "n_norm.weight" in old


def test_only_unambiguous_renames_are_made():
    assert legacy_renames(["q_linear.weight"], ["q.weight", "q_linear.weight"]) == {}
    assert legacy_renames(["a_b_linear.weight"], ["a.weight", "a_b.weight"]) == {}
    assert legacy_renames(["z_linear.weight"], ["q.weight"]) == {}


# the one block call or stack among several layers of a binding takes its name: until then it
# was `<binding>_<snake block name>` (`block_sparse_moe_sparse_moe`, `hidden_llama_layers`)
CALLS = """\
dim B, S, D
dim L = 2
example B=2, S=3, D=8

input x: [B, S, D]

block Mlp(x: [B, S, D]):
  up: x -> linear 2*D -> relu
  return up -> linear D
end

moe: x -> rmsnorm -> Mlp
hidden: moe -> stack L Mlp -> layernorm
"""


def test_a_state_dict_saved_before_block_calls_took_the_binding_name_loads():
    spec = api.check(CALLS, "calls.shape")
    assert spec.ok
    keys = []

    def old_names(saved):   # the old rule, written out: the block call `moe_mlp`, the stack `hidden_mlps`
        keys.extend(saved.state_dict())
        return {k.replace("moe.", "moe_mlp.", 1).replace("hidden.", "hidden_mlps.", 1): v
                for k, v in saved.state_dict().items()}

    old = _loads_after_upgrade(api.codegen(spec), dict(spec.example), old_names, torch.randn(2, 3, 8))
    assert "moe.up.weight" in keys and "moe_norm.weight" in keys and "hidden.1.out_linear.weight" in keys
    assert "moe_mlp.up.weight" in old and "hidden_mlps.0.up.weight" in old


def test_a_gpt2_small_state_dict_saved_before_it_took_nanogpts_names_loads():
    """specs/gpt2_small.shape named its layers h, qkv, y, m (`hidden_gpt2_blocks.0.h.weight`);
    they are nanoGPT's now (`hidden.0.ln_1.weight`, `hidden.0.attn.c_attn.weight`, ...)."""
    import tiers

    spec = tiers.checked(tiers.ROOT / "specs" / "gpt2_small.shape")
    gen = api.codegen(spec)
    sizes = {"V": 50, "Ctx": 16, "D": 16, "H": 2, "L": 2, "B": 1, "S": 5}
    _m, saved = runner.build(gen, sizes, seed=1)
    old_layer = {"ln_1": "h", "attn.c_attn": "qkv", "attn.c_proj": "y", "ln_2": "m_ln",
                 "mlp.c_fc": "m_linear1", "mlp.c_proj": "m_linear2"}
    old = {}
    for key, value in saved.state_dict().items():
        if key.startswith("hidden."):
            head, tensor = key.rsplit(".", 1)
            _, index, layer = head.split(".", 2)
            key = f"hidden_gpt2_blocks.{index}.{old_layer[layer]}.{tensor}"
        old[key] = value
    assert "hidden_gpt2_blocks.1.qkv.weight" in old and "hidden_gpt2_blocks.0.m_linear2.bias" in old
    _m, fresh = runner.build(gen, sizes, seed=2)
    fresh.load_state_dict(upgrade_state_dict(old, fresh))          # strict
    ids = torch.randint(0, 50, (1, 5))
    with torch.no_grad():
        torch.testing.assert_close(fresh(ids), saved(ids), rtol=0, atol=0)
