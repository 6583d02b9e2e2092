"""The trace and check output on a terminal: colour only where it belongs, tables that fit
the width, the compact trace, blocks in nesting order, both operands in "shape in", and
totals factored the way a textbook writes them (and still equal to the checker's)."""
from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import checked as shared_check
from tiers import examples, sample

from shapelang import check, render
from shapelang.cli import main
from shapelang.render import columns as layout
from shapelang.render import poly, table

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.shape"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MHA = str(ROOT / "specs" / "mha_self_attention.shape")
GPT2 = str(ROOT / "specs" / "gpt2_small.shape")

BROKEN = "dim B, S, D\ninput x: [B, S, D]\nmu: x -> mean -1\ny: x - mu\n"


def checked(path: str):
    return shared_check(path)   # once per test process


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "FORCE_COLOR")}
    env.update({"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", **extra})
    return env


def in_terminal(args, columns: int = 0, **env) -> str:
    """The CLI run with its output on a pseudo-terminal of `columns` (0: size unknown)."""
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "shapelang", *args], stdout=slave, stderr=slave,
                            stdin=subprocess.DEVNULL, env=_env(**env), cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:     # the terminal closes with the program
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def piped(args, **env) -> str:
    return subprocess.run([sys.executable, "-m", "shapelang", *args], check=False, capture_output=True, text=True,
                          env=_env(**env), cwd=ROOT, timeout=120).stdout


@pytest.fixture
def broken(tmp_path) -> str:
    path = tmp_path / "broken.shape"
    path.write_text(BROKEN)
    return str(path)


# ------------------------------------------------------------------ colour

@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_check_colours_severity_and_carets_on_a_terminal_only(broken):
    coloured = in_terminal(["check", broken])
    assert ANSI.search(coloured), coloured
    plain = piped(["check", broken])
    assert not ANSI.search(plain)
    # colour changes nothing but colour
    assert ANSI.sub("", coloured) == plain
    # the severity and the carets are what is coloured, in the same colour
    head = next(ln for ln in coloured.split("\n") if "E102" in ln)
    caret = next(ln for ln in coloured.split("\n") if "^" in ln)
    severity_style = re.search(r"(\x1b\[[0-9;]*m)error\[E102\]", head).group(1)
    assert re.search(re.escape(severity_style) + r"\^+", caret), caret


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
@pytest.mark.parametrize("env, args", [  # each a terminal of its own: one by default, the rest exhaustive
    ({"NO_COLOR": "1"}, []), pytest.param({"NO_COLOR": "true"}, [], marks=pytest.mark.exhaustive),
    pytest.param({}, ["--color", "never"], marks=pytest.mark.exhaustive),
    pytest.param({"TERM": "dumb"}, [], marks=pytest.mark.exhaustive)])
def test_no_colour_when_asked_not_to(broken, env, args):
    for cmd in (["check", broken], ["trace", MHA]):
        out = in_terminal(cmd + args, **env)
        assert out.strip() and not ANSI.search(out), (cmd, env, out[:300])


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_an_empty_no_color_does_not_turn_colour_off(broken):
    """no-color.org: NO_COLOR counts when it is set to a non-empty value."""
    assert ANSI.search(in_terminal(["check", broken], NO_COLOR=""))


def test_color_always_colours_a_pipe_and_never_json(broken):
    assert ANSI.search(piped(["check", "--color", "always", broken]))
    assert ANSI.search(piped(["trace", "--color", "always", MHA]))
    out = piped(["trace", "--format", "json", "--color", "always", MHA])
    assert not ANSI.search(out) and out.startswith("{")


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_trace_colours_the_axes_a_step_changes():
    out = in_terminal(["trace", "--width", "0", MHA])
    plain = piped(["trace", "--width", "0", MHA])
    assert ANSI.sub("", out) == plain
    magenta = "\x1b[1;35m"
    row = next(ln for ln in out.split("\n") if ANSI.sub("", ln).startswith("Qh ")
               and "transpose 1 2" in ANSI.sub("", ln))
    # [B, S, H, Dh] -> [B, H, S, Dh]: H and S moved, B and Dh did not
    coloured = re.findall(re.escape(magenta) + r"([^\x1b]+)\x1b\[0m", row)
    assert coloured[:2] == ["H", "S"] and coloured[2:4] == ["8", "4"], row


def test_plain_check_and_trace_do_not_import_rich():
    code = (f"import sys; from shapelang.cli import main; main(['check', {MHA!r}]); "
            f"main(['trace', {MHA!r}]); assert 'rich' not in sys.modules, 'rich imported'")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=_env(),
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------ width

def _widest(text: str) -> int:
    return max(len(line) for line in text.split("\n"))


@pytest.mark.parametrize("columns", [80, pytest.param(120, marks=pytest.mark.exhaustive)])
def test_every_trace_of_the_spec_library_fits_columns(columns, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["trace", *map(str, SPECS)]) == 0
    out = capsys.readouterr().out
    assert out.count("trace of ") == len(SPECS)
    too_long = [ln for ln in out.split("\n") if len(ln) > columns]
    assert not too_long, "\n".join(too_long)


@pytest.mark.parametrize("spec", sample(SPECS, every=6))
def test_compact_and_provenance_traces_fit_too(spec):
    got = checked(str(spec))
    for width in (40, 64, 80):
        for options in ({"example_only": True}, {"provenance": True}):
            out = render.trace_text(got, width=width, **options)
            assert _widest(out) <= width, (width, options, out)


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_trace_fits_the_terminal_it_prints_on():
    out = ANSI.sub("", in_terminal(["trace", GPT2], columns=72))
    assert "total parameters" in out and _widest(out) <= 72
    wide = ANSI.sub("", in_terminal(["trace", GPT2], columns=250))
    assert _widest(wide) > 120    # nothing left out when there is room
    assert "left out" not in wide


def test_a_pipe_gets_100_columns_and_width_0_no_limit():
    assert _widest(piped(["trace", GPT2])) <= table.DEFAULT_WIDTH
    full = piped(["trace", "--width", "0", GPT2])
    assert _widest(full) > 150 and "left out" not in full
    header = next(ln for ln in full.split("\n") if ln.startswith("binding"))
    assert header.split("  ")[0] == "binding" and "shape in" in header and "flops" in header


def test_columns_are_left_out_in_the_documented_order_and_said_so():
    got = checked(GPT2)
    seen = []
    for width in range(200, 39, -7):
        out = render.trace_text(got, width=width)
        header = next(ln for ln in out.split("\n") if ln.startswith("binding"))
        gone = [k for k in table.DROP if table.NAMES[k] not in header]
        assert gone == table.DROP[:len(gone)], (width, header)
        note = re.search(r"\(([^()]*) left out to fit", " ".join(out.split()))
        assert (note.group(1).split(", ") if note else []) == [table.NAMES[k] for k in gone]
        for kept in ("binding", "operation", "shape out"):
            assert kept in header
        seen.append(len(gone))
    assert seen == sorted(seen) and seen[0] == 0 and seen[-1] >= 3


def test_long_names_and_long_pipelines_wrap_inside_the_width():
    dims = ["BatchOfSentences", "TokensInEachSentence", "ModelWidthOfEveryToken", "AttentionHeads"]
    text = (f"dim {', '.join(dims)}\nassume ModelWidthOfEveryToken % AttentionHeads == 0\n"
            "example BatchOfSentences=2, TokensInEachSentence=3, ModelWidthOfEveryToken=8, AttentionHeads=2\n"
            f"input x: [{', '.join(dims[:3])}]\n"
            "y: x -> " + " -> ".join(["linear ModelWidthOfEveryToken", "relu"] * 4)
            + " -> view [BatchOfSentences, TokensInEachSentence, AttentionHeads, "
              "ModelWidthOfEveryToken/AttentionHeads] -> transpose 1 2\n")
    got = check(text)
    assert got.ok, render.check_text(got)
    for width in (40, 80, 120):
        out = render.trace_text(got, width=width)
        assert _widest(out) <= width, out
    # with room for the longest word, no name is cut
    out = render.trace_text(got, width=120)
    assert "[BatchOfSentences, AttentionHeads, TokensInEachSentence, ModelWidthOfEveryToken/AttentionHeads]" \
        in " ".join(out.split()).replace("[ ", "[")
    assert all(out.count(name) >= 2 for name in dims)


def test_a_huge_count_is_shortened_not_printed_in_full():
    got = check("dim B\ndim N = 2**16\ndim M = N**8\nexample B=1\ninput x: [B, M]\nparam W: [M, M]\n"
                "y: x @ W\n")
    assert got.ok, render.check_text(got)
    out = render.trace_text(got, width=80)
    assert _widest(out) <= 80 and "(78 digits)" in out     # M² = 2**256
    assert str(2 ** 128) not in out and "3.402…e38" in out
    assert "example out" in out   # shortened numbers leave room for the example


# ------------------------------------------------------------------ compact trace

def test_example_only_shows_one_column_of_example_shapes():
    out = piped(["trace", "--example-only", MHA])
    lines = out.split("\n")
    header = next(ln for ln in lines if ln.startswith("binding"))
    assert header.split() == ["binding", "line", "operation", "example", "shape"]
    start = header.index("example")
    rows = [ln[start:] for ln in lines[lines.index(header) + 2:] if ln.strip() and not ln.startswith("total")]
    assert "[1, 8, 4, 64]" in rows and "[1, 8, 4, 4]" in rows
    assert all(re.fullmatch(r"\[[\d, ]+\]", r) for r in rows), rows
    assert "total parameters: 1,048,576" in out and "·" not in out


def test_example_only_without_an_example_shows_the_symbolic_shapes():
    out = render.trace_text(check("dim B, D\ninput x: [B, D]\ny: x -> linear 2*D\n"), example_only=True)
    header = next(ln for ln in out.split("\n") if ln.startswith("binding"))
    assert header.split()[-1] == "shape" and "[B, 2*D]" in out


# ------------------------------------------------------------------ blocks, shape in

NESTED = """dim B, S, D
example B=2, S=3, D=4
input x: [B, S, D]

block Deep(t: [B, S, D]):
  return t -> relu
end

block Inner2(t: [B, S, D]):
  return t -> gelu
end

block Inner1(t: [B, S, D]):
  return t -> Deep -> linear D
end

block Outer(t: [B, S, D]):
  a: t -> Inner1
  return a -> Inner2 -> Inner1
end

block Other(t: [B, S, D]):
  return t -> tanh
end

y: x -> Outer -> Other -> Deep
"""


def test_blocks_follow_their_caller_depth_first():
    got = check(NESTED)
    assert got.ok, render.check_text(got)
    out = render.trace_text(got, width=0)
    heads = [ln.split("(")[0].split()[1] for ln in out.split("\n") if ln.startswith("block ")]
    assert heads == ["Outer", "Inner1", "Deep", "Inner2", "Other"]
    assert "block Deep(t: [B, S, D]), called in Inner1 on line" in out


def _row(out: str, op: str) -> list[str]:
    """The cells of the first row whose operation is `op`, cut where the header's columns start."""
    lines = out.split("\n")
    header = next(ln for ln in lines if ln.startswith("binding"))
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", header)]
    line = next(ln for ln in lines[lines.index(header):] if f"  {op}  " in ln)
    return [line[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]


def test_shape_in_shows_block_inputs_and_both_operands():
    out = render.trace_text(checked(GPT2), width=0)
    block = out[out.index("block GPT2Block"):]
    assert _row(block, "layernorm eps=1e-5")[3] == "[B, S, D]"  # ln_1: x -> layernorm, x the block's input
    assert _row(block, "x + attn__c_proj")[3] == "[B, S, D] + [B, S, D]"  # x is the block's input
    assert _row(block, "x2 + mlp__c_proj")[3] == "[B, S, D] + [B, S, D]"
    assert _row(block, "att @ vh")[3] == "[B, H, S, S] @ [B, H, S, Dh]"
    assert _row(out, "tok + pos")[3] == "[B, S, D] + [S, D]"
    rows = block.split("\n")[4:]
    header = block.split("\n")[2]
    start = header.index("shape in")
    assert all(ln[start:start + 1].strip() for ln in rows if ln.strip() and "param" not in ln[:40]
               and not ln.startswith(" " * (start - 1))), "a step without its input shape"


def test_json_is_unchanged_by_the_text_layout():
    out = render.spec_json(checked(GPT2), True)
    # the learner's notation (product order, `D*D`) may change the spelling, never the value
    dims = ["Ctx", "D", "L", "V"]
    got = read_back(out["total"]["params"], dims)
    assert sp.expand(got - read_back("Ctx*D + 12*D**2*L + 13*D*L + D*V + 2*D", dims)) == 0
    assert "·" not in out["total"]["params"] and "²" not in out["total"]["params"]
    assert out["blocks"][0]["bindings"][0]["steps"][0]["shape_in"] == ["B", "S", "D"]


# ------------------------------------------------------------------ totals

SUPER = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")


def read_back(text: str, dims) -> sp.Expr:
    """Our own formula read back by sympy (test only): `·` is `*`, superscripts powers."""
    from sympy.parsing.sympy_parser import parse_expr

    text = re.sub(r"([⁰¹²³⁴⁵⁶⁷⁸⁹]+)", lambda m: "**" + m.group(1).translate(SUPER), text)
    names = {d: sp.Symbol(d, positive=True, integer=True) for d in dims}
    return parse_expr(text.replace("·", "*"), local_dict=names)


def _formulas(out: str) -> dict:
    found = {}
    for line in out.split("\n"):
        m = re.match(r"\s*(total parameters|total multiply-add FLOPs \(forward\)|parameters): (.*) = ", line)
        if m:
            found.setdefault(m.group(1), []).append(m.group(2))
    return found


@pytest.mark.parametrize("spec", sample(SPECS, every=6))
def test_factored_totals_equal_the_checker_totals(spec):
    got = checked(str(spec))
    found = _formulas(render.trace_text(got, width=0))
    pairs = [(found["total parameters"][0], got.total_params)]
    if "total multiply-add FLOPs (forward)" in found:
        pairs.append((found["total multiply-add FLOPs (forward)"][0], got.total_flops))
    else:   # work that depends on the values (a mixture of experts) has no example number
        assert got.total_flops.free_symbols & set(got.prover.unbacked)
    blocks = [ir for ir, _, _ in table._Trace(got, False, False).blocks()]
    pairs += list(zip(found.get("parameters", []), [ir.total_params for ir in blocks if ir.total_params != 0]))
    for text, want in pairs:
        assert "**" not in text and "*" not in text
        assert sp.expand(read_back(text, got.dims) - want) == 0, (text, want)


def test_gpt2_totals_read_as_a_textbook_writes_them():
    got = checked(GPT2)
    found = _formulas(render.trace_text(got, width=0))
    params, flops = found["total parameters"][0], found["total multiply-add FLOPs (forward)"][0]
    block = found["parameters"][0]
    # L times one block's parameters, the embeddings after
    assert params.startswith(f"L·({block})"), (params, block)
    # the tokens times the work per token
    assert flops.startswith("B·S·(")
    for text, e in ((params, got.total_params), (flops, got.total_flops)):
        flat = poly.textbook(e, got.dims, ["L"], grouped=False)
        assert len(text) < len(flat) and len(text) < len(str(e)), (text, flat, e)
        assert sp.expand(read_back(flat, got.dims) - e) == 0


def test_totals_without_structure_stay_polynomials_in_the_learners_order():
    got = check("dim B, S, D\nexample B=1, S=2, D=3\ninput x: [B, S, D]\nparam g: [D]\ny: x -> linear D\n")
    found = _formulas(render.trace_text(got, width=0))
    assert found["total parameters"] == ["D² + 2·D"]


def test_non_polynomial_totals_fall_back_to_the_expanded_form():
    x = sp.Symbol("D", positive=True, integer=True)
    assert poly.textbook(sp.floor(x / 2) * x, ["D"]) is None


@pytest.mark.parametrize("seed", range(40))
def test_textbook_form_of_random_polynomials_is_the_same_polynomial(seed):
    import random

    rnd = random.Random(seed)
    names = ["B", "S", "D", "H", "L", "V"]
    syms = {n: sp.Symbol(n, positive=True, integer=True) for n in names}
    e = sp.Integer(0)
    for _ in range(rnd.randint(1, 8)):
        term = sp.Rational(rnd.choice([1, 2, 3, 12, -1, -4]), rnd.choice([1, 1, 1, 2]))
        for n in rnd.sample(names, rnd.randint(0, 4)):
            term *= syms[n] ** rnd.choice([1, 1, 2, 3, -1])
        e += term
    text = poly.textbook(e, names, counts=["L"], value=lambda x: float(x.subs({s: 3 for s in syms.values()})))
    assert text is not None
    assert sp.simplify(read_back(text, names) - e) == 0, (e, text)


def test_the_terms_beside_a_layer_count_keep_their_common_factor():
    # ViT's FLOPs: the layers, then the patch embedding and the head, which share D
    names = ["B", "C", "Img", "D", "H", "K", "L", "N"]
    B, C, Img, D, H, K, L, N = (sp.Symbol(n, positive=True, integer=True) for n in names)
    e = B * (4 * L * N * D**2 + 2 * L * H * N**2 + C * D * Img**2 + D * K)
    text = poly.textbook(e, names, counts=["L"])
    assert sp.expand(read_back(text, names) - e) == 0, text
    assert "D·(C·Img² + K)" in text


# ------------------------------------------------------------------ layout, any text

TEXT = st.text(alphabet="ab[], |@->(x)·²", max_size=80)


@settings(max_examples=examples(200), deadline=None)
@given(TEXT, st.integers(1, 60))
def test_wrapped_lines_fit_and_keep_every_character(text, width):
    ranges = layout.wrap(text, width)
    assert all(e - s <= width for s, e in ranges)
    assert "".join(text[s:e] for s, e in ranges).replace(" ", "") == text.replace(" ", "")
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.lists(TEXT, min_size=5, max_size=5), min_size=1, max_size=6), st.integers(40, 160))
def test_any_table_fits_any_width(cells, width):
    cols = [layout.Column(f"c{k}", f"column {k}") for k in range(5)]
    rows = [{f"c{k}": layout.Cell(t) for k, t in enumerate(r)} for r in cells]
    (lines,), dropped = layout.fit_tables([rows], cols, width, ["c4", "c3"], ["c0", "c1", "c2"])
    assert all(len(ln.text) <= width for ln in lines), [ln.text for ln in lines]
    assert dropped in ([], ["c4"], ["c4", "c3"])


def test_without_rich_colour_falls_back_to_plain_text(broken):
    """rich is the optional `color` extra: without it `--color always` prints the same text
    plain, with a note on how to get colour, and no traceback."""
    code = ("import sys; sys.modules['rich'] = None; from shapelang.cli import main; "
            f"raise SystemExit(main(['check', '--color', 'always', {str(broken)!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert not ANSI.search(r.stdout) and "error[E102]" in r.stdout
    assert "pip install 'shapelang[color]'" in r.stderr
    assert r.stdout == piped(["check", broken])
