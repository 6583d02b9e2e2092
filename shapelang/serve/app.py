"""The HTTP side of `shapelang serve`: the standard library's ThreadingHTTPServer, on a
loopback address only, with seven routes.

    GET  /              the page (static/index.html), GET /app.js, /syntax.js, /app.css and the TextMate grammar
    GET  /api/session   what the page starts from: the spec's text, or the exercise's parts
    POST /api/check     the body is spec text; the answer: diagnostics and `check`'s text, first
    POST /api/picture   then the picture of that check, only the pieces the page does not hold
    POST /api/block     a block of the picture, drawn when the page opens it
    POST /api/grade     (exercise mode) the body is the filled exercise; the grader's result

Everything else is 404 (405 for another method on a known path). A body larger than the
CLI's file limit is refused with 413 from its Content-Length, before a byte of it is read;
a Content-Length that is not ASCII digits is refused with 400.
Requests must name this server in `Host` (no DNS rebinding), and a POST must come from the
page itself (its own `X-Shapelang` header, so another site's form or fetch cannot post here).
Every answer carries a strict Content-Security-Policy: scripts and styles from this server
only (plus the trace picture's inline styles), connections to this server only. The work
itself runs in the worker process (shapelang.serve.worker), never in the server's threads.
"""
from __future__ import annotations

import ipaddress
import json
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .. import api
from .worker import Busy, Worker

STATIC = Path(__file__).resolve().parent / "static"
FILES = {"/": ("index.html", "text/html; charset=utf-8"),
         "/app.js": ("app.js", "text/javascript; charset=utf-8"),
         "/syntax.js": ("syntax.js", "text/javascript; charset=utf-8"),
         "/app.css": ("app.css", "text/css; charset=utf-8"),
         # the editor's colours: the VS Code extension's TextMate grammar (tests keep the two equal)
         "/shapelang.tmLanguage.json": ("shapelang.tmLanguage.json", "application/json; charset=utf-8")}
API = ("/api/session", "/api/check", "/api/picture", "/api/block", "/api/grade")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
           "X-Frame-Options": "DENY", "Cross-Origin-Opener-Policy": "same-origin",
           "Cross-Origin-Resource-Policy": "same-origin"}
IDLE_SECONDS = 30         # a connection silent this long is closed (no slow-client hang)


class ServeError(Exception):
    """A setting the server refuses (a host that is not loopback); the message says why."""


def loopback(host: str) -> str:
    """The address to bind: `host` if it is a loopback address (`localhost` is 127.0.0.1),
    else ServeError. The page is for the person at this machine, never for the network."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        ok = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise ServeError(f"shapelang serve listens on this machine only (127.0.0.1, ::1 or "
                         f"localhost), not on {host!r}: the page runs the checker on whatever "
                         "is posted to it")
    return host.strip("[]")


def content_length(values: list[str]) -> int | None:
    """The body's length from the request's Content-Length header(s), read strictly as RFC
    9110 writes it: ASCII digits only (not `²`, `٣`, `+5`, `1_0` or ` `), and the same number
    when the header is repeated; None for anything else."""
    found = {v.strip(" \t") for v in values}
    if len(found) != 1:
        return None
    text = found.pop()
    if not (0 < len(text) <= 20 and all("0" <= ch <= "9" for ch in text)):
        return None
    return int(text)


class Handler(BaseHTTPRequestHandler):
    server_version = "shapelang"
    timeout = IDLE_SECONDS
    server: Server

    # ------------------------------------------------------------------ answers
    def _send(self, status: int, body: bytes, ctype: str, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in HEADERS.items():
            self.send_header(k, v)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: dict, close: bool = False) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), "application/json; charset=utf-8", close)

    def _error(self, status: int, message: str, close: bool = False) -> None:
        self._json(status, {"error": message}, close)

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, fmt, *args) -> None:
        if self.server.verbose:
            super().log_message(fmt, *args)

    # ------------------------------------------------------------------ checks on every request
    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").lower()
        if host not in self.server.hosts:
            self._error(403, "this server answers only requests addressed to "
                             f"{self.server.url}", close=True)
            return False
        return True

    def _from_page(self) -> bool:
        origin = self.headers.get("Origin")
        site = self.headers.get("Sec-Fetch-Site")
        if (origin is not None and origin.lower() not in self.server.origins) or \
                (site is not None and site not in ("same-origin", "none")) or \
                self.headers.get("X-Shapelang") != "1":
            self._error(403, "requests are accepted from the shapelang page only", close=True)
            return False
        return True

    def _api(self) -> tuple:
        """The API paths of this session (grading only for an exercise)."""
        return API if self.server.worker.info.get("mode") == "exercise" else API[:-1]

    # ------------------------------------------------------------------ methods
    def do_GET(self) -> None:
        if not self._host_ok():
            return
        path = self.path.split("?", 1)[0]
        if path in FILES:
            name, ctype = FILES[path]
            self._send(200, self.server.static[name], ctype)
        elif path == "/api/session":
            self._json(200, self.server.worker.info)
        elif path in self._api():
            self._error(405, "use POST")
        else:
            self._error(404, f"no such page: {path[:200]}")

    do_HEAD = do_GET

    def do_POST(self) -> None:
        if not self._host_ok():
            return
        path = self.path.split("?", 1)[0]
        kind = path[len("/api/"):] if path in self._api() and path != "/api/session" else None
        if kind is None:
            known = path in FILES or path in self._api()
            self._error(405 if known else 404, "use GET" if known else f"no such page: {path[:200]}",
                        close=True)
            return
        if not self._from_page():
            return
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths or self.headers.get("Transfer-Encoding"):
            self._error(411, "send the text with a Content-Length", close=True)
            return
        length = content_length(lengths)
        if length is None:
            self._error(400, "bad Content-Length: one number written with the digits 0-9",
                        close=True)
            return
        if length > api.LIMITS.MAX_BYTES:        # refused unread: the CLI's limit for one file
            self._error(413, f"the text is larger than {api.LIMITS.MAX_BYTES // 1024} KB, the limit of "
                             "`shapelang check` for one file", close=True)
            return
        data = self.rfile.read(length)
        if len(data) < length:
            self._error(400, "the body ended before its Content-Length", close=True)
            return
        try:
            answer = self.server.worker.call(kind, data)
        except Busy as err:
            self._error(503, str(err))
            return
        except Exception as err:  # noqa: BLE001 - the page shows why; the server goes on
            self._error(500, str(err) or type(err).__name__)
            return
        self._json(200, answer)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, worker: Worker, verbose: bool = False):
        host = loopback(host)
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.worker = worker
        self.verbose = verbose
        self.static = {name: (STATIC / name).read_bytes() for name, _ in FILES.values()}
        super().__init__((host, port), Handler)
        port = self.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}/"
        names = {shown, "localhost"} | ({"127.0.0.1"} if host.startswith("127.") else set())
        self.hosts = {f"{n}:{port}" for n in names}
        self.origins = {f"http://{h}" for h in self.hosts}

    def server_close(self) -> None:
        """Stops listening and ends the checking worker (which may be closed twice)."""
        super().server_close()
        self.worker.close()


def start(host: str = "127.0.0.1", port: int = 0, *, path: str | None = None,
          exercise: str | None = None, solution: str | None = None,
          check_seconds: float | None = None, verbose: bool = False) -> Server:
    """A server ready to `serve_forever()` (its worker started; `server.url` is its page).
    Raises ServeError for a host that is not loopback, SetupFailed when the file or exercise
    cannot be served, OSError when the port cannot be bound."""
    from .worker import CHECK_SECONDS

    loopback(host)          # refuse before starting anything
    worker = Worker({"path": path, "exercise": exercise, "solution": solution},
                    check_seconds or CHECK_SECONDS)
    try:
        return Server(host, port, worker, verbose)
    except BaseException:
        worker.close()
        raise
