"""`shapelang codegen` and `shapelang run` on hostile input: no traceback whatever the
module does, bounded sizes, and output paths that never clobber the spec."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import run_cli

from shapelang.checker.checker import check_file
from shapelang.cli import main
from shapelang.codegen import runner

ROOT = Path(__file__).resolve().parent.parent
MHA = ROOT / "specs" / "pytorch" / "multihead_attention.shape"
SPEC = ("dim B, D\nexample B=2, D=4\nassume D % 2 == 0\ninput x: [B, D]\nparam w: [D, D]\n"
        "y: x @ w -> softmax -1\n")


def _process(*args, cwd=None) -> subprocess.CompletedProcess:
    """The command as a process of its own: what a shell sees on stdout (`-o -`)."""
    return subprocess.run([sys.executable, "-m", "shapelang", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False)


def _cli(*args, cwd=None):
    """The command in-process: its exit code, stdout and stderr (tests/cli_kit.py)."""
    return run_cli(*args, cwd=cwd)


@pytest.fixture
def spec_path(tmp_path) -> Path:
    path = tmp_path / "model.shape"
    path.write_text(SPEC)
    return path


# ------------------------------------------------------------------ 11: run never shows a traceback

def test_a_module_that_fails_to_build_is_a_finding(spec_path):
    pytest.importorskip("torch")
    spec = check_file(str(spec_path))
    rep = runner.run_spec(spec, {"B": 2, "D": 3})       # breaks `assume D % 2 == 0`: the config refuses it
    assert not rep.ok and rep.error.startswith("the module was not built: ValueError")
    assert "D % 2 == 0 is needed (D=3)" in rep.error
    assert "the module was not built, no step ran" in runner.report_text(rep)
    assert "MISMATCH" not in runner.report_text(rep)


@pytest.mark.parametrize("where", ["build", "make_inputs", "load_module"])
def test_run_reports_any_failure_of_the_module_without_a_traceback(where, spec_path, monkeypatch, capsys):
    pytest.importorskip("torch")

    def broken(*_a, **_k):
        raise RuntimeError("CUDA out of memory.\nException raised from frame #4 <unknown function>")

    monkeypatch.setattr(runner, where, broken)
    assert main(["run", str(spec_path)]) == 1
    out, err = capsys.readouterr()
    assert "the module was not built: RuntimeError: CUDA out of memory." in out
    assert "frame #4" not in out and "Traceback" not in out + err


def test_a_forward_failure_names_the_step(monkeypatch, capsys):
    pytest.importorskip("torch")
    real = runner.generate

    def broken(spec, *, instrument=False):
        gen = real(spec, instrument=instrument)
        gen.source = gen.source.replace("qh.transpose(1, 2)", "qh.transpose(1, 3)")
        return gen

    monkeypatch.setattr(runner, "generate", broken)
    assert main(["run", str(MHA)]) == 1
    text = capsys.readouterr().out
    # the wrong transpose runs; the matmul after it is the step that fails
    assert "forward failed at step %9 (line 31: att: qh @ (kh -> transpose -2 -1)): RuntimeError: " in text


def test_an_internal_error_of_codegen_is_reported_not_raised(spec_path, monkeypatch, capsys):
    from shapelang.codegen import generator

    def broken(*_a, **_k):
        raise KeyError("return")

    monkeypatch.setattr(generator, "generate", broken)
    monkeypatch.setattr(runner, "generate", broken)
    for command in ("codegen", "run"):
        assert main([command, str(spec_path)]) == 1
        err = capsys.readouterr().err
        assert "KeyError: 'return'" in err and "internal error" in err and "Traceback" not in err


@pytest.mark.parametrize("sizes, message", [
    ("D=99999999999999999999", "too large"),
    ("D=" + "9" * 5000, "too large"),
    ("D=200000", "param w has 40,000,000,000 elements"),
    ("B=99999999,D=4096", "more than `run` builds"),
])
def test_run_refuses_sizes_it_cannot_build(sizes, message, spec_path):
    pytest.importorskip("torch")
    proc = _cli("run", str(spec_path), "--sizes", sizes)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr + proc.stdout


# ------------------------------------------------------------------ 12: output paths

def test_output_to_a_directory_is_refused_without_suggesting_force(spec_path, tmp_path):
    for extra in ([], ["--force"]):
        proc = _cli("codegen", str(spec_path), "-o", str(tmp_path), *extra)
        assert proc.returncode == 2
        assert "is a directory" in proc.stderr and "--force" not in proc.stderr
        assert str(tmp_path / "model.py") in proc.stderr        # what to write instead
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.shape"]


def test_output_dash_is_stdout(spec_path, tmp_path):
    proc = _process("codegen", str(spec_path), "-o", "-", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == _process("codegen", str(spec_path)).stdout and proc.stdout.startswith('"""')
    assert not (tmp_path / "-").exists()


def test_output_never_overwrites_the_spec_under_any_spelling(spec_path, tmp_path):
    link = tmp_path / "link.py"
    link.symlink_to(spec_path)
    hard = tmp_path / "hard.py"
    os.link(spec_path, hard)
    other = tmp_path / "sub"
    other.mkdir()
    spellings = [str(spec_path), str(other / ".." / "model.shape"), "./model.shape", "model.shape",
                 str(link), str(hard)]
    for out in spellings:
        for extra in ([], ["--force"]):
            proc = _cli("codegen", "model.shape", "-o", out, *extra, cwd=tmp_path)
            assert proc.returncode == 2, (out, proc.stderr)
            assert "the spec itself" in proc.stderr and "--force" not in proc.stderr
    assert spec_path.read_text() == SPEC and link.is_symlink() and hard.read_text() == SPEC


def test_force_still_replaces_an_ordinary_file(spec_path, tmp_path):
    out = tmp_path / "model.py"
    out.write_text("old\n")
    assert _cli("codegen", str(spec_path), "-o", str(out)).returncode == 2
    assert _cli("codegen", str(spec_path), "-o", str(out), "--force").returncode == 0
    assert out.read_text().startswith('"""') and spec_path.read_text() == SPEC


def test_codegen_never_imports_torch(spec_path):
    code = ("import sys\nfrom shapelang.cli import main\nassert main(['codegen', sys.argv[1]]) == 0\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code, str(spec_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------ issue 24: sizes never locked silently

LOCKED = """dim B
dim C = 3
dim D = 1
example B=2
input x: [B, C, C]
p: x -> linear D
y: p -> transpose 1 2 -> view [B, C*D]
"""


def test_codegen_keeps_only_the_size_a_failing_rule_needs(tmp_path):
    """The view is legal only while D is 1 (it has no counterexample to name D): the config
    keeps D at 1 and frees C, and a refusal names the rule and says no module was built."""
    torch = pytest.importorskip("torch")
    (tmp_path / "m.shape").write_text(LOCKED)
    free_c = _cli("run", "m.shape", "--sizes", "C=4", cwd=tmp_path)
    assert free_c.returncode == 0, free_c.stdout
    assert torch.zeros(2, 4, 1).transpose(1, 2).view(2, 4).shape == (2, 4)   # torch agrees at C=4
    both = _cli("run", "m.shape", "--sizes", "C=4,D=16", cwd=tmp_path)
    assert both.returncode == 1
    assert "D == 1 is needed (D=16)" in both.stdout and "E106 on line 7" in both.stdout
    assert "the module was not built, no step ran" in both.stdout and "MISMATCH" not in both.stdout
    with pytest.raises(RuntimeError):   # and torch refuses the view at D=16
        torch.zeros(2, 4, 16).transpose(1, 2).view(2, 64)
