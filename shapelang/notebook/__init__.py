"""Notebook integration: `%load_ext shapelang` registers the `%%shapelang` cell magic.

IPython is imported only when the extension is loaded, so `import shapelang` stays light.
"""
from __future__ import annotations


def load_ipython_extension(ipython) -> None:
    from .magic import register

    register(ipython)
