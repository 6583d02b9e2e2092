"""`shapelang serve` over HTTP, without a browser: a real server on a free port of 127.0.0.1
(in a thread, its worker a real process). It answers with the same diagnostics and text as
`shapelang check` and the same result as `shapelang grade`, bounds input exactly as the
command line does (refusing an oversized body unread), answers hostile text with diagnostics,
never binds beyond this machine, and leaks no solution."""
from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from serve_session import POST, Running, raw

import shapelang
from shapelang.serve.app import ServeError, loopback, start
from shapelang.syntax.limits import MAX_BYTES, MAX_LINES
from shapelang.teaching.exercise import extract, load_template

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = sorted((ROOT / "exercises").glob("*.shape"))
EXERCISE = ROOT / "exercises" / "02_split_heads.shape"
SOLUTION = ROOT / "exercises" / "solutions" / "02_split_heads.shape"


def _cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shapelang", *args], check=False, capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    path = d / "mha.shape"
    shutil.copy(ROOT / "specs" / "mha_self_attention.shape", path)
    return path


@pytest.fixture(scope="module")
def srv(spec_file):
    r = Running(path=str(spec_file))
    yield r
    r.close()


@pytest.fixture(scope="module")
def ex_srv():
    r = Running(exercise=str(EXERCISE))
    yield r
    r.close()


# ---------------------------------------------------------------------- the page

def test_the_page_is_self_contained_with_a_strict_policy(srv):
    status, headers, page = srv.request("GET", "/")
    assert status == 200 and b'<script src="/app.js"' in page
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert "unsafe-eval" not in csp and "script-src 'self' 'unsafe-inline'" not in csp
    for path in ("/", "/app.js", "/app.css"):
        status, headers, body = srv.request("GET", path)
        assert status == 200 and headers["X-Content-Type-Options"] == "nosniff"
        # nothing fetched from elsewhere: no address of another server in the page
        assert not re.search(rb"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", body), path


def test_the_session_is_the_files_text(srv, spec_file):
    status, _, body = srv.request("GET", "/api/session")
    info = json.loads(body)
    assert status == 200 and info["mode"] == "spec"
    assert info["text"] == spec_file.read_text(encoding="utf-8")
    assert info["limits"]["max_bytes"] == MAX_BYTES and info["limits"]["max_lines"] == MAX_LINES


# ---------------------------------------------------------------------- same as the command line

def test_a_check_answers_with_the_text_of_shapelang_check(srv, spec_file):
    text = spec_file.read_text(encoding="utf-8")
    bad = text.replace("Kt: Kh -> transpose -2 -1", "Kt: Kh")
    for version in (text, bad):
        spec_file.write_text(version, encoding="utf-8")
        cli = _cli("check", str(spec_file))
        status, got = srv.post("/api/check", version)
        assert status == 200
        assert got["text"] == cli.stdout
        assert got["ok"] == (cli.returncode == 0)
    spec_file.write_text(text, encoding="utf-8")
    # the mistake: Qh @ Kt fails on the line of `scores`, after the line that changed
    line = bad.split("\n").index("scores: Qh @ Kt -> scale 1/sqrt(Dh)") + 1
    errors = [(d["line"], d["code"]) for d in got["diagnostics"] if d["severity"] == "error"]
    assert (line, "E101") in errors
    d = got["diagnostics"][errors.index((line, "E101"))]
    assert d["rendered"].startswith(f"{spec_file}:{line}:{d['column']}: error[E101]: {d['message']}")
    assert d["help"] and d["help"] in d["rendered"]
    assert "picture" not in got         # the diagnostics come first, the picture after
    picture = _picture(srv, got)
    # the failing binding is drawn as stopped by its error, with the error on it
    assert 'data-binding="scores" data-unfinished="E101"' in picture and 'data-diagnostic="E101"' in picture


def _picture(srv, checked, have=()) -> str:
    """The picture of a check as the page assembles it: every piece's HTML."""
    status, got = srv.post("/api/picture", json.dumps({"version": checked["version"], "have": list(have)}))
    assert status == 200, got
    return "".join(html or "" for _, html in got["pieces"])


def test_the_picture_carries_only_what_changed_and_blocks_are_drawn_when_opened(srv):
    text = (ROOT / "specs" / "gpt2_small.shape").read_text(encoding="utf-8")
    _, first = srv.post("/api/check", text)
    _, pic = srv.post("/api/picture", json.dumps({"version": first["version"], "have": []}))
    keys = [k for k, _ in pic["pieces"]]
    whole = "".join(h for _, h in pic["pieces"])
    # the block is a closed, empty <details> until it is opened
    lazy = re.findall(r'data-block="GPT2Block" data-lazy="(\d+)"', whole)
    assert lazy and 'data-binding="att"' not in whole
    status, block = srv.post("/api/block", json.dumps({"version": first["version"], "block": int(lazy[0])}))
    assert status == 200 and 'data-binding="att"' in block["html"] and 'data-step=' in block["html"]
    # one line changed: the next answer carries that line's piece, the others by their keys
    edited = text.replace("logits: hidden @ (W_te -> transpose 0 1)", "logits: hidden @ (W_te -> transpose 1 0)")
    assert edited != text
    _, second = srv.post("/api/check", edited)
    _, again = srv.post("/api/picture", json.dumps({"version": second["version"], "have": keys}))
    sent = [h for _, h in again["pieces"] if h is not None]
    assert len(sent) == 1 and 'data-binding="logits"' in sent[0] and "transpose 1 0" in sent[0]
    assert len(again["pieces"]) == len(pic["pieces"])
    # a picture or block asked for an older check is refused as stale, never drawn from the new one
    _, stale = srv.post("/api/picture", json.dumps({"version": first["version"], "have": []}))
    assert stale == {"stale": True}


LIMITS = {
    "too many lines": "".join(f"dim D{k}\n" for k in range(MAX_LINES + 3)),
    "a line too long": "dim B\ninput X: [B, " + "B, " * 900 + "B]\n",
    "brackets too deep": "dim B\ninput X: [B]\nY: X -> view " + "[" * 80 + "B" + "]" * 80 + "\n",
    "a number too long": "dim B\ninput X: [B]\nY: X -> linear " + "9" * 40 + "\n",
    "a rank too high": "dim B\ninput X: [" + ", ".join(["B"] * 40) + "]\n",
    "just under the size limit": "dim B\ninput X: [B]\n" + ("#" + "x" * 98 + "\n") * ((MAX_BYTES - 40) // 100),
}


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_input_is_bounded_exactly_as_the_command_line_does(srv, tmp_path, name):
    text = LIMITS[name]
    assert len(text.encode()) <= MAX_BYTES
    path = tmp_path / "limit.shape"
    path.write_text(text, encoding="utf-8")
    cli = json.loads(_cli("check", "--format", "json", str(path)).stdout)
    status, got = srv.post("/api/check", text)
    assert status == 200

    def key(ds):
        return [(d["code"], d["line"], d["column"], d["message"]) for d in ds]
    assert key(got["diagnostics"]) == key(cli["diagnostics"])
    if name != "just under the size limit":
        assert any(d["code"] in ("E004", "E003") or d["severity"] == "error" for d in got["diagnostics"])


def _raw(port: int, head: bytes, body: bytes = b"") -> bytes:
    return raw(port, head + body, timeout=10)


@pytest.mark.parametrize("size", [MAX_BYTES + 1, 10**12])
def test_an_oversized_body_is_refused_before_it_is_read(srv, size):
    # the body is never sent: a server that tried to read it would wait, and the socket
    # would time out instead of answering
    head = (f"POST /api/check HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nX-Shapelang: 1\r\n"
            f"Content-Type: text/plain\r\nContent-Length: {size}\r\n\r\n").encode()
    out = _raw(srv.port, head)
    assert out.startswith(b"HTTP/1.0 413 "), out[:200]
    assert f"larger than {MAX_BYTES // 1024} KB".encode() in out


def test_a_body_at_the_limit_is_checked(srv):
    text = "dim B\ninput X: [B]\n"
    text += ("#" * 99 + "\n") * ((MAX_BYTES - len(text)) // 100)
    text += "#" * (MAX_BYTES - len(text) - 1) + "\n"
    assert len(text.encode()) == MAX_BYTES
    status, got = srv.post("/api/check", text)
    assert status == 200 and got["ok"]


def test_requests_without_a_length_are_refused(srv):
    head = (f"POST /api/check HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nX-Shapelang: 1\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()
    assert _raw(srv.port, head, b"5\r\ndim B\r\n0\r\n\r\n").startswith(b"HTTP/1.0 411 ")


HOSTILE = {
    "markup": "dim B\ninput X: [B]\n# </pre><script>alert(1)</script>\nY: X -> <script>alert(1)</script>\n",
    "python": "dim B\ninput X: [B]\nY: __import__('os').system('touch PWNED')\nZ: X -> view [eval('1')]\n",
    "NUL and control bytes": "dim B\x00\ninput X: [B]\x1b[31m\nY: X\x07 -> gelu\n",
    "not UTF-8": b"dim B\ninput X: [B]\nY: X -> linear \xff\xfe\xc3\n",
    "byte-order mark and CR": "\ufeffdim B\rinput X: [B]\r\nY: X -> linear\r",
    "a number of 5,000 digits": "dim B\ninput X: [B]\nY: X -> linear " + "7" * 5000 + "\n",
    "deep brackets": "dim B\ninput X: [B]\nY: X -> view " + "(" * 5000 + "\n",
    "an unclosed statement": "dim B\ninput X: [B\nY: X -> -> -> @ @\nexpect Y: ?\n",
    "an exponent tower": "dim B\nexample B=2\ninput X: [B**B**B**B**B**B**B**B]\n",
    "direction overrides": "dim B\u202e\ninput X\u2066: [B]\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_gets_diagnostics_not_tracebacks(srv, tmp_path, name):
    text = HOSTILE[name]
    body = text if isinstance(text, bytes) else text.encode("utf-8")
    status, got = srv.post("/api/check", body)
    assert status == 200, got
    assert not got["ok"] and got["diagnostics"]
    for d in got["diagnostics"]:
        assert d["line"] >= 1 and d["column"] >= 1 and d["message"]
    everything = json.dumps(got)
    assert "Traceback" not in everything and "internal" not in everything
    assert "<script>alert" not in _picture(srv, got)
    assert not (tmp_path / "PWNED").exists() and not (ROOT / "PWNED").exists()
    path = tmp_path / "hostile.shape"
    path.write_bytes(body)
    assert got["text"] == shapelang.render_check(shapelang.check_file(str(path))).replace(
        str(path), srv.server.worker.info["path"])


def test_a_check_that_takes_too_long_is_stopped_and_the_server_goes_on(srv):
    worker = srv.server.worker
    big = (ROOT / "specs" / "gpt2_small.shape").read_text(encoding="utf-8")
    before = worker.restarts
    worker.check_seconds = 0.001
    try:
        status, got = srv.post("/api/check", big)
    finally:
        worker.check_seconds = 10.0
    assert status == 503 and "took longer than" in got["error"]
    assert worker.restarts == before + 1
    assert worker.ready.wait(120)     # the replacement starts after the answer, in the background
    status, got = srv.post("/api/check", big)
    assert status == 200 and got["ok"]


# ---------------------------------------------------------------------- what is refused

@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "example.com", "", "*"])
def test_a_non_local_bind_is_refused(host):
    with pytest.raises(ServeError, match="this machine only"):
        loopback(host)
    with pytest.raises(ServeError):
        start(host, 0)


def test_loopback_addresses_are_accepted():
    assert loopback("localhost") == "127.0.0.1"
    assert loopback("127.0.0.1") == "127.0.0.1" and loopback("::1") == "::1"


def test_the_command_refuses_a_non_local_host():
    out = _cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert out.returncode == 2 and "this machine only" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("method,path", [("GET", "/nope"), ("GET", "/../../etc/passwd"),
                                         ("GET", "/api/nothing"), ("GET", "/static/app.js"),
                                         ("GET", "/app.js/../index.html"), ("POST", "/api/nope"),
                                         ("POST", "/api/grade"), ("GET", "/%2e%2e/pyproject.toml")])
def test_unknown_paths_are_404(srv, method, path):
    status, _, body = srv.request(method, path, b"dim B\n" if method == "POST" else None, POST)
    assert status == 404 and "error" in json.loads(body)


def test_wrong_methods_are_405(srv):
    assert srv.request("GET", "/api/check")[0] == 405
    assert srv.request("POST", "/", b"x", POST)[0] == 405


def test_requests_for_another_host_or_from_another_page_are_refused(srv):
    # DNS rebinding: a name that resolves here is still not this server's name
    assert srv.request("GET", "/api/session", host=f"evil.example:{srv.port}")[0] == 403
    assert srv.request("GET", "/", host=f"localhost:{srv.port}")[0] == 200
    assert srv.request("POST", "/api/check", b"dim B\n", {"Content-Type": "text/plain"})[0] == 403
    assert srv.request("POST", "/api/check", b"dim B\n", dict(POST, Origin="http://evil.example"))[0] == 403
    assert srv.request("POST", "/api/check", b"dim B\n", dict(POST, **{"Sec-Fetch-Site": "cross-site"}))[0] == 403
    ok = dict(POST, Origin=f"http://127.0.0.1:{srv.port}", **{"Sec-Fetch-Site": "same-origin"})
    assert srv.request("POST", "/api/check", b"dim B\n", ok)[0] == 200


def test_check_does_not_import_the_server():
    code = ("import sys; from shapelang.cli import main; "
            f"main(['check', {str(ROOT / 'specs' / 'mha_self_attention.shape')!r}]); "
            "print(sorted(m for m in sys.modules if m.startswith(('shapelang.serve', 'http.server', "
            "'socketserver'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("[]"), out.stdout[-300:]


def test_the_command_serves_until_interrupted(spec_file):
    proc = subprocess.Popen([sys.executable, "-m", "shapelang", "serve", str(spec_file), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, line
        conn = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=60)
        text = "dim B\ninput X: [B, 3]\nY: X -> view [B, 4]\n"
        conn.request("POST", "/api/check", body=text.encode(), headers=POST)
        got = json.loads(conn.getresponse().read())
        assert got["text"] == shapelang.render_check(shapelang.check(text, str(spec_file)))
        assert not got["ok"]
        os.killpg(proc.pid, signal.SIGINT)         # Ctrl-C: to the server and its worker
        assert proc.wait(timeout=30) == 0
        assert proc.stderr.read() == ""            # no traceback from either
        for _ in range(100):                       # and the worker is gone with the server
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the worker outlived the server")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
        proc.stdout.close()


def test_the_command_says_why_it_cannot_serve(tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        out = _cli("serve", "--port", str(busy.getsockname()[1]))
        assert out.returncode == 2 and "cannot listen on 127.0.0.1" in out.stderr
    finally:
        busy.close()
    out = _cli("serve", str(tmp_path / "missing.shape"), "--port", "0")
    assert out.returncode == 2 and "cannot read" in out.stderr and "Traceback" not in out.stderr
    big = tmp_path / "big.shape"
    big.write_text("#" * (MAX_BYTES + 1), encoding="utf-8")
    out = _cli("serve", str(big), "--port", "0")
    assert out.returncode == 2 and "larger than 256 KB" in out.stderr


def test_the_server_process_imports_neither_sympy_nor_the_checker():
    code = ("import sys; from shapelang.serve.app import start; s = start('127.0.0.1', 0); "
            "print(sorted(m for m in sys.modules if m.startswith(('sympy', 'lark', 'torch', "
            "'shapelang.checker', 'shapelang.teaching')))); s.worker.close()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


# ---------------------------------------------------------------------- exercises

def _reference_answers(exercise: Path, solution: Path) -> list[str]:
    tmpl = load_template(exercise.read_text(encoding="utf-8"), str(exercise))
    ext = extract(tmpl, solution.read_text(encoding="utf-8"))
    return [a.text for a in ext.answers.values() if a.text]


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_the_page_of_an_exercise_holds_no_answer(exercise):
    from shapelang.serve.work import Work

    solution = exercise.parent / "solutions" / exercise.name
    info = json.dumps(Work(exercise=str(exercise)).info())
    text = exercise.read_text(encoding="utf-8")
    squash = "".join(text.split())
    secret = [a for a in _reference_answers(exercise, solution) if "".join(a.split()) not in squash]
    assert secret, "the test needs answers that are not in the exercise"
    assert [a for a in secret if a in info or json.dumps(a)[1:-1] in info] == []
    assert "solution" not in json.loads(info)


def test_every_get_of_an_exercise_server_holds_no_answer(ex_srv):
    secret = _reference_answers(EXERCISE, SOLUTION)
    for path in ("/", "/app.js", "/app.css", "/api/session"):
        status, _, body = ex_srv.request("GET", path)
        assert status == 200
        assert [a for a in secret if a.encode() in body] == []
    info = json.loads(ex_srv.request("GET", "/api/session")[2])
    assert "\n\n".join(p["text"] for p in info["parts"]) == EXERCISE.read_text(encoding="utf-8")


def _filled(answers: dict) -> str:
    text = EXERCISE.read_text(encoding="utf-8")
    for name, answer in answers.items():
        text = re.sub(rf"\?{name}\b(?!:)", answer, text)
    return text


@pytest.mark.parametrize("answers", [
    {"split": "view [B, S, H, D/H]", "swap": "transpose 2 1", "qh": "[B, H, S, Dh]", "one": "[B, S, Dh]"},
    {"split": "view [B, S, H, Dh]", "swap": "transpose 1 3", "qh": "[B, S, H, Dh]", "one": "[B, S]"},
    {"split": "view [B, H, S, Dh]"},
], ids=["right", "wrong", "partly filled"])
def test_grading_gives_what_shapelang_grade_gives(ex_srv, tmp_path, answers):
    text = _filled(answers)
    sub = tmp_path / "answers.shape"
    sub.write_text(text, encoding="utf-8")
    cli = json.loads(_cli("grade", str(EXERCISE), str(sub), "--format", "json").stdout)["submissions"][0]
    status, got = ex_srv.post("/api/grade", text)
    assert status == 200
    assert got["score"] == cli["score"] and got["max_score"] == cli["max_score"]
    for key in ("blanks", "whole_file", "notes", "gradable", "error"):
        assert got["result"][key] == cli[key], key
    assert got["full_marks"] == (cli["score"] == cli["max_score"])
    report = _cli("grade", str(EXERCISE), str(sub)).stdout
    assert got["report"].split("\n", 1)[1] == report.split("\n", 1)[1]


def test_an_oversized_submission_is_refused_like_the_command_line(ex_srv):
    head = (f"POST /api/grade HTTP/1.1\r\nHost: 127.0.0.1:{ex_srv.port}\r\nX-Shapelang: 1\r\n"
            f"Content-Length: {MAX_BYTES + 1}\r\n\r\n").encode()
    assert _raw(ex_srv.port, head).startswith(b"HTTP/1.0 413 ")
    status, got = ex_srv.post("/api/grade", "dim B\x00\n" * 3)
    assert status == 200 and got["score"] == 0 and got["result"]["error"] == "the submission is not a text file"


def test_the_command_refuses_an_exercise_without_solution(tmp_path):
    ex = tmp_path / "lonely.shape"
    shutil.copy(EXERCISE, ex)
    out = _cli("serve", "--exercise", str(ex), "--port", "0")
    assert out.returncode == 2 and "no solution found" in out.stderr and "Traceback" not in out.stderr
