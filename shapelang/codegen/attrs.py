"""Codegen, attribute names: what a module's parameters, buffers and submodules are called,
which fixes the keys of its state dict.

The rule (docs/codegen.md, "Names and state-dict keys"):

- a `param` or `buffer` is the attribute of its name: `param W_te` -> `self.W_te`;
- a binding whose steps own one module with weights (`linear`, `layernorm`, `rmsnorm`,
  `embed V D`, a block call, `stack`) names it: `c_attn: h -> linear 3*D` -> `self.c_attn`;
- a binding with several such modules numbers them after its name and their kind:
  `m: x -> layernorm -> linear 4*D -> gelu -> linear D` -> `m_ln`, `m_linear1`, `m_linear2`;
  dropout is `<binding>_drop`, a `return` line counts as the binding `out`;
- with `names="dotted"` (the default), `__` inside a name is a level of the key:
  `transformer__h: x -> stack L Block` is `self.transformer.h`, whose state-dict keys are
  `transformer.h.0. ...`; `param transformer__wpe__weight` is `transformer.wpe.weight`.
  The containers are plain `nn.Module()`s, made on first use. A name whose path would clash
  (a level that is already a tensor, a tensor that is already a level) stays flat.
  `names="flat"` keeps every name flat.
"""
from __future__ import annotations

from .naming import MODULE_ATTRS, RESERVED, Namer, safe_identifier

NAMING = ("dotted", "flat")


class AttrTree:
    """The attribute names of one nn.Module. `claim(want)` gives the attribute path
    (`c_attn`, `transformer.h`), and appends the lines creating any new container to `init`."""

    def __init__(self, init: list, *, dotted: bool = True):
        self.init, self.dotted = init, dotted
        self.root = Namer(reserved=RESERVED | MODULE_ATTRS)
        self.levels: dict = {}      # container path -> Namer of the names inside it
        self.leaves: set = set()    # dotted paths taken by tensors and modules

    @property
    def taken(self) -> set:
        return self.root.taken

    def claim(self, want: str) -> str:
        parts = want.split("__")
        if self.dotted and len(parts) > 1 and all(parts):
            path = self._path(parts)
            if path is not None:
                return path
        return self.root.claim(want)

    def _path(self, parts: list) -> str | None:
        reserved = RESERVED | MODULE_ATTRS
        if any(safe_identifier(p, reserved, private=False) != p for p in parts):
            return None
        for k in range(1, len(parts)):
            prefix = ".".join(parts[:k])
            if prefix in self.leaves or (k == 1 and prefix in self.root.taken and prefix not in self.levels):
                return None
        full = ".".join(parts)
        if full in self.leaves or full in self.levels:
            return None
        for k in range(1, len(parts)):
            prefix = ".".join(parts[:k])
            if prefix not in self.levels:
                if k == 1:
                    self.root.taken.add(prefix)
                self.levels[prefix] = True
                self.init.append(f"self.{prefix} = nn.Module()")
        self.leaves.add(full)
        return full
