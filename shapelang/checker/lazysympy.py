"""sympy, imported on first use.

`check` and `trace` of a spec that needs no size (an empty file, a file that does not
parse) should not pay sympy's import, which costs more than the rest of the program.
The checker's and renderers' modules write `from ..checker.lazysympy import sympy as sp`
and use `sp.X` as before: the first attribute read imports sympy and copies its
namespace into this module object, so later reads are ordinary module lookups.
"""
from __future__ import annotations

import types


class _Sympy(types.ModuleType):
    def __getattr__(self, name: str):   # only called for names not copied yet
        import sympy

        if "Symbol" not in self.__dict__:
            self.__dict__.update((k, v) for k, v in vars(sympy).items() if not k.startswith("__"))
        return getattr(sympy, name)


sympy = _Sympy("sympy", "sympy, imported on first attribute read")


def zero():
    """sympy's 0, as a dataclass field's default (`field(default_factory=zero)`)."""
    return sympy.S.Zero
