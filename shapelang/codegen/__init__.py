"""The codegen stage: checked IR -> PyTorch source. Generator, emitters, naming,
the runner that executes generated modules, and PyTorch weight loading.
Nothing here imports torch at import time."""
from .generator import Generated, generate, write_atomic
from .naming import CodegenError, Printer

__all__ = ["CodegenError", "Generated", "Printer", "generate", "write_atomic"]
