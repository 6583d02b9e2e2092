"""Shape rules applied once per operation and input type.

A shape rule (checker/ops) is a function of the operation as written, the input's type
and what the checker knows about sizes: the same `view [B, S, H, Dh]` on the same
`[B, S, D]` float tensor gives the same result wherever it is written, and a spec that
repeats its layers (an unrolled GPT: 48 times the same 20 operations) need not prove the
same conditions 48 times. The result is kept when nothing else was read:

- no tensor was looked up by name (`embed W_te`, `mul Q`: the name's binding may change
  between statements), and no value was read at all (`Checker.value`); where a rule only
  asked whether a name is a tensor (`mask causal`), the answer is kept with the result and
  the result holds where the answer is the same;
- nothing was reported (a warning belongs to the place it is reported at, so the rule
  runs again there and reports it);
- no data-dependent size was made (`nonzero`: a new one each time), nor strides of their
  own (an `einsum` whose layout is not modelled: `unique`);
- the operation is not in an `expect` (which names data-dependent sizes). Inside a block,
  the sizes the call binds and the block's size parameters are part of the key.

The same memo answers the layouts worked out beside the rules, where they are as pure: the
product and the elementwise combination of two tensors (arith.binop), the layout of a tensor
made element by element from one (`-x`, `x * 2`: arith._dense) and of a concatenation
(`concat(-1, a, b)`), each keyed by its input types.

An error is never kept: the rule raises, and runs again the next time. The result given
back is a copy (the checker names the outputs' sizes on the result it emits). The named
types are kept too (`named`): the kept results come back as the same types again and again.

A check session (checker/session.py) keeps all this from one check to the next while the
facts stay as written (`facts`, `facts_key`: the `dim`, `assume` and `example` lines and the
blocks' signatures). That holds because the prover's own sizes (the quotient `assume D % H
== 0` brings in) are the same objects for the same assumptions (dims.fresh_symbol), and a
reused result records again the spellings of sizes its rule read (checker/notation.py), in
the order the rule recorded them, as applying it would.
"""
from __future__ import annotations

from ..syntax.nodes import Assume, Block, DimDecl, Example
from . import ops

_KEEP = 4096   # results (and named types) kept at most


class RuleMemo:
    def __init__(self):
        self.kept: dict = {}
        self.read = 0       # values read through the checker (tensors by name)
        self.reported = 0   # diagnostics reported
        self.hits = 0       # rules answered from `kept`: what tests count
        self.names: dict = {}   # (type, why) -> the type with its sizes named
        self.facts_key = None   # the sizes' statements the kept results were made under
        self._asked: list | None = None   # (name, is a tensor) asked by the rule being applied

    def facts(self, key) -> None:
        """Start a check whose sizes are `key` (its dims, assumptions, example and block
        signatures, as written): what was kept under other facts is dropped."""
        if key != self.facts_key:
            self.kept.clear()
            self.names.clear()
            self.facts_key = key

    def unique(self) -> None:
        """The result being made must not be reused (it has sizes or strides of its own,
        new each time: an `einsum` whose layout is not modelled)."""
        self.read += 1

    def apply(self, c, op, x):
        """`ops.apply(c, op, x)`, answered from an earlier identical application where it is pure."""
        return self.result(c, (op.name, op.text, op.tuple_kwargs, x, x.why), lambda: ops.apply(c, op, x))

    def result(self, c, key, compute):
        """`compute()` (an `ops.Result`), or a copy of the one kept for `key`: what decides the
        result besides the sizes the checker knows (the operation as written, the input types)."""
        if c.data_names:
            return compute()
        if c.scope is not c.top:   # in a block: its dims are bound to this call's sizes
            key = key + (tuple(c.scope.subst.items()), frozenset(c.scope.sizes))
        try:
            hit = self.kept.get(key)
        except TypeError:   # an unhashable part (a list in a type): no memo
            return compute()
        notation = c.prover.notation
        if hit is not None and (not hit[2] or all((c.scope.values.get(n) is not None) == t
                                                  for n, t in hit[2])):
            self.hits += 1
            result, spelled, _asked = hit
            for record in spelled:   # the sizes the rule read, as written (first spelling wins)
                notation.record(*record)
            return _copy(result)
        read, reported, unbacked = self.read, self.reported, len(c.prover.unbacked)
        outer, notation.log = notation.log, []
        outer_asked, self._asked = self._asked, []
        try:
            result = compute()
        finally:
            spelled, notation.log = notation.log, outer
            asked, self._asked = self._asked, outer_asked
            if outer is not None:
                outer.extend(spelled)
            if outer_asked is not None:
                outer_asked.extend(asked)
        if (self.read, self.reported, len(c.prover.unbacked)) == (read, reported, unbacked):
            if len(self.kept) >= _KEEP:
                self.kept.clear()
            self.kept[key] = (_copy(result), tuple(spelled), tuple(asked))
        return result

    def looked(self, name: str, is_tensor: bool) -> bool:
        """A rule asked whether `name` is a tensor (`mask causal`: the word, unless a tensor is
        named so): a kept result holds where the answer is the same."""
        if self._asked is not None:
            self._asked.append((name, is_tensor))
        return is_tensor

    def named(self, prover, t):
        """`t` with each computed size shown as the declared dim it equals (`prover.name_of`)."""
        key = (t, t.why)
        try:
            hit = self.names.get(key)
        except TypeError:   # an unhashable part: named anew
            hit, key = None, None
        if hit is None:
            hit = t.with_shape([prover.name_of(d) for d in t.shape], t.strides)
            if key is not None:
                if len(self.names) >= _KEEP:
                    self.names.clear()
                self.names[key] = hit
        return hit


def _copy(result: ops.Result) -> ops.Result:
    return ops.Result(result.outputs, result.params, result.flops, dict(result.detail))


def facts_key(spec, skipped) -> tuple:
    """What the shape rules read of a spec besides their own operation and input: its `dim`,
    `assume` and `example` lines and its blocks' signatures, as written and in order, and the
    names left out by syntax errors."""
    lines = spec.source.split("\n")
    out = []
    for s in spec.statements:
        if isinstance(s, (Assume, DimDecl, Example)):
            out.append("\n".join(lines[s.span.line - 1:s.span.end_line]))
        elif isinstance(s, Block):
            out.append(lines[s.span.line - 1])
    return tuple(out), tuple(sorted(skipped))
