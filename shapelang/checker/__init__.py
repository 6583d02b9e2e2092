"""The checker stage: nodes -> checked IR. Sizes and the prover (dims), facts,
memory layout, the table of operations, the checker itself and the IR."""
from .checker import check_file, check_text

__all__ = ["check_file", "check_text"]
