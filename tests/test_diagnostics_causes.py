"""Messages that point at the cause: labels, counterexamples, cascades, sizes in the
learner's notation. The reproductions of issue "Messages that teach", and more cases of
each kind (the golden transcripts are tests/test_messages.py)."""
from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest
import sympy as sp
from sympy.parsing.sympy_parser import parse_expr

from shapelang import render
from shapelang.checker import dims as dimlib
from shapelang.checker.advice.fixes import apply
from shapelang.checker.checker import check_text
from shapelang.checker.notation import Notation
from shapelang.render import sarif

ATTN = "dim B, H, S, Dh\nexample B=2, H=4, S=5, Dh=8\n"


def check(text):
    return check_text(text, "t.shape")


def only(text):
    spec = check(text)
    assert len(spec.diagnostics) == 1, render.check_text(spec)
    return spec.diagnostics[0]


def fixed(text, d):
    """The spec with the diagnostic's proved fix applied, checked again."""
    assert d.fix is not None, d
    new, _ = apply(text, d.fix[0], d.fix[1])
    return check(new)


# ------------------------------------------------------------ labels

@pytest.mark.parametrize("op, axis, where", [("mean -1", -1, "its last axis"),
                                             ("sum 1", 1, "axis 1"),
                                             ("amax -1", -1, "its last axis")])
def test_a_reduction_that_drops_an_axis_is_labelled_and_keepdim_proved(op, axis, where):
    text = ("dim B, S, D\nexample B=2, S=3, D=4\ninput X: [B, S, D]\n"
            f"mu: X -> {op}\nmid: mu -> scale 2\nres: X - mid\n")
    d = only(text)
    assert d.span.line == 6
    lost = [(s, t) for s, t in d.labels if s.line == 4]
    assert lost and f"mid loses {where} here" in lost[0][1]
    assert d.fix[0].line == 4 and "keepdim" in d.fix[1] and "write line 4 as" in d.help
    assert fixed(text, d).ok


def test_operands_of_a_failing_product_get_their_shapes():
    text = ATTN + "input Q: [B, H, S, Dh]\ninput K: [B, H, S, Dh]\nscores: Q @ K\n"
    d = only(text)
    texts = [t for _, t in d.labels]
    assert texts == ["[B, H, S, Dh] = [2, 4, 5, 8]"] * 2
    out = render.check_text(check(text))
    assert "-^^^- [B, H, S, Dh] = [2, 4, 5, 8]" in out


def test_first_declared_here_for_dims_tensors_and_blocks():
    d = only("dim d_model, h\ndim d_k\ndim d_k = d_model / h\nassume d_model % h == 0\n")
    assert d.code == "E003" and [(s.line, t) for s, t in d.labels] == [(2, "first declared here")]
    assert d.help == "declare each dim once: delete line 2"
    d = only("dim B\ninput X: [B]\nX: X -> relu\n")
    assert [(s.line, t) for s, t in d.labels] == [(2, "first declared here")]
    d = only("dim B\ninput X: [B]\nY: X -> relu\nY: X -> relu\n")
    assert [(s.line, t) for s, t in d.labels] == [(3, "first defined here")]
    d = only("dim B\nblock F(x: [B]):\n  return x\nend\nblock F(x: [B]):\n  return x\nend\n")
    assert [(s.line, t) for s, t in d.labels] == [(2, "first defined here")]
    d = only("dim B, S\nexample B=2, S=3\ninput B: [S]\n")
    assert [(s.line, t) for s, t in d.labels] == [(1, "declared as a dim here")]


def test_a_dim_in_a_list_declared_again_is_removed_from_the_list():
    text = "dim B, S, D\ndim S\nexample B=2, S=3, D=4\n"
    d = only(text)
    assert d.help == "declare each dim once: delete line 2"
    text = "dim B, S\ndim D, S, H\nexample B=2, S=3, D=4, H=2\n"
    d = only(text)
    assert d.help == "declare each dim once: write it as `dim D, H`"
    assert fixed(text, d).ok


def test_labels_in_json_sarif_and_lsp():
    text = ATTN + "input Q: [B, H, S, Dh]\ninput K: [B, H, S, Dh]\nscores: Q @ K\n"
    spec = check(text)
    out = json.loads(render.to_json(render.spec_json(spec, False)))
    labels = out["diagnostics"][0]["labels"]
    assert [(x["line"], x["column"], x["end_column"]) for x in labels] == [(5, 9, 10), (5, 13, 14)]
    assert labels[0]["text"] == "[B, H, S, Dh] = [2, 4, 5, 8]"
    log = sarif.sarif_log([("t.shape", spec.diagnostics)], "0")
    related = log["runs"][0]["results"][0]["relatedLocations"]
    assert [r["physicalLocation"]["region"]["startColumn"] for r in related] == [9, 13]
    assert related[1]["message"]["text"] == "[B, H, S, Dh] = [2, 4, 5, 8]"
    pytest.importorskip("lsprotocol", reason="the language server needs the `lsp` extra")
    from shapelang.lsp import findings
    from shapelang.lsp.documents import DocumentStore
    store = DocumentStore()
    store.update("file:///t.shape", 1, text)
    an = store.analysis("file:///t.shape")
    diag = findings.to_lsp(an, an.spec.diagnostics[0], findings.CodeDocs(None))
    located = [(r.location.range.start.line, r.location.range.start.character, r.message)
               for r in diag.related_information]
    assert (4, 8, "[B, H, S, Dh] = [2, 4, 5, 8]") in located and (4, 12, "[B, H, S, Dh] = [2, 4, 5, 8]") in located


def test_labels_render_on_their_own_lines_in_line_order():
    text = "dim B, S, D\nexample B=2, S=3, D=4\ninput X: [B, S, D]\nmu: X -> mean -1\n\n\n" \
           "res: X - mu\n"
    out = render.check_text(check(text))
    rows = out.split("\n")
    assert rows[2].startswith("4 | mu: X -> mean -1") and rows[4] == "..."
    assert rows[5].startswith("7 | res: X - mu")


# ------------------------------------------------------------ the padding mask

@pytest.mark.parametrize("scores, mask, want", [
    ("[B, H, S, S]", "[B, S]", "[B, 1, 1, S]"),
    ("[B, H, S, T]", "[B, T]", "[B, 1, 1, T]"),      # cross-attention: the keys are T
    ("[B, H, S, T]", "[S, T]", None),                # broadcasts as it is
    ("[B, H, S, T]", "[B, H]", "[B, H, 1, 1]"),
])
def test_a_mask_that_does_not_line_up_gets_size_one_axes(scores, mask, want):
    text = (f"dim B, H, S, T\nexample B=2, H=3, S=5, T=7\ninput x: {scores}\n"
            f"input pad: {mask} bool\nw: x -> mask pad -> softmax -1\n")
    spec = check(text)
    if want is None:
        assert spec.ok, render.check_text(spec)
        return
    (d,) = spec.diagnostics
    assert d.fix is not None and f"view {want}" in d.fix[1], d.help
    assert fixed(text, d).ok
    torch = pytest.importorskip("torch", reason="PyTorch checks the proposed mask shape")
    sizes = {"B": 2, "H": 3, "S": 5, "T": 7, "1": 1}
    x = torch.zeros([sizes[n] for n in re.findall(r"\w+", scores)])
    m = torch.zeros([sizes[n] for n in re.findall(r"\w+", want)], dtype=torch.bool)
    assert x.masked_fill(m, 0.0).shape == x.shape      # the proposed mask broadcasts in PyTorch
    bad = torch.zeros([sizes[n] for n in re.findall(r"\w+", mask)], dtype=torch.bool)
    with pytest.raises(RuntimeError):
        x.masked_fill(bad, 0.0)                        # and the written one does not


# ------------------------------------------------------------ batch dims of `@`

def test_batch_dims_of_a_product_count_the_real_dims():
    text = ATTN + ("input Q: [B, H, S, Dh]\ninput K: [B, H, S, Dh]\n"
                   "scores: Q @ (K -> transpose 1 2 -> transpose -2 -1)\n")
    d = only(text)
    m = re.match(r"dim (-\d) is H in `Q` and S in", d.message)
    assert m, d.message
    torch = pytest.importorskip("torch", reason="PyTorch says which dim fails")
    q, k = torch.zeros(2, 4, 5, 8), torch.zeros(2, 4, 5, 8)
    with pytest.raises(RuntimeError) as err:
        q @ k.transpose(1, 2).transpose(-2, -1)
    dim = int(re.search(r"non-singleton dimension (\d+)", str(err.value)).group(1))
    assert 4 + int(m.group(1)) == dim
    assert fixed(text, d).ok and "Q @ (K -> transpose -2 -1)" in d.help


# ------------------------------------------------------------ counterexamples

def _breaks(relation: str, cex: dict) -> bool:
    env = {sp.Symbol(k, positive=True, integer=True): v for k, v in cex.items()}
    left, right = relation.split("==")
    syms = {k: sp.Symbol(k, positive=True, integer=True) for k in cex}
    return parse_expr(left, local_dict=syms).subs(env) != parse_expr(right, local_dict=syms).subs(env)


@pytest.mark.parametrize("text, relation", [
    ("dim D, H\ndim Dh = D / H\nexample D=512, H=8\n", "D % H == 0"),
    ("dim D, H\ndim Dh = D / H\n", "D % H == 0"),
    ("dim H, G\ndim Nrep = H / G\nexample H=8, G=2\n", "H % G == 0"),
    (("dim B, S, D, H\nexample B=1, S=4, D=512, H=8\ninput X: [B, S, D]\n"
     "y: X -> view [B, S, H, D/H]\n"), "D % H == 0"),
])
def test_a_counterexample_breaks_the_condition_and_names_only_its_dims(text, relation):
    d = next(d for d in check(text).diagnostics if d.code == "E104")
    assert d.counterexample and _breaks(relation, d.counterexample), d.counterexample
    assert set(d.counterexample) == set(re.findall(r"[A-Za-z]\w*", relation))
    assert not any("no counterexample" in n for n in d.notes)
    assert fixed(text, d).ok     # the `assume` line the help adds


def test_a_counterexample_differs_from_the_example_where_it_can():
    d = only("dim B, S, D\nexample B=2, S=4, D=8\ninput X: [B, S, D]\nmu: X -> mean -1\nr: X - mu\n")
    assert d.counterexample != {"B": 2, "S": 4}
    assert d.counterexample["B"] != d.counterexample["S"] and 1 not in d.counterexample.values()


def test_a_condition_on_numbers_needs_no_dims():
    d = only("dim B\nexample B=2\ninput X: [B, 7]\na, b, c: X -> chunk 3 -1\n")
    assert d.counterexample == {} and "B=" not in render.check_text(check(
        "dim B\nexample B=2\ninput X: [B, 7]\na, b, c: X -> chunk 3 -1\n"))
    assert "this involves no dims" in d.notes[0]
    assert d.fix[1] == "split [3, 3, 1] -1"   # what torch.chunk gives
    torch = pytest.importorskip("torch", reason="PyTorch gives the chunks")
    assert [p.shape[-1] for p in torch.zeros(2, 7).chunk(3, -1)] == [3, 3, 1]


def test_no_counterexample_only_after_a_real_search():
    # B(B + D) divisible by 4 with B odd makes B + D divisible by 4, but the prover cannot
    # show it (the congruence is not linear): it says it searched instead of claiming a bug
    d = only("dim B, D\nassume (B*B + B*D) % 4 == 0\nassume B % 2 == 1\nexample B=3, D=5\n"
             "input X: [B, (B + D)/4]\n")
    assert "`(B + D)/4`" in d.message     # as written
    assert d.message.startswith("could not prove")
    assert re.search(r"none of the \d+ assignments", d.notes[-1])
    assert d.counterexample is None


# ------------------------------------------------------------ cascades

def test_a_dim_line_without_commas_gives_one_error():
    text = "dim B S D\nexample B=2, S=4, D=8\ninput X: [B, S, D]\nY: X -> linear 4*D\nexpect Y: [B, S, 4*D]\n"
    d = only(text)
    assert d.code == "E001" and d.help == "write it as `dim B, S, D`"
    assert fixed(text, d).ok


def test_a_failed_dim_definition_stays_one_error():
    d = only("dim B, S, D, H\ndim Dk = D / Hh\nassume D % H == 0\nexample B=2, S=4, D=8, H=2\n"
             "input X: [B, S, D]\nQ: X -> view [B, S, H, Dk]\n")
    assert d.code == "E002" and "did you mean `H`? write it as `dim Dk = D / H`" == d.help


def test_nothing_downstream_of_a_failed_binding_is_reported():
    text = ("dim B, S, D\nexample B=2, S=4, D=8\ninput X: [B, S, D]\n"
            "block F(x: [B, S, D], y: [B, S, D]):\n  return x + y\nend\n"
            "a: X -> view [B, S, 3]\n"             # the one mistake
            "b: a -> relu\nc: a + X\nd: X -> F(a)\ne: X -> mask a\nexpect a: [B, S, D]\n"
            "f, g: a -> chunk 2 -1\nh: concat(-1, a, X)\n")
    d = only(text)
    assert d.span.line == 7


def test_a_block_is_reported_once_in_the_callers_dims_without_a_false_missing_return():
    text = ("dim B, T, D, Sq\nexample B=2, T=5, D=8, Sq=5\n"
            "block Inner(x: [B, Sq, D]):\n  y: x -> slice 1 0 4\n  return y\nend\n"
            "block Outer(x: [B, T, D]):\n  z: x -> Inner\n  return z\nend\n"
            "input X: [B, T, D]\nout: X -> Inner\n")
    d = only(text)   # Outer is never called: checked at its declared shapes, silently poisoned
    assert d.code == "E105" and "(T)" in d.message and "Sq" not in d.message + d.help
    assert d.help.endswith("add the line `assume T >= 4` after line 1")
    assert fixed(text, d).ok
    d = only("dim B\nblock F(x: [B]):\n  y: x -> relu\nend\ninput X: [B]\nout: X -> F\n")
    assert d.message == "block `F` has no `return`"


# ------------------------------------------------------------ expect with numbers

def test_expect_written_with_numbers_says_so_and_writes_the_dims():
    base = ("dim batch_size, seq_length, d_model\nexample batch_size=1, seq_length=4, d_model=512\n"
            "input X: [batch_size, seq_length, d_model]\nY: X -> linear d_model\n")
    d = only(base + "expect Y: [1, 4, 512]\n")
    assert "only at the example sizes" in d.message and "written with numbers" in d.message
    assert "but the spec expects" not in d.message
    assert d.fix[1] == "[batch_size, seq_length, d_model]" and fixed(base + "expect Y: [1, 4, 512]\n", d).ok
    assert [(s.line, t.split(":")[0]) for s, t in d.labels] == [(4, "`Y` is computed here")]
    d = only(base + "expect Y: [batch_size, 4, 512]\n")
    assert "dims 1, 2 are written as numbers" in d.message
    d = only(base + "expect Y: [1, 4, 256]\n")   # wrong at the example too: the usual message
    assert "but the spec expects" in d.message


# ------------------------------------------------------------ notation

def test_sizes_keep_the_learners_order_and_notation():
    text = ("dim B, S, D, H, Dv\nexample B=1, S=4, D=512, H=8, Dv=64\nparam W_o: [D, D]\n"
            "heads: [B, S, H*Dv]\no: heads @ W_o\n")
    out = render.check_text(check(text))
    assert "H*Dv" in out and "Dv*H" not in out
    d = only("dim B, D, H\nexample B=1, D=512, H=8\ninput X: [B, D % H]\n")
    assert "`D % H`" in d.message
    for text in (("dim B, D, H\nexample B=2, D=12, H=5\ninput X: [B, D % H, D // H]\ny: X -> flatten 1\n"
                 "z: y -> linear D*D\n"),):
        spec = check(text)
        shown = render.trace_text(spec) + render.to_json(render.spec_json(spec, True))
        assert not re.search(r"Mod\(|floor|\*\*", shown), shown


def test_computed_products_follow_the_declaration_order():
    spec = check("dim S, B, D\nexample S=3, B=2, D=4\ninput X: [S, B, D]\ny: X -> flatten 0\n")
    assert render.spec_json(spec, False)["bindings"][0]["shape"] == ["S*B*D"]


def test_huge_numbers_are_elided():
    text = "dim B\nexample B=2\ninput X: [B, (2**16)**16 * (2**16)**16]\nY: X -> view [B, 3]\n"
    out = render.check_text(check(text))
    assert "1340…(155 digits)…096" in out and not re.search(r"\d{41}", out)
    assert dimlib.fmt_value(Fraction(7 ** 900)) == "3874…(761 digits)…001"
    # JSON keeps numbers whole, for tools
    js = render.to_json(render.spec_json(check(text), True))
    assert str(2 ** 512) in js


SYMS = {n: sp.Symbol(n, positive=True, integer=True) for n in ("B", "S", "D", "H", "Dv", "Dk")}


@pytest.mark.parametrize("expr", [
    "D % H", "floor(D/H)", "Dv*H", "B*S*D", "D/H", "(D + H)/2", "D**2", "12*D**2 + 4*D + 1",
    "B*Mod(D, H)", "1 - S", "D/(Dv*H)", "-D - H", "Min(S, D)", "3*D/(2*H)", "D**5",
])
def test_shown_sizes_read_back_as_the_same_size(expr):
    n = Notation()
    for s in SYMS.values():
        n.declare(s)
    e = parse_expr(expr, local_dict={**SYMS, "Mod": sp.Mod, "floor": sp.floor, "Min": sp.Min})
    shown = n.show(e)
    assert not re.search(r"Mod\(|floor|Min\(", shown)
    back = parse_expr(shown.replace("min(", "Min("), local_dict={**SYMS, "Min": sp.Min})
    assert sp.simplify(back - e) == 0, (expr, shown)
