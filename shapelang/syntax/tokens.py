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

The loop needs none of lark's objects: `describe` reads what it needs out of a compiled
lark parser (each state's regex and keywords, the parse table, each rule's callback by
name) as JSON data, which grammar.py keeps between processes, so that text that parses
never imports lark.
"""
from __future__ import annotations

import functools
import re
from bisect import bisect_right

MISSING = object()
FORMAT = 1               # of describe()'s data: a new one makes stored tables stale

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
    alternation, which it compiles. This builds the parts the same way without compiling
    them (the fast path compiles its own version, with blanks skipped first, and lark
    compiles its own only if its own path ever lexes in that state). With another lark, it
    asks lark's scanner.
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


def _lexer_data(basic_lexer) -> list:
    """What one parser state needs to lex, as data: [regex or None, flags, special].

    The regex is lark's alternation after the blanks lark would skip as a token of their
    own; None where this loop cannot lex the state (lark's own path then does). `special`
    says what is special about a kind of token there: _SKIP (lark ignores it), _SKIP_LINES
    (ignored, and it spans lines: a continuation), _LINES (a token that spans lines: a
    newline), or the keywords that a NAME of that text is instead ({text: kind})."""
    pattern, callbacks = _alternation(basic_lexer)
    regex = f"[\t ]*+(?:{pattern})" if pattern is not None and _skips_blanks(basic_lexer) else None
    special: dict = {}
    for kind in sorted(basic_lexer.newline_types):      # sorted: the same data in every process
        special[kind] = _LINES
    for kind in sorted(basic_lexer.ignore_types):
        special[kind] = _SKIP_LINES if kind in basic_lexer.newline_types else _SKIP
    for kind, callback in sorted(callbacks.items()):
        words = _keywords(callback)
        if words is None or kind in special:
            regex = None                               # a callback this loop does not know
        else:
            special[kind] = words
    return [regex, basic_lexer.g_regex_flags, special]


class _Lexer:
    """One state's lexer of `_lexer_data`, compiled when a parse first reaches the state."""
    __slots__ = ("regex", "special")

    def __init__(self, data: list, compiled: dict):
        regex, flags, special = data
        self.special = {kind: _MARKS[how] if isinstance(how, str) else how
                        for kind, how in special.items()}
        if regex is None:
            self.regex = _UNKNOWN
        else:
            self.regex = compiled.get((regex, flags))
            if self.regex is None:
                self.regex = compiled[regex, flags] = re.compile(regex, flags)


class _Rows(dict):
    """The parse table: state -> {symbol: (True, state to shift to) or (False, (size,
    origin, effect))}, each row made from describe's data when a parse first needs it."""

    def __init__(self, plans: list, raw: dict):
        super().__init__()
        self.plans, self.raw = plans, raw

    def __missing__(self, state: int) -> dict:
        plans = self.plans
        row = self[state] = {sym: (True, move) if type(move) is int else (False, plans[move[0]])
                             for sym, move in self.raw[state].items()}
        return row


class _Step:
    """A stack of parser states: how to lex the next token there and, per token kind met
    so far, (the moves on the values before shifting it, the step after it)."""
    __slots__ = ("edges", "match", "special", "stack")

    def __init__(self, stack: tuple, lexer: _Lexer):
        self.stack, self.special, self.edges = stack, lexer.special, {}
        self.match = lexer.regex.match


_MERGE = "merge"         # an inlined rule (`_name`, `__x_star_0`): its children join its parent's
_REFUSE = "refuse"       # a rule lark would make a Tree of: left to lark's own path
_MARKS = {_SKIP: _SKIP, _SKIP_LINES: _SKIP_LINES, _LINES: _LINES}     # data -> the loop's marks


def _plan_data(rule, builder) -> list:
    """How to reduce one rule, as lark's tree builder would with keep_all_tokens, as data:
    [size, origin, effect]. The effect is ["call", name] for the builder's callback, or
    ["one", name] for a `?rule` (its one child as it is, else the callback); None for a
    rule that only renames its one child (`?expr: product`); _MERGE for an inlined rule,
    whose children lark splices into its parent's; _REFUSE for a rule lark would make a
    Tree of."""
    name = rule.alias or rule.options.template_source or rule.origin.name
    fn = getattr(builder, name, None)
    size = len(rule.expansion)
    splices = any(not sym.is_term and sym.name.startswith("_") for sym in rule.expansion)
    single = bool(rule.options.expand1 and not rule.alias)
    if single and size == 1 and not splices:
        effect = None
    elif fn is None:
        effect = _MERGE if rule.origin.name.startswith("_") else _REFUSE
    else:
        effect = ["one" if single else "call", name]
    return [size, rule.origin.name, effect]


def _plan(data: list, builder) -> tuple:
    """A `_plan_data` as the loop uses it: (size, origin, effect), the effect a callable."""
    size, origin, effect = data
    if isinstance(effect, list):
        how, name = effect
        fn = vars(type(builder)).get(name) and getattr(builder, name)
        if not callable(fn):
            raise KeyError(name)                       # a stale description: no such callback
        effect = functools.partial(_one_or_all, fn) if how == "one" else fn
    elif effect is not None:
        effect = {_MERGE: _MERGE, _REFUSE: _REFUSE}[effect]    # the loop's own marks
    return (int(size), str(origin), effect)


def describe(lark_parser, builder) -> dict:
    """What the fast path needs of a compiled lark LALR parser with a contextual lexer, as
    JSON data: each state's lexer, the parse table, each rule's reduction, and where each
    start begins and ends. States are lark's numbers."""
    from lark.parsers.lalr_analysis import Shift

    lexers, index_of, state_lexer = [], {}, []
    for state, basic in lark_parser.parser.lexer.lexers.items():
        if id(basic) not in index_of:
            index_of[id(basic)] = len(lexers)
            lexers.append(_lexer_data(basic))
        state_lexer.append([state, index_of[id(basic)]])
    start = lark_parser.options.start
    table = lark_parser.parse_interactive(None, start=start[0]).parser_state.parse_conf.parse_table
    plans, plan_of, rows = [], {}, []
    for state, row in table.states.items():
        moves = {}
        for sym, (action, arg) in row.items():
            if action is Shift:
                moves[sym] = arg                       # a number: shift, to that state
            else:
                if id(arg) not in plan_of:
                    plan_of[id(arg)] = len(plans)
                    plans.append(_plan_data(arg, builder))
                moves[sym] = [plan_of[id(arg)]]        # a list: reduce, by that plan
        rows.append([state, moves])
    return {"format": FORMAT, "lexers": lexers, "state_lexer": state_lexer, "plans": plans,
            "table": rows,
            "starts": {s: [table.start_states[s], table.end_states[s]] for s in start}}


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
    """The loop over one grammar's tables (`describe`'s data). Data that does not describe
    a grammar the builder knows raises ValueError, KeyError, TypeError, IndexError or
    AttributeError here, never in a parse."""

    def __init__(self, tables: dict, builder):
        if tables.get("format") != FORMAT:
            raise ValueError("tables of another format")
        self.table = _Rows([_plan(p, builder) for p in tables["plans"]],
                           {int(state): moves for state, moves in tables["table"]})
        self.starts = {str(name): (int(a), int(b)) for name, (a, b) in tables["starts"].items()}
        self.lexer_data = tables["lexers"]
        self.lexer_of_state = {int(state): int(i) for state, i in tables["state_lexer"]}
        if not set(self.lexer_of_state) >= set(self.table.raw) or \
                not all(0 <= i < len(self.lexer_data) for i in self.lexer_of_state.values()):
            raise ValueError("a state without its lexer")
        states, n = self.table.raw, len(self.table.plans)
        for first, end in self.starts.values():
            if first not in states or end not in states:
                raise ValueError("a start outside the table")
        for moves in states.values():   # every move leads to a state of the table or a plan
            for move in moves.values():
                if not (move in states if type(move) is int else 0 <= move[0] < n):
                    raise ValueError("a move outside the table")
        self._compiled: dict = {}  # (regex, flags) -> compiled: states often lex alike
        self.roots: dict = {}      # start -> its first step
        self.steps: dict = {}      # stack of states -> its step
        self.stacked = 0           # states in the stacks of self.steps
        self._lexers: dict = {}    # index in lexer_data (states share them) -> _Lexer
        self.failed_at: int | None = None     # where the last parse that returned MISSING stopped

    def _table(self, start):
        """(start state, end state, the parse table) for `start`."""
        first, end = self.starts[start]
        return first, end, self.table

    def _step(self, stack: tuple) -> _Step:
        step = self.steps.get(stack)
        if step is None:
            if len(self.steps) >= MAX_STEPS or self.stacked >= MAX_STACKED:
                self.steps, self.roots, self.stacked = {}, {}, 0    # steps in use stay valid
            self.stacked += len(stack)
            i = self.lexer_of_state[stack[-1]]
            lexer = self._lexers.get(i)
            if lexer is None:
                lexer = self._lexers[i] = _Lexer(self.lexer_data[i], self._compiled)
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
