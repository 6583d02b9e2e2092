"""The worker process: every check and grade of the page runs here, one at a time, under a
wall-clock limit; a request that overruns it gets an answer saying so, and the worker is
killed and replaced. So no spec, however it is written, can hang the server, and the server
process itself imports neither sympy nor the checker.

The worker is `python -m shapelang.serve.worker`, a plain child process (not forked from the
threaded server, and not multiprocessing, which would re-run the caller's main module). It
builds the session (the file, or the exercise and its grader) once, says it is ready, then
answers requests on its stdin/stdout: a request is one JSON line `{"kind": ..., "size": n}`
followed by n bytes of text; an answer is one JSON line. A grade runs in the worker's main
thread, so the grader's own time limit (`# @time limit`, as in `shapelang grade`) applies as
it does on the command line; the kill is the backstop past it.

A request that overruns its limit is answered at its limit: the worker is killed, and its
replacement starts in a thread of its own, outside the request lock. A request never waits
longer than its own limit for the lock (an earlier request) or for a replacement starting.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

CHECK_SECONDS = 10.0      # wall-clock limit of one check
GRACE_SECONDS = 5.0       # past a grade's own time limit, before the worker is killed
START_SECONDS = 120.0     # for the worker to import shapelang and build the session
MAX_ANSWER = 64 * 1024 * 1024   # bytes of one answer line (a picture of a large spec is < 1 MB)


class Busy(Exception):
    """The worker did not answer in time (or is still busy with an earlier request)."""


class SetupFailed(Exception):
    """The worker could not build the session; the message says why."""


class Worker:
    """The parent's side: one worker process, replaced when it overruns a time limit."""

    def __init__(self, setup: dict, check_seconds: float = CHECK_SECONDS):
        self.setup = setup
        self.check_seconds = check_seconds
        self.lock = threading.Lock()          # one request at a time in the worker
        self.ready = threading.Event()        # set while no replacement is starting
        self.proc: subprocess.Popen | None = None
        self.buffer = b""
        self.info: dict = {}
        self.restarts = 0
        self.closed = False
        self.failure: str | None = None       # why the last replacement did not start
        self._start()
        self.ready.set()

    # ------------------------------------------------------------------ the process
    def _start(self) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])     # the same shapelang as this one
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen([sys.executable, "-m", "shapelang.serve.worker",
                                      json.dumps(self.setup)], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, close_fds=True)
        self.buffer = b""
        try:
            first = self._line(START_SECONDS)
        except Busy:
            self._kill()
            raise SetupFailed(f"the worker did not start within {START_SECONDS:g} s") from None
        if first is None:
            self._kill()
            raise SetupFailed("the worker stopped while starting")
        if first.get("status") != "ready":
            self._kill()
            raise SetupFailed(first.get("message") or "the worker could not start")
        self.info = first["info"]

    def _kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def _replace(self) -> None:
        """Kill the worker and start its replacement in the background (called holding
        the lock; the replacement is waited for by the next request, up to its limit)."""
        self._kill()
        self.proc = None
        self.restarts += 1
        self.ready.clear()
        threading.Thread(target=self._start_replacement, daemon=True).start()

    def _start_replacement(self) -> None:
        try:
            self._start()
            self.failure = None
        except SetupFailed as err:
            self.proc, self.failure = None, str(err)
        finally:
            if self.closed:
                self._kill()
            self.ready.set()

    def _line(self, seconds: float) -> dict | None:
        """The worker's next answer line (None when it exits first); Busy after `seconds`."""
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + seconds
        while b"\n" not in self.buffer:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Busy("no answer in time")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self.buffer += chunk
            if len(self.buffer) > MAX_ANSWER:
                return None
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    # ------------------------------------------------------------------ requests
    def seconds(self, kind: str) -> float:
        if kind == "grade":
            return float(self.info.get("time_limit") or CHECK_SECONDS) + GRACE_SECONDS
        return self.check_seconds

    def call(self, kind: str, data: bytes) -> dict:
        """The worker's answer to one request; Busy when it takes too long (then the worker
        is replaced) or an earlier request, or a replacement starting, holds the worker past
        this request's own limit; RuntimeError
        when shapelang itself failed on the text."""
        limit = self.seconds(kind)
        arrived = time.monotonic()
        if not self.lock.acquire(timeout=limit):
            raise Busy(f"the server was busy with an earlier request for {limit:g} s; try again")
        try:
            if not self.ready.wait(max(limit - (time.monotonic() - arrived), 0)):
                raise Busy("shapelang is restarting after a request that took too long; "
                           "try again in a moment")
            if self.proc is None or self.proc.poll() is not None:
                if self.proc is not None or self.failure is None:
                    self._replace()
                    raise Busy("shapelang is restarting; try again in a moment")
                raise RuntimeError(f"shapelang could not restart: {self.failure}")
            start = time.monotonic()
            try:
                self.proc.stdin.write(json.dumps({"kind": kind, "size": len(data)}).encode() + b"\n")
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
                answer = self._line(limit)
            except Busy:
                self._replace()
                what = "checking" if kind == "check" else "grading"
                raise Busy(f"{what} this text took longer than {limit:g} s and was stopped "
                           f"(after {time.monotonic() - start:.1f} s)") from None
            except (OSError, ValueError):
                answer = None
            if answer is None:
                self._replace()
                raise RuntimeError("shapelang stopped while working on this text; this is a "
                                   "fault of shapelang, not of your spec")
            if answer.get("status") != "ok":
                raise RuntimeError(answer.get("message") or "shapelang failed on this text")
            return answer["answer"]
        finally:
            self.lock.release()

    def close(self) -> None:
        self.closed = True           # a replacement still starting is killed when it is up
        with self.lock:
            self._kill()
            self.proc = None


# ---------------------------------------------------------------------- the worker's side

def main() -> int:
    """Build the session named on the command line, then answer requests until stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C stops the server, which stops this
    out = os.fdopen(os.dup(1), "wb")      # answers only: anything printed goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer

    def send(obj: dict) -> None:
        out.write(json.dumps(obj).encode() + b"\n")
        out.flush()

    from .work import SetupError, Work

    try:
        work = Work(**json.loads(sys.argv[1]))
    except SetupError as err:
        send({"status": "failed", "message": str(err)})
        return 1
    send({"status": "ready", "info": work.info()})
    while True:
        head = inp.readline()
        if not head:
            return 0
        request = json.loads(head)
        data = inp.read(int(request["size"]))
        try:
            send({"status": "ok", "answer": work.answer(request["kind"], data)})
        except Exception as err:  # noqa: BLE001 - a fault of shapelang is an answer, not a dead worker
            send({"status": "error", "message": f"shapelang failed on this text (internal "
                  f"{type(err).__name__}); this is a fault of shapelang, not of your spec"})


if __name__ == "__main__":
    sys.exit(main())
