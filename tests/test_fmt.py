"""`shapelang fmt`: the canonical layout keeps every token, comment and finding."""
from __future__ import annotations

import functools
import itertools
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from tiers import sample

from shapelang import api
from shapelang.fmt import FormatError, format_text
from shapelang.render import spec_json

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted({p for d in ("specs", "exercises", "tests/provenance")
                 for p in (ROOT / d).rglob("*.shape")})


@functools.cache
def _grammar():
    import lark

    from shapelang.syntax.parser import grammar_text

    return lark.Lark(grammar_text(), parser="lalr")


def _comments(text: str) -> Counter:
    found = Counter()
    for tok in _grammar().lex(text if text.endswith("\n") else text + "\n", dont_ignore=True):
        if tok.type in ("COMMENT", "_NL", "CONTINUATION"):
            found.update(c.rstrip() for c in re.findall(r"#[^\n]*", tok.value))
    return found


def _findings_and_shapes(text: str, path: str):
    spec = api.check(text, path)
    out = spec_json(spec, True)
    codes = [(d["code"], d["line"]) for d in out["diagnostics"]]
    shapes = [[(s["op"], s["shape"], s["line"]) for s in b["steps"]] for b in out["bindings"]]
    shapes += [[(s["op"], s["shape"]) for b in blk["bindings"] for s in b["steps"]]
               for blk in out["blocks"]]
    return codes, shapes


def test_the_corpus_is_there():
    assert len(CORPUS) > 100
    assert any(p.parent.name == "solutions" for p in CORPUS)


@pytest.mark.parametrize("path", sample(CORPUS, every=8, ids=lambda p: p.relative_to(ROOT).as_posix()))
def test_format_keeps_meaning(path):
    text = path.read_text()
    rel = path.relative_to(ROOT).as_posix()
    once = format_text(text, rel)
    assert format_text(once, rel) == once                 # idempotent
    assert _comments(once) == _comments(text)              # comments, directives included
    # the lines do not move, so findings keep their lines; steps keep their shapes
    if once != text:
        assert _findings_and_shapes(once, rel) == _findings_and_shapes(text, rel)
    assert re.findall(r"\?\w*", once) == re.findall(r"\?\w*", text)   # exercise blanks
    assert not re.search(r"[ \t]$", once, re.MULTILINE)


MESSY = """\
# header comment   
dim B   # batch
dim D=8     # width, as written
example B=2 ,D=8

input x :[ B,D ]
param W: [D , 2*D]
block Mlp( x:[B, D] ,  y: [B,D]):
      # inside the block
      h : x   ->  linear  2*D
        ->gelu   # a continuation
   ->   linear D
      return h+y
end
out: x->Mlp(x)   -> softmax -1
z: x -> ?blank


"""

CANONICAL = """\
# header comment
dim B          # batch
dim D=8        # width, as written
example B=2, D=8

input x: [B, D]
param W: [D, 2*D]
block Mlp(x: [B, D], y: [B, D]):
  # inside the block
  h: x -> linear 2*D
    -> gelu    # a continuation
    -> linear D
  return h+y
end
out: x -> Mlp(x) -> softmax -1
z: x -> ?blank
"""


def test_canonical_layout():
    assert format_text(MESSY) == CANONICAL
    assert format_text(CANONICAL) == CANONICAL


def test_trailing_comments_align_past_the_longest_code():
    text = "dim B # a\ndim Nrep = H / G / 1 # b\n\ndim S   # c\n"
    assert format_text(text) == ("dim B                # a\ndim Nrep = H / G / 1 # b\n\n"
                                 "dim S          # c\n")


def test_refuses_what_does_not_parse():
    with pytest.raises(FormatError) as err:
        format_text("dim B\nx: [B] -> ->\n")
    assert err.value.diagnostic.code == "E001"
    assert err.value.diagnostic.span.line == 2


@pytest.mark.parametrize("number", ["-10000.0", "-3.4028234663852886e+38", "-1e9", "-3.5"])
def test_a_negative_decimal_is_formatted(number):
    # the layout's plain lexer once read `-3` of `-3.5` as a signed whole number and gave up
    text = f"dim B\nexample B=2\ninput x: [B]\ny:  x  * {number}\n"
    assert api.check(text).ok
    assert format_text(text) == f"dim B\nexample B=2\ninput x: [B]\ny: x * {number}\n"


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "shapelang", "fmt", *args], check=False, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_cli_check_diff_and_in_place(tmp_path):
    messy, clean, bad = tmp_path / "messy.shape", tmp_path / "clean.shape", tmp_path / "bad.shape"
    messy.write_text(MESSY)
    clean.write_text(CANONICAL)
    bad.write_text("dim B\nx : [B] -> ->\n")
    r = _cli("--check", str(messy), str(clean))
    assert r.returncode == 1
    assert str(messy) in r.stdout and str(clean) not in r.stdout
    assert messy.read_text() == MESSY                      # --check changes nothing
    r = _cli("--diff", str(tmp_path))
    assert r.returncode == 1
    assert "+input x: [B, D]" in r.stdout and "-input x :[ B,D ]" in r.stdout
    assert "E001" in r.stderr and "bad.shape:2:" in r.stderr
    r = _cli(str(messy), str(bad))
    assert r.returncode == 1                               # the bad file
    assert messy.read_text() == CANONICAL
    assert bad.read_text() == "dim B\nx : [B] -> ->\n"     # left alone
    r = _cli("--check", str(messy), str(clean))
    assert r.returncode == 0, r.stdout + r.stderr


def test_specs_are_formatted():
    r = _cli("--check", "specs/")
    assert r.returncode == 0, r.stdout + r.stderr


def _tokens(text: str) -> list:
    return [t for t in _grammar().lex(text if text.endswith("\n") else text + "\n", dont_ignore=True)]


def _respace(text: str, rng) -> str:
    """The same tokens on the same lines, with random indentation and spaces between them."""
    lines = text.split("\n")
    out = []
    by_line: dict[int, list] = {}
    for t in _tokens(text):
        if t.type not in ("_NL", "CONTINUATION") and not t.type.startswith("__IGNORE"):
            by_line.setdefault(t.line, []).append(t)
    def canonical(a, b) -> bool:   # a gap the layout decides, whatever was written
        return (a.value in ("->", ",", ":", "[", "(") or b.value in ("->", ",", ":", "]", ")")
                or (b.value == "(" and a.type == "NAME"))

    for n, line in enumerate(lines, 1):
        toks = by_line.get(n)
        if not toks:
            out.append(line + rng.choice(["", " ", "\t"]))
            continue
        parts = [rng.choice(["", " ", "    ", "\t", "      "]), toks[0].value]
        for a, b in itertools.pairwise(toks):
            gap = line[a.end_column - 1:b.column - 1]
            if b.type == "COMMENT" or canonical(a, b):
                gap = rng.choice(["", " ", "  ", "   "]) if b.type != "COMMENT" else " " * rng.randint(1, 6)
            elif gap:
                gap = rng.choice([" ", "  ", "\t", gap])
            parts += [gap, b.value]
        out.append("".join(parts) + rng.choice(["", " ", "  "]))
    return "\n".join(out)


def _code(text: str) -> list:
    return [(t.type, t.value.rstrip()) for t in _tokens(text)
            if t.type not in ("_NL", "CONTINUATION") and not t.type.startswith("__IGNORE")]


def test_the_layout_does_not_depend_on_the_spacing_written():
    import random

    rng = random.Random(14)
    seeds = sorted((ROOT / "specs").glob("*.shape")) + sorted((ROOT / "exercises").glob("*.shape"))
    tried = 0
    for _ in range(4):
        for path in seeds:
            text = path.read_text()
            messy = _respace(text, rng)
            want, got = _code(text), _code(messy)
            if got != want:   # removing a space merged two tokens: not the same program
                continue
            try:
                result = format_text(messy)
            except FormatError:
                continue
            tried += 1
            assert result == format_text(text), path.name
    assert tried > 50


def test_a_layout_that_would_change_a_token_is_refused(monkeypatch):
    from shapelang.fmt import LayoutBug, layout

    join = layout._join
    monkeypatch.setattr(layout, "_join", lambda toks, raw: join(toks, raw).replace("->", "- >"))
    with pytest.raises(LayoutBug, match="line 3"):
        format_text("dim B\ninput x: [B]\ny: x -> relu\n")


@pytest.mark.parametrize("expr", ["x * -1.5", "x * -3.4028234663852886e38", "(x - 1.0) * -2e5",
                                  "where(x > 0, -1.5, 0.0)", "x -> transpose -1 -2", "x -> pow -2"])
def test_a_negative_decimal_that_checks_is_laid_out(expr):
    """Regression: `x * -1.5` checked but fmt's lexer read `-1` as a negative integer and
    stopped at the `.`; a negative decimal (with or without an exponent) is now laid out,
    keeping its tokens and its findings."""
    text = f"dim B, S\nexample B=2, S=3\ninput x: [B, S]\ny: {expr}\n"
    spec = api.check(text)
    assert spec.ok, [d.message for d in spec.diagnostics]
    assert format_text(text) == text


@pytest.mark.parametrize("messy, tidy", [
    ("block Mlp(h:[B,S,D],dim F):\n  return h -> linear F\nend\n",
     "block Mlp(h: [B, S, D], dim F):\n  return h -> linear F\nend\n"),
    ("y: Mlp(x,F=4*D)\n", "y: Mlp(x, F=4*D)\n"),
    ("y: x ->  Mlp(c,F=4*D)\n", "y: x -> Mlp(c, F=4*D)\n"),
    ("y: x -> Mlp( F=E )\n", "y: x -> Mlp(F=E)\n"),
    ("y: x -> stack L  Moe(F=E)   first=Dense\n", "y: x -> stack L Moe(F=E) first=Dense\n"),
    ("a: arange(S,dtype=float)\n", "a: arange(S, dtype=float)\n"),
])
def test_size_parameters_and_call_keywords_format_idempotently(messy, tidy):
    assert format_text(messy) == tidy
    assert format_text(tidy) == tidy
