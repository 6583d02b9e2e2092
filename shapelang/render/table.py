"""The trace table (`shapelang trace`): every declaration and step with its shapes, at the
example sizes, with parameters and FLOPs; then each block's table in nesting order; then the
totals, factored the way a textbook writes them.

The table fits a width: when it is too wide, columns are first wrapped between words, then
left out in the order of `DROP` (the same in every table of the trace), and a note says
which. Nothing here decides anything: it prints what the checker computed.
"""
from __future__ import annotations

from ..checker import dims as dimlib
from ..checker import dtypes
from ..checker.ir import CheckedSpec
from ..checker.lazysympy import sympy as sp
from . import poly
from .columns import Cell, Column, Line, fit_tables, plain, wrap_line
from .common import _axes, example_number, example_shape, notation, shape_text, shapes_in
from .svg import Axis, axes_of, changes
from .text import check_lines

DEFAULT_WIDTH = 100    # characters, when the caller does not say (a pipe, a file, the API)
MAX_DIGITS = 30        # longer numbers are shown by their first digits and their length

COLUMNS = [Column("binding", "binding"), Column("line", "line"), Column("op", "operation", floor=32),
           Column("in", "shape in"), Column("out", "shape out"), Column("ex", "example out"),
           Column("params", "params"), Column("flops", "flops"), Column("axes", "axes from")]
# left out first to last when the table cannot fit by wrapping; never: binding, operation,
# shape out, and the provenance column when it was asked for
DROP = ["flops", "line", "in", "params", "ex"]
# spare room goes to these first
PRIORITY = ["binding", "op", "out", "ex", "axes", "in", "params", "line", "flops"]
NAMES = {c.key: c.header for c in COLUMNS}


def _fmt_int(n) -> str:
    if n is None:
        return ""
    digits = str(abs(n))
    if len(digits) > MAX_DIGITS:
        return f"{_big(n)} ({len(digits)} digits)"
    return f"{n:,}"


def _big(n) -> str:
    """A whole number, or its first digits and its power of ten when it is too long to read."""
    digits = str(abs(n))
    if len(digits) <= MAX_DIGITS:
        return str(n)
    return f"{'-' if n < 0 else ''}{digits[0]}.{digits[1:4]}…e{len(digits) - 1}"


def _ex_text(ex) -> str:
    return "[" + ", ".join(map(_big, ex)) + "]"


def _shape_cell(shapes: list, changed: list | None = None, suffixes: list | None = None) -> Cell:
    """Shapes (lists of axis texts) joined by ` | `, the changed axes marked for colour, each
    followed by its suffix (the dtype where it is not the default)."""
    text, spans = "", []
    for k, parts in enumerate(shapes):
        if k:
            text += " | "
        text += "["
        for j, part in enumerate(parts):
            if j:
                text += ", "
            if changed and j in changed[k]:
                spans.append((len(text), len(text) + len(part), "changed"))
            text += part
        text += "]" + (suffixes[k] if suffixes else "")
    return Cell(text, tuple(spans))


class _Trace:
    def __init__(self, spec: CheckedSpec, provenance: bool, example_only: bool):
        self.spec = spec
        self.provenance = provenance
        self.example_only = example_only
        self.has_example = bool(spec.example)
        self.counts = []
        self.book = None
        self._axes: dict = {}
        self._shapes: dict = {}
        self._sizes: dict = {}
        self._values: dict = {}

    # ------------------------------------------------------------ memoized pieces
    def shape(self, shape) -> str:
        key = tuple(shape)
        if key not in self._shapes:
            self._shapes[key] = shape_text(shape, self.spec)
        return self._shapes[key]

    def size(self, d) -> str:
        """One axis as `shape_text` writes it."""
        if d not in self._sizes:
            self._sizes[d] = shape_text((d,), self.spec)[1:-1]
        return self._sizes[d]

    def axes(self, shape, tp) -> list:
        """Fresh `Axis` objects (`changes` tags them) for a shape with provenance `tp`."""
        key = (tuple(shape), id(tp))
        if key not in self._axes:
            self._axes[key] = [(a.size, a.ex, a.atoms, a.root, a.depth)
                               for a in axes_of(self.spec, shape, tp, self.axis_size)]
        return [Axis(*a) for a in self._axes[key]]

    def axis_size(self, d) -> tuple:
        """An axis's size as the checker prints it and its example value."""
        if d not in self._values:
            self._values[d] = (dimlib.show(d, notation(self.spec)), example_number(self.spec, d))
        return self._values[d]

    # ------------------------------------------------------------ numbers
    def formula(self, e) -> str:
        e = sp.sympify(e) if isinstance(e, int) else e
        if not e.free_symbols:
            return self.size(e)
        if self.book is None:
            def value(x):
                v = self.spec.example_value(x)
                return None if v is None else float(v)
            self.book = lambda x: poly.textbook(x, self.spec.dims, self.counts, value)
        return self.book(e) or self.size(e)

    def amount(self, e) -> str:
        """A count for a table cell: the number at the example, else the formula."""
        if e == 0:
            return ""
        n = example_number(self.spec, e)
        return _fmt_int(n) if n is not None else self.formula(e)

    def total(self, label: str, e, indent: str = "") -> str:
        n = example_number(self.spec, e)
        if n is not None and (self.example_only or not sp.sympify(e).free_symbols):
            return f"{indent}{label}: {_fmt_int(n)}"
        return f"{indent}{label}: {self.formula(e)}" + (f" = {_fmt_int(n)}" if n is not None else "")

    def size_text(self, size) -> str:
        """A size given to a block's size parameter, with its value at the example sizes."""
        text = self.size(size)
        ex = example_shape(self.spec, [size])
        if ex is not None and not self.example_only and text != _ex_text(ex)[1:-1]:
            return f"{text} ({_ex_text(ex)[1:-1]})"
        return text if ex is None else (_ex_text(ex)[1:-1] if self.example_only else text)

    def shape_text(self, shape) -> str:
        """A shape as written, or at the example sizes in the compact trace."""
        ex = example_shape(self.spec, shape) if self.example_only else None
        return self.shape(shape) if ex is None else _ex_text(ex)

    # ------------------------------------------------------------ rows
    def types(self, decls, bindings) -> dict:
        types = {d.name: (d.type.shape, None) for d in decls}
        for b in bindings:
            for s in b.steps:
                tps = s.provenance or ()
                for k, t in enumerate(s.outputs):
                    types[f"{s.ref}.{k}"] = (t.shape, tps[k] if k < len(tps) else None)
                types[s.ref] = (s.out.shape, tps[0] if tps else None)
        return types

    def _changed(self, s, types) -> list:
        """Per output: the positions of the axes the step changes (as the picture marks them)."""
        ins = [self.axes(*types[r]) for r in s.inputs if r in types]
        tps = s.provenance or ()
        out = []
        for k, t in enumerate(s.outputs):
            axes = self.axes(t.shape, tps[k] if k < len(tps) else None)
            axes, _, _ = changes(s.op, ins, axes)
            out.append({j for j, a in enumerate(axes) if a.tag})
        return out

    def _shape_in(self, s, types) -> Cell:
        return Cell(shapes_in(s.op, [self.shape(types[r][0]) for r in s.inputs if r in types]))

    def step_rows(self, b, types) -> list[dict]:
        rows = []
        name = ", ".join(b.names)
        for k, s in enumerate(b.steps):
            changed = self._changed(s, types)
            row = {"binding": Cell(name, ((0, len(name), "name"),)) if k == len(b.steps) - 1 else Cell(),
                   "line": Cell(str(s.span.line)), "op": Cell(s.text),
                   "in": self._shape_in(s, types),
                   "out": _shape_cell([[self.size(d) for d in t.shape] for t in s.outputs], changed,
                                      [dtypes.suffix(t.dtype) for t in s.outputs])}
            exs = [example_shape(self.spec, t.shape) for t in s.outputs]
            if all(e is not None for e in exs):
                row["ex"] = _shape_cell([[_big(v) for v in e] for e in exs], changed)
            elif getattr(self.spec.prover, "unbacked", None):   # `[N_tok, 4096]`: N_tok has no example
                parts = [[self._ex_size(d) for d in t.shape] for t in s.outputs]
                if all(None not in p for p in parts):
                    row["ex"] = _shape_cell(parts, changed)
            row["params"] = Cell(self.amount(s.params))
            row["flops"] = Cell(self.amount(s.flops))
            if self.provenance:
                got = _axes(s)
                row["axes"] = Cell("?" if got is None else "[" + ", ".join(got) + "]")
            rows.append(row)
        if b.names == ("return",) and len(b.results) > 1:   # `return h, k, v`: one row for all
            rows = self._returns(b, rows)
        return rows

    def _ex_size(self, d) -> str | None:
        """A size at the example; one made of data-dependent sizes by its name."""
        v = self.spec.example_value(d)
        if v is not None and dimlib.as_int(v) is not None:
            return _big(dimlib.as_int(v))
        unbacked = self.spec.prover.unbacked
        if sp.sympify(d).free_symbols & set(unbacked):
            return self.size(d) if sp.sympify(d).free_symbols <= set(unbacked) else None
        return None
    def _returns(self, b, rows) -> list[dict]:
        if rows:
            rows[-1]["binding"] = Cell()
        lines = self.spec.source.split("\n")
        text = lines[b.span.line - 1].strip() if 0 < b.span.line <= len(lines) else "return"
        row = {"binding": Cell("return", ((0, 6, "name"),)), "line": Cell(str(b.span.line)),
               "op": Cell(text.removeprefix("return").strip()),
               "out": _shape_cell([[self.size(d) for d in t.shape] for t in b.types], [set()] * len(b.types),
                                  [dtypes.suffix(t.dtype) for t in b.types])}
        exs = [example_shape(self.spec, t.shape) for t in b.types]
        if all(e is not None for e in exs):
            row["ex"] = _shape_cell([[_big(v) for v in e] for e in exs], [set()] * len(b.types))
        return rows + [row]

    def decl_row(self, d) -> dict:
        ex = example_shape(self.spec, d.type.shape)
        n = sp.Integer(1)
        for x in d.type.shape:
            n *= x
        kind = d.kind + dtypes.suffix(d.type.dtype) + (" frozen" if d.frozen else "")
        row = {"binding": Cell(d.name, ((0, len(d.name), "name"),)), "line": Cell(str(d.span.line)),
               "op": Cell(kind), "out": Cell(self.shape(d.type.shape)),
               "params": Cell(self.amount(n) if d.kind == "param" else "")}
        if ex:
            row["ex"] = Cell(_ex_text(ex))
        if self.provenance:
            row["axes"] = Cell(self.shape(d.type.shape))
        return row

    def rows(self, decls, bindings, inputs=()) -> list[dict]:
        """Declarations and bindings interleaved as they appear in the file; a block's
        inputs are known to its steps but have no row."""
        types = self.types(list(inputs) + list(decls), bindings)
        groups = [(d.span.line, [self.decl_row(d)]) for d in decls]
        groups += [(b.span.line, self.step_rows(b, types)) for b in bindings]
        groups.sort(key=lambda g: g[0])
        return [row for _, rows in groups for row in rows]

    # ------------------------------------------------------------ blocks
    def blocks(self) -> list[tuple]:
        """(block instance, call step, caller name): the caller's blocks in the order they
        are first called, each followed by the blocks it calls (depth first)."""
        out, seen = [], set()

        def visit(bindings, caller):
            for b in bindings:
                for s in b.steps:
                    count = s.detail.get("layers", s.detail.get("count")) if s.op == "stack" else None
                    if isinstance(count, sp.Symbol) and count.name not in self.counts:
                        self.counts.append(count.name)     # `first=`: the stack's own count
                    ir = s.block
                    # one table per block, and one per set of sizes its size parameters are given
                    key = (ir.name, tuple(ir.size_args.values())) if ir is not None else None
                    if ir is not None and key not in seen:
                        seen.add(key)
                        out.append((ir, s, caller))
                        visit(ir.bindings, ir.name)

        visit(self.spec.bindings, None)
        for name, insts in self.spec.blocks.items():   # blocks reached by no step shown
            if not any(k[0] == name for k in seen) and insts:
                seen.add((name, ()))
                out.append((insts[0], None, None))
                visit(insts[0].bindings, name)
        return out

    # ------------------------------------------------------------ the whole trace
    def columns(self) -> tuple[list[Column], list[str]]:
        if not self.example_only:
            return [c for c in COLUMNS if c.key != "axes" or self.provenance], DROP
        key, header = ("ex", "example shape") if self.has_example else ("out", "shape")
        cols = [Column("binding", "binding"), Column("line", "line"), Column("op", "operation", floor=32),
                Column(key, header)] + ([Column("axes", "axes from")] if self.provenance else [])
        return cols, ["line"]

    def lines(self, width: int) -> list[Line]:
        spec = self.spec
        blocks = self.blocks()
        tables = [self.rows(spec.decls, spec.bindings)]
        tables += [self.rows(ir.params + ir.buffers, ir.bindings, ir.inputs) for ir, _, _ in blocks]
        cols, drop = self.columns()
        laid, dropped = fit_tables(tables, cols, width, drop, PRIORITY)

        def prose(text, role=None, indent="  "):
            return wrap_line(text, width, [(0, len(text), role)] if role else [], indent)

        out = prose(f"trace of {spec.path}", "title")
        if spec.example:
            given = {k: v for k, v in spec.example.items() if k in spec.dims}
            out += prose("example: " + ", ".join(f"{k}={_big(v)}" for k, v in given.items()))
        if dropped:
            out += prose(f"({', '.join(NAMES[k] for k in dropped)} left out to fit {width} columns; "
                         "--width=0 shows them)", "dropped", " ")
        out += [Line("")] + laid[0]
        for (ir, call, caller), table in zip(blocks, laid[1:]):
            args = ", ".join(f"{d.name}: {self.shape_text(d.type.shape)}"
                             + dtypes.suffix(d.type.dtype) for d in ir.inputs)
            args += "".join(f", {k} = {self.size_text(v)}" for k, v in ir.size_args.items())
            head = f"block {ir.name}({args})"
            if call is not None:
                head += f", called {'in ' + caller + ' ' if caller else ''}on line {call.span.line}"
            out += [Line("")] + prose(head, "block", "    ")
            out += prose(self.total("parameters", ir.total_params, "  "), "total", "    ")
            out += table
        for d, why in getattr(spec, "acknowledged", ()):   # the author's `# allow`, still shown here
            out += prose(f"meant: line {d.span.line} {d.code}" + (f" ({why})" if why else "")
                         + f": {d.message}", "dropped", "    ")
        out += [Line("")] + prose(self.total("total parameters", spec.total_params), "total")
        if spec.frozen_params != 0:     # counted above, as model.parameters() counts them
            out += prose(self.total("of which frozen (not trained)", spec.frozen_params), "total")
        out += prose(self.total("total multiply-add FLOPs (forward)", spec.total_flops), "total")
        if spec.diagnostics:
            out += [Line("")] + check_lines(spec)
        return out


def Printer(spec: CheckedSpec) -> _Trace:
    """The trace table's printer of sizes and counts (`formula`, `amount`), for the pictures."""
    return _Trace(spec, False, False)


def trace_lines(spec: CheckedSpec, provenance: bool = False, *, width: int = DEFAULT_WIDTH,
                example_only: bool = False) -> list[Line]:
    """The trace as lines with the roles of their parts (for colour); `width` 0: no limit."""
    return _Trace(spec, provenance, example_only).lines(width or 0)


def trace_text(spec: CheckedSpec, provenance: bool = False, *, width: int = DEFAULT_WIDTH,
               example_only: bool = False) -> str:
    """The trace table; with `provenance`, a last column says where each axis comes from;
    with `example_only`, one column of shapes at the example sizes."""
    return plain(trace_lines(spec, provenance, width=width, example_only=example_only))
