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
comments. `run` (shapelang.runner) uses the instrumented variant, which records
the shape of every step.
"""
from __future__ import annotations

import io
import os
import re
import tempfile
import tokenize

from ..checker.ir import CheckedSpec
from .emit import FUNCTIONAL, Emitter
from .naming import RESERVED, CodegenError, Namer, Printer, _camel, class_name, doc_text, module_name, py_str
from .sizes import Sizes
from .units import Generated, Unit

__all__ = ["CodegenError", "Generated", "Generator", "Printer", "Unit", "generate", "write_atomic"]


class Generator:
    """Assembles the module: names the classes, has the emitter write the units and the
    sizes decide the config, then writes each class and the file around them."""

    def __init__(self, spec: CheckedSpec, *, instrument: bool = False, name: str | None = None):
        if not spec.ok:
            raise CodegenError("the spec does not check")
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
        self.emitter = Emitter(spec, self.sizes, instrument=instrument, taken=taken)

    # -------------------------------------------------------------- driver
    def generate(self) -> Generated:
        top = self.emitter.top(self.top_name)
        self.units = [top] + self.emitter.order
        self.sizes.classify(self.units)
        for unit in self.emitter.order:          # children before parents
            self._finish(unit)
        self._finish(top)
        return self._assemble(top)

    # -------------------------------------------------------------- pass 2: text
    def _finish(self, unit: Unit) -> None:
        if unit.class_name:
            return
        init = list(unit.init)
        for child in unit.children:
            self._finish(child)
        init = [self._child_names(line) for line in init]
        preamble = self.sizes.preamble(unit)
        is_top = unit.block is None
        lines = []
        if is_top:
            lines.append(f'    """The whole of {doc_text(self.file_name)}."""')
        else:
            args = ", ".join(f"{n}: [{', '.join(self.sizes.local(unit, x, compact=True, record=False) for x in t.shape)}]"
                             for (n, t, _a) in unit.inputs)
            lines.append(f'    """block {doc_text(unit.label)}({doc_text(args)})."""')
        lines += ["", f"    def __init__(self, cfg: {self.config_name}):", "        super().__init__()"]
        if is_top:
            for a, cmp, b, stmt in self.sizes.init_asserts:
                p = Printer(lambda x: "cfg." + self.sizes.dim_py[x])
                lines.append(f"        assert {p(a)} {cmp} {p(b)}, {py_str(stmt.text)}")
        if any("self.cfg." in line for line in preamble):
            lines.append("        self.cfg = cfg")
        lines += ["        " + line for line in init]
        arg_list = "".join(f", {a}: torch.Tensor" for a in unit.arg_names)
        if is_top:
            if len(unit.returns) == 1:
                ret_t, ret = "torch.Tensor", unit.returns[0][1]
            elif unit.returns:
                ret_t = "dict[str, torch.Tensor]"
                ret = "{" + ", ".join(f"{py_str(n)}: {py}" for n, py, _r in unit.returns) + "}"
            else:
                ret_t, ret = "None", None
        else:
            ret_t, ret = "torch.Tensor", unit.returns[0][1]
        lines += ["", f"    def forward(self{arg_list}) -> {ret_t}:"]
        body = preamble + unit.body
        lines += ["        " + line for line in body]
        if ret is not None:
            lines.append(f"        return {ret}")
        elif not body:
            lines.append("        pass")
        unit.text = "\n".join(lines)
        if is_top:
            unit.class_name = self.top_name
            return
        if not self.instrument and unit.text in self._by_text:
            unit.class_name = self._by_text[unit.text]
            unit.text = ""
            return
        unit.class_name = self._class_names.claim(class_name(unit.label))
        self._by_text[unit.text] = unit.class_name

    def _child_names(self, line: str) -> str:
        def sub(m):
            key = m.group(1)
            unit = next(u for u in self.units if str(u.key) == key)
            return unit.class_name
        return re.sub("\x00C([^\x00]*)\x00", sub, line)

    # -------------------------------------------------------------- the file
    def _assemble(self, top: Unit) -> Generated:
        spec = self.spec
        alias = self._functional_alias()
        uses_functional = any(FUNCTIONAL in u.text for u in self.units)
        fields = [(n, self.sizes.dim_py[self.sizes.syms[n]]) for n in spec.dims
                  if n not in spec.definitions and self.sizes.syms[n] in self.sizes.fields]
        props = [n for n in spec.dims if n in spec.definitions and self.sizes.base_syms(self.sizes.syms[n]) <= self.sizes.fields]
        with_defaults = all(n in spec.example for n, _ in fields)
        args = [(unit_arg, t, ref) for unit_arg, (ref, t, _anon) in zip(top.arg_names, top.inputs)]
        out = ['"""' + self._docstring(top, args) + '"""']
        if self.sizes.uses_math:
            out.append("import math")
        out.append("from dataclasses import dataclass")
        out += ["", "import torch"]
        if uses_functional:
            out.append(f"import torch.nn.functional as {alias}")
        out += ["from torch import nn", "", ""]
        out += ["@dataclass", f"class {self.config_name}:",
                '    """Hyper-parameters: the sizes fixed when the module is built."""']
        if fields:
            out.append("")
        for n, py in fields:
            default = f" = {spec.example[n]}" if with_defaults else ""
            out.append(f"    {py}: int{default}")
        constants = [n for n in props if not self.sizes.definitions[self.sizes.syms[n]].free_symbols]
        if constants:
            out += ["", "    # fixed by the spec: class constants, not fields"]
        for n in constants:
            p = Printer(lambda x: "self." + self.sizes.dim_py[x])
            out.append(f"    {self.sizes.dim_py[self.sizes.syms[n]]} = {p(self.sizes.definitions[self.sizes.syms[n]])}")
        for n in props:
            if n in constants:
                continue
            p = Printer(lambda x: "self." + self.sizes.dim_py[x])
            out += ["", "    @property", f"    def {self.sizes.dim_py[self.sizes.syms[n]]}(self) -> int:",
                    f"        return {p(self.sizes.definitions[self.sizes.syms[n]])}"]
        if self.emitter.uses_causal:
            out += ["", "", "def causal_mask(rows: int, cols: int, device: torch.device) -> torch.Tensor:",
                    '    """True above the diagonal: the keys a query may not look at."""',
                    "    return torch.ones(rows, cols, dtype=torch.bool, device=device).triu(1)"]
        for u in self.units[1:] + [top]:
            if u.text:
                out += ["", "", f"class {u.class_name}(nn.Module):", u.text]
        source = "\n".join(out) + "\n"
        source = source.replace(FUNCTIONAL, alias)
        outputs = [(n, r) for n, _py, r in top.returns]
        return Generated(source, module_name(os.path.splitext(self.file_name)[0]), self.top_name,
                         self.config_name, fields, args, outputs, len(top.returns) > 1)

    def _functional_alias(self) -> str:
        """`F` for torch.nn.functional, unless the module uses that name for something else
        (a size, a binding, a class): then `nnf`, `nnf_2`, ..."""
        used = {u.class_name for u in self.units} | {self.config_name}
        for u in self.units:
            text = "class C:\n" + u.text.replace(FUNCTIONAL, "functional_")
            previous = None
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.NAME and previous != ".":
                    used.add(tok.string)
                if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                    previous = tok.string
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
                 "in forward, e.g. `B, S, D = x.shape`. Each assumption is an `assert`.",
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


def generate(spec: CheckedSpec, *, instrument: bool = False) -> Generated:
    """The PyTorch module for a checked spec (CodegenError if it cannot be written)."""
    return Generator(spec, instrument=instrument).generate()


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
