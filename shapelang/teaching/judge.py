"""Judging: is a learner's answer equivalent to the reference, and if not, why.

Input: the exercise's reference run (shapelang.teaching.engines.Reference) and the
learner's answers, one statement at a time (every other blank at its
reference answer). Output: a Verdict per blank, the fraction of its points
and feedback; and, for the whole file with all the learner's answers, the
findings of its check.

A statement's answers are right when, re-checked with them, its tensors have
the reference shapes and dtypes, the same value-changing operations (softmax
axis, scale factor, ...), the same values at probe sizes (shapelang.teaching.probe)
where those are tracked, and the rest of the file still checks the same.
Both judgements are memoised on the answers they depend on.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from ..checker import dims as dimlib
from ..syntax.diagnostics import Diagnostic, ShapeError
from ..syntax.nodes import Expect, Hole, Name
from ..syntax.parser import ParseFailure, parse
from . import steps as stepmap
from .diagnose import Context, Diagnose
from .engines import CACHE_LIMIT, Reference, filled_text
from .feedback import Feedback, layout_message, with_help
from .respell import number_runs, number_value
from .results import clean
from .steps import answer_ranges
from .structure import Structure
from .template import _squash, fill

MAX_NUMBER_TRIALS = 16    # answers tried with dims in place of numbers, per answer


@dataclass
class Verdict:
    fraction: float
    message: str = ""
    unparsed: bool = False     # the answer's line does not parse


def fill_answers(tmpl, ref_answers: dict, st, answers: dict) -> str | None:
    """Statement code with the learner's `answers` (name -> text), the rest reference."""
    repl = {}
    for b in tmpl.blanks.values():
        if b.stmt != st.index:
            continue
        if b.name in answers:
            repl[b.hole] = answers[b.name]
        elif ref_answers.get(b.name) is not None:
            repl[b.hole] = ref_answers[b.name]
        else:
            return None      # an `expect X: ?` with no reference text: not run
    return fill(st, repl)


# words of an explanation that already names the mistake exactly (a factor, a pair of axes)
SPECIFIC = ("times too", "of the size needed", "must change places", "missing", "is `")


class Judge:
    """Verdicts for one exercise; `judged` and `findings` are its memos."""

    def __init__(self, ref: Reference, feedback: Feedback):
        self.ref = ref
        self.tmpl = ref.tmpl
        self.engine = ref.engine
        self.prover = ref.prover
        self.ref_units = ref.units
        self.feedback = feedback
        self.judged: dict = {}
        self.findings: dict = {}
        self._lookup = self._dim_lookup_factory()
        self.diagnose = Diagnose(feedback, feedback.words, self._lookup)
        self.structure = Structure(feedback.words, self._lookup)

    def _dim_lookup_factory(self):
        p = self.prover
        tensors = self.engine.tensor_names

        def lookup(node: Name):
            if node.name in p.user:
                return p.user[node.name]
            if node.name in tensors:
                raise ShapeError("E112", f"`{node.name}` is a tensor, but a size is expected here",
                                 span=node.span)
            raise ShapeError("E002", self.feedback.unknown_dim(node.name), span=node.span)
        return lookup

    # -- one statement
    def statement(self, st, answers: dict) -> dict:
        """Verdicts for the learner's answers in one statement (memoised: they depend only
        on the statement and these answers, every other blank being at its reference)."""
        key = (st.index, tuple(sorted(answers.items())))
        hit = self.judged.get(key)
        if hit is None:
            hit = self._statement(st, answers)
            if len(self.judged) > CACHE_LIMIT:
                self.judged.clear()
            self.judged[key] = hit
        return hit

    def _statement(self, st, answers: dict) -> dict:
        judge = self._expect if st.kind == "expect" else self._binding
        v = judge(st, answers)
        if v.fraction >= 1:
            return {n: v for n in answers}
        out = {n: v for n in answers} if len(answers) == 1 else \
            {n: judge(st, {n: a}) for n, a in answers.items()}
        if st.kind != "expect":
            for n, a in answers.items():
                if out[n].fraction < self.feedback.partial:
                    out[n] = self._numbers(st, n, a) or out[n]
        return out

    # -- numbers where dims belong: right at the example sizes only
    def _numbers(self, st, name: str, answer: str) -> Verdict | None:
        """The `@partial` share when the answer, with some of its numbers (`64`, `512/8`,
        `3072`) written as sizes of the same value at the example, is right."""
        env = self.ref.example_env
        if not env or self.feedback.partial <= 0:
            return None
        runs = number_runs(answer)
        options = []
        for a, b in runs:
            v = number_value(answer[a:b])
            texts = self._sizes_of_value(st, v) if v is not None and v > 0 else []
            options.append([answer[a:b]] + texts[:3])
        if not any(len(o) > 1 for o in options):
            return None
        import itertools
        tried = 0
        for choice in itertools.product(*options):
            if all(c == o[0] for c, o in zip(choice, options)):
                continue
            tried += 1
            if tried > MAX_NUMBER_TRIALS:
                break
            text = answer
            for (a, b), c in sorted(zip(runs, choice), reverse=True):
                text = text[:a] + c + text[b:]
            if self._binding(st, {name: text}).fraction >= 1:
                nums = [answer[a:b] for (a, b), c, o in zip(runs, choice, options) if c != o[0]]
                one = len(nums) == 1
                return Verdict(self.feedback.partial, (
                    f"your answer is right for the example ({self.feedback.example_text()}), "
                    f"but {', '.join(f'`{x}`' for x in nums)} {'is' if one else 'are'} right "
                    f"only for those sizes: write {'it' if one else 'them'} with the dims, so "
                    "that the answer holds for every size"))
        return None

    def _sizes_of_value(self, st, value) -> list:
        """Sizes of the reference statement (and the exercise's dims) whose value at the
        example is `value`, as text."""
        key = ("sizes", st.index)
        table = self.findings.get(key)
        if table is None:
            p, env = self.prover, self.ref.example_env
            exprs = list(p.user.values())
            ui = self.engine.unit_of_stmt.get(st.index)
            if ui is not None:
                for s in self.ref_units[ui].steps:
                    for t in s.outputs:
                        exprs.extend(t.shape)
                    exprs.extend(v for v in s.detail.values() if isinstance(v, sp.Basic))
            table = []
            for e in exprs:
                try:
                    v = p.value(e, env)
                except (TypeError, ValueError, ZeroDivisionError, KeyError):
                    v = None
                text = str(e)
                if v is not None and all(t != text for _, t in table):
                    table.append((v, text))
            self.findings[key] = table
        return [t for v, t in table if _same_number(v, value)]

    # -- expect statements: compare the learner's shape with the tensor's reference shape
    def _expect(self, st, answers: dict) -> Verdict:
        code = fill_answers(self.tmpl, self.ref.answers, st, answers)
        name = st.names[0]
        want = self.ref.env.get(name)
        if code is None or want is None:
            return Verdict(0.0, "this blank could not be graded")
        try:
            spec = parse(code, self.ref.path)
            node = next(s for s in spec.statements if isinstance(s, Expect))
        except ParseFailure as failure:
            return Verdict(0.0, f"your answer does not parse: {with_help(failure.diagnostic)}",
                           unparsed=True)
        except StopIteration:
            return Verdict(0.0, "your answer does not give a shape")
        if isinstance(node.shape, Hole):
            return Verdict(0.0, "the blank is not filled in")
        try:
            got = [dimlib.build(d, self._lookup) for d in node.shape.dims]
        except ShapeError as err:
            return Verdict(0.0, with_help(err))
        unit = self.engine.unit_of_stmt.get(self._binding_stmt(name))
        frac, msg = self.feedback.compare(got, want.shape, unit, name, subject="your shape")
        return Verdict(frac, msg)

    def _binding_stmt(self, name: str) -> int | None:
        for st in self.tmpl.stmts:
            if st.block is None and name in st.names and st.kind != "expect":
                return st.index
        return None

    # -- other statements: re-check with the answers and compare the IR
    def _binding(self, st, answers: dict) -> Verdict:
        fb = self.feedback
        code = fill_answers(self.tmpl, self.ref.answers, st, answers)
        fills = dict(self.ref.fills)
        fills[st.index] = code
        full = self.engine.run(fills)
        run = full.units
        ref_units = self.ref_units
        ui = self.engine.unit_of_stmt[st.index]
        mine, ref = run[ui], ref_units[ui]
        cx = self._context(st, answers, code, mine, ref)
        if mine.errors:
            d = mine.errors[0]
            refs = [_squash(self.ref.answers.get(n) or "") for n in answers]
            if d.help and any(len(r) >= 3 and r in _squash(d.help) for r in refs):
                d = Diagnostic(d.code, d.message, d.span, None, d.notes, d.counterexample)
            better = self.diagnose.failure(d, cx) if cx is not None else None
            if not better or not any(w in better for w in SPECIFIC):
                better = self._structure(st, code, ref) or better
            if better:
                return Verdict(0.0, fb.scrub(better, tuple(answers.values())))
            return Verdict(0.0, fb.error_text(d, tuple(answers.values())),
                           unparsed=d.code in ("E001", "E004"))
        unit = self.engine.units[ui]
        names = list(ref.defs) + [n for n in mine.defs if n not in ref.defs]
        for n in names:
            got, want = mine.defs.get(n), ref.defs.get(n)
            if isinstance(want, sp.Basic) or isinstance(got, sp.Basic):     # `dim X = ...`
                if got is None or want is None or not (got == want or
                                                       self.prover.equal(got, want).ok):
                    label = n.split()[-1]
                    return Verdict(0.0, f"with your answer, `{label}` is {got}, which is not "
                                        "always the size this exercise needs")
                continue
            n_shown = n.split(".")[-1].split("#")[0]
            if got is None or want is None:
                return Verdict(0.0, f"with your answer `{n_shown}` cannot be computed")
            if got.dtype != want.dtype:
                return Verdict(0.0, f"with your answer `{n}` holds {got.dtype} values, not "
                                    f"{want.dtype} values")
            if not fb.same_shape(got.shape, want.shape):
                frac, msg = fb.compare(got.shape, want.shape, ui, n_shown,
                                       subject=f"with your answer `{n_shown}` is "
                                               f"{fb.show(got.shape)}: that")
                if cx is not None and frac == 0:
                    moves = self.diagnose.moves(cx, got.shape, want.shape)
                    inner = self.diagnose.inner_step(cx, last=False)
                    named = None if moves else self._structure(st, code, ref)
                    if named and "runs along" not in named and \
                            fb.words.detail(got.shape, want.shape, n_shown):
                        named = None         # the shape comparison says it as exactly
                    if moves:
                        msg = f"with your answer `{n_shown}` is {fb.show(got.shape)}: {moves}"
                    elif named:
                        msg = f"with your answer `{n_shown}` is {fb.show(got.shape)}: {named}"
                    elif inner:
                        msg = f"with your answer `{n_shown}` is {fb.show(got.shape)}: {inner}"
                return Verdict(frac, msg)
        values = full.vals[ui], self.ref.run.vals[ui]
        names = [n for n in names if not isinstance(ref.defs.get(n), sp.Basic)]
        tracked = all(values[0].get(n) is not None and values[1].get(n) is not None
                      for n in names)
        for n in names:
            msg = fb.sig_difference(mine.sigs.get(n, ()), ref.sigs.get(n, ()), n)
            if tracked and values[0][n].key == values[1][n].key:
                continue
            inner = self.diagnose.inner_step(cx) if cx is not None else None
            if inner:
                return Verdict(0.0, f"`{n}` has the right shape, but {inner}")
            if msg:
                found = self._mixed_values(fills, st)
                return Verdict(0.0, f"{msg}; {found}" if found else msg)
            if tracked or not fb.same_shape(mine.defs[n].strides, ref.defs[n].strides):
                named = self._structure(st, code, ref)
                if named:
                    return Verdict(0.0, f"`{n}` has the right shape, but {named}")
                found = self._mixed_values(fills, st)
                return Verdict(0.0, f"`{n}` has the right shape, but its numbers end up in the wrong "
                                    f"places: {found}" if found else layout_message(n, code))
        for k in range(ui + 1, len(run)):
            if run[k].errors:
                what = f"`{'`, `'.join(unit.names)}` gets the right shape, but" \
                    if unit.kind == "binding" else "With"
                return Verdict(0.0, f"{what} with your answer line {self.engine.units[k].line} "
                                    f"fails: {fb.error_text(run[k].errors[0])}")
            for n, t in run[k].defs.items():
                r = ref_units[k].defs.get(n)
                if isinstance(t, sp.Basic) or isinstance(r, sp.Basic):
                    continue
                if (t is None) != (r is None) or (t is not None and not fb.same_shape(t.shape,
                                                                                       r.shape)):
                    return Verdict(0.0, f"with your answer, `{n}` on line "
                                        f"{self.engine.units[k].line} comes out different")
            for n, v in full.vals[k].items():
                r = self.ref.run.vals[k].get(n)
                if v is not None and r is not None and v.key != r.key:
                    return Verdict(0.0, f"with your answer, `{n}` on line "
                                        f"{self.engine.units[k].line} computes something else")
        return Verdict(1.0)

    def _structure(self, st, code: str | None, ref) -> str | None:
        """The learner's statement against the reference's, operation by operation
        (shapelang.teaching.structure): the axis, factor or keyword that differs."""
        ref_code = self.ref.fills.get(st.index)
        if code is None or ref_code is None or "\n" in code or "\n" in ref_code:
            return None
        steps = [s for s in ref.steps if s.op != "input"]

        def before(k):
            if k >= len(steps):
                return None
            shape = stepmap.input_shape(ref.steps, steps[k])
            if shape is None and steps[k].inputs and self.ref.env.get(steps[k].inputs[0]):
                shape = self.ref.env[steps[k].inputs[0]].shape
            return shape
        return self.structure.explain(code, ref_code, before)

    def _context(self, st, answers: dict, code: str, mine, ref) -> Context | None:
        """The learner's statement next to the reference's, with where the answers sit."""
        if code is None or "\n" in code:
            return None
        holes = {b.hole: b.name for b in self.tmpl.blanks.values() if b.stmt == st.index}
        judged = {k for k, n in holes.items() if n in answers}
        mine_texts = {k: answers.get(n, self.ref.answers.get(n)) for k, n in holes.items()}
        ref_texts = {k: self.ref.answers.get(n) for k, n in holes.items()}
        if any(t is None for t in list(mine_texts.values()) + list(ref_texts.values())):
            return None
        return Context(code, st.line, mine, ref, answer_ranges(st, mine_texts, judged),
                       answer_ranges(st, ref_texts, judged), self.ref.env)

    def _mixed_values(self, fills: dict, st) -> str | None:
        """What `shapelang check` says about where the values of this statement come from
        (W301-W313), so that check and grade name the same mistake; None if it says nothing.
        The proved fix is left out: it would hand out the answer."""
        from ..checker.checker import check_text

        key = ("provenance", st.index, fills.get(st.index))
        if key not in self.findings:
            spec = check_text(filled_text(self.tmpl, fills), self.tmpl.path, prove_fixes=False)
            found = [d for d in spec.diagnostics if d.code.startswith("W3")
                     and st.line <= d.span.line <= st.end_line]
            self.findings[key] = f"{found[0].message} [{found[0].code}]" if found else None
        return self.findings[key]

    # -- the whole file with all the learner's answers
    def whole_file(self, given: dict, wrong_units: set, done: dict) -> tuple:
        """Findings, (line, message), of the whole file with all the learner's answers
        (memoised on them); none for units whose blanks are already marked wrong."""
        key = tuple(sorted(given.items()))
        hit = self.findings.get(key)
        if hit is None:
            hit = tuple(self._whole_file(given, wrong_units, done))
            if len(self.findings) > CACHE_LIMIT:
                self.findings.clear()
            self.findings[key] = hit
        return hit

    def _whole_file(self, given: dict, wrong_units: set, done: dict) -> list:
        tmpl, engine = self.tmpl, self.engine
        fills = {}
        for st in tmpl.stmts:
            if not st.holes:
                continue
            repl = {}
            for b in tmpl.blanks.values():
                if b.stmt == st.index:
                    repl[b.hole] = given.get(b.name, f"?{b.name}")
            fills[st.index] = fill(st, repl)
        run = engine.run(fills).units
        reads: dict[int, set] = {}
        producer = {}
        for u in engine.units:
            for n in u.names:
                producer[n] = u.index
        for k, r in enumerate(run):
            src = {producer[n] for n in r.deps if n in producer}
            reads[k] = set(src)
            for j in src:
                reads[k] |= reads.get(j, set())
        expect_holes = {engine.unit_of_stmt[b.stmt] for b in tmpl.blanks.values()
                        if tmpl.stmts[b.stmt].kind == "expect"}
        out = []
        for k, r in enumerate(run):
            if k in wrong_units or k in expect_holes:
                continue
            for d in r.errors:
                if d.code == "E116":
                    continue
                if any(d.message == e.message for e in self.ref_units[k].errors):
                    continue
                blame = sorted({b.label for b in tmpl.blanks.values()
                                if engine.unit_of_stmt[b.stmt] in (reads.get(k, set()) | {k})
                                and done.get(b.name) and done[b.name].status != "correct"},
                               key=lambda s: s)
                msg = self.feedback.error_text(d)
                if blame:
                    msg += f" (this follows from your answer{'s' if len(blame) > 1 else ''} to " \
                           f"{', '.join(blame)})"
                out.append((engine.units[k].line, clean(msg)))
                break
        return out


def _same_number(a, b) -> bool:
    """A value of the prover (Fraction or float) against a sympy number."""
    from fractions import Fraction
    try:
        if isinstance(a, Fraction) and b.is_Rational:
            return a == Fraction(int(b.p), int(b.q))
        x, y = float(a), float(b)
    except (TypeError, ValueError, OverflowError):
        return False
    return abs(x - y) <= 1e-9 * max(1.0, abs(y))
