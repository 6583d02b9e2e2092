"""One rule for where a comment starts (shapelang.syntax.comments), and it is the parser's:
a `#` inside a quoted einsum pattern is code, any other `#` starts the comment."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from shapelang import api
from shapelang.syntax.comments import code_of, comment_of, split_comment

HEAD = "dim B, S, D\ninput x: [B, S, D]\n"
# statements whose code holds quotes (a `#` may sit inside them) and primes in names
CODE = st.sampled_from([
    'y: einsum("{p}bsd->bds", x)',
    "y': x -> transpose 1 2",
    'y: x -> rearrange "b s{p} d -> b d s"',
    "y: x -> softmax -1",
])
PAD = st.sampled_from(["", " #", "##", "# #"])
COMMENT = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=20)


@settings(max_examples=examples(300), deadline=None)
@given(CODE, PAD, COMMENT)
def test_the_comment_starts_where_the_parser_says(template, pad, comment):
    code = template.replace("{p}", pad) if "einsum" not in template or not pad else template.replace("{p}", "")
    line = f"{code}  #{comment}"
    assert split_comment(line) == (code, f"#{comment}")
    assert code_of(line) == code and comment_of(line) == comment
    # the parser reads the same line the same way: the comment changes nothing it sees
    with_comment = api.check(HEAD + line + "\n")
    without = api.check(HEAD + code + "\n")
    assert [d.code for d in with_comment.diagnostics] == [d.code for d in without.diagnostics]


def test_a_quoted_hash_is_code_and_a_primed_name_is_not_a_quote():
    assert split_comment('y: x -> rearrange "b (h#) -> b h"  # note') == (
        'y: x -> rearrange "b (h#) -> b h"', "# note")
    # a prime ends a name (`K'`); it opens no string, so the comment after it is found
    assert comment_of("K': X -> transpose 1 2  # keys, transposed") == " keys, transposed"
    assert split_comment("no comment here ") == ("no comment here", None)
