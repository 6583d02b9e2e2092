"""A lean driver for lark's contextual lexer and LALR parser, for text that parses.

lark's contextual lexer picks, in every parser state, the terminals that state
accepts and matches them with one compiled regex; its LALR parser then shifts the
token or reduces rules, calling a callback per reduction. This loop does exactly
that with lark's own per-state regexes and keyword rules (`ContextualLexer.lexers`),
lark's own parse table and lark's own callbacks (the NodeBuilder). It only leaves
out what costs most per token: a line counter object, a generator, a method call
and an assertion per token. Positions come from a table of line starts.

On anything unusual (a character no terminal matches, a token the parse table
refuses) it returns MISSING and the caller parses again through lark's ordinary
path, which then raises lark's exact error. So the language and the error
messages are lark's; only the speed of the common case differs.
"""
from __future__ import annotations

import re
from bisect import bisect_right

_MISSING = object()


def _skips_blanks(basic_lexer) -> bool:
    """Whether this lexer ignores runs of spaces and tabs (`%ignore /[\t ]+/`)."""
    return any(t.name in basic_lexer.ignore_types and t.pattern.value == "[\t ]+"
               for t in basic_lexer.terminals)


class _State:
    """What one parser state needs to lex: lark's regex, its ignore set, its callbacks."""
    __slots__ = ("callback", "ignore", "newline", "regex")

    def __init__(self, basic_lexer):
        scanner = basic_lexer.scanner              # builds lark's regex and keyword callbacks
        mres = scanner._mres
        # lark's alternation, after the blanks lark would skip as a token of their own
        self.regex = re.compile(f"[\t ]*+(?:{mres[0].pattern})", mres[0].flags) \
            if len(mres) == 1 and _skips_blanks(basic_lexer) else None
        self.ignore = basic_lexer.ignore_types
        self.newline = basic_lexer.newline_types
        self.callback = basic_lexer.callback


class Inline(list):
    """The children of an inlined rule (`_name`), spliced into its parent's children."""
    __slots__ = ()


def _plan(rule, builder):
    """How to reduce one rule, as lark's tree builder would with keep_all_tokens."""
    name = rule.alias or rule.options.template_source or rule.origin.name
    fn = getattr(builder, name, None)
    splice = tuple(i for i, sym in enumerate(rule.expansion)
                   if not sym.is_term and sym.name.startswith("_"))
    single = bool(rule.options.expand1 and not rule.alias)
    return (len(rule.expansion), rule.origin.name, splice, fn, single)


class FastPath:
    def __init__(self, lark_parser, builder):
        from lark.lexer import Token
        from lark.parsers.lalr_analysis import Shift

        self.parser = lark_parser
        self.lexers = lark_parser.parser.lexer.lexers        # parser state -> lark BasicLexer
        self.states: dict = {}
        self.token = getattr(Token, "_future_new", Token)
        self.Token = Token
        self.builder = builder
        self.Shift = Shift
        self.tables: dict = {}
        self.failed_at: int | None = None     # where the last parse that returned MISSING stopped

    def _state(self, position):
        st = self.states.get(position)
        if st is None:
            st = self.states[position] = _State(self.lexers[position])
        return st

    def _table(self, start):
        """lark's parse table for `start`, with each reduction as a plan: (start, end, table)."""
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

    def parse(self, source: str, starts: list[int], start: str, a: int, b: int, line_offset: int):
        """Nodes of source[a:b] (whole lines; line numbers shifted by line_offset), or MISSING."""
        start_state, end_state, table = self._table(start)
        state_stack, value_stack = [start_state], []
        states, get_state, make = self.states, self._state, self.token
        pos, token, eof = a, None, False
        line = bisect_right(starts, a)                  # the line pos is on, and its start
        lstart = starts[line - 1]
        while True:
            if pos < b:
                st = states.get(state_stack[-1]) or get_state(state_stack[-1])
                regex = st.regex
                if regex is None:
                    self.failed_at = None
                    return _MISSING
                m = regex.match(source, pos, b)
                if m is None:
                    self.failed_at = pos
                    return _MISSING
                kind = m.lastgroup
                end = m.end()
                if kind in st.ignore:
                    if kind in st.newline:                # a continuation: on to the `->` line
                        line = bisect_right(starts, end)
                        lstart = starts[line - 1]
                    pos = end
                    continue
                pos = m.start(kind)
                col = pos - lstart + 1
                if kind in st.newline:                    # only these can span lines
                    end_line = bisect_right(starts, end)
                    end_col = end - starts[end_line - 1] + 1
                else:
                    end_line, end_col = line, col + end - pos
                token = make(kind, m.group(kind), pos, line + line_offset, col, end_line + line_offset,
                             end_col, end)
                line, lstart = end_line, starts[end_line - 1]
                cb = st.callback.get(kind)
                if cb is not None:
                    token = cb(token)
                pos = end
            else:
                token = self.Token.new_borrow_pos("$END", "", token) if token is not None \
                    else self.Token("$END", "", 0, 1, 1)
                eof = True
            kind = token.type
            while True:                                   # lark's LALR step, as in feed_token
                action = table[state_stack[-1]].get(kind)
                if action is None or (action[0] and eof):
                    self.failed_at = b if eof else token.start_pos
                    return _MISSING
                if action[0]:
                    state_stack.append(action[1])
                    value_stack.append(token)
                    break
                size, origin, splice, fn, single = action[1]
                if size:
                    args = value_stack[-size:]
                    del state_stack[-size:]
                    del value_stack[-size:]
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
                    value = args[0]
                elif fn is None:
                    value = args if type(args) is Inline else Inline(args)
                else:
                    value = fn(args)
                state_stack.append(table[state_stack[-1]][origin][1])
                value_stack.append(value)
                if eof and state_stack[-1] == end_state:
                    return value_stack[-1]


MISSING = _MISSING
