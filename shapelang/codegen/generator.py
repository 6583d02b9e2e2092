"""Codegen stage: checked IR -> one readable PyTorch module per spec.

Input: a `CheckedSpec` that checks. Output: Python source in the style of
nanoGPT's model.py: a config @dataclass for the hyper-parameter sizes, one
nn.Module per block and one for the whole spec, the spec's own names, one
operation per line with its shape as a trailing comment.

Which sizes are hyper-parameters: every size in the shape of a `param` or
`buffer`, in an argument that creates weights (linear widths, embedding tables,
norm widths, stack depths), and every size a module needs but cannot read from
the shapes of its inputs. They live in the config; every other size is read
from the inputs in `forward` (`B, S, D = x.shape`). Assumptions become
`assert`s: in `__init__` when they involve hyper-parameters only, else at the
top of `forward`.

Everything comes from the IR: shapes, strides, resolved arguments. Nothing is
parsed again and no shape is derived here; the source text is only quoted in
comments. `run` (shapelang.codegen.runner) uses the instrumented variant, which records
the shape of every step.
"""
from __future__ import annotations

import os
import re
import tempfile

from ..checker.ir import CheckedSpec
from . import tables
from .attrs import NAMING
from .config_checks import config_checks, post_init
from .emit import FUNCTIONAL, Emitter
from .layout import fit, signature
from .naming import (
    RESERVED,
    CodegenError,
    Namer,
    Printer,
    _camel,
    _snake,
    class_name,
    doc_text,
    module_name,
    py_str,
)
from .sizes import Sizes
from .units import Generated, Unit

__all__ = ["CodegenError", "Generated", "Generator", "Printer", "Unit", "generate", "write_atomic"]


# the documented initialisation (docs/codegen.md, "Initialisation"): GPT-2's and nanoGPT's
INIT_LAYERS = ("nn.Linear(", "nn.Embedding(", "nn.Conv1d(", "nn.Conv2d(")
INIT_METHOD = [
    "",
    "    def _init_weights(self, module: nn.Module) -> None:",
    '        """normal(0, 0.02) weights, zero biases: linear, embedding, convolution.',
    "",
    "        Norms keep ones and zeros; the spec's own parameters are drawn the same way.",
    '        """',
    "        if isinstance(module, (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d)):",
    "            nn.init.normal_(module.weight, mean=0.0, std=0.02)",
    '            if getattr(module, "bias", None) is not None:',
    "                nn.init.zeros_(module.bias)",
]


class Generator:
    """Assembles the module: names the classes, has the emitter write the units and the
    sizes decide the config, then writes each class and the file around them.

    `names`: "dotted" (`__` in a spec name is a level of the state-dict key) or "flat";
    `attention`: "sdpa" (recognised attention is one F.scaled_dot_product_attention call)
    or "explicit" (every step written out, as the instrumented module of `run` has it)."""

    def __init__(self, spec: CheckedSpec, *, instrument: bool = False, name: str | None = None,
                 names: str = "dotted", attention: str = "sdpa"):
        if not spec.ok:
            raise CodegenError("the spec does not check")
        if names not in NAMING:
            raise CodegenError(f"names must be one of {', '.join(NAMING)}, not {names!r}")
        if attention not in ("sdpa", "explicit"):
            raise CodegenError(f"attention must be sdpa or explicit, not {attention!r}")
        self.spec, self.instrument = spec, instrument
        stem = os.path.splitext(os.path.basename(spec.path or "spec"))[0]
        self.file_name = os.path.basename(spec.path or "spec.shape")
        self.sizes = Sizes(spec)
        self.block_names = {ir.name for insts in spec.blocks.values() for ir in insts}
        top = _camel(name or stem)
        if top in self.block_names or top in RESERVED:
            top += "Model"
        self.top_name = top
        self.config_name = top + "Config"
        self._by_text: dict[str, str] = {}
        self._class_names = Namer(RESERVED | {self.top_name, self.config_name})
        taken = (RESERVED | set(self.sizes.dim_py.values()) | {self.top_name, self.config_name}
                 | self.block_names)
        self._taken, self._names, self._attention = taken, names, attention
        self.emitter = Emitter(spec, self.sizes, instrument=instrument, taken=taken, names=names,
                               attention=attention)

    # -------------------------------------------------------------- driver
    def generate(self) -> Generated:
        top = self._units()
        # tables whose sizes turn out fixed when the module is built: write it again with
        # them in __init__ (tables.py); the config fields stay the same
        # (a block with no state stays a function: its tables stay in it)
        eligible = {u.key: tables.eligible(u, self.emitter.table_sizes[u.key], self.sizes)
                    for u in self.units if u.key in self.emitter.table_sizes
                    and (u.block is None or any(not str(x).startswith("\x00I") for x in u.init))}
        eligible = {k: v for k, v in eligible.items() if v}
        if eligible:
            self.sizes = Sizes(self.spec)
            self.emitter = Emitter(self.spec, self.sizes, instrument=self.instrument, taken=self._taken,
                                   names=self._names, attention=self._attention)
            self.emitter.eligible = eligible
            top = self._units()
        self.alias = self._functional_alias()
        self.uses_functional = False
        for unit in self.emitter.order:          # children before parents
            self._finish(unit)
        self._finish(top)
        return self._assemble(top)

    def _units(self) -> Unit:
        top = self.emitter.top(self.top_name)
        self.units = [top] + self.emitter.order
        self.sizes.classify(self.units)
        return top

    # -------------------------------------------------------------- pass 2: text
    def _finish(self, unit: Unit) -> None:
        if unit.class_name:
            return
        is_top = unit.block is None
        # a block with no parameters, buffers or submodules is a plain function
        unit.function = not is_top and not unit.stacked and not unit.init and not self.instrument \
            and not unit.size_args
        for child in unit.children:
            self._finish(child)
            if child.function:
                unit.needed |= set(child.config_sizes)
        preamble = self.sizes.preamble(unit)
        init = [self._child_names(line) for line in unit.init]
        init = [line for line in init if line is not None]
        size_init = [f"self.{attr} = {'' if s in unit.size_args else 'cfg.'}{self.sizes.dim_py[s]}"
                     for s, attr in unit.size_attrs.items()]
        body = [self._child_names(line) for line in preamble + unit.body]
        ret = self._returns(unit, body)
        args = [f"{a}: torch.Tensor" for a in unit.arg_names]
        lines = []
        if is_top:
            lines.append(f'    """The whole of {doc_text(self.file_name)}."""')
        else:
            shapes = ", ".join(f"{n}: [{', '.join(self.sizes.local(unit, x, compact=True, record=False) for x in t.shape)}]"
                               for (n, t, _a) in unit.inputs)
            lines.append(f'    """block {doc_text(unit.label)}({doc_text(shapes)})."""')
        if unit.function:
            args += [f"{self.sizes.dim_py[s]}: int" for s in unit.config_sizes]
            if ret is not None:
                body.append("return " + ret if isinstance(ret, str) else ret)
            text = "\n".join(lines + self._lines(body, 4))
            self._name(unit, text, function=True)
            return
        own = "".join(f", {self.sizes.dim_py[s]}: int" for s in unit.size_args)
        lines += ["", f"    def __init__(self, cfg: {self.config_name}{own}):", "        super().__init__()"]
        for a, cmp, b, stmt in self.sizes.size_asserts(unit):
            p = Printer(lambda x: ("" if x in unit.size_args else "cfg.") + self.sizes.dim_py[x])
            lines += self._lines([f"assert {p(a)} {cmp} {p(b)}, {py_str(stmt.text)}"], 8)
        lines += self._lines(size_init + init, 8)
        initialised = is_top and any(k in self.source_so_far() for k in INIT_LAYERS) if is_top else False
        if initialised:
            lines += self._lines(["self.apply(self._init_weights)"], 8)
        if is_top:
            if len(unit.returns) == 1:
                ret_t = "torch.Tensor"
            elif unit.returns:
                ret_t = "dict[str, torch.Tensor]"
            else:
                ret_t = "None"
        else:
            ret_t = "torch.Tensor" if len(unit.returns) < 2 else \
                f"tuple[{', '.join(['torch.Tensor'] * len(unit.returns))}]"
        lines.append("")
        lines += ["    " + x for x in signature(4, "def forward", ["self"] + args, f" -> {ret_t}:")]
        lines += self._lines(body, 8)
        if ret is not None:
            lines += self._lines(["return " + ret] if isinstance(ret, str) else [ret], 8)
        elif not body:
            lines.append("        pass")
        if initialised:
            lines += INIT_METHOD
        self._name(unit, "\n".join(lines), function=False)

    def source_so_far(self) -> str:
        """The classes written so far and the top's own lines: which layers the model holds."""
        return "\n".join(u.text for u in self.units if getattr(u, "text", None)) + "\n".join(
            str(x) for x in self.units[0].init)

    def _returns(self, unit: Unit, body: list):
        """What forward returns; `out = x + m` then `return out` becomes `return x + m`."""
        is_top = unit.block is None
        if is_top and len(unit.returns) > 1:
            return "{" + ", ".join(f"{py_str(n)}: {py}" for n, py, _r in unit.returns) + "}"
        if not unit.returns:
            return None
        if len(unit.returns) > 1:     # `return h, k, v`
            return ", ".join(py for _n, py, _r in unit.returns)
        ret = unit.returns[0][1]
        last = body[-1] if body else None
        if isinstance(last, tuple) and last[0].startswith(ret + " = ") and not self.instrument:
            body.pop()
            return ("return " + last[0][len(ret) + 3:], last[1])
        return ret

    def _lines(self, items: list, indent: int) -> list[str]:
        out = []
        for item in items:
            code, comment = item if isinstance(item, tuple) else (item, None)
            if FUNCTIONAL in code:
                code = code.replace(FUNCTIONAL, self.alias)
                self.uses_functional = True
            out += [" " * indent + line if line else "" for line in fit(code, comment, indent)]
        return out

    def _name(self, unit: Unit, text: str, *, function: bool) -> None:
        unit.text = text
        if unit.block is None:
            unit.class_name = self.top_name
            return
        if not self.instrument and (function, text) in self._by_text:
            unit.class_name = self._by_text[(function, text)]
            unit.text = ""
            return
        if function:     # a module-level name no forward uses for a local
            for u in self.units:
                self._class_names.taken |= u.locals
            unit.class_name = self._class_names.claim(_snake(unit.label))
        else:
            unit.class_name = self._class_names.claim(class_name(unit.label))
        self._by_text[(function, text)] = unit.class_name

    def _child_names(self, line):
        """Fill in the markers a block call leaves (see steps._block); None drops the line."""
        if isinstance(line, tuple):
            return (self._child_names(line[0]), line[1])
        by_key = {str(u.key): u for u in self.units}
        m = re.match("\x00I([^\x00]*)\x00", line)
        if m:
            if by_key[m.group(1)].function:
                return None
            line = line[m.end():]

        def callee(m):
            unit = by_key[m.group(1)]
            return unit.class_name if unit.function else m.group(2)

        def extra(m):
            unit = by_key[m.group(1)]
            return "".join(f", {self.sizes.dim_py[s]}" for s in unit.config_sizes) if unit.function else ""

        line = re.sub("\x00K([^\x00|]*)[|]([^\x00]*)\x00", callee, line)
        line = re.sub("\x00A([^\x00]*)\x00", extra, line)
        return re.sub("\x00C([^\x00]*)\x00", lambda m: by_key[m.group(1)].class_name, line)

    # -------------------------------------------------------------- the file
    def _assemble(self, top: Unit) -> Generated:
        spec, sizes = self.spec, self.sizes
        alias = self.alias
        uses_functional = self.uses_functional
        fields = [(n, sizes.dim_py[sizes.syms[n]]) for n in spec.dims
                  if sizes.syms[n] not in sizes.definitions and sizes.syms[n] in sizes.fields]
        props = [n for n in spec.dims if sizes.syms[n] in sizes.definitions
                 and sizes.base_syms(sizes.syms[n]) <= sizes.fields]

        def default(n):
            sym = sizes.syms[n]
            if sym in sizes.fixed:
                return sizes.fixed[sym]
            return spec.example.get(n)

        args = [(unit_arg, t, ref) for unit_arg, (ref, t, _anon) in zip(top.arg_names, top.inputs)]
        out = ['"""' + self._docstring(top, args) + '"""', ""]
        if sizes.uses_math:
            out.append("import math")
        out.append("from dataclasses import dataclass")
        out += ["", "import torch"]
        if uses_functional:
            out.append(f"import torch.nn.functional as {alias}")
        out += ["from torch import nn", "", ""]
        out += ["@dataclass", f"class {self.config_name}:",
                '    """Hyper-parameters: the sizes fixed when the module is built, dropout and eps."""']
        if fields or sizes.extra:
            out.append("")
        ordered = [f for f in fields if default(f[0]) is None] + [f for f in fields if default(f[0]) is not None]
        for n, py in ordered:
            d = default(n)
            out.append(f"    {py}: int" + (f" = {d}" if d is not None else ""))
        for name, (typ, value) in sizes.extra.items():
            out.append(f"    {name}: {typ} = {value!r}")
        for n in props:
            p = Printer(lambda x: "self." + sizes.dim_py[x])
            out += ["", "    @property", f"    def {sizes.dim_py[sizes.syms[n]]}(self) -> int:",
                    f"        return {p(sizes.definitions[sizes.syms[n]])}"]
        checks = config_checks(spec, {n for n, _py in fields},
                               lambda n: n in sizes.syms and sizes._in_config(sizes.syms[n], sizes.fields))
        out += post_init(checks, lambda n: sizes.dim_py[sizes.syms[n]])
        if self.emitter.uses_causal:
            out += ["", "", "def causal_mask(rows: int, cols: int, device: torch.device) -> torch.Tensor:",
                    '    """True above the diagonal: the keys a query may not look at."""',
                    "    return torch.ones(rows, cols, dtype=torch.bool, device=device).triu(1)"]
        for u in self.units[1:] + [top]:
            if not u.text:
                continue
            if u.function:
                args_u = [f"{a}: torch.Tensor" for a in u.arg_names] + \
                    [f"{sizes.dim_py[s]}: int" for s in u.config_sizes]
                out += ["", ""] + signature(0, f"def {u.class_name}", args_u, " -> torch.Tensor:") + [u.text]
            else:
                out += ["", "", f"class {u.class_name}(nn.Module):", u.text]
        source = "\n".join(out) + "\n"
        source = source.replace(FUNCTIONAL, alias)
        outputs = [(n, r) for n, _py, r in top.returns]
        return Generated(source, module_name(os.path.splitext(self.file_name)[0]), self.top_name,
                         self.config_name, ordered, args, outputs, len(top.returns) > 1,
                         bool(self.emitter.eligible))

    def _functional_alias(self) -> str:
        """`F` for torch.nn.functional, unless the module uses that name for something else
        (a size, a local, a class): then `nnf`, `nnf_2`, ..."""
        used = set(self.block_names) | {self.top_name, self.config_name}
        for u in self.units:      # the sizes forward binds (a function takes some of them)
            used |= u.locals | {self.sizes.dim_py[s] for s in u.needed}
            used |= {self.sizes.dim_py[s] for s in u.size_args}     # constructor arguments
        alias, n = "F", 1
        while alias in used:
            alias, n = ("nnf" if n == 1 else f"nnf_{n}"), n + 1
        return alias

    def _docstring(self, top: Unit, args) -> str:
        def shape(t):
            return self.sizes.shape_comment(top, t.shape)
        lines = [f"{self.top_name} in PyTorch, generated by shapelang from {doc_text(self.file_name)}.", "",
                 "One nn.Module per block and one for the whole spec, with the spec's names;",
                 "each line of forward is one operation, its shape in the comment.",
                 "",
                 f"Sizes: the hyper-parameters in `{self.config_name}` are the sizes that fix",
                 "a weight or buffer shape, a layer width, an embedding table or a stack depth,",
                 "plus any size that no input shows. Every other size is read from the inputs",
                 "in forward, e.g. `B, S, D = x.shape`. Each assumption is checked: by the",
                 "config when it is about hyper-parameters only, else by an `assert`.",
                 f"`shapelang run {doc_text(self.file_name)}` runs this code and compares every shape",
                 "with the one the checker proved.",
                 "", "Inputs:"]
        dtypes = {"float": "float32", "int": "int64 (torch.long)", "bool": "bool"}
        for py, t, _ref in args:
            lines.append(f"    {py}: {shape(t)} {dtypes.get(t.dtype, t.dtype)}")
        lines.append("Returns:")
        refs_types = {}
        for b in self.spec.bindings:
            for n, r, t in zip(b.names, b.results, b.types):
                refs_types[n] = t
        for n, _py, _r in top.returns:
            lines.append(f"    {n}: {shape(refs_types[n])}")
        if not top.returns:
            lines.append("    nothing")
        lines.append("")
        return "\n".join(lines)


def generate(spec: CheckedSpec, *, instrument: bool = False, names: str = "dotted",
             attention: str = "sdpa") -> Generated:
    """The PyTorch module for a checked spec (CodegenError if it cannot be written).

    names: "dotted" (`__` in a name is a level of the state-dict key) or "flat";
    attention: "sdpa" or "explicit" (see Generator)."""
    return Generator(spec, instrument=instrument, names=names, attention=attention).generate()


# ------------------------------------------------------------------ writing files

def write_atomic(path: str, text: str, *, force: bool) -> None:
    """Write `text` to `path` through a temporary file; refuse to replace a file unless `force`."""
    if not force and os.path.lexists(path):
        raise FileExistsError(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".shapelang-", suffix=".py", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        if force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)      # fails if the file appeared meanwhile: never clobber
            except FileExistsError:
                raise
            except OSError:
                if os.path.lexists(path):
                    raise FileExistsError(path) from None
                os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
