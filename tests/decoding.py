"""Incremental decoding in the model tests: a step module (a spec whose caches come in
with a leading layer axis, [L, B, H, P, Dh], and go out grown by the new positions) run
on a prompt at once (prefill, P = 0) and in pieces with the caches carried between calls.
The logits of the pieces, put together, are what one forward over the whole sequence
gives."""
from __future__ import annotations


def load_full_weights(step, full) -> None:
    """The step module takes the full module's weights under the same names."""
    want = {k: tuple(v.shape) for k, v in full.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in step.state_dict().items()}
    assert got == want, sorted(set(got) ^ set(want))
    step.load_state_dict(full.state_dict())


def in_pieces(step, ids, pieces, empty, *extra, names=("present_k", "present_v")):
    """Logits of `step` called on consecutive pieces of `ids` (sizes `pieces`), starting
    from the empty caches `empty` and carrying what each call returns under `names`;
    `extra` inputs are passed to every call after the caches. Returns the logits and the
    last caches."""
    import torch

    caches, outs, at = list(empty), [], 0
    for n in pieces:
        res = step(ids[:, at:at + n], *caches, *extra)
        outs.append(res["logits"])
        new = [res[k] for k in names]
        for old, grown in zip(caches, new):
            assert grown.shape[:-2] == old.shape[:-2] and grown.shape[-2] == old.shape[-2] + n
        caches, at = new, at + n
    return torch.cat(outs, dim=1), caches


PIECES = [(7,), (4, 1, 1, 1), (1,) * 7, (3, 2, 2)]


def assert_step_is_the_full_forward(full, step, ref, ids, pieces, kv_heads: int, head_width: int,
                                    layers: int) -> None:
    """A decoder-only step module with the full module's weights: the prompt `ids` fed in
    `pieces` with the key/value caches ([L, B, kv_heads, P, Dh], empty at first) carried
    gives the logits of the full forward and of the reference `ref`, to 1e-5, and caches
    holding every position."""
    import torch

    load_full_weights(step, full)
    batch, n = ids.shape
    empty = [torch.zeros(layers, batch, kv_heads, 0, head_width)] * 2
    with torch.no_grad():
        got, (k, v) = in_pieces(step, ids, pieces, empty)
        whole, want = full(ids), ref(ids)
    assert k.shape == (layers, batch, kv_heads, n, head_width) == v.shape
    torch.testing.assert_close(got, whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
