"""github.com's git side for tests: smart HTTP through real ``git http-backend`` on 127.0.0.1."""

from __future__ import annotations

import base64
import subprocess
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from testing.fake_github_base import RecordedRequest
from testing.httpserve import FakeServer


class FakeGitHost:
    """github.com's git side: smart HTTP through real ``git http-backend``.

    Repositories live under ``root`` as ``OWNER/NAME.git``; every request must
    carry ``Authorization: Basic base64(x-access-token:TOKEN)`` (what GitHub
    accepts for a token), else 401.  Records each request's method, path and
    headers so tests can check what git sent.
    """

    def __init__(self, root: str, token: str) -> None:
        self.root = root
        self.token = token
        self.requests: list[RecordedRequest] = []
        handler = type("GitHandler", (_GitHandler,), {"host": self})
        self._server = FakeServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def expected_auth(self) -> str:
        raw = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        return f"Basic {raw}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _GitHandler(BaseHTTPRequestHandler):
    host: FakeGitHost
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        body = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.host.requests.append(RecordedRequest(self.command, parts.path, {}, headers, body))
        if headers.get("authorization") != self.host.expected_auth():
            self._reply(401, {"WWW-Authenticate": 'Basic realm="GitHub"'}, b"Unauthorized\n")
            return
        env = {
            "PATH": "/usr/bin:/bin", "GIT_PROJECT_ROOT": self.host.root, "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
            "REQUEST_METHOD": self.command, "PATH_INFO": parts.path, "QUERY_STRING": parts.query,
            "CONTENT_TYPE": headers.get("content-type", ""), "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": headers.get("content-encoding", ""),
            "REMOTE_USER": "x-access-token", "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": headers.get("git-protocol", ""),
        }
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True,
                             check=False).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status, extra = 200, {}
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                extra[key.strip()] = value.strip()
        self._reply(status, extra, payload)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            if k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _serve
