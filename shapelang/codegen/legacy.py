"""Codegen, old names: a state dict saved under an earlier naming rule, loaded into today's module.

Until the rule "a binding that owns exactly one layer gives it the binding's name" (docs/codegen.md,
"Names and state-dict keys"), every layer was named `<binding>_<kind>`: `q: x -> linear D` was
`self.q_linear` (keys `q_linear.weight`), `h: x -> layernorm` was `self.h_ln`, an RMSNorm
`self.h_norm`, a block call `self.attn_causal_self_attention`; until the one block call or
stack among several layers took the binding's name, `moe: x -> rmsnorm -> SparseMoe` was
`self.moe_sparse_moe` and `h: x -> stack L Layer -> rmsnorm` `self.h_layers`. `legacy_renames` pairs such old
keys with the keys of the module generated now, by that rule alone: a key segment `X_<kind>` is
`X` when the new module has that key and the old dict does not already give it. Nothing else is
guessed, and a key that fits no rule is left for `load_state_dict` to report. No torch needed.
"""
from __future__ import annotations

from collections.abc import Iterable

LIMIT = 256          # candidate keys tried per old key

# Deliberate renames in a library spec's own names (docs/codegen.md, "Old names"): the generated
# top class -> (old layer name, new layer name) of the layer that holds the tensor.
_GPT2 = (("h", "ln_1"), ("qkv", "attn.c_attn"), ("y", "attn.c_proj"), ("m_ln", "ln_2"),
         ("m_linear1", "mlp.c_fc"), ("m_linear2", "mlp.c_proj"))
RENAMED = {"Gpt2Small": _GPT2, "Gpt2SmallStep": _GPT2}   # gpt2_small(_step).shape took nanoGPT's names


def _stems(segment: str) -> list[str]:
    """`attn_causal_self_attention` -> itself, `attn`, `attn_causal`, `attn_causal_self`."""
    words = segment.split("_")
    return [segment] + ["_".join(words[:k]) for k in range(1, len(words)) if words[0]]


def _candidates(key: str) -> list[str]:
    """The keys an old key may have become: any of its module segments (not the tensor's own
    name) cut back to a prefix before an `_<kind>` suffix (`q_linear.weight` -> `q.weight`;
    `h.0.attn_causal_self_attention.c_attn_linear.weight` -> `h.0.attn.c_attn.weight`)."""
    parts = key.split(".")
    out = [[]]
    for seg in parts[:-1]:
        out = [o + [s] for o in out for s in _stems(seg)][:LIMIT]
    return [".".join(o + parts[-1:]) for o in out[1:]]


def _respelled(key: str, renamed) -> str:
    """`key` with its layer's name as the spec now writes it (`renamed`: old -> new)."""
    parts = key.split(".")
    for old, new in renamed:
        if len(parts) > 1 and parts[-2] == old:
            return ".".join(parts[:-2] + [new, parts[-1]])
    return key


def legacy_renames(old_keys: Iterable[str], new_keys: Iterable[str], renamed=()) -> dict[str, str]:
    """{old key: new key} for the old keys the new module lacks and the old rule explains
    (`renamed`: the spec's own renames, see RENAMED)."""
    new = list(new_keys)
    old = list(old_keys)
    have, wanted = set(old), set(new)
    out: dict[str, str] = {}
    taken: set[str] = set()
    for key in old:
        if key in wanted:
            continue
        spelled = _respelled(key, renamed)
        tried = ([spelled] if spelled != key else []) + _candidates(spelled) + \
            (_candidates(key) if spelled != key else [])
        hits = list(dict.fromkeys(c for c in tried if c in wanted and c not in have and c not in taken))
        if len(hits) == 1:
            out[key] = hits[0]
            taken.add(hits[0])
    return out


def upgrade_state_dict(state_dict: dict, model, spec: str | None = None) -> dict:
    """A copy of `state_dict` with its old keys renamed to `model`'s (an nn.Module or its keys):
    `model.load_state_dict(upgrade_state_dict(torch.load(old), model))`. `spec`: the generated
    top class whose renames apply (RENAMED), by default the model's own class."""
    new_keys = model.state_dict().keys() if hasattr(model, "state_dict") else model
    spec = spec or (type(model).__name__ if hasattr(model, "state_dict") else None)
    renames = legacy_renames(state_dict.keys(), new_keys, RENAMED.get(spec, ()))
    return {renames.get(k, k): v for k, v in state_dict.items()}
