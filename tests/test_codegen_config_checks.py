"""The generated config refuses the sizes the checker's proof does not cover: a spec that fixes
its sizes (`dim D = 768`) is proved at those values, but its config lets an engineer change them,
so a change that breaks the proof is refused when the config is made, naming the assumption,
instead of a reshape error deep inside forward."""
from __future__ import annotations

from pathlib import Path

import pytest
from torch_shapes import checked, module

from shapelang import codegen
from shapelang.codegen import runner

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def _config(spec, tag):
    gen = codegen.generate(spec)
    mod = runner.load_module(gen.source, f"config_checks_{tag}")
    return getattr(mod, gen.config_class), mod, gen


def test_gpt2_config_refuses_a_width_the_heads_do_not_divide():
    spec = checked((ROOT / "specs" / "gpt2_small.shape").read_text(), "gpt2_small.shape")
    config, mod, gen = _config(spec, "gpt2")
    small = mod.Gpt2Small(config(V=50, Ctx=16, D=64, H=4, L=2)).eval()
    ids = torch.randint(0, 50, (2, 5))
    assert small(ids).shape == (2, 5, 50)
    with pytest.raises(ValueError, match=r"D % H == 0 is needed \(D=66, H=4\)"):
        config(D=66, H=4)
    # without the check, PyTorch fails only inside forward, at the heads' view
    unchecked = gen.source.replace("def __post_init__(self)", "def _unused(self)")
    loose = runner.load_module(unchecked, "config_checks_gpt2_loose")
    model = loose.Gpt2Small(loose.Gpt2SmallConfig(V=50, Ctx=16, D=66, H=4, L=1)).eval()
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        model(ids)


def test_the_specs_own_assumption_is_checked_by_the_config():
    spec = checked((ROOT / "specs" / "mha_self_attention.shape").read_text())
    config, _mod, _gen = _config(spec, "mha")
    assert config(D=48, H=6).Dh == 8
    with pytest.raises(ValueError, match=r"D % H == 0"):
        config(D=50, H=6)


def test_a_size_the_proof_needs_at_its_value_cannot_change():
    # multi-query attention: one key/value head expanded to every query head; `expand` stretches
    # only a size-1 axis, so the proof holds for G = 1 alone
    spec = checked((ROOT / "specs" / "multi_query_attention.shape").read_text())
    config, _mod, _gen = _config(spec, "mqa")
    with pytest.raises(ValueError, match=r"G == 1 is needed \(G=2\)"):
        config(G=2)
    model, _ = module(spec, "mqa_wider", D=96, H=12)
    assert model(torch.randn(2, 3, 96)).shape == (2, 3, 96)


STACKED = """\
dim B, S
dim D = 8
dim L = 4
example B=2, S=3
input x: [B, S, D]
block Layer(h: [B, S, D]):
  return h -> linear D -> gelu
end
first: x -> Layer
rest: first -> stack (L - 1) Layer
"""


def test_an_assumption_found_for_a_fixed_size_is_checked_by_the_config():
    # the spec fixes L = 4, so `stack (L - 1)` is proved at 3 copies; with L free it needs L >= 2
    spec = checked(STACKED)
    config, mod, gen = _config(spec, "stacked")
    model = getattr(mod, gen.top_class)(config(L=2)).eval()
    assert model(torch.randn(2, 3, 8)).shape == (2, 3, 8)
    with pytest.raises(ValueError, match=r"L >= 2 is needed \(L=1\)"):
        config(L=1)


def test_every_shipped_spec_builds_its_config_with_its_own_sizes():
    # the checks never refuse the sizes a spec was proved at
    for path in sorted((ROOT / "specs").glob("*.shape")):
        spec = checked(path.read_text(), path.name)
        config, _mod, _gen = _config(spec, path.stem)
        config()


def test_a_block_assumption_at_a_call_has_a_proved_fix_in_the_callers_sizes():
    from test_codegen_block_sizes import SPEC

    from shapelang import check, render_check

    spec = check(SPEC.replace("dim E = 24", "dim E").replace("example B=2, S=8", "example B=2, S=8, E=24"))
    (err,) = spec.errors()
    assert err.code == "E113" and err.counterexample == {"E": 1}
    assert err.fix is not None and err.fix[1] == "assume E % 2 == 0\n"
    assert "`assume E % 2 == 0`" in render_check(spec)
    fixed = check(spec.source.replace("example B=2", "assume E % 2 == 0\nexample B=2"))
    assert fixed.ok


def test_the_block_size_config_keeps_every_size_free_that_its_proof_allows():
    from test_codegen_block_sizes import SPEC

    config, _mod, _gen = _config(checked(SPEC), "block_sizes")
    assert config(D=16, E=6, L=3).E == 6
    with pytest.raises(ValueError, match=r"E % 2 == 0 is needed \(E=5\)"):
        config(E=5)


def test_each_check_is_written_once():
    # Llama-2 assumes D % H == 0 itself and its quotient dim Dh = D / H needs it too
    spec = checked((ROOT / "specs" / "llama2_7b.shape").read_text(), "llama2_7b.shape")
    source = codegen.generate(spec).source
    assert source.count("if self.D % self.H != 0:") == 1 and source.count("if self.Dh % 2 != 0:") == 1
