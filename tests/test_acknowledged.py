"""A warning the author meant is acknowledged by `allow` and its code in that line's
comment (`# allow W302: ...`): check leaves it out. Only warnings, only on their own line, only by
their exact code; errors are always reported."""
from __future__ import annotations

from torch_shapes import codes

HEAD = "dim B, S, Dr\nassume Dr % 2 == 0\nexample B=1, S=4, Dr=8\ninput x: [B, S, Dr]\n"
PAIRS = "p: x -> view [B, S, Dr/2, 2] -> transpose 3 2 -> reshape [B, S, Dr]"


def test_the_deliberate_regroup_warns_without_the_comment():
    assert codes(HEAD + PAIRS + "\n") == ["W302"]
    assert codes(HEAD + PAIRS + "  # evens first, then odds\n") == ["W302"]


def test_naming_the_code_in_the_line_comment_acknowledges_it():
    assert codes(HEAD + PAIRS + "  # allow W302: the checkpoint stores interleaved pairs\n") == []
    assert codes(HEAD + PAIRS + "  # evens first; allow W307, W302\n") == []
    # a code alone is how the test corpus marks an expected finding: not an acknowledgement
    assert codes(HEAD + PAIRS + "  # W: W302\n") == ["W302"]
    assert codes(HEAD + PAIRS + "  # deliberate (W302)\n") == ["W302"]


def test_only_that_code_on_that_line():
    assert codes(HEAD + PAIRS + "  # allow W303\n") == ["W302"]
    assert codes(HEAD + PAIRS + "  # allow W3020\n") == ["W302"]
    assert codes(HEAD + "# allow W302\n" + PAIRS + "\n") == ["W302"]  # the line before: no
    two = HEAD + PAIRS + "  # allow W302\n" + PAIRS.replace("p:", "q:") + "\n"
    assert codes(two) == ["W302"]                                     # the second is not acknowledged


def test_an_error_is_never_acknowledged():
    assert codes(HEAD + "y: x @ x  # allow E101\n") == ["E101"]
    assert codes(HEAD + "y: x @ x  # allow W302\n") == ["E101"]


def test_a_hash_inside_a_quoted_string_is_not_a_comment():
    quoted = PAIRS + ' -> opaque "# allow W302" [B, S, Dr]'
    assert codes(HEAD + quoted + "\n") == ["W302"]
    assert codes(HEAD + quoted + "  # allow W302\n") == []
