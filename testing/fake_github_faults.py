"""Fault injection for the fake GitHub: the failures a real GitHub (or a proxy) hands out.

A mixin of :class:`testing.fake_github.FakeGitHub`.  Each knob makes the next
``count`` requests matching a method and a full-match path regex fail one way.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SECONDARY_RATE_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
    "again. If you reach out to GitHub Support for help, please include the request ID "
    "0000:1111:2222:3333:44444444."
)
SECONDARY_RATE_LIMIT_DOCS = (
    "https://docs.github.com/free-pro-team@latest/rest/overview/"
    "rate-limits-for-the-rest-api#about-secondary-rate-limits"
)


@dataclass
class Fault:
    """A failure injected into the next ``count`` requests matching method and path.

    kind: ``rate_limit`` (403 secondary rate limit, ``Retry-After``),
    ``status`` (answer ``status`` with the JSON ``body`` without doing anything),
    ``json`` (the same, but ``body`` is sent as it is, ``null`` included),
    ``raw`` (answer ``status`` with the bytes ``raw`` as ``content_type``: HTML, bad JSON),
    ``after`` (do the work, then answer ``status``: the lost-response case),
    ``delay`` (sleep ``seconds``, then do the work and answer normally),
    ``hang`` (never answer: wait until the server stops),
    ``redirect`` (answer 301 with ``Location: location``),
    ``mutate`` (do the work, answer ``mutate(json)`` instead: wrongly typed fields).
    """

    method: str
    path: str
    kind: str
    count: int = 1
    status: int = 502
    body: Any = None
    seconds: float = 0.0
    retry_after: int | str = 1
    raw: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    location: str = ""
    mutate: Callable[[Any], Any] | None = None
    headers: dict[str, str] | None = None  # extra headers of a ``status``/``json`` answer

    def matches(self, method: str, path: str) -> bool:
        return self.count > 0 and method == self.method and re.fullmatch(self.path, path) is not None


@dataclass(frozen=True)
class RawBody:
    """An answer that is not JSON (an HTML error page, a truncated body)."""

    data: bytes
    content_type: str


class FaultKnobs:
    """The fault knobs; FakeGitHub provides ``faults``, ``url`` and ``_lock``."""

    faults: list[Fault]
    _lock: Any
    _stopping: threading.Event
    url: str

    def add_fault(self, fault: Fault) -> Fault:
        """Inject ``fault``; returns it so a test can read its remaining count."""
        with self._lock:
            self.faults.append(fault)
        return fault

    def rate_limit_next(
        self, method: str, path: str, count: int = 1, retry_after: int | str = 1
    ) -> Fault:
        """The next ``count`` matching requests answer 403 secondary rate limit."""
        return self.add_fault(Fault(method, path, "rate_limit", count, retry_after=retry_after))

    def fail_after_create(self, count: int = 1, status: int = 502) -> Fault:
        """The next ``count`` PR creations succeed on the server, then answer ``status``."""
        return self.add_fault(Fault("POST", r"/repos/[^/]+/[^/]+/pulls", "after", count, status))

    def delay_next(self, method: str, path: str, seconds: float, count: int = 1) -> Fault:
        """The next ``count`` matching requests sleep ``seconds`` before being handled."""
        return self.add_fault(Fault(method, path, "delay", count, seconds=seconds))

    def primary_rate_limit_next(self, method: str, path: str, reset_in: float,
                                count: int = 1) -> Fault:
        """The next ``count`` matching requests answer 403 "API rate limit exceeded",
        the limit resetting ``reset_in`` seconds from now (``X-RateLimit-Reset``)."""
        reset = str(int(time.time() + reset_in))
        return self.add_fault(Fault(method, path, "status", count, 403, body={
            "message": "API rate limit exceeded for user ID 1000.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"},
            headers={"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0",
                     "X-RateLimit-Reset": reset, "X-RateLimit-Resource": "core"}))

    def fail_after(self, method: str, path: str, count: int = 1, status: int = 502) -> Fault:
        """The next ``count`` matching requests do their work, then answer ``status``."""
        return self.add_fault(Fault(method, path, "after", count, status))

    def answer_raw(self, method: str, path: str, raw: bytes, *, status: int = 200,
                   content_type: str = "text/html; charset=utf-8", count: int = 1) -> Fault:
        """The next ``count`` matching requests answer ``raw`` bytes and do nothing."""
        return self.add_fault(Fault(method, path, "raw", count, status, raw=raw,
                                    content_type=content_type))

    def answer_json(self, method: str, path: str, value: Any, *, status: int = 200,
                    count: int = 1) -> Fault:
        """The next ``count`` matching requests answer the JSON ``value`` and do nothing."""
        return self.add_fault(Fault(method, path, "json", count, status, body=value))

    def mutate_next(self, method: str, path: str, mutate: Callable[[Any], Any],
                    count: int = 1) -> Fault:
        """The next ``count`` matching requests do their work and answer ``mutate(json)``."""
        return self.add_fault(Fault(method, path, "mutate", count, mutate=mutate))

    def redirect_next(self, method: str, path: str, location: str, count: int = 1) -> Fault:
        """The next ``count`` matching requests answer 301 to ``location`` (a path or URL)."""
        return self.add_fault(Fault(method, path, "redirect", count, 301, location=location))

    def hang_next(self, method: str, path: str, count: int = 1) -> Fault:
        """The next ``count`` matching requests are never answered (until stop())."""
        return self.add_fault(Fault(method, path, "hang", count))

    def _fault_before(self, fault: Fault) -> tuple[int, dict[str, str], Any] | None:
        """The answer a fault gives instead of doing the work; None: do it."""
        if fault.kind == "delay":
            time.sleep(fault.seconds)
        elif fault.kind == "hang":
            self._stopping.wait(300)
            return 504, {}, {"message": "server stopped"}
        elif fault.kind == "rate_limit":
            return 403, {"Retry-After": str(fault.retry_after)}, {
                "message": SECONDARY_RATE_LIMIT_MESSAGE,
                "documentation_url": SECONDARY_RATE_LIMIT_DOCS,
            }
        elif fault.kind == "status":
            body = {"message": "Server Error"} if fault.body is None else fault.body
            return fault.status, dict(fault.headers or {}), body
        elif fault.kind == "json":
            return fault.status, dict(fault.headers or {}), fault.body
        elif fault.kind == "raw":
            return fault.status, {}, RawBody(fault.raw, fault.content_type)
        elif fault.kind == "redirect":
            location = fault.location if "://" in fault.location else self.url + fault.location
            return 301, {"Location": location}, {"message": "Moved Permanently", "url": location}
        return None
