"""Masks in generated code: attention written out with several masks (a padding mask and
a causal mask, an additive bias and a mask) becomes one F.scaled_dot_product_attention
with the combined attn_mask, giving the written-out numbers, also where a query's keys
are all hidden (zeros there, not NaN, in both forms).
"""
from __future__ import annotations

import pytest
from torch_shapes import formatted_module

from shapelang import codegen
from shapelang.checker.checker import check_text
from shapelang.codegen import runner

torch = pytest.importorskip("torch")
F = torch.nn.functional

HEAD = ("dim B, S, D, H\ndim Dh = D / H\nassume D % H == 0\nexample B=3, S=5, D=16, H=4\n"
        "input x: [B, S, D]\n")
QKV = ("q: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2\n"
       "k: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2\n"
       "v: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2\n")
TAIL = "y: att @ v -> transpose 1 2 -> reshape [B, S, D] -> linear D\n"

# name -> (extra inputs, the scores line)
CASES = {
    "padding then causal": ("input pad: [B, 1, 1, S] bool\n",
                            ("att: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh) -> mask pad -> mask causal "
                            "-> softmax -1\n")),
    "causal then padding": ("input pad: [B, 1, 1, S] bool\n",
                            ("att: q @ (k -> transpose -2 -1) -> mask causal -> mask pad -> scale 1/sqrt(Dh) "
                            "-> softmax -1\n")),
    "two padding masks": ("input pad: [B, 1, 1, S] bool\ninput keep: [B, 1, S, S] bool\n",
                          ("att: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh) -> mask pad -> mask keep "
                          "-> softmax -1\n")),
    "bias and padding": ("input pad: [B, 1, 1, S] bool\ninput bias: [1, H, S, S]\n",
                         ("s0: q @ (k -> transpose -2 -1) -> scale 1/sqrt(Dh)\n"
                         "att: s0 + bias -> mask pad -> softmax -1\n")),
    "bias before the scale": ("input pad: [B, 1, 1, S] bool\ninput bias: [1, H, S, S]\n",
                              ("s0: q @ (k -> transpose -2 -1) + bias\n"
                              "att: s0 -> mask pad -> scale 0.5 -> softmax -1\n")),
    "bias, padding and causal": ("input pad: [B, 1, 1, S] bool\ninput bias: [1, H, S, S]\n",
                                 ("s0: bias + (q @ (k -> transpose -2 -1))\n"
                                 "att: s0 -> mask causal -> scale 1/sqrt(Dh) -> mask pad -> softmax -1\n")),
}


def _models(text: str, name: str):
    spec = check_text(text, f"{name.replace(' ', '_').replace(',', '')}.shape")
    assert spec.ok, [d.message for d in spec.diagnostics]
    out = []
    for attention in ("sdpa", "explicit"):
        gen = codegen.generate(spec, attention=attention)
        mod = runner.load_module(gen.source, f"masks_{abs(hash(name))}_{attention}")
        model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)()).eval()
        out.append((gen, model))
    return out


def _inputs(case: str, padded_row: bool):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 5, 16, generator=g)
    pad = torch.zeros(3, 1, 1, 5, dtype=torch.bool)
    pad[1, ..., 3:] = True                       # padding at the end of sequence 1
    if padded_row:
        pad[2] = True                            # sequence 2 entirely padded: every key hidden
    args = {"x": x, "pad": pad}
    if "two padding" in case:
        keep = torch.rand(3, 1, 5, 5, generator=g) < 0.3
        if padded_row:
            keep[0, 0, 2] = True                 # query 2 of sequence 0 sees no key
        args["keep"] = keep
    if "bias" in case:
        args["bias"] = torch.randn(1, 4, 5, 5, generator=g)
    return args


@pytest.mark.parametrize("padded_row", [False, True], ids=["some keys", "fully padded rows"])
@pytest.mark.parametrize("case", list(CASES))
def test_two_masks_become_one_sdpa_call_with_the_written_out_numbers(case, padded_row):
    extra, scores = CASES[case]
    (fused_gen, fused), (written_gen, written) = _models(HEAD + extra + QKV + scores + TAIL, case)
    assert fused_gen.source.count("scaled_dot_product_attention(") == 1, fused_gen.source
    assert "F.softmax" not in fused_gen.source and "is_causal" not in fused_gen.source
    assert "scaled_dot_product_attention" not in written_gen.source
    written.load_state_dict(fused.state_dict())
    args = _inputs(case, padded_row)
    with torch.no_grad():
        got, want = fused(**args), written(**args)
    assert torch.isfinite(got).all() and torch.isfinite(want).all()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    if padded_row and "two padding" not in case:
        # a query that sees no key gets zeros from attention: the output is the projection's bias
        torch.testing.assert_close(got[2], fused.y.bias.expand(5, 16), atol=1e-6, rtol=0)


def test_the_written_out_form_of_two_masks_is_finite_on_a_hidden_row():
    """`mask pad -> mask causal -> softmax`: a query whose keys are all hidden gets zeros."""
    extra, scores = CASES["padding then causal"]
    (_, _), (gen, written) = _models(HEAD + extra + QKV + scores + TAIL, "finite written")
    assert "isneginf" in gen.source
    args = _inputs("padding then causal", padded_row=True)
    with torch.no_grad():
        assert torch.isfinite(written(**args)).all()


def test_a_bias_that_widens_the_scores_stays_written_out():
    """scores [B, H, S, S] + a bias with a batch of its own ([2, B, H, S, S]) is not attention's
    attn_mask (sdpa could not broadcast it): the steps are written out."""
    text = (HEAD + "input bias: [2, B, H, S, S]\n" + QKV
            + "att: (q @ (k -> transpose -2 -1)) + bias -> softmax -1\ny: att @ v\n")
    spec = check_text(text, "widening.shape")
    assert spec.ok
    assert "scaled_dot_product_attention" not in codegen.generate(spec).source


def test_a_softmax_in_float32_stays_written_out():
    """`softmax -1 dtype=float32` (T5) computes in float32 whatever the input: sdpa would not."""
    text = (HEAD + "input bias: [1, H, S, S]\n" + QKV
            + "att: (q @ (k -> transpose -2 -1)) + bias -> softmax -1 dtype=float32\n" + TAIL)
    spec = check_text(text, "upcast.shape")
    assert spec.ok
    assert "scaled_dot_product_attention" not in codegen.generate(spec).source


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("attention", ["sdpa", "explicit"])
def test_combined_masks_script_and_are_ruff_formatted(case, attention, tmp_path):
    extra, scores = CASES[case]
    spec = check_text(HEAD + extra + QKV + scores + TAIL, "combined.shape")
    gen = codegen.generate(spec, attention=attention)
    mod = formatted_module(gen, tmp_path / "combined.py", f"combined_{abs(hash(case))}_{attention}")
    model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)()).eval()
    scripted = torch.jit.script(model)
    args = _inputs(case, padded_row=True)
    with torch.no_grad():
        torch.testing.assert_close(scripted(**args), model(**args), atol=1e-6, rtol=0)


# ------------------------------------------------------------------ masks and tables built once

STACKED = """\
dim B, S, D, H, L
dim Dh = D / H
assume D % H == 0
assume Dh % 2 == 0
example B=2, S=5, D=16, H=4, L=3
input x: [B, S, D]

block Layer(x: [B, S, D]):
  q: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2
  k: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2
  v: x -> linear D -> view [B, S, H, Dh] -> transpose 1 2
  # rotary tables: sizes only
  inv_freq: 1 / 10000.0 ** (arange(0.0, Dh, 2) / Dh)
  freqs: outer(arange(S), inv_freq)
  c: concat(-1, freqs -> cos, freqs -> cos)
  s: concat(-1, freqs -> sin, freqs -> sin)
  qr: q * c + q * s
  kr: k * c - k * s
  att: qr @ (kr -> transpose -2 -1) -> scale 1/sqrt(Dh) -> mask causal -> softmax -1
  # the weights are also summed: this attention stays written out, with its mask
  w: att -> sum -1 -> unsqueeze -1
  return (att @ v) * w -> transpose 1 2 -> reshape [B, S, D] -> linear D
end

h: x -> stack L Layer
"""


class _Calls(torch.overrides.TorchFunctionMode):
    """Counts the torch functions a forward calls."""

    def __init__(self):
        super().__init__()
        self.calls: dict = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        self.calls[name] = self.calls.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("layers", [1, 4])
def test_a_stack_builds_its_causal_mask_and_tables_once(layers):
    spec = check_text(STACKED, "stacked.shape")
    assert spec.ok
    gen = codegen.generate(spec)
    layer_src = gen.source.split("class Layer(nn.Module)")[1].split("\nclass ")[0]
    assert "causal_mask(" not in layer_src and "torch.arange" not in layer_src
    assert "def forward(" in layer_src and "causal: torch.Tensor" in layer_src
    mod = runner.load_module(gen.source, f"stacked_once_{layers}")
    model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)(L=layers)).eval()
    assert list(model.buffers()) == []       # nothing new in the state dict
    x = torch.randn(2, 5, 16)
    counter = _Calls()
    with torch.no_grad(), counter:
        model(x)
    assert counter.calls.get("triu") == 1          # the causal mask: once, whatever L
    assert counter.calls.get("arange") == 2        # the two aranges of the tables: once
    assert counter.calls.get("outer") == 1
    assert counter.calls.get("softmax") == layers


@pytest.mark.parametrize("sizes", [{}, {"B": 1, "S": 9, "L": 2}])
def test_hoisted_tables_give_the_numbers_of_the_written_out_layers(sizes):
    """The run command's comparison: the instrumented module (every step inside its layer)
    and the clean module (mask and tables built once) load the same state dict by name
    and give the same outputs."""
    spec = check_text(STACKED, "stacked_run.shape")
    rep = runner.run_spec(spec, runner.resolve_sizes(spec, sizes))
    assert rep.error is None and rep.clean_same is True and rep.ok


def test_a_block_called_once_keeps_its_own_tables():
    text = STACKED.replace("h: x -> stack L Layer", "h: x -> Layer")
    source = codegen.generate(check_text(text, "once.shape")).source
    layer_src = source.split("class Layer(nn.Module)")[1].split("\nclass ")[0]
    assert "causal_mask(S, S, " in layer_src and "torch.arange(S" in layer_src


def test_the_stack_with_hoisted_tables_scripts_and_is_ruff_formatted(tmp_path):
    gen = codegen.generate(check_text(STACKED, "stacked_jit.shape"))
    mod = formatted_module(gen, tmp_path / "stacked_jit.py", "stacked_jit_mod")
    model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)()).eval()
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        torch.testing.assert_close(torch.jit.script(model)(x), model(x), atol=1e-6, rtol=0)


EYE_STACKED = """\
dim B, S, D, L
example B=2, S=5, D=8, L=3
input x: [B, S, D]

block Layer(x: [B, S, D]):
  # a table from sizes alone (an identity), and a layer with weights over it
  e: eye(S) -> unsqueeze 0
  g: e -> unsqueeze 1 -> groupnorm 1 -> squeeze 1
  return (e + g) @ x -> linear D
end

h: x -> stack L Layer
"""


def test_every_table_from_sizes_is_built_once_and_weights_stay_in_their_layer():
    """Which steps a stack builds once comes from the op table: every op that makes a tensor
    from sizes alone (here `eye`) is built by the caller, and a step that owns weights (here
    `groupnorm`, even of a table) stays in each layer, with its own weights."""
    spec = check_text(EYE_STACKED, "eye_stacked.shape")
    assert spec.ok, spec.diagnostics
    gen = codegen.generate(spec)
    layer_src = gen.source.split("class Layer(nn.Module)")[1].split("\nclass ")[0]
    assert "torch.eye(" not in layer_src and "nn.GroupNorm(" in layer_src
    rep = runner.run_spec(spec, runner.resolve_sizes(spec, {}))
    assert rep.error is None and rep.clean_same is True and rep.ok
    mod = runner.load_module(gen.source, "eye_stacked_once")
    model = getattr(mod, gen.top_class)(getattr(mod, gen.config_class)(L=3)).eval()
    assert sorted(n for n, _ in model.named_parameters() if ".g." in n) == \
        [f"h.{k}.g.{w}" for k in range(3) for w in ("bias", "weight")]
    counter = _Calls()
    with torch.no_grad(), counter:
        model(torch.randn(2, 5, 8))
    assert counter.calls.get("eye") == 1
