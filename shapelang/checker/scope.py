"""What checking a statement works in: the visible tensors, and the silent error for
values that depend on an earlier failure."""
from __future__ import annotations

from ..syntax.diagnostics import ShapeError
from .ir import Decl, Step
from .layout import TensorType


class Poisoned(ShapeError):
    """A value depends on a statement that already failed: stay silent."""

    def __init__(self):
        super().__init__("E002", "depends on an earlier error")

    def at(self, span):
        return None


class Scope:
    """Tensors visible in the file or in one block instantiation."""

    def __init__(self, subst=None):
        self.values: dict[str, tuple[TensorType, str] | None] = {}
        self.subst = subst or {}   # block dim symbol -> size at this call
        self.steps: list[Step] = []
        self.decls: list[Decl] = []
        self.spans: dict = {}      # name -> where it was defined (for "first defined here")
        self.sizes: set = set()    # the size parameters of the block being checked
