"""Open documents and their analyses, cached per text.

An `Analysis` is one version of a document checked: the checked IR (exactly
what `shapelang check` computes for that text), the symbol index and the line
map. The store keeps the analyses of the last few texts of every document, so
that a request for a version already checked (a hover after the diagnostics,
an undo back to an earlier text) costs nothing, and a `CheckSession` per
document, so that an edit parses only the statements it changed. Only the
server's one worker thread calls into the store.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from .. import api
from ..api import CheckSession
from .positions import LineMap, normalise
from .symbols import SymbolIndex, build

KEEP = 4   # analyses kept per document


@dataclass
class Analysis:
    uri: str
    version: int | None
    text: str
    spec: api.CheckedSpec
    lines: LineMap
    _index: SymbolIndex | None = field(default=None, repr=False)

    @property
    def index(self) -> SymbolIndex:
        if self._index is None:
            self._index = build(self.text)
        return self._index


def path_of(uri: str) -> str:
    """The file path `shapelang check` would be given, for a file URI; the URI otherwise."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


class DocumentStore:
    def __init__(self, encoding: str = "utf-16"):
        self.encoding = encoding                             # the session's position encoding
        self.texts: dict[str, tuple[int | None, str]] = {}   # uri -> (version, text)
        self.cache: dict[str, OrderedDict] = {}              # uri -> text -> Analysis
        self.sessions: dict[str, CheckSession] = {}          # uri -> its checks between edits
        self.checks = 0                                      # full checks run (for tests, bench)

    def update(self, uri: str, version: int | None, text: str) -> None:
        self.texts[uri] = (version, normalise(text))

    def close(self, uri: str) -> None:
        self.texts.pop(uri, None)
        self.cache.pop(uri, None)
        self.sessions.pop(uri, None)

    def analysis(self, uri: str, stale=None) -> Analysis | None:
        """The analysis of the document's current text (checked now if it is not cached).
        `stale`: asked between statements; when true, the check stops with `Stale`."""
        if uri not in self.texts:
            return None
        version, text = self.texts[uri]
        cached = self.cache.setdefault(uri, OrderedDict())
        hit = cached.get(text)
        if hit is not None:
            cached.move_to_end(text)
            hit.version = version
            return hit
        session = self.sessions.get(uri)
        if session is None:
            session = self.sessions[uri] = CheckSession(path_of(uri), keep=1)
        spec = session.check(text, stale=stale)
        self.checks += 1
        hit = Analysis(uri, version, text, spec, LineMap(text, self.encoding))
        cached[text] = hit
        while len(cached) > KEEP:
            cached.popitem(last=False)
        return hit
