"""Fuzzing: random and mutated spec text never crashes or hangs the checker.

Seeds are the spec library (specs/*.shape, read when the tests run) plus a few
inline specs. Each case applies 1..4 random mutations (characters, tokens and
lines deleted, duplicated or swapped; grammar tokens, `?`, huge numbers, deep
brackets, unicode, NUL bytes and CRLF inserted) and asserts that `check_text`
returns, that every diagnostic points inside the text, that rendering works,
and that no case makes the prover work without bound (a count of the conditions
it decides and the sizes it tries, not seconds: a busy machine stretches
seconds; an alarm still aborts a real hang). The CLI is run on a few mutated
files. All randomness uses fixed seeds. The default tier runs the first chunk
of mutated cases and a fifth of the token soup; `--exhaustive` runs the rest.
"""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import sample, sweep
from work import hard_limit

from shapelang import render
from shapelang.checker.checker import check_text
from shapelang.syntax.diagnostics import CODES

ROOT = Path(__file__).resolve().parent.parent
MAX_WORK = 5000        # prover decisions and sizes tried for one case; the library's largest spec needs 65
HARD_LIMIT = 60        # seconds; an alarm that aborts a case that really hangs (never hit by slowness)
N_CHUNKS, PER_CHUNK = 8, 250   # 2,000 mutated cases
N_RANDOM = 300                 # plus token soup
AVOID_KNOWN_BUGS = False       # the hang and crash it skipped are fixed; kept for the next ones
SKIPPED: list = []

INLINE_SEEDS = [
    """dim B, S, D, H
dim Dk = D / H
assume D % H == 0
assume 1 <= S <= 1024
example B=2, S=4, D=8, H=2
input X: [B, S, D]
param W_qkv: [D, 3*D]
q, k, v: X @ W_qkv -> chunk 3 -1
Q: q -> view [B, S, H, Dk] -> transpose 1 2
K: k -> rearrange "b s (h d) -> b h s d" h=H
V: v -> reshape [B, S, H, -1] -> permute 0 2 1 3
scores: Q @ (K -> transpose -2 -1) -> scale 1/sqrt(Dk) -> mask causal -> softmax -1
out: scores @ V -> transpose 1 2 -> contiguous -> view [B, S, D]
expect out: [B, S, D]
""",
    """dim B, S, D, V = 50257
example B=1, S=3, D=4
input ids: [B, S] int
buffer M: [B, 1, 1, S] bool
block Layer(x: [B, S, D]):
  param W: [D, D]
  h: x -> layernorm -> linear 4*D -> gelu -> linear D bias=false
  expect h: [B, S, D]
  return x + h
end
x: ids -> embed V D
y: x -> stack 2 Layer -> rmsnorm
z: Layer(y)
  -> sum -1 keepdim
  -> expand [B, S, D]
w1, w2: concat(-1, z, y) -> split [D, D] -1
""",
    """dim N, E, I, lambda, d_model
example N=2, E=3, I=1, lambda=4, d_model=6
input A: [N, E, lambda]
input B2: [lambda, d_model]
y: A -> einsum "nel,ld->nde" B2 -> select 0 0 -> slice 0 0 d_model
t: (A -> transpose 0 -1) * 2 + lambda
expect y: [?, E]
a, b: A -> split 1 0 -> ?op 1
""",
    """dim S, N, E, I, Q, lambda
example S=2, N=3
input X: [S, N, (E + 1), Q ** 2, lambda // 2, min(S, N)]
y: X -> flatten 1 -> unsqueeze 0 -> squeeze 0 -> repeat_interleave 2 1
""",
]

TOKENS = [
    "dim", "assume", "example", "input", "param", "buffer", "expect", "block", "return", "end",
    "->", ":", ",", "[", "]", "(", ")", "=", "==", "<=", ">=", "!=", "<", ">", "+", "-", "*", "/",
    "//", "%", "**", "@", "?", "?x", "#", "\n", "\n->", "  ", "\t", "view", "reshape", "transpose",
    "permute", "unsqueeze", "squeeze", "flatten", "expand", "repeat_interleave", "softmax", "scale",
    "mask", "causal", "contiguous", "relu", "layernorm", "rmsnorm", "linear", "embed", "concat",
    "split", "chunk", "sum", "mean", "keepdim", "select", "slice", "einsum", "rearrange", "stack",
    "sqrt", "min", "max", "bias=false", "h=H", "int", "bool", "float", "B", "S", "D", "H", "N",
    "E", "I", "Q", "lambda", "d_model", "X", "Q'", "0", "1", "-1", "-2", "3", "7", "0.5", "1e3",
    '"b s d -> b d s"', '"ij,jk->ik"', '"(a b) c -> a b c"', '"..."', '"', "[B, S, D]", "[]",
    "99999999999999999999", "18446744073709551617", "123456789012345678", "2**64", "10**16",
    "1e309", "0.0", "-0", "(D + 1)", "D/0", "D % 0", "D ** 17", "D ** -1", "sqrt(D)",
]
UNICODE = ["é", "λ", "∀", "\u200b", "\ufeff", "\u202e", "😀", "ß", "Ω", "\u00a0", "\u2028", "\x85",
           "\uffff", "\ud7ff", "中", "𝔇"]


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s+|\w+'?|->|\*\*|//|==|<=|>=|!=|\"[^\"\n]*\"|.", text, re.DOTALL)


def mutate(text: str, rng: random.Random) -> str:
    kind = rng.randrange(16)
    n = len(text)
    pos = rng.randint(0, n)
    if kind == 0 and n:       # delete characters
        return text[:pos] + text[pos + rng.randint(1, 3):]
    if kind == 1 and n:       # duplicate characters
        return text[:pos] + text[pos:pos + rng.randint(1, 8)] + text[pos:]
    if kind == 2 and n > 1:   # swap two characters
        i, j = sorted(rng.sample(range(n), 2))
        return text[:i] + text[j] + text[i + 1:j] + text[i] + text[j + 1:]
    if kind in (3, 4, 5):     # token edits
        toks = _tokens(text)
        if not toks:
            return rng.choice(TOKENS)
        i = rng.randrange(len(toks))
        if kind == 3:
            del toks[i]
        elif kind == 4:
            toks.insert(i, toks[i])
        else:
            j = rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
        return "".join(toks)
    if kind in (6, 7, 8):     # line edits
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        if kind == 6:
            del lines[i]
        elif kind == 7:
            lines.insert(i, lines[i])
        else:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    if kind == 9:             # a token from the grammar, maybe padded with spaces
        tok = rng.choice(TOKENS)
        pad = rng.choice(["", " "])
        return text[:pos] + pad + tok + pad + text[pos:]
    if kind == 10:            # blanks
        return text[:pos] + rng.choice(["?", "?", "?k", " ? "]) + text[pos:]
    if kind == 11:            # huge numbers, replacing a number or inserted
        huge = rng.choice(["9" * rng.randint(10, 400), "18446744073709551616", "1" + "0" * 17,
                           "4294967297", "1e99999", "0" * 50 + "1"])
        nums = list(re.finditer(r"\d+", text))
        if nums and rng.random() < 0.7:
            m = rng.choice(nums)
            return text[:m.start()] + huge + text[m.end():]
        return text[:pos] + huge + text[pos:]
    if kind == 12:            # deep brackets
        depth = rng.choice([10, 63, 64, 65, 200, 2000])
        o, c = rng.choice([("(", ")"), ("[", "]"), ("(", "]"), ("[", "")])
        inner = rng.choice(["D", "", "X", "1"])
        return text[:pos] + o * depth + inner + c * depth + text[pos:]
    if kind == 13:            # unicode
        return text[:pos] + "".join(rng.choice(UNICODE) for _ in range(rng.randint(1, 3))) + text[pos:]
    if kind == 14:            # NUL bytes and other control characters
        return text[:pos] + rng.choice(["\x00", "\x00\x00", "\x1b", "\x7f", "\x0c", "\x0b"]) + text[pos:]
    # line endings
    r = rng.random()
    if r < 0.4:
        return text.replace("\n", "\r\n")
    if r < 0.7:
        return text[:pos] + "\r" + text[pos:]
    return text[:pos] + "\r\n->" + text[pos:]


def seeds() -> list[tuple[str, str]]:
    out = [(p.name, p.read_text(encoding="utf-8", errors="replace"))
           for p in sorted((ROOT / "specs").glob("*.shape"))]
    out += [(f"inline{i}", s) for i, s in enumerate(INLINE_SEEDS)]
    return out


def known_hang(text: str) -> bool:
    """An example size of 7+ digits hangs the divisor hint (test_bug_huge_example_hangs)."""
    return AVOID_KNOWN_BUGS and re.search(r"example[^\n]*?\d{7}", text) is not None


def known_crash(text: str) -> bool:
    """`assume H == 0` then `D % H` (test_bug_assume_zero_then_modulo_crashes)."""
    if not AVOID_KNOWN_BUGS:
        return False
    for line in re.split(r"\r?\n|\r", text):
        body = line.split("#")[0].strip()
        if body.startswith("assume"):
            parts = [p.strip() for p in re.split(r"(==|!=|<=|>=|<|>)", body[len("assume"):])]
            for a, cmp, b in zip(parts[0::2], parts[1::2], parts[2::2]):
                if cmp == "==" and "0" in (a, b) and re.fullmatch(r"[A-Za-z_]\w*'?", b if a == "0" else a):
                    return True
    return False


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 2000 else repr(text[:2000]) + f" ... ({len(text)} characters)"


def check_case(text: str, label: str, *, full_render: bool) -> None:
    if known_hang(text):
        SKIPPED.append(label)
        return
    with hard_limit(HARD_LIMIT):
        try:
            spec = check_text(text, "fuzz.shape")
        except ZeroDivisionError as err:
            if known_crash(text):
                SKIPPED.append(label)
                return
            raise AssertionError(f"check_text raised ZeroDivisionError: {err}\n"
                                 f"case {label}:\n{_shown(text)}") from err
        except Exception as err:
            raise AssertionError(f"check_text raised {type(err).__name__}: {err}\n"
                                 f"case {label}:\n{_shown(text)}") from err
        work = spec.prover.work if spec.prover is not None else 0
        assert work <= MAX_WORK, f"case {label} made the prover work {work} times:\n{_shown(text)}"
        lines = text.split("\n")
        for d in spec.diagnostics:
            where = f"{d.code} {d.span} {d.message!r} in case {label}:\n{_shown(text)}"
            assert d.code in CODES, where
            assert isinstance(d.message, str) and d.message, where
            assert d.severity in ("error", "warning"), where
            assert 1 <= d.span.line <= len(lines), "line outside the text: " + where
            line = lines[d.span.line - 1]
            assert 1 <= d.span.column <= len(line) + 1, "column outside the line: " + where
            assert d.span.end_line >= d.span.line, where
            if d.counterexample is not None:
                assert all(isinstance(v, int) for v in d.counterexample.values()), where
        try:
            render.check_text(spec)
            if full_render:
                json.dumps(render.spec_json(spec, True))
                render.trace_text(spec)
        except Exception as err:
            raise AssertionError(f"rendering raised {type(err).__name__}: {err}\n"
                                 f"case {label}:\n{_shown(text)}") from err
    assert spec.ok or spec.errors() or spec.diagnostics, label


_DECL = re.compile(r"\s*(dim|assume|example|input|param|buffer)\b")


def excerpt(text: str, rng: random.Random) -> str:
    """The declarations plus a window of the other lines, comment lines dropped.

    The library specs are mostly comments; an excerpt puts the mutations on
    code and keeps each case quick to check.
    """
    lines = [ln for ln in text.split("\n") if not ln.lstrip().startswith("#")]
    decls = [ln for ln in lines if _DECL.match(ln)]
    rest = [ln for ln in lines if not _DECL.match(ln)]
    i = rng.randrange(max(1, len(rest)))
    return "\n".join(decls + rest[i:i + rng.randint(3, 12)]) + "\n"


def mutated_cases(chunk: int, count: int):
    rng = random.Random(1000 + chunk)
    pool = seeds()
    for i in range(count):
        name, text = pool[(chunk * count + i) % len(pool)]
        if rng.random() < 0.6:
            text, name = excerpt(text, rng), name + "[excerpt]"
        for _ in range(rng.choice([1, 1, 2, 3, 4])):
            text = mutate(text, rng)
        yield f"{name}#{chunk}.{i}", text


@pytest.mark.parametrize("chunk", sample(range(N_CHUNKS), every=N_CHUNKS, always=()))
def test_mutated_specs_never_crash(chunk):
    for k, (label, text) in enumerate(mutated_cases(chunk, PER_CHUNK)):
        check_case(text, label, full_render=k % 4 == 0)


@pytest.mark.parametrize("count", sweep(N_RANDOM, N_RANDOM // 5))
def test_token_soup_never_crashes(count):
    rng = random.Random(7)
    for i in range(count):
        n = rng.randint(1, 60)
        parts = [rng.choice(TOKENS + UNICODE + ["\n"] * 8) for _ in range(n)]
        text = " ".join(parts) if rng.random() < 0.5 else "".join(parts)
        check_case(text, f"soup{i}", full_render=i % 4 == 0)


def test_seeds_never_crash():
    """The unmutated seeds (whether the library is clean is tested elsewhere)."""
    for name, text in seeds():
        check_case(text, name, full_render=True)
    for i in (0, 1):   # the inline seeds that are meant to be valid
        spec = check_text(INLINE_SEEDS[i])
        assert spec.ok, [(d.code, d.message) for d in spec.errors()]


def test_bounds():
    """Inputs at and past the parser's limits are refused with a diagnostic."""
    cases = {
        "many lines": "dim N\n" + "\n" * 6000,
        "big file": "# " + "x" * (300 * 1024) + "\n",
        "deep": "dim N\ny: " + "(" * 5000 + "N" + ")" * 5000 + "\n",
        "long number": "dim N = " + "9" * 5000 + "\n",
        "many dims": "dim " + ", ".join(f"d{i}" for i in range(3000)) + "\n",
        "long pipeline": "dim N\ninput X: [N]\ny: X" + " -> relu" * 3000 + "\n",
        "wide shape": "dim N\ninput X: [" + ", ".join(["N"] * 500) + "]\ny: X -> sum 0\n",
        "long assume chain": "dim N\nassume " + " <= ".join(["N"] * 500) + "\n",
        "big exponent": "dim N = 2 ** 16 ** 16\n",
        "only NULs": "\x00" * 1000,
        "only CR": "\r" * 1000,
    }
    for label, text in cases.items():
        check_case(text, label, full_render=False)


def _run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "shapelang", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120, check=False)


def test_cli_on_mutated_files(tmp_path):
    rng = random.Random(99)
    files = []
    pool = seeds()
    for i in range(12):
        text = pool[i % len(pool)][1]
        while text == pool[i % len(pool)][1] or known_hang(text):
            text = pool[i % len(pool)][1]
            for _ in range(rng.randint(1, 3)):
                text = mutate(text, rng)
        path = tmp_path / f"m{i}.shape"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        files.append(str(path))
    binary = tmp_path / "binary.shape"
    binary.write_bytes(bytes(range(256)) * 4 + b"\xff\xfe\x00dim N\n")
    files.append(str(binary))
    runs = [(("check", *files[:7], str(tmp_path / "missing.shape")), {2}),   # unreadable: 2
            (("check", "--format", "json", *files[7:]), {0, 1}),
            (("trace", "--format", "json", *files[2:8]), {0, 1}),
            (("check",), {2})]                                                # usage error
    for args, codes in runs:
        proc = _run_cli(*args, cwd=tmp_path)
        assert proc.returncode in codes, (args, proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        if "--format" in args and proc.returncode in (0, 1):
            # one JSON document per file, concatenated
            decoder, text, pos, n = json.JSONDecoder(), proc.stdout, 0, 0
            while pos < len(text.strip()):
                obj, end = decoder.raw_decode(text, pos)
                assert "diagnostics" in obj
                pos, n = end + 1, n + 1
            assert n == len(args) - 3, (args, n)


# Three cases that once hung or took minutes. Each is bounded by its work (the prover's
# count, the parser's limits), with an alarm far above that aborts a real hang.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the alarm
def test_bug_huge_example_hangs():
    text = "dim D, H\nassume D % H == 0\nexample D=512, H=100000000000000000\n"
    with hard_limit(HARD_LIMIT):
        spec = check_text(text)
    assert [d.code for d in spec.errors()] == ["E108"]
    assert spec.prover.work <= 10     # refused before any search over the huge size


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the alarm
def test_bug_positivity_proof_is_exponential():
    n = 14
    names = ", ".join(f"d{i}" for i in range(n))
    text = f"dim {names}\ninput X: [{names}]\ny: X -> reshape [-1]\n"
    with hard_limit(HARD_LIMIT):
        spec = check_text(text)
    assert spec.ok
    assert spec.prover.work <= n      # one decision for the product, not one per subset of its factors


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the alarm
def test_bug_huge_rank_is_slow():
    text = "dim N\ninput X: [" + ", ".join(["N"] * 20000) + "]\ny: X -> sum 0\n"
    with hard_limit(HARD_LIMIT):
        spec = check_text(text)
    assert [d.code for d in spec.errors()] == ["E004"]   # refused unread: the line is too long
    assert spec.prover.work == 0


@pytest.mark.parametrize("text", ["dim D, H\nassume H == 0\nassume D % H == 0\n",
                                  "dim D, H\nassume D % H == H == 0\n",
                                  "dim D, H\nassume H == 0\ninput X: [D % H]\n"])
def test_bug_assume_zero_then_modulo_crashes(text):
    spec = check_text(text)
    assert not spec.ok   # H == 0 contradicts `dim H` being a positive size
