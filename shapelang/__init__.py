"""shapelang: a language and static analyzer for the tensor shapes of transformer models.

The public API lives in `shapelang.api` and is re-exported here lazily, so that
importing the package (and `shapelang --help`) does not import sympy:

    import shapelang
    spec = shapelang.check("dim B\\ninput X: [B, 3]\\nY: X -> linear 4\\n")
    print(shapelang.trace(spec))
"""
__version__ = "0.1.0"

__all__ = ["CheckedSpec", "CodegenError", "Diagnostic", "__version__", "check", "check_file", "codegen",
           "grader", "render_check", "run", "to_json", "trace"]


_STAGES = ("api", "syntax", "checker", "render", "fmt", "codegen", "importer", "teaching", "cli", "lsp",
           "notebook", "serve")


def __getattr__(name: str):
    import importlib

    if name in _STAGES:    # `from shapelang import render` is the package, not api.render
        return importlib.import_module(f"{__name__}.{name}")
    api = importlib.import_module("shapelang.api")   # light: it loads each stage when first used

    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'shapelang' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:
    """`%load_ext shapelang`: the `%%shapelang` cell magic (IPython is imported only here)."""
    from .notebook import load_ipython_extension as load

    load(ipython)
