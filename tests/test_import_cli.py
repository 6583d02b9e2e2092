"""`shapelang import` on the command line: files written, exit codes, guards turned into
`assume` lines, and constructs it cannot import faithfully (opaque steps, sizes it cannot
tell apart, a module export cannot trace). And the `opaque` operation in the language."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from cli_kit import run_cli

ROOT = Path(__file__).resolve().parent.parent

MODELS = textwrap.dedent('''
    import torch
    from torch import nn


    def encoder(d_model=32, nhead=4):
        torch.manual_seed(0)
        return nn.TransformerEncoderLayer(d_model, nhead, 80, batch_first=True)


    class Pairs(nn.Module):
        """Merges neighbouring tokens: the sequence must be even."""
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(64, 32)

        def forward(self, x):
            B, S, D = x.shape
            return self.proj(x.reshape(B, S // 2, 2 * D))


    class Capped(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = nn.Parameter(torch.randn(12, 32))

        def forward(self, x):
            torch._check(x.size(1) <= 12)
            return x + self.pos[: x.size(1)]


    class Special(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(32, 32)

        def forward(self, x):
            return self.proj(torch.lgamma(x.abs() + 1))


    class Reflect(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(34, 32)

        def forward(self, x):
            return self.proj(nn.functional.pad(x, (1, 1), mode="reflect"))


    class NarrowEps(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(32, eps=1e-6)

        def forward(self, x):
            return self.ln(x)


    class Picks(nn.Module):
        def forward(self, x):
            return x[x > 0]
''')


def _run(tmp_path, *args):
    """The command in-process (the exit code and the stderr a shell would see; the process
    boundary itself is tested in tests/test_import_hostile.py)."""
    return run_cli(*args, cwd=tmp_path)


@pytest.fixture
def models(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "models.py").write_text(MODELS)
    return tmp_path


def test_import_writes_a_spec_that_checks_traces_and_regenerates(models):
    r = _run(models, "import", "models:encoder", "--arg", "d_model=32", "--input", "src=2x8x32",
             "-o", "enc.shape")
    assert r.returncode == 0, r.stderr
    assert "matches the original" in r.stderr
    text = (models / "enc.shape").read_text()
    assert "block MultiheadAttention(x: [B, S, D])" in text and "linear F -> relu" in text
    mapping = json.loads((models / "enc.weights.json").read_text())
    assert mapping["steps"][0]["tensors"]["weight"] == "self_attn.in_proj_weight"
    assert _run(models, "check", "enc.shape").returncode == 0
    assert _run(models, "trace", "enc.shape").returncode == 0
    gen = _run(models, "codegen", "enc.shape", "-o", "enc.py")
    assert gen.returncode == 0, gen.stderr
    # an existing file is not replaced without --force
    again = _run(models, "import", "models:encoder", "--input", "src=2x8x32", "-o", "enc.shape")
    assert again.returncode == 2 and "--force" in again.stderr


def test_guards_become_assumptions(models):
    r = _run(models, "import", "models:Pairs", "--input", "x=2x8x32")
    assert r.returncode == 0, r.stderr
    assert "assume S % 2 == 0" in r.stdout and "reshape [B, S/2, 2*D]" in r.stdout
    r = _run(models, "import", "models:Capped", "--input", "x=2x8x32")
    assert r.returncode == 0, r.stderr
    assert "assume S <= N" in r.stdout and "param pos: [N, D]" in r.stdout   # N: 12, the table's rows


def test_opaque_steps_are_kept_marked_and_fail_the_import(models):
    r = _run(models, "import", "models:Special", "--input", "x=2x8x32", "-o", "lgamma.shape")
    assert r.returncode == 1
    assert "1 opaque step" in r.stderr and "aten.lgamma" in r.stderr
    text = (models / "lgamma.shape").read_text()
    assert "# opaque: aten.lgamma.default" in text
    assert 'opaque "aten.lgamma.default" [B, S, D]' in text
    assert _run(models, "check", "lgamma.shape").returncode == 0          # the shapes still check
    gen = _run(models, "codegen", "lgamma.shape")
    assert gen.returncode == 1 and "opaque" in gen.stderr and "line" in gen.stderr
    # an argument the language cannot say is not silently dropped: the step stays opaque
    r = _run(models, "import", "models:Reflect", "--input", "x=2x8x32")
    assert r.returncode == 1 and 'a pad with mode "reflect"' in r.stderr
    # a layer norm's eps is the spec's
    r = _run(models, "import", "models:NarrowEps", "--input", "x=2x8x32")
    assert r.returncode == 0 and "ln: x -> layernorm eps=1e-06" in r.stdout, r.stderr


def test_what_cannot_be_imported_writes_nothing(models):
    r = _run(models, "import", "models:Picks", "--input", "x=2x8x32", "-o", "picks.shape")
    assert r.returncode == 1 and "cannot import" in r.stderr
    assert not (models / "picks.shape").exists()
    r = _run(models, "import", "models:Missing", "--input", "x=2x8x32")
    assert r.returncode == 2 and "has no `Missing`" in r.stderr
    r = _run(models, "import", "models:encoder", "--input", "src=2by8")
    assert r.returncode == 2 and "--input" in r.stderr


def test_the_opaque_operation_in_the_language():
    from shapelang import api
    from shapelang.codegen.naming import CodegenError

    spec = api.check('dim B, S\nexample B=2, S=3\ninput x: [B, S]\n'
                     'c: x -> opaque "aten.cumsum.default" [B, S]\nm: c -> opaque "aten.gt" [B, S] bool\n')
    assert spec.ok and not spec.diagnostics
    assert spec.bindings[-1].types[0].dtype == "bool"
    with pytest.raises(CodegenError, match="line 4"):
        api.codegen(spec)
    bad = api.check('dim B\ninput x: [B]\nc: x -> opaque [B]\n')
    assert [d.code for d in bad.diagnostics] == ["E110"]
