"""Operations: the table (one entry per operation) and the shape rules, one
function per operation with PyTorch's semantics, grouped by family.

A rule takes the tensor entering the operation and the operation's arguments
and returns a `Result` (output tensors, learned parameters, multiply-add FLOPs
and the resolved arguments that codegen needs). Side conditions go through the
context `c` (the checker), which proves them or raises a ShapeError with a
counterexample.
"""
from .args import Args, Result, prod
from .calls import CALLS
from .combine import broadcast, concat_types, einsum_types, matmul
from .table import RULES, TABLE, UNARY, OpDef, apply
from .tables import COMPARISONS, compare

__all__ = ["CALLS", "COMPARISONS", "RULES", "TABLE", "UNARY", "Args", "OpDef", "Result", "apply", "broadcast",
           "compare", "concat_types", "einsum_types", "matmul", "prod"]
