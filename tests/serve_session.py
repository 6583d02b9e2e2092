"""A real `shapelang serve` server for the tests: on a free port of 127.0.0.1, served from a
thread, its worker a real process."""
from __future__ import annotations

import http.client
import json
import socket
import threading

from shapelang.serve.app import start

POST = {"Content-Type": "text/plain; charset=utf-8", "X-Shapelang": "1"}


class Running:
    def __init__(self, **kw):
        self.server = start("127.0.0.1", 0, **kw)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def request(self, method, path, body=None, headers=None, host=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            hdrs = dict(headers or {})
            if host is not None:
                conn.putrequest(method, path, skip_host=True)
                conn.putheader("Host", host)
                for k, v in hdrs.items():
                    conn.putheader(k, v)
                conn.endheaders(body)
            else:
                conn.request(method, path, body=body, headers=hdrs)
            res = conn.getresponse()
            return res.status, dict(res.getheaders()), res.read()
        finally:
            conn.close()

    def post(self, path, text, **kw):
        body = text.encode("utf-8") if isinstance(text, str) else text
        status, _, data = self.request("POST", path, body, POST, **kw)
        return status, json.loads(data)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def raw(port: int, data: bytes, timeout: float = 60) -> bytes:
    """Send bytes as they are (a malformed request, a body that is never sent) and read
    everything the server answers until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
    return out
