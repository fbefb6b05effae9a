"""The HTTP server the fakes serve on."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class FakeServer(ThreadingHTTPServer):
    """A threading server whose handler threads never print into a test's stderr when
    a client goes away mid-request (a killed CLI, a timed-out retry): socketserver
    prints those tracebacks to ``sys.stderr``, which an in-process CLI run of a later
    test may hold, and that test then reads them as its own output."""

    daemon_threads = True  # a delayed handler must not block shutdown

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # reset, broken pipe, aborted
            return
        super().handle_error(request, client_address)
