"""shapelang: a language and static analyzer for tensor shapes in transformer models."""

__version__ = "0.1.0"
