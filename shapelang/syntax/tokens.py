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

import functools
import re
from bisect import bisect_right

MISSING = object()

# Remembered stacks, for all texts together: at most MAX_STEPS of them, holding at most
# MAX_STACKED states in all (deep brackets make long stacks), a few MB. A parse adds at most
# one per token, so the bound only matters to a long-lived process that parses many
# different texts (the editor server); past it, the parser forgets them and starts afresh.
MAX_STEPS = 20_000
MAX_STACKED = 400_000
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


def _alternation(basic_lexer) -> tuple[str | None, dict]:
    """The regex lark's scanner matches in a parser state, as text, and its callbacks.

    lark builds these (BasicLexer._build_scanner) by turning keywords into callbacks on
    the terminal that also matches them (`_create_unless`) and joining the rest into one
    alternation, which it compiles. This loop compiles its own version of that regex
    (with blanks skipped first), so it builds the parts the same way and leaves lark's
    compile to the first time lark's own path lexes in that state: a fresh process then
    compiles each state's regex once, not twice. With another lark, it asks lark's scanner.
    """
    try:
        from lark.lexer import _create_unless

        terminals, callbacks = _create_unless(basic_lexer.terminals, basic_lexer.g_regex_flags,
                                              basic_lexer.re, basic_lexer.use_bytes)
    except (ImportError, TypeError, AttributeError):
        mres = basic_lexer.scanner._mres
        return (mres[0].pattern if len(mres) == 1 else None), basic_lexer.callback
    if basic_lexer.user_callbacks or basic_lexer.use_bytes:
        return None, callbacks
    return "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terminals), callbacks


_SKIP, _SKIP_LINES, _LINES = "skip", "skip lines", "lines"
_UNKNOWN = re.compile("(?!)")     # a state this loop cannot lex: lark's own path lexes it


class _Lexer:
    """What one parser state needs to lex: lark's regex, and what is special about a kind
    of token there (`special`): _SKIP (lark ignores it), _SKIP_LINES (ignored, and it
    spans lines: a continuation), _LINES (a token that spans lines: a newline), or the
    keywords that a NAME of that text is instead ({text: kind})."""
    __slots__ = ("regex", "special")

    def __init__(self, basic_lexer):
        pattern, callbacks = _alternation(basic_lexer)
        # lark's alternation, after the blanks lark would skip as a token of their own
        self.regex = re.compile(f"[\t ]*+(?:{pattern})", basic_lexer.g_regex_flags) \
            if pattern is not None and _skips_blanks(basic_lexer) else _UNKNOWN
        special: dict = {}
        for kind in basic_lexer.newline_types:
            special[kind] = _LINES
        for kind in basic_lexer.ignore_types:
            special[kind] = _SKIP_LINES if kind in basic_lexer.newline_types else _SKIP
        for kind, callback in callbacks.items():
            words = _keywords(callback)
            if words is None or kind in special:
                self.regex = _UNKNOWN                 # a callback this loop does not know
            else:
                special[kind] = words
        self.special = special


class _Step:
    """A stack of parser states: how to lex the next token there and, per token kind met
    so far, (the moves on the values before shifting it, the step after it)."""
    __slots__ = ("edges", "match", "special", "stack")

    def __init__(self, stack: tuple, lexer: _Lexer):
        self.stack, self.special, self.edges = stack, lexer.special, {}
        self.match = lexer.regex.match


_MERGE = "merge"         # an inlined rule (`_name`, `__x_star_0`): its children join its parent's
_REFUSE = "refuse"       # a rule lark would make a Tree of: left to lark's own path


def _plan(rule, builder):
    """How to reduce one rule, as lark's tree builder would with keep_all_tokens:
    (size, origin, effect). The effect is the callback; None for a rule that only renames
    its one child (`?expr: product`); _MERGE for an inlined rule, whose children lark
    splices into its parent's."""
    name = rule.alias or rule.options.template_source or rule.origin.name
    fn = getattr(builder, name, None)
    size = len(rule.expansion)
    splices = any(not sym.is_term and sym.name.startswith("_") for sym in rule.expansion)
    single = bool(rule.options.expand1 and not rule.alias)
    if single and size == 1 and not splices:
        effect = None
    elif fn is None:
        effect = _MERGE if rule.origin.name.startswith("_") else _REFUSE
    elif single:
        effect = functools.partial(_one_or_all, fn)
    else:
        effect = fn
    return (size, rule.origin.name, effect)


def _one_or_all(fn, children):
    """A `?rule`'s reduction: its one child as it is, else the callback."""
    return children[0] if len(children) == 1 else fn(children)


def _program(effects: list) -> tuple:
    """The reductions one token makes, as moves on the parse's values.

    The values are kept flat: an inlined rule's children are never gathered into a
    list of their own, since lark would splice that list into the parent's children
    anyway; `marks` holds where each entry of the parser's stack starts among the
    values. So an inlined rule only joins its entries into one, and joins fold into
    the next reduction: (count, None) joins the last `count` entries (0: adds an
    empty one); (count, fn) replaces them with fn(their values).
    """
    program, joined = [], None          # joined: entries to join, not yet done
    for size, effect in effects:
        if effect is _MERGE:
            if joined is None:
                joined = size
            elif size:
                joined += size - 1
            else:
                program.append((joined, None))
                joined = 0
        else:
            if joined is not None:
                if size:
                    size += joined - 1
                else:
                    program.append((joined, None))
                joined = None
            program.append((size, effect))
    if joined is not None:
        program.append((joined, None))
    return tuple(move for move in program if move != (1, None))   # one entry is joined already


class FastPath:
    def __init__(self, lark_parser, builder):
        from lark.parsers.lalr_analysis import Shift

        self.parser = lark_parser
        self.lexers = lark_parser.parser.lexer.lexers        # parser state -> lark BasicLexer
        self.builder = builder
        self.Shift = Shift
        self.tables: dict = {}     # start -> (start state, end state, table)
        self.roots: dict = {}      # start -> its first step
        self.steps: dict = {}      # stack of states -> its step
        self.stacked = 0           # states in the stacks of self.steps
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
            if len(self.steps) >= MAX_STEPS or self.stacked >= MAX_STACKED:
                self.steps, self.roots, self.stacked = {}, {}, 0    # steps in use stay valid
            self.stacked += len(stack)
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
        edge: (moves, next step or _ACCEPT), or None where the table refuses it."""
        _, end_state, table = self._table(start)
        stack, effects, eof = list(step.stack), [], kind == "$END"
        while True:
            action = table[stack[-1]].get(kind)
            if action is None or (action[0] and eof):
                return None
            if action[0]:
                stack.append(action[1])
                break
            size, origin, effect = action[1]
            if effect is _REFUSE:
                return None
            if size:
                del stack[-size:]
            stack.append(table[stack[-1]][origin][1])
            if effect is not None:
                effects.append((size, effect))
            if eof and stack[-1] == end_state:
                break
        edge = (_program(effects), _ACCEPT if eof else self._step(tuple(stack)))
        step.edges[kind] = edge
        return edge

    def parse(self, source: str, starts: list[int], start: str, a: int, b: int, line_offset: int):
        """Nodes of source[a:b] (whole lines; line numbers shifted by line_offset), or MISSING."""
        step = self._root(start)
        values: list = []         # tokens and nodes, flat (see _program)
        marks: list = []          # where each entry of the parser's stack starts in values
        push, mark = values.append, marks.append
        pos = a
        line = bisect_right(starts, a)                  # the line pos is on,
        row = line + line_offset                        # its number as shown,
        before = starts[line - 1] - 1                   # and where its column 0 would be
        while True:
            if pos >= b:
                kind, token = "$END", None
            else:
                m = step.match(source, pos, b)
                if m is None:
                    self.failed_at = pos if step.match != _UNKNOWN.match else None
                    return MISSING
                kind = m.lastgroup
                text = m[kind]
                end = m.end()
                special = step.special.get(kind)
                if special is None:
                    end_col = end - before
                    token = (kind, text, row, end_col - len(text), row, end_col)
                elif special is _SKIP:
                    pos = end
                    continue
                elif special is _SKIP_LINES:          # a continuation: on to the `->` line
                    line = bisect_right(starts, end)
                    row, before = line + line_offset, starts[line - 1] - 1
                    pos = end
                    continue
                elif special is _LINES:               # a newline: ends on a later line
                    line = bisect_right(starts, end)
                    token = (kind, text, row, end - len(text) - before, line + line_offset,
                             end - starts[line - 1] + 1)
                    row, before = line + line_offset, starts[line - 1] - 1
                else:                                 # a NAME, or a keyword
                    kind = special.get(text, kind)
                    end_col = end - before
                    token = (kind, text, row, end_col - len(text), row, end_col)
            edge = step.edges.get(kind) or self._edge(step, kind, start)
            if edge is None:
                self.failed_at = b if token is None else end - len(text)
                return MISSING
            moves, step = edge
            for count, fn in moves:                   # the moves of _program
                if fn is None:
                    if count:
                        del marks[1 - count:]
                    else:
                        mark(len(values))
                elif count:
                    at = marks[-count]
                    if count > 1:
                        del marks[1 - count:]
                    args = values[at:]
                    del values[at:]
                    push(fn(args))
                else:
                    mark(len(values))
                    push(fn([]))
            if step is _ACCEPT:
                return values[-1]
            mark(len(values))
            push(token)
            pos = end
