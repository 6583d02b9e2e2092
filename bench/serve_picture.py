"""`shapelang serve` as the page sees it: a keystroke's diagnostics, then its picture.

    python -m bench.serve_picture [--spec specs/swin_tiny.shape] [--runs 7]

Starts a real server (its worker a real process) on a free port and posts the spec as the
page does: each run adds a blank line (a new text, so nothing answers from a cache), times
`/api/check` (the diagnostics, what the learner waits for) and then `/api/picture` (drawn
after), and reports the bytes of the first picture, of a picture that did not change (sent
by its keys), of one block opened, and of the whole static page `trace --format html`
writes. Medians with min and max, wall-clock on this machine.
"""
from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time
from pathlib import Path

from shapelang.api import check
from shapelang.render.html import trace_html
from shapelang.serve.app import start

ROOT = Path(__file__).resolve().parent.parent


def _post(server, path: str, body: str) -> dict:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        conn.request("POST", path, body.encode("utf-8"), {
            "Host": f"127.0.0.1:{port}", "X-Shapelang": "1", "Content-Type": "text/plain; charset=utf-8"})
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default=str(ROOT / "specs" / "swin_tiny.shape"))
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args(argv)
    import threading

    server = start("127.0.0.1", 0, path=args.spec)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        text = Path(args.spec).read_text(encoding="utf-8")
        _post(server, "/api/check", text)
        diag, pic = [], []
        for k in range(args.runs):
            t = time.perf_counter()
            got = _post(server, "/api/check", text + "\n" * (k + 1))
            diag.append(time.perf_counter() - t)
            t = time.perf_counter()
            first = _post(server, "/api/picture", json.dumps({"version": got["version"], "have": []}))
            pic.append(time.perf_counter() - t)
        keys = [k for k, _ in first["pieces"]]
        again = _post(server, "/api/picture", json.dumps({"version": got["version"], "have": keys}))
        lazy = [k for k, h in enumerate(first["pieces"]) if h[1] and "data-lazy=" in h[1]]
        block = _post(server, "/api/block", json.dumps({"version": got["version"], "block": 0})) if lazy else {}
        whole = len(trace_html(check(text, args.spec)).encode("utf-8"))

        def ms(xs):
            return f"median {statistics.median(xs) * 1000:.0f} ms (min {min(xs) * 1000:.0f}, max {max(xs) * 1000:.0f})"
        print(f"{Path(args.spec).name}, {args.runs} runs")
        print(f"keystroke -> diagnostics: {ms(diag)}")
        print(f"then the picture:         {ms(pic)}")
        print(f"first picture: {len(json.dumps(first)):,} bytes; unchanged: {len(json.dumps(again)):,} bytes; "
              f"one block opened: {len(json.dumps(block)):,} bytes; whole static page: {whole:,} bytes")
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
