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

import json
import os
import re
import tempfile
from dataclasses import dataclass, field

import sympy as sp

from ..checker.ir import BlockIR, CheckedSpec
from .emit import FUNCTIONAL, EmitMixin
from .naming import (
    MODULE_ATTRS,
    RESERVED,
    CodegenError,
    Namer,
    Printer,
    SizesMixin,
    _camel,
    _identifier,
    _symbols_in,
)

__all__ = ["CodegenError", "Generated", "Generator", "Printer", "Unit", "generate", "write_atomic"]


# ------------------------------------------------------------------ units

@dataclass
class Unit:
    """One nn.Module class: the whole spec (`block` None) or one instantiation of a block."""
    key: object
    label: str
    block: BlockIR | None
    inputs: list                      # (ref, TensorType, is_anonymous)
    params: list
    buffers: list
    bindings: list
    rename: dict = field(default_factory=dict)   # outer size -> the block's own dim (forward only)
    # pass 1
    arg_names: list = field(default_factory=list)
    init: list = field(default_factory=list)      # __init__ lines after super().__init__()
    body: list = field(default_factory=list)      # forward lines
    needed: set = field(default_factory=set)      # sizes the forward body uses (local names)
    init_syms: set = field(default_factory=set)   # sizes __init__ uses (spec names)
    readable: dict = field(default_factory=dict)  # size -> (arg index, axis)
    returns: list = field(default_factory=list)   # (name, code) returned by forward
    children: list = field(default_factory=list)  # child units, in order
    dead: set = field(default_factory=set)
    # pass 2
    class_name: str = ""
    text: str = ""


@dataclass
class Generated:
    source: str
    module_name: str
    top_class: str
    config_class: str
    fields: list          # (dim name, python field name) of the config
    args: list            # (python name, TensorType, ref) of the top forward, in order
    outputs: list         # (name, ref) returned by the top forward
    returns_dict: bool

class Generator(SizesMixin, EmitMixin):
    def __init__(self, spec: CheckedSpec, *, instrument: bool = False, name: str | None = None):
        if not spec.ok:
            raise CodegenError("the spec does not check")
        self.spec, self.instrument = spec, instrument
        stem = os.path.splitext(os.path.basename(spec.path or "spec"))[0]
        self.file_name = os.path.basename(spec.path or "spec.shape")
        self.prover = spec.prover
        self.syms = dict(self.prover.user) if self.prover else {}
        self.definitions = {self.syms[k]: v for k, v in spec.definitions.items()}
        self.folds = [(v, self.syms[k]) for k, v in spec.definitions.items()
                      if v.free_symbols and not v.is_Symbol]
        global_names = Namer(RESERVED)
        self.dim_py = {self.syms[n]: global_names.claim(n) for n in spec.dims}
        self.block_names = {ir.name for insts in spec.blocks.values() for ir in insts}
        top = _camel(name or stem)
        if top in self.block_names or top in RESERVED:
            top += "Model"
        self.top_name = top
        self.config_name = top + "Config"
        self.units: dict = {}
        self.order: list = []
        self.uses_math = self.uses_causal = False
        self._by_text: dict[str, str] = {}
        self._class_names = Namer(RESERVED | {self.top_name, self.config_name})

    # -------------------------------------------------------------- driver
    def generate(self) -> Generated:
        spec = self.spec
        inputs = [(d.name, d.type, False) for d in spec.decls if d.kind == "input"]
        for b in spec.bindings:
            for s in b.steps:
                if s.op == "input":
                    inputs.append((s.ref, s.out, True))
        top = Unit("top", self.top_name, None, inputs,
                   [d for d in spec.decls if d.kind == "param"],
                   [d for d in spec.decls if d.kind == "buffer"], spec.bindings)
        self.units["top"] = top
        self._build(top)
        self._classify()
        for unit in self.order:          # children before parents
            self._finish(unit)
        self._finish(top)
        return self._assemble(top)

    def _unit_for(self, ir: BlockIR) -> Unit:
        key = id(ir)
        if key in self.units:
            return self.units[key]
        # forward uses the block's own dims: `x: [B, S, D]` called with [B, T, D] reads S
        rename, taken = {}, set()
        for local_sym, outer in ir.binding_of_dims.items():
            if outer not in rename and local_sym not in taken:
                rename[outer] = local_sym
                taken.add(local_sym)
        # ... unless the block also uses the outer size of that name
        present = set()
        for d in ir.inputs + ir.params + ir.buffers:
            for x in d.type.shape:
                present |= sp.sympify(x).free_symbols
        for b in ir.bindings:
            for s in b.steps:
                for t in s.outputs:
                    for x in t.shape:
                        present |= sp.sympify(x).free_symbols
                present |= _symbols_in(s.detail)
        rename = {o: loc for o, loc in rename.items() if loc not in present}
        unit = Unit(key, ir.name, ir, [(d.name, d.type, False) for d in ir.inputs], ir.params,
                    ir.buffers, ir.bindings, rename)
        self.units[key] = unit
        saved = (self.refs, self.types, self._names, self._attrs)
        self._build(unit)
        self.refs, self.types, self._names, self._attrs = saved
        self.order.append(unit)
        return unit

    # -------------------------------------------------------------- pass 1: one unit
    def _build(self, unit: Unit) -> None:
        is_top = unit.block is None
        names = Namer(RESERVED | set(self.dim_py.values()) | {self.top_name, self.config_name}
                      | self.block_names)
        attrs = Namer(MODULE_ATTRS)
        self.refs: dict[str, str] = {}
        self.types: dict = {}
        unit.arg_names = []
        for ref, t, anon in unit.inputs:
            if not anon:
                py = names.claim(ref)
                self.refs[ref] = py
                self.types[ref] = t
                unit.arg_names.append(py)
        for d in unit.params + unit.buffers:
            self.refs[d.name] = "self." + attrs.claim(d.name)
            self.types[d.name] = d.type
        # which binding results are used later (the rest are returned, or dead in a block)
        used = set()
        for b in unit.bindings:
            for s in b.steps:
                used |= set(s.inputs)
        result_ref = unit.block.result if unit.block is not None else None
        if result_ref:
            used.add(result_ref)
        binding_names = {}
        for b in unit.bindings:
            if b.names == ("return",):
                continue
            for n, r in zip(b.names, b.results):
                dead = r not in used and not is_top
                binding_names[n] = names.claim(("_" if dead else "") + n)
                if dead:
                    unit.dead.add(n)
        self._names, self._attrs = names, attrs
        for ref, t, anon in unit.inputs:   # anonymous inputs: named after their binding
            if anon:
                owner = next(b for b in unit.bindings if any(s.ref == ref for s in b.steps))
                py = names.claim(f"{owner.names[0]}_input")
                self.refs[ref] = py
                self.types[ref] = t
                unit.arg_names.append(py)
        for d in unit.params:
            unit.init.append(f"{self.refs[d.name]} = nn.Parameter({self._param_init(unit, d)})"
                             f"  # {self.shape_comment(unit, d.type.shape)}")
        for d in unit.buffers:
            attr = self.refs[d.name][5:]
            unit.init.append(f'self.register_buffer("{attr}", {self._buffer_init(unit, d)})'
                             f"  # {self.shape_comment(unit, d.type.shape)}, not learned: set its values")
        for b in unit.bindings:
            self._binding(unit, b, binding_names)
        if is_top:
            sinks = []
            for k, b in enumerate(unit.bindings):
                later = set()
                for b2 in unit.bindings[k + 1:]:
                    for s in b2.steps:
                        later |= set(s.inputs)
                for n, r in zip(b.names, b.results):
                    if r not in later:
                        sinks.append((n, binding_names[n], r))
            unit.returns = sinks
        else:
            if result_ref is None:
                raise CodegenError(f"block `{unit.label}` has no result")
            unit.returns = [("return", self.refs[result_ref], result_ref)]

    # -------------------------------------------------------------- pass 2: text
    def _finish(self, unit: Unit) -> None:
        if unit.class_name:
            return
        init = list(unit.init)
        for child in unit.children:
            self._finish(child)
        init = [self._child_names(line) for line in init]
        preamble = self._preamble(unit)
        is_top = unit.block is None
        lines = []
        if is_top:
            lines.append(f'    """The whole of {self.file_name}."""')
        else:
            args = ", ".join(f"{n}: [{', '.join(self.local(unit, x, compact=True, record=False) for x in t.shape)}]"
                             for (n, t, _a) in unit.inputs)
            lines.append(f'    """block {unit.label}({args})."""')
        lines += ["", f"    def __init__(self, cfg: {self.config_name}):", "        super().__init__()"]
        if is_top:
            for a, cmp, b, stmt in self.init_asserts:
                p = Printer(lambda x: "cfg." + self.dim_py[x])
                lines.append(f"        assert {p(a)} {cmp} {p(b)}, {json.dumps(stmt.text)}")
        if any("self.cfg." in line for line in preamble):
            lines.append("        self.cfg = cfg")
        lines += ["        " + line for line in init]
        arg_list = "".join(f", {a}: torch.Tensor" for a in unit.arg_names)
        if is_top:
            if len(unit.returns) == 1:
                ret_t, ret = "torch.Tensor", unit.returns[0][1]
            elif unit.returns:
                ret_t = "dict[str, torch.Tensor]"
                ret = "{" + ", ".join(f'"{n}": {py}' for n, py, _r in unit.returns) + "}"
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
        unit.class_name = self._class_names.claim(unit.label, escape=False) \
            if unit.label not in RESERVED else self._class_names.claim(unit.label + "Block", escape=False)
        self._by_text[unit.text] = unit.class_name

    def _child_names(self, line: str) -> str:
        def sub(m):
            key = m.group(1)
            unit = next(u for u in self.units.values() if str(u.key) == key)
            return unit.class_name
        return re.sub("\x00C([^\x00]*)\x00", sub, line)

    # -------------------------------------------------------------- the file
    def _assemble(self, top: Unit) -> Generated:
        spec = self.spec
        local_names = set()
        for u in [top] + self.order:
            for line in u.text.split("\n"):
                m = re.match(r"\s*([\w, ]+) = ", line)
                if m:
                    local_names |= {n.strip() for n in m.group(1).split(",")}
            local_names |= set(u.arg_names)
        alias = "F" if "F" not in local_names else "nnf"
        uses_functional = any(FUNCTIONAL in u.text for u in [top] + self.order)
        fields = [(n, self.dim_py[self.syms[n]]) for n in spec.dims
                  if n not in spec.definitions and self.syms[n] in self.fields]
        props = [n for n in spec.dims if n in spec.definitions and self.base_syms(self.syms[n]) <= self.fields]
        with_defaults = all(n in spec.example for n, _ in fields)
        args = [(unit_arg, t, ref) for unit_arg, (ref, t, _anon) in zip(top.arg_names, top.inputs)]
        out = ['"""' + self._docstring(top, args) + '"""']
        if self.uses_math:
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
        constants = [n for n in props if not self.definitions[self.syms[n]].free_symbols]
        if constants:
            out += ["", "    # fixed by the spec: class constants, not fields"]
        for n in constants:
            p = Printer(lambda x: "self." + self.dim_py[x])
            out.append(f"    {self.dim_py[self.syms[n]]} = {p(self.definitions[self.syms[n]])}")
        for n in props:
            if n in constants:
                continue
            p = Printer(lambda x: "self." + self.dim_py[x])
            out += ["", "    @property", f"    def {self.dim_py[self.syms[n]]}(self) -> int:",
                    f"        return {p(self.definitions[self.syms[n]])}"]
        if self.uses_causal:
            out += ["", "", "def causal_mask(rows: int, cols: int, device: torch.device) -> torch.Tensor:",
                    '    """True above the diagonal: the keys a query may not look at."""',
                    "    return torch.ones(rows, cols, dtype=torch.bool, device=device).triu(1)"]
        for u in self.order + [top]:
            if u.text:
                out += ["", "", f"class {u.class_name}(nn.Module):", u.text]
        source = "\n".join(out) + "\n"
        source = source.replace(FUNCTIONAL, alias)
        outputs = [(n, r) for n, _py, r in top.returns]
        return Generated(source, _identifier(os.path.splitext(self.file_name)[0]), self.top_name,
                         self.config_name, fields, args, outputs, len(top.returns) > 1)

    def _docstring(self, top: Unit, args) -> str:
        def shape(t):
            return self.shape_comment(top, t.shape)
        lines = [f"{self.top_name} in PyTorch, generated by shapelang from {self.file_name}.", "",
                 "One nn.Module per block and one for the whole spec, with the spec's names;",
                 "each line of forward is one operation, its shape in the comment.",
                 "",
                 f"Sizes: the hyper-parameters in `{self.config_name}` are the sizes that fix",
                 "a weight or buffer shape, a layer width, an embedding table or a stack depth,",
                 "plus any size that no input shows. Every other size is read from the inputs",
                 "in forward, e.g. `B, S, D = x.shape`. Each assumption is an `assert`.",
                 f"`shapelang run {self.file_name}` runs this code and compares every shape",
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
