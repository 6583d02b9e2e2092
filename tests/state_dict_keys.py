"""The state-dict keys of every library spec's generated module: what tests/golden/state_dict_keys.json
pins. Regenerate after a deliberate rename with

    python tests/state_dict_keys.py

(and add the old names to docs/codegen.md's table of renames; `shapelang.codegen.legacy` maps a
state dict saved under them). The modules are built on the meta device: no memory, any size.
A layer index is written `#` (`h.#.attn.c_attn.weight`), each such name once, in order, beside
the number of keys: the names and their nesting are pinned without a line per layer."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden" / "state_dict_keys.json"


def key_of(path: Path) -> str:
    return path.relative_to(HERE.parent).as_posix()


def compact(names: list[str]) -> dict:
    """{"count": how many keys, "keys": the names with layer indices as `#`, each once}."""
    return {"count": len(names), "keys": list(dict.fromkeys(re.sub(r"(?<=\.)\d+(?=\.)", "#", n) for n in names))}


def keys(path: Path) -> dict | str:
    """The generated module's state-dict keys, in order; a spec that does not check or cannot be
    generated gives the reason, so a change there shows too."""
    from shapelang import api
    from shapelang.codegen import runner
    from shapelang.codegen.naming import CodegenError

    spec = api.check_file(str(path))
    if not spec.ok:
        return "does not check"
    try:
        gen = api.codegen(spec)
    except CodegenError as e:
        return f"no module: {str(e).split(':', 1)[0]}"
    _mod, model = runner.build(gen, dict(spec.example), meta=True)
    return compact(list(model.state_dict().keys()))


def main() -> int:
    sys.path.insert(0, str(HERE))
    import tiers

    table = {key_of(p): keys(p) for p in tiers.LIBRARY}
    GOLDEN.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{GOLDEN.relative_to(HERE.parent)}: {len(table)} specs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
