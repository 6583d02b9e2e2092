"""What the checker knows about sizes, and the side conditions it proves.

Input: the `dim`, `assume` and `example` statements. Output: a Prover set up
with the assumptions, the example assignment (checked against them), and the
`need_*` conditions the shape rules call: each proves its condition or raises
a ShapeError with the shapes at the example sizes and a counterexample.
`Facts` is the base of the Checker; shape rules see it as their context `c`.
"""
from __future__ import annotations

import itertools

from ..syntax.diagnostics import Diagnostic, ShapeError
from ..syntax.nodes import Assume, Block, DimDecl, Example
from . import dims as dimlib
from .advice import causes
from .blocks import call_bound_dims
from .layout import TensorType
from .lazysympy import sympy as sp
from .prover import Prover, divisor_alternatives


class Facts:
    prover: Prover
    example_env: dict | None

    # ------------------------------------------------------------ sizes
    def _sizes(self, stmts) -> None:
        p = self.prover
        dims = [s for s in stmts if isinstance(s, DimDecl)]
        first: dict[str, DimDecl] = {}
        for d in dims:
            if d.name in p.user:
                self.report(Diagnostic(
                    "E003", f"dim `{d.name}` is declared twice", d.span,
                    "a dim is declared once, with its definition if it has one",
                    labels=causes.first_declared(first[d.name].span),
                    fixes=causes.duplicate_dim(self, first[d.name], d)))
                continue
            first[d.name] = d
            self.dim_spans[d.name] = d.span
            p.declare(d.name)
            self.out.dims.append(d.name)
        self._size_params(stmts)
        for d in dims:
            if d.value is not None:
                try:
                    value = self.build(d.value)
                except ShapeError as err:
                    self.report(err.at(d.span))
                    self._poison_dim(d.name)
                    continue
                sym = p.user.get(d.name)
                if sym is None:             # poisoned by an error in a definition it uses
                    continue
                if sym in value.free_symbols:
                    self.error("E005", f"`{d.name}` is defined in terms of itself", d.span)
                    self._poison_dim(d.name)
                    continue
                p.define(sym, value)
                self.out.definitions[d.name] = value
        for s in stmts:
            if isinstance(s, Assume):
                self._assume(s)
        for d in dims:
            if d.value is not None and d.name in self.out.definitions:
                value = self.out.definitions[d.name]
                said = f"`{d.name} = {self.sz(value)}` is"
                self.need_whole_size(value, d.value.span, f"{said} not always a whole number",
                                     claim=f"{said} always a whole number")
                verdict = p.positive(value)
                help, fixes = self._positive_fix(value, verdict) if not verdict.ok else (None, ())
                self.need(verdict, "E109", d.value.span, f"`{d.name} = {self.sz(value)}` is not always "
                          "positive", help=help, fixes=fixes,
                          claim=f"`{d.name} = {self.sz(value)}` is always at least 1")
        examples = [s for s in stmts if isinstance(s, Example)]
        self._example(examples)

    def _size_params(self, stmts) -> None:
        """`block Mlp(x: [B, S, D], dim F)`: F is a dim of its own unless a `dim` line declares
        it too (each call binds it, as it binds the dims of the block's input shapes)."""
        p = self.prover
        for s in stmts:
            if not isinstance(s, Block):
                continue
            seen = {d.name for d in s.inputs}
            for sz in s.sizes:
                if sz.name in seen:
                    self.error("E003", f"`{sz.name}` is already a name in block `{s.name}`'s signature",
                               sz.span, "give the size parameter a name of its own")
                    continue
                seen.add(sz.name)
                if sz.name not in p.user and sz.name not in self.skipped:
                    self.dim_spans[sz.name] = sz.span
                    p.declare(sz.name)
                    self.out.dims.append(sz.name)

    def _poison_dim(self, name: str) -> None:
        """A dim whose definition failed: what uses it stays silent (one root cause, one
        error), as for a tensor whose statement failed."""
        self.prover.user.pop(name, None)
        if name in self.out.dims:
            self.out.dims.remove(name)
        self.skipped.add(name)

    def _assume(self, s: Assume) -> None:
        try:
            terms = [self.build(t) for t in s.terms]
        except ShapeError as err:
            self.report(err.at(s.span))
            return
        for (a, b), cmp in zip(itertools.pairwise(terms), s.cmps):
            try:
                self.prover.assume(a, cmp, b, s.text)
            except (ValueError, ZeroDivisionError) as err:
                reason = str(err) if isinstance(err, ValueError) else "it divides by zero"
                self.error("E115", f"this assumption cannot be used: {reason}", s.span,
                           "sizes are positive whole numbers")
                return
            self.out.assumptions.append((a, cmp, b, s))

    def _example(self, examples) -> None:
        p = self.prover
        values, spans = {}, {}
        for ex in examples:
            for item in ex.items:
                if item.name not in p.user and item.name in self.skipped:
                    continue   # its `dim` line does not parse: that error is the one to fix
                if item.name not in p.user:
                    self.error("E002", f"the example sets `{item.name}`, which is not a dim",
                               item.span, self._did_you_mean(item.name, p.user))
                elif item.value < (p.user[item.name] not in p.zero_ok):
                    self.error("E108", f"the example sets {item.name}={item.value}; sizes are "
                               "positive whole numbers", item.span)
                else:
                    values[item.name] = item.value
                    spans[item.name] = item.span
        if not examples:
            return
        self.out.example_given = dict(values)
        # a dim only in block signatures is bound at each call: the example need not give it
        self.out.call_bound = bound = [n for n in call_bound_dims(self.spec.statements, p.user)
                                       if n not in values]
        missing = [n for n in self.out.dims
                   if n not in values and n not in self.out.definitions and n not in bound]
        span = examples[0].span
        if missing:
            self.error("W201", f"the example gives no value for {', '.join(missing)}", span,
                       "add them to the `example` line to see example shapes", severity="warning")
            return
        env = {p.user[k]: x for k, x in values.items()}
        for name, value in self.out.definitions.items():
            if env is not None and not value.free_symbols <= set(env):
                continue       # made of a dim bound at block calls
            v = p.value(value, env) if env is not None else None
            iv = dimlib.as_int(v) if v is not None else None
            if env is not None and iv is not None:
                env.setdefault(p.user[name], iv)
            if name in values and iv is not None and iv != values[name]:
                self.error("E108", f"the example sets {name}={values[name]}, but `{name} = {self.sz(value)}` "
                           f"gives {iv}", spans[name])
            if iv is None or iv < 1:
                if env is not None:
                    self.error("E108", f"at the example sizes `{name} = {self.sz(value)}` is "
                               f"{dimlib.fmt_value(v) if v is not None else 'undefined'}, not a "
                               "whole positive number", span, self._alternatives(value, values))
                env = None
        if env is None:
            return
        for a, cmp, b, s in self.out.assumptions:
            va, vb = p.value(a, env), p.value(b, env)
            if va is None or vb is None or dimlib._CMP[cmp](va, vb):
                continue
            if isinstance(a, sp.Mod):
                x, y = (p.value(t, env) for t in a.args)
                msg = f"the example breaks `{s.text[7:].strip()}`: {dimlib.fmt_value(x)} mod {dimlib.fmt_value(y)} = {dimlib.fmt_value(va)}"
                help = self._alternatives(a.args[0] / a.args[1], values)
            else:
                msg = f"the example breaks `{s.text[7:].strip()}`: {dimlib.fmt_value(va)} {cmp} " \
                      f"{dimlib.fmt_value(vb)} is false"
                help = None
            self.error("E108", msg, span, help)
            env = None
        if env is not None:
            self.example_env = env
            p.example = dict(values)
            self.out.example = {str(k): v for k, v in env.items()}

    def _alternatives(self, ratio, values) -> str | None:
        """`H in {8, 16, 32} divides 1024`, for a ratio of a number by a dim."""
        num, den = sp.fraction(ratio)
        if not den.is_Symbol or str(den) not in values:
            return None
        env = {self.prover.user[k]: v for k, v in values.items()}
        n = self.prover.value(num, env)
        if n is None or dimlib.as_int(n) is None:
            return None
        alts = divisor_alternatives(dimlib.as_int(n), values[str(den)])
        if not alts:
            return None
        return f"{self.sz(den)} in {{{', '.join(map(str, alts))}}} divides {dimlib.as_int(n)}"

    def _divisibility_help(self, value) -> str | None:
        return self._divisibility(value)[0]

    def _divisibility(self, value) -> tuple[str | None, tuple]:
        """The help for a size that may not be whole, and the `assume` line that says it is."""
        num, den = sp.fraction(sp.together(value))
        if den.is_Integer and den > 1 and num.free_symbols:   # `D/3`: D a multiple of 3
            n = self.sz(num) if num.is_Atom else f"({self.sz(num)})"
            return (f"add `assume {n} % {den} == 0`",
                    causes.assume_line(self, f"{n} % {den} == 0",
                                       f"say that {self.sz(num)} is always a multiple of {den}"))
        if den != 1 and not den.is_Number:
            plain, d = self.sz(num), self.sz(den)
            d = d if den.is_Atom else f"({d})"
            n = plain if num.is_Atom else f"({plain})"
            fixes = causes.assume_line(self, f"{n} % {d} == 0",
                                       f"say that {plain} is always a multiple of {d}")
            if num.is_Symbol:
                return (f"add `assume {n} % {d} == 0`, or define the size the other way round, "
                        f"e.g. `dim {n} = {d} * k`"), fixes
            return f"add `assume {n} % {d} == 0`", fixes
        return None, ()

    def _close_fix(self, name, known, span) -> tuple:
        """The candidate that writes the closest known name instead (proved before shown)."""
        close = _closest(name, known)
        return ((span, close, f"did you mean `{close}`?"),) if close else ()

    def _did_you_mean(self, name, known) -> str | None:
        close = _closest(name, known)
        return f"did you mean `{close}`?" if close else None

    def build(self, node, allow_real: bool = False) -> sp.Expr:
        """A size node as an expression; how it is written is kept for messages."""
        return dimlib.build(node, self._dim_lookup, allow_real=allow_real,
                            notation=self.prover.notation)

    def sz(self, e) -> str:
        """A size as the learner writes it (checker/notation.py); the prover's own sizes
        (the quotient that `assume D % H == 0` makes) in the learner's terms."""
        fresh = self.prover.fresh
        for _ in range(4):
            if not (isinstance(e, sp.Basic) and fresh and e.free_symbols & fresh.keys()):
                break
            e = e.xreplace({k: fresh[k] for k in e.free_symbols & fresh.keys()})
        return self.prover.notation.show(e)

    # ------------------------------------------------------------ conditions
    def same(self, a, b) -> bool:
        """Cheap symbolic equality (no search): for layouts and fast paths."""
        return a == b or self.prover.same(a, b)

    def need_whole_size(self, e, span, message, claim=None) -> None:
        """E104 where size `e` is not always whole, with the help and the `assume` line that
        would make it so (worked out only then, as the message and the claim may be)."""
        verdict = self.prover.whole(e)
        if not verdict.ok:
            help, fixes = self._divisibility(e)
            self.need(verdict, "E104", span, message, help=help, claim=_text(claim), fixes=fixes)

    def need(self, verdict, code, span, message, help=None, expr=None, claim=None,
             fixes=()) -> bool:
        if verdict.ok:
            return True
        notes = self._verdict_notes(verdict)
        self.report(Diagnostic(code, _unproved(verdict, message, claim), span, help, tuple(notes),
                               verdict.counterexample, fixes=tuple(fixes)))
        return False

    def _verdict_notes(self, verdict) -> list[str]:
        if verdict.status == "unknown":
            if not verdict.tried:
                return [("no counterexample either: no small sizes that satisfy every assumption "
                        "were found to test it with; shapelang accepts only what it can prove")]
            return [(f"no counterexample either: none of the {verdict.tried} assignments of small "
                    "sizes tried (each satisfying the assumptions) breaks it, so this may hold; "
                    "shapelang accepts only what it can prove")]
        if verdict.counterexample == {}:
            return ["this involves no dims: it fails whatever the sizes"]
        if verdict.counterexample:
            cex = ", ".join(f"{k}={v}" for k, v in verdict.counterexample.items())
            return [f"counterexample: {cex}"]
        return []

    def _fail(self, verdict, code, message, help, span, extra_notes=(), claim=None, fixes=()):
        """The error for a condition not proved: refuted ones state the problem with a
        counterexample; undecided ones say "could not prove" and never claim an error."""
        notes = list(extra_notes) + self._verdict_notes(verdict)
        return ShapeError(code, _unproved(verdict, message, claim), help, tuple(notes),
                          verdict.counterexample, span, fixes=tuple(fixes))

    def need_equal(self, a, b, *, code, message, help=None, span=None, shapes=None,
                   broadcast=False):
        """Prove a == b, or raise with a counterexample. Messages are built only on failure."""
        verdict = self.prover.equal(a, b, broadcast=broadcast)
        if verdict.ok:
            return
        message = _text(message)
        notes = []
        va, vb = self.ex(a), self.ex(b)
        if va is not None and vb is not None:
            notes.append(f"at the example sizes: {dimlib.fmt_value(va)} and {dimlib.fmt_value(vb)}")
        fixes = ()
        if verdict.status == "unknown":
            help = f"if they are always equal, say so: `assume {self.sz(a)} == {self.sz(b)}`"
            fixes = causes.assume_line(self, f"{self.sz(a)} == {self.sz(b)}",
                                       "if they are always equal, say so")
        raise self._fail(verdict, code, message, help, span, notes,
                         claim=f"{self.sz(a)} == {self.sz(b)} ({message})", fixes=fixes)

    def need_shape_equal(self, got, want, *, span, code, message):
        if len(got) != len(want):
            raise ShapeError(code, _text(message) + f" ({len(got)} dims against {len(want)})",
                             span=span)
        for k, (a, b) in enumerate(zip(got, want)):
            self.need_equal(a, b, code=code, span=span,
                            message=lambda k=k, a=a, b=b: _text(message) + f"; dim {k} is {self.sz(a)}, not {self.sz(b)}")

    def need_whole(self, e, *, span, what):
        verdict = self.prover.whole(e)
        if verdict.ok:
            return
        notes = []
        num, den = sp.fraction(sp.together(e))
        vn, vd = self.ex(num), self.ex(den)
        if e.free_symbols and vn is not None and vd is not None and vd != 0 and (vn % vd) != 0:
            notes.append(f"at the example sizes: {dimlib.fmt_value(vn)} mod {dimlib.fmt_value(vd)} "
                         f"= {dimlib.fmt_value(vn % vd)}")
            alt = self._alternatives(e, self.prover.example) if self.prover.example else None
            if alt:
                notes.append(alt)
        help, fixes = self._divisibility(e)
        always = "always " if e.free_symbols else ""
        raise self._fail(verdict, "E104", f"{_text(what)}, which is not {always}a whole number",
                         help, span, notes, fixes=fixes,
                         claim=f"{self.sz(e)} is always a whole number ({_text(what)})")

    def need_positive(self, e, span, what=None):
        """A size is at least 1; an axis size (no `what`) made of a dim that may be 0
        (`assume P >= 0`) may be 0, as PyTorch takes empty axes."""
        verdict = self.prover.positive(e)
        if not verdict.ok and what is None and e.free_symbols & self.prover.zero_ok \
                and self.prover.leq(sp.Integer(0), e).ok:
            return
        if not verdict.ok:
            subject = _text(what) if what is not None else f"the size {self.sz(e)}"
            help, fixes = self._positive_fix(e, verdict)
            raise self._fail(verdict, "E109", f"{subject} is not always positive", help, span,
                             claim=f"{subject} is always at least 1", fixes=fixes)

    def _positive_fix(self, e, verdict) -> tuple[str, tuple]:
        """The help of a size that may be 0 or less (`L - 1`), and the assumption that makes it
        at least 1 (`assume L >= 2`) as a candidate line, proved before it is shown."""
        rel = causes.positive_relation(e, self.sz)
        lead = "if it is, say so" if verdict.status == "unknown" else \
            "a size must be at least 1 at every size the assumptions allow; to rule out the others, say so"
        # the relation as written is the fallback, for a prover that needs the size itself
        rels = dict.fromkeys((rel, f"{self.sz(e)} >= 1"))
        return f"{lead}: `assume {rel}`", tuple(f for r in rels for f in causes.assume_line(self, r, lead))

    def need_leq(self, a, b, *, span, message):
        verdict = self.prover.leq(a, b)
        if not verdict.ok:
            rel = f"{self.sz(b)} >= {self.sz(a)}" if a.is_Number else f"{self.sz(a)} <= {self.sz(b)}"
            raise self._fail(verdict, "E105", _text(message), f"add `assume {rel}` if that is intended",
                             span, claim=f"{self.sz(a)} <= {self.sz(b)} ({_text(message)})",
                             fixes=causes.assume_line(self, rel))

    def ex(self, e):
        if self.example_env is None:
            return None
        return self.prover.value(e, self.example_env)

    def show_shape(self, shape) -> str:
        sym = "[" + ", ".join(self.sz(d) for d in shape) + "]"
        if self.example_env is None:
            return sym
        vals = [self.ex(d) for d in shape]
        if any(v is None for v in vals):
            return sym
        num = "[" + ", ".join(dimlib.fmt_value(v) for v in vals) + "]"
        return sym if num == sym else f"{sym} = {num}"

    def show(self, t: TensorType) -> str:
        return self.show_shape(t.shape)


def _closest(name: str, known) -> str | None:
    """The known name a misspelt one most likely means: the same letters in another case
    (`h` for `H`) first, then the closest spelling."""
    known = list(known)
    same = [k for k in known if k.lower() == name.lower() and k != name]
    if same:
        return same[0]
    import difflib

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return close[0] if close else None


def _text(message) -> str:
    return message() if callable(message) else message


def _unproved(verdict, message, claim) -> str:
    if verdict.status != "unknown":
        return _text(message)
    return f"could not prove that {claim}" if claim else \
        f"could not prove this holds for every allowed size: {_text(message)}"
