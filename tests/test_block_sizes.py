"""Blocks with size parameters (`block Mlp(x: [B, S, D], dim F)`), keywords in every call
form (`arange(S, dtype=float)`, `Mlp(x, F=4*D)`, `-> Mlp(c, F=4*D)`), and the sizes bound
at block calls wherever they show (trace, JSON, run)."""
from __future__ import annotations

import pytest

from shapelang import check, to_json, trace

HEAD = """dim B, S
dim D = 64
dim E = 24
example B=2, S=8
input x: [B, S, D]

block Mlp(h: [B, S, D], dim F):
  m: h -> linear F -> gelu
  expect m: [B, S, F]
  return m -> linear D
end
"""


def ex(spec, size) -> int:
    """A size at the spec's example sizes."""
    return int(spec.prover.value(size, {spec.prover.user[k]: v for k, v in spec.example.items()}))


def codes(text):
    return [(d.code, d.span.line, d.span.column) for d in check(text).diagnostics]


def only(text, code):
    spec = check(text)
    found = [d for d in spec.diagnostics if d.code == code]
    assert found, [(d.code, d.message) for d in spec.diagnostics]
    return found[0]


@pytest.mark.parametrize("call", ["y: Mlp(x, F=4*D)", "y: x -> Mlp F=4*D", "y: x -> Mlp(F=4*D)",
                                  "y: x -> Mlp(F = 4*D)", "y: Mlp(x, F=E*8)", "y: x -> Mlp F=(D + E)"])
def test_every_call_form_gives_the_size(call):
    spec = check(HEAD + call + "\n")
    assert spec.ok and not spec.diagnostics, [(d.code, d.message) for d in spec.diagnostics]
    (ir,) = spec.blocks["Mlp"]
    assert [str(k) for k in ir.size_args] == ["F"]
    # the hidden width is the size given: linear D->F then F->D, with biases
    value = {"4*D": 256, "E*8": 192, "(D + E)": 88}[call.split("F")[-1].strip(" =)(") if "(D" not in call
                                                    else "(D + E)"]
    assert spec.total_params.subs({spec.prover.user["D"]: 64, spec.prover.user["E"]: 24}) \
        == 64 * value + value + value * 64 + 64


def test_calls_at_two_sizes_are_two_instances_with_their_own_shapes():
    spec = check(HEAD + "y: Mlp(x, F=4*D)\nz: y -> Mlp F=E\n")
    assert spec.ok
    sizes = sorted(ex(spec, ir.size_args[spec.prover.user["F"]]) for ir in spec.blocks["Mlp"])
    assert sizes == [24, 256]
    assert spec.total_params.subs({spec.prover.user["D"]: 64, spec.prover.user["E"]: 24}) == \
        (64 * 256 + 256 + 256 * 64 + 64) + (64 * 24 + 24 + 24 * 64 + 64)


def test_missing_size_is_an_error_at_the_call_with_a_proved_suggestion():
    d = only(HEAD + "y: Mlp(x, F=4*D)\nz: Mlp(y)\n", "E113")
    assert (d.span.line, d.span.column) == (13, 4)
    assert "`F=`" in d.message
    assert d.fix is not None and d.fix[2] == "z: Mlp(y, F=4*D)"   # the size of its earlier call
    d = only(HEAD + "dim F = 100\ny: x -> Mlp\n", "E113")
    assert d.fix is not None and d.fix[2] == "y: x -> Mlp F=F"      # the caller's size of that name


def test_unknown_and_repeated_sizes_are_refused_at_the_keyword():
    d = only(HEAD + "y: x -> Mlp G=4\n", "E110")
    assert (d.span.line, d.span.column) == (12, 13) and "`F=`" in d.help
    d = only(HEAD + "y: Mlp(x, F=D, F=D)\n", "E110")
    assert "twice" in d.message and d.span.column == 16
    d = only(HEAD + "block Id(h: [B, S, D]):\n  return h\nend\ny: x -> Id F=3\n", "E110")
    assert "no size" in d.message and "dim F" in d.help


def test_size_must_be_a_whole_positive_size():
    assert only(HEAD + "y: x -> Mlp F=(D - 64)\n", "E109").span.line == 12
    assert only(HEAD + "y: x -> Mlp F=D/3\n", "E104").span.line == 12


def test_assumptions_about_a_size_parameter_are_proved_at_each_call():
    text = HEAD.replace("example", "assume F % 8 == 0\nexample")
    assert check(text + "y: x -> Mlp F=4*D\n").ok
    d = only(text + "y: x -> Mlp F=12\n", "E113")
    assert "F % 8 == 0" in d.message and d.span.column == 13
    d = only(text.replace("dim E = 24", "dim E") + "y: x -> Mlp F=E\n", "E113")
    assert d.counterexample     # E=1 breaks it


def test_a_size_parameter_is_not_a_dim_outside_its_block():
    d = only(HEAD + "y: x -> linear F\n", "E002")
    assert "size parameter of block `Mlp`" in d.message


def test_a_size_declared_by_dim_too_is_shadowed_in_the_block():
    text = HEAD.replace("dim E = 24", "dim E = 24\ndim F = 1408") + "y: x -> Mlp F=F\nz: y -> Mlp F=E\n"
    spec = check(text)
    assert spec.ok
    assert sorted(ex(spec, ir.size_args[spec.prover.user["F"]]) for ir in spec.blocks["Mlp"]) == [24, 1408]


def test_stack_passes_sizes_to_every_layer():
    text = HEAD + "dim L = 3\ny: x -> stack L Mlp(F=2*D)\nz: y -> stack L Mlp F=E\n"
    spec = check(text)
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    D, E = 64, 24
    assert spec.total_params.subs({spec.prover.user["D"]: D, spec.prover.user["E"]: E, spec.prover.user["L"]: 3}) \
        == 3 * (2 * D * 2 * D + 2 * D + D) + 3 * (2 * D * E + E + D)


def test_nested_blocks_pass_their_sizes_on():
    text = HEAD + """block Layer(h: [B, S, D], dim F):
  return h + (h -> layernorm -> Mlp F=F)
end
y: x -> Layer F=4*D
"""
    spec = check(text)
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    (mlp,) = spec.blocks["Mlp"]
    assert ex(spec, mlp.size_args[spec.prover.user["F"]]) == 256


def test_trace_and_json_show_the_bound_sizes():
    spec = check(HEAD + "y: Mlp(x, F=4*D)\nz: y -> Mlp F=E\n")
    text = trace(spec, width=0)
    assert "block Mlp(h: [B, S, D], F = 4*D (256)), called on line 12" in text
    assert "block Mlp(h: [B, S, D], F = E (24)), called on line 13" in text
    assert "[2, 8, 256]" in text and "[2, 8, 24]" in text     # example shapes at each size
    compact = trace(spec, width=0, example_only=True)
    assert "block Mlp(h: [2, 8, 64], F = 256)" in compact
    blocks = to_json(spec, trace=True)["blocks"]
    assert [(b["sizes"], b["sizes_example"]) for b in blocks] == [({"F": "4*D"}, {"F": 256}),
                                                                  ({"F": "E"}, {"F": 24})]


def test_the_example_need_not_give_a_size_parameter():
    spec = check(HEAD + "y: Mlp(x, F=4*D)\n")
    assert not [d for d in spec.diagnostics if d.code == "W201"]
    assert spec.example["B"] == 2


def test_a_size_parameter_named_like_an_input_is_refused():
    d = only("dim B\nblock K(h: [B], dim h):\n  return h\nend\n", "E003")
    assert d.span.line == 2


# ------------------------------------------------------------------ keywords in op calls

@pytest.mark.parametrize("call, dtype", [("arange(S, dtype=float)", "float"), ("arange(0, S, 2, dtype=int)", "int"),
                                         ("zeros([S, S], dtype=int)", "int"), ("ones([S], dtype=bool)", "bool"),
                                         ("full([S], 1, dtype=bfloat16)", "bfloat16"),
                                         ("linspace(0, 1, S, dtype=float64)", "float64")])
def test_dtype_keyword_of_the_new_tensor_calls_is_honoured(call, dtype):
    spec = check(f"dim S\nexample S=4\nz: {call}\n")
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    assert spec.bindings[0].types[0].dtype == dtype


@pytest.mark.parametrize("call, column", [("arange(S, foo=1)", 14), ("concat(-1, a, a, dtype=float)", 21),
                                          ("where(a > 0, a, a, p=1)", 23), ("einsum(\"i->i\", a, x=1)", 22)])
def test_other_keywords_in_op_calls_are_refused(call, column):
    d = only(f"dim S\nexample S=4\ninput a: [S]\nz: {call}\n", "E110")
    assert (d.span.line, d.span.column) == (4, column)


def test_bool_arange_is_refused_as_pytorch_refuses_it():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.arange(4, dtype=torch.bool)
    assert not check("dim S\nz: arange(S, dtype=bool)\n").ok


def test_keywords_in_parentheses_after_an_operation_are_still_the_pytorch_habit():
    d = check("dim B, S\ninput x: [B, S]\ny: x -> softmax(dim=-1)\n").diagnostics[0]
    assert d.code == "E001" and "PyTorch syntax" in d.message and d.fix[2] == "y: x -> softmax -1"


# ------------------------------------------------------------------ the editor

def _lsp(text):
    pytest.importorskip("lsprotocol")
    from shapelang.lsp.documents import DocumentStore
    store = DocumentStore()
    store.update("file:///sizes.shape", 1, text)
    return store.analysis("file:///sizes.shape")


def test_hover_shows_the_size_each_call_binds():
    from shapelang.lsp import hover
    text = HEAD + "y: Mlp(x, F=4*D)\nz: y -> Mlp F=E\n"
    an = _lsp(text)
    md, _span = hover.hover(an, 7, 29)            # the `F` of `dim F` in the signature
    assert "size parameter of block `Mlp`" in md
    assert "`Mlp(x, F=4*D)` on line 12: F = 4*D (256)" in md and "`Mlp F=E` on line 13: F = E (24)" in md
    md, _span = hover.hover(an, 8, 18)            # `linear F` inside the block: the same symbol
    assert "size parameter of block `Mlp`" in md
    md, _span = hover.hover(an, 12, 11)           # the `F=` of the call goes to the block's F
    assert "size parameter of block `Mlp`" in md
    md, _span = hover.hover(an, 7, 8)             # the block: its whole signature
    assert "block Mlp(h: [B, S, D], dim F)" in md


def test_hover_on_a_dim_bound_by_an_input_shape_shows_each_call():
    from shapelang.lsp import hover
    text = ("dim B, S, N, D\nexample B=2, S=8, D=4\ninput x: [B, S, D]\ninput c: [B, 3, D]\n"
            "block Id(h: [B, N, D]):\n  return h -> gelu\nend\ny: x -> Id\nz: c -> Id\n")
    md, _span = hover.hover(_lsp(text), 1, 11)
    assert "bound at each block call" in md
    assert "`Id` on line 8: N = S (8)" in md and "`Id` on line 9: N = 3" in md


def test_signature_help_lists_a_blocks_sizes():
    from shapelang.lsp import completion
    an = _lsp(HEAD + "y: x -> Mlp \n")
    help = completion.signature(an, 12, 13)
    assert help.signatures[0].label == "Mlp F=" and help.active_parameter == 0


def test_html_shows_the_bound_sizes():
    from shapelang.render.html import trace_html
    page = trace_html(check(HEAD + "y: Mlp(x, F=4*D)\nz: y -> Mlp F=E\n"))
    assert "block Mlp(h: [B, S, D], F = 4·D = 256)" in page     # the text trace's notation
    assert "block Mlp(h: [B, S, D], F = E = 24)" in page


def test_json_shows_the_dims_each_call_binds_from_its_inputs():
    text = ("dim B, S, N, D\nexample B=2, S=8, D=4\ninput x: [B, S, D]\ninput c: [B, 3, D]\n"
            "block Id(h: [B, N, D]):\n  return h -> gelu\nend\ny: x -> Id\nz: c -> Id\n")
    blocks = to_json(check(text), trace=True)["blocks"]
    assert [b["bound"] for b in blocks] == [{"N": "S"}, {"N": "3"}]
    assert [b["sizes"] for b in blocks] == [{}, {}]


def test_a_size_parameter_in_an_input_shape_must_match_the_tensor_given():
    text = ("dim B, S\ndim D = 8\nexample B=2, S=3\ninput x: [B, S, D]\n"
            "block Up(h: [B, S, F], dim F):\n  return h -> linear D\nend\n")
    assert check(text + "y: x -> Up F=D\n").ok
    d = only(text + "y: x -> Up F=2*D\n", "E113")
    assert d.span.line == 8 and "[B, S, F]" in d.message


def test_a_call_with_several_inputs_and_sizes_in_any_order():
    text = ("dim B, S\ndim D = 8\nexample B=2, S=3\ninput x: [B, S, D]\ninput c: [B, S, D]\n"
            "block Two(h: [B, S, D], k: [B, S, D], dim F, dim G):\n"
            "  return h + (k -> linear F -> linear G -> linear D)\nend\n")
    spec = check(text + "y: Two(x, c, G=2*D, F=3)\nz: y -> Two(c, F=3, G=2*D)\n")
    assert spec.ok, [(d.code, d.message) for d in spec.diagnostics]
    assert len(spec.blocks["Two"]) == 1          # the same sizes: one instance
    d = only(text + "y: Two(x, c, G=2)\n", "E113")
    assert "`F=`" in d.message
