"""The checker stage: nodes -> checked IR. Sizes and the prover (dims), facts,
memory layout, the table of operations, the checker itself and the IR.

`check_text` and `check_file` are loaded on first use, so that reading plain data
of this stage (the explanations of the codes) does not import sympy."""

__all__ = ["check_file", "check_text"]


def __getattr__(name: str):
    if name in __all__:
        from . import checker

        return getattr(checker, name)
    raise AttributeError(f"module 'shapelang.checker' has no attribute {name!r}")
