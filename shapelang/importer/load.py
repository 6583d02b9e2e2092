"""Import, stage 1: find the module, make its example inputs, and trace it with torch.export.

`resolve("pkg.models:GPT", kwargs)` imports `pkg.models` (or a file, `path/to/models.py:GPT`)
and builds the module: an nn.Module instance is used as it is, a class or a factory is
called with `kwargs`. `example_inputs` makes one random tensor per input. `export` traces
the module with every named axis dynamic (`torch.export.Dim.DYNAMIC`), after checking that
axes with the same name have the same size (`torch._check`), so export treats them as one
size.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import logging
import os
import re
import sys
from dataclasses import dataclass, field

import torch
from torch import nn

WRAPPED = "inner"     # the attribute under which the wrapper holds the user's module


class ImportFailure(Exception):
    """The module cannot be imported as a faithful spec; the message says why."""


class UsageError(ImportFailure):
    """The command was given something it cannot use (exit 2): a malformed size, no module."""


@dataclass
class InputSpec:
    name: str
    shape: tuple
    dtype: str = "float"                     # float, int, bool
    axes: list = field(default_factory=list)  # per axis: a dim name, or None for a fixed size
    named: bool = False                      # axes named by the user (else by `default_axes`)


def resolve(target: str, kwargs: dict | None = None) -> nn.Module:
    """The module named by `MODULE:NAME` (NAME may be dotted), built with `kwargs` if callable."""
    kwargs = dict(kwargs or {})
    if ":" not in target:
        raise UsageError(f"`{target}`: write the module as MODULE:CLASS or MODULE:factory")
    mod_name, _, attr = target.rpartition(":")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
            path = os.path.abspath(mod_name)
            name = "_shapelang_import_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportFailure(f"cannot load `{mod_name}`")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(mod_name)
    except ImportFailure:
        raise
    except Exception as e:   # the user's code: any error it raises is reported, not a traceback
        raise UsageError(f"cannot import `{mod_name}`: {type(e).__name__}: {e}") from e
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"`{mod_name}` has no `{attr}`")
        obj = getattr(obj, part)
    if isinstance(obj, nn.Module):
        if kwargs:
            raise UsageError(f"`{attr}` is a module instance already: it takes no arguments")
        return obj
    if not callable(obj):
        raise UsageError(f"`{attr}` is neither an nn.Module, a class nor a factory")
    try:
        built = obj(**kwargs)
    except Exception as e:   # the user's factory: its error is reported, not a traceback
        raise UsageError(f"building the module failed: `{attr}(**{kwargs})` raised "
                         f"{type(e).__name__}: {_first_line(e)}") from e
    if not isinstance(built, nn.Module):
        raise UsageError(f"`{attr}` returned a {type(built).__name__}, not an nn.Module")
    return built


def forward_names(module: nn.Module) -> list[str]:
    """The names of forward's positional parameters, in order."""
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


BATCH, SEQUENCE = "B", ["S", "T", "U", "Sq", "Sk"]
IMAGE = ["Himg", "Wimg"]
TENTATIVE = "_axis"          # a default name for an axis export may find fixed


def default_axes(inputs: list[InputSpec], channels_first: bool = False) -> None:
    """Name the axes nobody named: axis 0 is the batch `B`, axis 1 a sequence length (`S`,
    then `T`, `U` for other lengths: axes of the same example size share a name). Every
    other axis but the features gets a name of its own too, and all are traced with
    `Dim.AUTO`: export then fixes the ones the module fixes (the channels of a convolution,
    an image of the size a module asserts) and `name_dynamic` names the ones that stay free.
    The features are the last axis of a 3-d input, or its axis 1 in a module with Conv1d
    layers ([B, C, L]): export cannot be relied on to fix them (a reshape into a linear
    layer's width is not a guard it records)."""
    lengths: dict[int, str] = {}
    for i, inp in enumerate(inputs):
        if inp.axes:
            continue
        rank = len(inp.shape)
        axes = [f"{TENTATIVE}{i}_{a}" for a in range(rank)]
        if rank == 3 and inp.dtype == "float":
            axes[1 if channels_first else 2] = None
        if rank >= 1:
            axes[0] = BATCH
        if rank >= 2 and axes[1] is not None:
            size = inp.shape[1]
            if size not in lengths:
                lengths[size] = SEQUENCE[len(lengths)] if len(lengths) < len(SEQUENCE) else f"S{len(lengths)}"
            axes[1] = lengths[size]
        inp.axes = axes


def name_dynamic(inputs: list[InputSpec], exprs: list[list]) -> None:
    """After export: the default-named axes it fixed lose their names, and the sequence names
    go to the axes that stayed free, in order (`[B, C, L]` with C fixed: `[B, S]` free);
    the two spatial axes of an image `[B, C, H, W]` are `Himg`, `Wimg`."""
    given: dict[str, str] = {}
    taken = {n for inp in inputs if inp.named for n in inp.axes if n}
    for inp, shape in zip(inputs, exprs):
        if inp.named:
            continue
        free = [a for a, e in enumerate(shape) if e is not None]
        image = len(inp.shape) == 4 and inp.dtype == "float" and 1 not in free and {2, 3} <= set(free)
        for a, name in enumerate(inp.axes):
            if shape[a] is None or name is None:
                inp.axes[a] = None
                continue
            if name == BATCH:
                continue
            key = str(shape[a])
            if key not in given:
                pool = IMAGE if image and a in (2, 3) else SEQUENCE
                given[key] = next((n for n in pool if n not in given.values() and n not in taken),
                                  f"S{len(given)}")
            inp.axes[a] = given[key]


def example_inputs(inputs: list[InputSpec], vocab: int, seed: int = 0,
                   sizes: dict | None = None) -> list[torch.Tensor]:
    """Random tensors for the inputs (floats N(0, 1), ids below `vocab`, bool masks); `sizes`
    replaces the example size of every axis with a dim name in it."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for inp in inputs:
        shape = tuple(sizes.get(n, s) if (sizes and n) else s for s, n in zip(inp.shape, inp.axes))
        if inp.dtype == "int":
            out.append(torch.randint(0, max(vocab, 1), shape, generator=g))
        elif inp.dtype == "bool":
            out.append(torch.rand(shape, generator=g) < 0.2)
        else:
            out.append(torch.randn(shape, generator=g))
    return out


class Call(nn.Module):
    """Calls the user's module with the example's keyword arguments, after telling export
    which axes are the same size."""

    def __init__(self, module: nn.Module, equal: list, kwargs: dict):
        super().__init__()
        setattr(self, WRAPPED, module)
        self._equal, self._kwargs = equal, kwargs

    def forward(self, *xs):
        for (i, a), (j, b) in self._equal:
            torch._check(xs[i].size(a) == xs[j].size(b))
        return getattr(self, WRAPPED)(*xs, **self._kwargs)


def export(module: nn.Module, inputs: list[InputSpec], tensors: list, call_kwargs: dict):
    """torch.export of `module` on `tensors`, every named axis dynamic."""
    first: dict[str, tuple] = {}
    equal = []
    dynamic = []
    for i, inp in enumerate(inputs):
        spec = {}
        for a, name in enumerate(inp.axes):
            if name is None:
                continue
            # axes the user named must stay dynamic; the default ones may turn out fixed
            spec[a] = torch.export.Dim.DYNAMIC if inp.named else torch.export.Dim.AUTO
            if name.startswith(TENTATIVE):
                continue
            if name in first:
                equal.append((first[name], (i, a)))
            else:
                first[name] = (i, a)
        dynamic.append(spec)
    wrapper = Call(module, equal, call_kwargs).eval()
    try:
        with _quiet_torch_logs():
            return torch.export.export(wrapper, tuple(tensors), dynamic_shapes=(tuple(dynamic),), strict=False)
    except Exception as e:   # export's own explanation is the useful part
        text = str(e).strip().splitlines()
        first_lines = " ".join(line.strip() for line in text[:6] if line.strip())
        if "data-dependent" in str(e) or "DataDependent" in type(e).__name__:
            raise UsageError("forward depends on the values of its inputs (an `if` on a tensor, or a "
                             "shape computed from values), which torch.export cannot trace and a spec "
                             f"cannot say: {type(e).__name__}: {_first_line(e)[:200]}") from e
        raise UsageError(f"torch.export could not trace the module: {type(e).__name__}: "
                         f"{first_lines[:800]}") from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:400] if text else ""


@contextlib.contextmanager
def _quiet_torch_logs():
    """torch logs a failed trace (with its stack) at ERROR level; the import reports it once."""
    loggers = [logging.getLogger(n) for n in list(logging.root.manager.loggerDict)
               if n == "torch" or n.startswith("torch.")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


# example inputs larger than this many elements are refused: the import traces, runs and
# compares the module at the example sizes, so they should be small (2x8x32)
MAX_EXAMPLE_ELEMENTS = 1 << 24


def check_example_size(inputs: list) -> None:
    total = 0
    for inp in inputs:
        n = 1
        for s in inp.shape:
            n *= s
        total += n
    if total > MAX_EXAMPLE_ELEMENTS:
        raise UsageError(f"the example inputs have {total:,} elements (at most {MAX_EXAMPLE_ELEMENTS:,}): "
                         "the import traces and compares the module at these sizes, so give small ones "
                         "(e.g. --input x=2x8x32); every size the module does not fix stays a name")


def parse_input(text: str, index: int, names: list[str]) -> InputSpec:
    """`idx=2x8:int`, `2x8x32`, `x=2x8x32:float` -> an InputSpec (the name defaults to forward's)."""
    m = re.fullmatch(r"(?:([A-Za-z_]\w*)=)?(\d+(?:x\d+)*)(?::(float|int|long|bool))?", text.strip())
    if not m:
        raise UsageError(f"`--input {text}`: write it as NAME=2x8x32 or NAME=2x8:int")
    name = m.group(1) or (names[index] if index < len(names) else f"x{index}")
    shape = tuple(int(s) for s in m.group(2).split("x"))
    if any(s < 1 for s in shape):
        raise UsageError(f"`--input {text}`: every size must be at least 1")
    dtype = {"long": "int", None: "float"}.get(m.group(3), m.group(3))
    return InputSpec(name, shape, dtype)


def parse_value(text: str):
    """A keyword argument's value: an int, a float, true/false, none, or else the text itself."""
    t = text.strip()
    if re.fullmatch(r"[-+]?\d+", t):
        return int(t)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", t):
        return float(t)
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    return t.strip("\"'")


def parse_kwargs(items) -> dict:
    out = {}
    for item in items or []:
        for part in item.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise UsageError(f"`{part}`: write keyword arguments as NAME=VALUE")
            k, _, v = part.partition("=")
            if not k.strip().isidentifier():
                raise UsageError(f"`{k}` is not a Python name")
            out[k.strip()] = parse_value(v)
    return out
