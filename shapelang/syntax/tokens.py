"""A lean driver for lark's contextual lexer and LALR parser, for text that parses.

lark's contextual lexer picks, in every parser state, the terminals that state
accepts and matches them with one compiled regex; its LALR parser then shifts the
token or reduces rules, calling a callback per reduction. This loop does exactly
that with lark's own per-state regexes and keyword rules (`ContextualLexer.lexers`),
lark's own parse table and lark's own callbacks (the NodeBuilder).

What it leaves out is the work that repeats. LALR's next move depends only on the
stack of parser states and the kind of the next token, so each stack met is a
`_Step` that remembers, per token kind, the reductions the table makes before the
token is shifted and the stack after it. A statement shaped like one met before
(`q_7: h_7 -> linear 3*D` after `q_6: h_6 -> linear 3*D`) replays those moves: no
table lookups, no state stack, and the reductions that only rename a value
(`?expr: product`) drop out. Tokens are plain tuples (build.py reads them), made
with positions from a table of line starts.

On anything unusual (a character no terminal matches, a token the parse table
refuses) it returns MISSING and the caller parses again through lark's ordinary
path, which then raises lark's exact error. So the language and the error
messages are lark's; only the speed of the common case differs.
"""
from __future__ import annotations

import re
from bisect import bisect_right

MISSING = object()

# Remembered stacks, for all texts together. A parse adds at most one per token, so the
# bound only matters to a long-lived process that parses many different texts.
MAX_STEPS = 50_000
_ACCEPT = object()           # the edge of `$END` where lark's parser accepts


def _skips_blanks(basic_lexer) -> bool:
    """Whether this lexer ignores runs of spaces and tabs (`%ignore /[\t ]+/`)."""
    return any(t.name in basic_lexer.ignore_types and t.pattern.value == "[\t ]+"
               for t in basic_lexer.terminals)


def _keywords(callback) -> dict | None:
    """lark's keyword rule for a terminal (`"dim"` out of NAME) as {text: kind}, or None if
    it is anything else."""
    from lark.lexer import PatternStr, UnlessCallback

    if type(callback) is not UnlessCallback:
        return None
    words = {}
    for t in callback.scanner.terminals:
        if type(t.pattern) is not PatternStr or t.pattern.flags:
            return None
        words.setdefault(t.pattern.value, t.name)
    return words


class _Lexer:
    """What one parser state needs to lex: lark's regex, its ignore set, its keywords."""
    __slots__ = ("ignore", "keywords", "newline", "regex")

    def __init__(self, basic_lexer):
        scanner = basic_lexer.scanner              # builds lark's regex and keyword callbacks
        mres = scanner._mres
        # lark's alternation, after the blanks lark would skip as a token of their own
        self.regex = re.compile(f"[\t ]*+(?:{mres[0].pattern})", mres[0].flags) \
            if len(mres) == 1 and _skips_blanks(basic_lexer) else None
        self.ignore = basic_lexer.ignore_types
        self.newline = basic_lexer.newline_types
        self.keywords = {}
        for kind, callback in basic_lexer.callback.items():
            words = _keywords(callback)
            if words is None:
                self.regex = None                  # a callback this loop does not know
            else:
                self.keywords[kind] = words


class _Step:
    """A stack of parser states: how to lex the next token there and, per token kind met
    so far, (the reductions before shifting it, the step after it)."""
    __slots__ = ("edges", "lexer", "stack")

    def __init__(self, stack: tuple, lexer: _Lexer):
        self.stack, self.lexer, self.edges = stack, lexer, {}


class Inline(list):
    """The children of an inlined rule (`_name`), spliced into its parent's children."""
    __slots__ = ()


def _plan(rule, builder):
    """How to reduce one rule, as lark's tree builder would with keep_all_tokens:
    (size, origin, splice, callback, single)."""
    name = rule.alias or rule.options.template_source or rule.origin.name
    fn = getattr(builder, name, None)
    splice = tuple(i for i, sym in enumerate(rule.expansion)
                   if not sym.is_term and sym.name.startswith("_"))
    single = bool(rule.options.expand1 and not rule.alias)
    return (len(rule.expansion), rule.origin.name, splice, fn, single)


class FastPath:
    def __init__(self, lark_parser, builder):
        from lark.parsers.lalr_analysis import Shift

        self.parser = lark_parser
        self.lexers = lark_parser.parser.lexer.lexers        # parser state -> lark BasicLexer
        self.builder = builder
        self.Shift = Shift
        self.tables: dict = {}     # start -> (end state, table)
        self.roots: dict = {}      # start -> its first step
        self.steps: dict = {}      # stack of states -> its step
        self._lexer_of: dict = {}  # id of lark's BasicLexer (states share them) -> _Lexer
        self.failed_at: int | None = None     # where the last parse that returned MISSING stopped

    def _table(self, start):
        """lark's parse table for `start`, each reduction as a plan: (start, end, table)."""
        if start not in self.tables:
            conf = self.parser.parse_interactive(None, start=start).parser_state.parse_conf
            plans, table = {}, {}
            for state, row in conf.states.items():
                new = table[state] = {}
                for sym, (action, arg) in row.items():
                    if action is self.Shift:
                        new[sym] = (True, arg)
                    else:
                        if id(arg) not in plans:
                            plans[id(arg)] = _plan(arg, self.builder)
                        new[sym] = (False, plans[id(arg)])
            self.tables[start] = (conf.start_state, conf.end_state, table)
        return self.tables[start]

    def _step(self, stack: tuple) -> _Step:
        step = self.steps.get(stack)
        if step is None:
            if len(self.steps) >= MAX_STEPS:        # start afresh; steps in use stay valid
                self.steps, self.roots = {}, {}
            basic = self.lexers[stack[-1]]
            lexer = self._lexer_of.get(id(basic))
            if lexer is None:
                lexer = self._lexer_of[id(basic)] = _Lexer(basic)
            step = self.steps[stack] = _Step(stack, lexer)
        return step

    def _root(self, start: str) -> _Step:
        root = self.roots.get(start)
        if root is None:
            root = self.roots[start] = self._step((self._table(start)[0],))
        return root

    def _edge(self, step: _Step, kind: str, start: str):
        """lark's LALR step for a token of `kind` at `step` (as in its feed_token), as an
        edge: (reductions, next step or _ACCEPT), or None where the table refuses it."""
        _, end_state, table = self._table(start)
        stack, reductions, eof = list(step.stack), [], kind == "$END"
        while True:
            action = table[stack[-1]].get(kind)
            if action is None or (action[0] and eof):
                return None
            if action[0]:
                stack.append(action[1])
                break
            size, origin, splice, fn, single = action[1]
            if size:
                del stack[-size:]
            stack.append(table[stack[-1]][origin][1])
            if not (size == 1 and single and not splice):   # not just a new name for a value
                reductions.append((size, splice, fn, single))
            if eof and stack[-1] == end_state:
                break
        edge = (tuple(reductions), _ACCEPT if eof else self._step(tuple(stack)))
        step.edges[kind] = edge
        return edge

    def parse(self, source: str, starts: list[int], start: str, a: int, b: int, line_offset: int):
        """Nodes of source[a:b] (whole lines; line numbers shifted by line_offset), or MISSING."""
        step = self._root(start)
        values: list = []
        pos, eof = a, False
        line = bisect_right(starts, a)                  # the line pos is on, and its start
        lstart = starts[line - 1]
        while True:
            if pos < b:
                lexer = step.lexer
                regex = lexer.regex
                if regex is None:
                    self.failed_at = None
                    return MISSING
                m = regex.match(source, pos, b)
                if m is None:
                    self.failed_at = pos
                    return MISSING
                kind = m.lastgroup
                end = m.end()
                if kind in lexer.ignore:
                    if kind in lexer.newline:             # a continuation: on to the `->` line
                        line = bisect_right(starts, end)
                        lstart = starts[line - 1]
                    pos = end
                    continue
                pos = m.start(kind)
                text = m.group(kind)
                col = pos - lstart + 1
                if kind in lexer.newline:                 # only these can span lines
                    end_line = bisect_right(starts, end)
                    end_col = end - starts[end_line - 1] + 1
                    token = (kind, text, line + line_offset, col, end_line + line_offset, end_col)
                    line, lstart = end_line, starts[end_line - 1]
                else:
                    if kind in lexer.keywords:
                        kind = lexer.keywords[kind].get(text, kind)
                    token = (kind, text, line + line_offset, col, line + line_offset,
                             col + end - pos)
            else:
                kind, eof = "$END", True
            edge = step.edges.get(kind) or self._edge(step, kind, start)
            if edge is None:
                self.failed_at = b if eof else pos
                return MISSING
            reductions, step = edge
            for size, splice, fn, single in reductions:
                if size:
                    args = values[-size:]
                    del values[-size:]
                    if splice:
                        # a left-recursive list grows in place, as in lark's ChildFilterLALR:
                        # LALR uses every value once, so nothing else holds it
                        if splice[0] == 0 and type(args[0]) is Inline:
                            flat, i = args[0], 1
                        else:
                            flat, i = Inline(), 0
                        while i < size:
                            if i in splice:
                                flat.extend(args[i])
                            else:
                                flat.append(args[i])
                            i += 1
                        args = flat
                else:
                    args = []
                if single and len(args) == 1:
                    values.append(args[0])
                elif fn is None:
                    values.append(args if type(args) is Inline else Inline(args))
                else:
                    values.append(fn(args))
            if eof:
                return values[-1]
            values.append(token)
            pos = end
