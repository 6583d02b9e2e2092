"""The codegen stage: checked IR -> PyTorch source. Generator, emitters, naming,
the runner that executes generated modules, and PyTorch weight loading.
Nothing here imports torch at import time.

The names below are loaded on first use, so that importing `shapelang.codegen.naming`
(for `CodegenError`) does not load the generator and every emitter."""

__all__ = ["CodegenError", "Generated", "Printer", "generate", "write_atomic"]
_WHERE = {"Generated": "generator", "generate": "generator", "write_atomic": "generator",
          "CodegenError": "naming", "Printer": "naming"}


def __getattr__(name: str):
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
