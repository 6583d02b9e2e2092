"""`shapelang serve` keeps its limits, over real HTTP requests to a running server.

- A check past its limit is answered at the limit: the worker is replaced in the background,
  after the answer, never while the request (or the lock) waits for it.
- A small request never waits behind a slow one, or behind a replacement starting, for
  longer than its own limit: it is answered "busy" instead.
- Content-Length is read strictly (ASCII digits only): anything else gets a 400 answer,
  never a dropped connection.

No test measures time: a slow request is simulated by holding the worker's lock, a slow
restart by holding the replacement at a gate; every wait is bounded by a generous limit.
"""
from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from serve_session import Running, raw

from shapelang.serve.app import content_length

ROOT = Path(__file__).resolve().parents[1]
SMALL = "dim B\ninput X: [B]\nY: X -> gelu\n"
BIG = (ROOT / "specs" / "gpt2_small.shape").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve_limits")
    path = d / "mha.shape"
    shutil.copy(ROOT / "specs" / "mha_self_attention.shape", path)
    r = Running(path=str(path))
    yield r
    r.close()




# ---------------------------------------------------------------------- headers

# latin-1 bytes as a client may send them: `²` `³` `¹` are str.isdigit() in Python
BAD_LENGTHS = [b"\xb2", b"\xb3", b"1\xb9", b"\xbc", b"+5", b"-1", b"0x10", b"1_0", b"5 5", b"",
               b"\xd9\xa3", b"1e3", b"99999999999999999999999"]


@pytest.mark.parametrize("length", BAD_LENGTHS, ids=repr)
def test_a_content_length_that_is_not_ascii_digits_gets_a_400(srv, length):
    head = (f"POST /api/check HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nX-Shapelang: 1\r\n"
            "Content-Type: text/plain\r\nContent-Length: ").encode() + length + b"\r\n\r\n"
    out = raw(srv.port, head + SMALL.encode())
    assert out.startswith(b"HTTP/1.0 400 "), out[:200]
    assert b"Content-Length" in out


def test_repeated_content_lengths_must_agree(srv):
    head = (f"POST /api/check HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nX-Shapelang: 1\r\n"
            f"Content-Length: {len(SMALL)}\r\nContent-Length: 3\r\n\r\n").encode()
    assert raw(srv.port, head + SMALL.encode()).startswith(b"HTTP/1.0 400 ")
    head = (f"POST /api/check HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nX-Shapelang: 1\r\n"
            f"Content-Length: {len(SMALL)}\r\nContent-Length: {len(SMALL)}\r\n\r\n").encode()
    assert raw(srv.port, head + SMALL.encode()).startswith(b"HTTP/1.0 200 ")


def test_the_length_reader_agrees_with_a_plain_ascii_reading():
    for text in ["0", "7", "0012", "262144", " 5\t", *(b.decode("latin-1") for b in BAD_LENGTHS)]:
        plain = text.strip(" \t")
        want = int(plain) if plain and len(plain) <= 20 and \
            all(c in "0123456789" for c in plain) else None
        assert content_length([text]) == want, text


# ---------------------------------------------------------------------- time limits

def test_a_small_request_behind_a_slow_one_is_answered_within_its_own_limit(srv):
    worker = srv.server.worker
    worker.lock.acquire()             # a slow request holds the worker
    try:
        worker.check_seconds = 0.5
        status, got = srv.post("/api/check", SMALL)
        # answered while the slow request still holds the worker
        assert status == 503 and "busy" in got["error"]
    finally:
        worker.check_seconds = 10.0
        worker.lock.release()
    status, got = srv.post("/api/check", SMALL)
    assert status == 200 and got["ok"]


def test_a_check_past_its_limit_is_answered_before_the_worker_is_replaced(srv):
    worker = srv.server.worker
    gate = threading.Event()
    real = worker._start

    def slow_start():                 # the replacement cannot start until the gate opens
        assert gate.wait(120)
        real()

    worker._start = slow_start
    before = worker.restarts
    try:
        worker.check_seconds = 0.001
        status, got = srv.post("/api/check", BIG)
        assert status == 503 and "took longer than" in got["error"]
        # the answer came while the replacement was still held at the gate
        assert worker.restarts == before + 1 and not worker.ready.is_set()
        worker.check_seconds = 0.5
        status, got = srv.post("/api/check", SMALL)
        assert status == 503 and "restarting" in got["error"]
    finally:
        worker.check_seconds = 10.0
        gate.set()
    assert worker.ready.wait(120)
    del worker._start
    status, got = srv.post("/api/check", SMALL)
    assert status == 200 and got["ok"]
    status, got = srv.post("/api/check", BIG)
    assert status == 200 and got["ok"]
