"""The command line as a learner meets it: exit codes, formats, no tracebacks."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MHA = str(ROOT / "specs" / "mha_self_attention.shape")


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "shapelang", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60, check=False)


def test_check_clean_spec_exits_0():
    r = run("check", MHA)
    assert r.returncode == 0 and "ok" in r.stdout and r.stderr == ""


def test_check_findings_exit_1_with_caret(tmp_path):
    bad = tmp_path / "bad.shape"
    bad.write_text("dim B, S, D, E\ninput X: [B, S, D]\ninput Y: [B, S, E]\nr: X + Y\n")
    r = run("check", str(bad))
    assert r.returncode == 1
    assert f"{bad}:4:4: error[E102]" in r.stdout
    # the operation marked `^`, each operand `-` with its shape, as rustc does
    assert "-^^^- [B, S, E]" in r.stdout and "Traceback" not in r.stdout + r.stderr


def test_missing_file_exits_2(tmp_path):
    r = run("check", str(tmp_path / "nope.shape"))
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr


def test_usage_error_exits_2():
    assert run("frobnicate").returncode == 2


def test_json_formats_follow_the_schema():
    out = json.loads(run("check", "--format", "json", MHA).stdout)
    assert out["ok"] is True and out["diagnostics"] == []
    trace = json.loads(run("trace", "--format", "json", MHA).stdout)
    assert trace["total"]["params_example"] == 4 * 512 * 512
    step = trace["bindings"][0]["steps"][0]
    assert {"op", "line", "column", "shape", "example"} <= set(step)


def test_check_and_trace_never_import_torch():
    code = (f"import sys; from shapelang.cli import main; main(['trace', {MHA!r}]); main(['check', {MHA!r}]);"
            "assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr


def test_binary_garbage_is_a_diagnostic_not_a_traceback(tmp_path):
    f = tmp_path / "junk.shape"
    f.write_bytes(b"\x00\xff\xfe dim \x80\n[[[[((((\n")
    r = run("check", str(f))
    assert r.returncode == 1 and "error[E001]" in r.stdout and "Traceback" not in r.stderr


def test_check_and_trace_help_describe_the_command():
    for command, says in (("check", "labels under the lines that caused it"),
                          ("trace", "step-by-step shape table")):
        r = run(command, "--help")
        assert r.returncode == 0
        text = " ".join(r.stdout.split())
        assert says in text and "Exit status: 0 clean" in text and "a .shape spec" in text
        assert "text: for people" in text


def test_output_cut_short_by_a_pipe_is_not_a_traceback(tmp_path):
    """`shapelang fmt --diff big.shape | head -3`: the reader leaves early; no traceback."""
    big = tmp_path / "big.shape"        # a diff of ~300 kB: more than a pipe holds
    big.write_text("".join(f"dim   X{i}     # a size that is long enough\n" for i in range(3000)))
    proc = subprocess.Popen([sys.executable, "-m", "shapelang", "fmt", "--diff", str(big)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.read(40)       # a few bytes, then the pipe closes
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert first.startswith(b"--- ")
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
