"""Stable names: the state-dict keys of every library spec's generated module are pinned in
tests/golden/state_dict_keys.json, so a checkpoint saved from a generated module keeps loading,
and a rename is a visible, deliberate change (regenerate with `python tests/state_dict_keys.py`,
and list the old names in docs/codegen.md; `shapelang.codegen.legacy` loads them)."""
from __future__ import annotations

import json

import pytest
import tiers
from state_dict_keys import GOLDEN, key_of, keys

pytest.importorskip("torch")

TABLE = json.loads(GOLDEN.read_text())


def test_the_golden_file_covers_every_spec():
    assert sorted(TABLE) == sorted(key_of(p) for p in tiers.LIBRARY)


@pytest.mark.parametrize("path", tiers.sample(tiers.LIBRARY))
def test_generated_state_dict_keys_are_pinned(path):
    assert keys(path) == TABLE[key_of(path)], (
        f"{key_of(path)}: the generated module's state-dict keys changed; if the rename is deliberate, "
        "run `python tests/state_dict_keys.py`, review the diff and document the old names")
