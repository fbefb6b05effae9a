"""The fakes' HTTP server says nothing when a client goes away mid-request."""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler

from testing.httpserve import FakeServer


def test_a_client_resetting_mid_request_prints_nothing() -> None:
    """socketserver prints a ConnectionResetError traceback to sys.stderr, which a
    later test's in-process CLI run may hold (test_requires_typed read 20 lines where
    it wanted one)."""
    handled = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def handle(self) -> None:
            try:
                super().handle()
            finally:
                handled.set()

    server = FakeServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            client = socket.create_connection(server.server_address[:2])
            client.sendall(b"GET / HTT")  # no end of line: the handler waits in readline
            time.sleep(0.2)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()  # a reset, as a killed process leaves
            assert handled.wait(5)
            time.sleep(0.1)
    finally:
        server.shutdown()
        server.server_close()
    assert err.getvalue() == "", err.getvalue()
