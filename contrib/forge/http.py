"""How contrib talks HTTP to GitHub: bounded retries and waits, and one line per failure.

PyGithub retries through urllib3's ``Retry``; :class:`BoundedRetry` keeps
every wait short and said.  A ``Retry-After`` (or a primary rate-limit reset)
within ``max_wait`` seconds is waited out with a line on stderr (``waiting 60 s
for GitHub's rate limit (Retry-After) ...``); a longer one, or one past the
budget of all waits of a request, fails at once with the time to retry.  A
request redirected more than :data:`MAX_REDIRECTS` times in a row is a
redirect loop, not something to follow until Python's recursion limit.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
import urllib3
from github import GithubException, GithubRetry
from github.GithubException import RateLimitExceededExceedsMaxWait

from contrib.errors import GitHubError
from contrib.forge.api import ForgeUnavailable, MalformedAnswer, PullRequestExists, RateLimited
from contrib.secrets import scrub

MAX_REDIRECTS = 10
Notify = Callable[[str], None]


def say_on_stderr(line: str) -> None:
    """The default way a wait is said: one scrubbed line on stderr."""
    print(scrub(line), file=sys.stderr, flush=True)


class WaitTooLong(Exception):
    """A wait GitHub asked for exceeds the bound; ``seconds`` is what it asked."""

    def __init__(self, seconds: float, why: str) -> None:
        super().__init__(seconds)
        self.seconds, self.why = seconds, why


class RedirectLoop(Exception):
    """More than MAX_REDIRECTS redirects in a row."""


class BoundedRetry(GithubRetry):
    """GithubRetry whose waits never exceed ``max_wait`` each nor ``budget`` in all.

    ``budget`` is shared by the copies urllib3 makes for one request (a list
    holding the seconds still allowed), and so is the redirect counter.
    """

    def __init__(self, max_wait: float = 60.0, budget: float = 120.0,
                 notify: Notify = say_on_stderr, state: dict[str, float] | None = None,
                 **kwargs: Any) -> None:
        self.max_wait, self.budget, self.notify = max_wait, budget, notify
        self.state = state if state is not None else {"waited": 0.0, "redirects": 0}
        super().__init__(**kwargs)

    def new(self, **kw: Any) -> BoundedRetry:
        kw.update(max_wait=self.max_wait, budget=self.budget, notify=self.notify,
                  state=self.state)
        retry: BoundedRetry = super().new(**kw)
        return retry

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        # urllib3 asks this of every response, redirects included (requests
        # follows none itself; PyGithub follows 301s by recursing).
        if 300 <= status_code < 400:
            self.state["redirects"] += 1
            if self.state["redirects"] > MAX_REDIRECTS:
                self.state["redirects"] = 0
                raise RedirectLoop(status_code)
        else:
            self.state["redirects"] = 0
        return bool(super().is_retry(method, status_code, has_retry_after))

    def parse_retry_after(self, retry_after: str) -> float:
        # urllib3 caps the value at 6 h, hiding what GitHub asked for: take it whole.
        saved, self.retry_after_max = self.retry_after_max, 2**62
        try:
            return float(super().parse_retry_after(retry_after))
        finally:
            self.retry_after_max = saved

    def get_retry_after(self, response: Any) -> float | None:
        try:
            return super().get_retry_after(response)  # type: ignore[no-any-return]
        except urllib3.exceptions.InvalidHeader:
            return None  # a Retry-After that is no number nor date: back off as usual

    def sleep(self, response: Any = None) -> None:
        after = self.get_retry_after(response) if response is not None else None
        if after is not None:
            self._wait(after, "GitHub's rate limit (Retry-After)")
            return
        backoff = self.get_backoff_time()
        if backoff > 0:
            why = ("GitHub's rate limit" if response is not None and response.status in (403, 429)
                   else "GitHub to recover")
            self._wait(backoff, why)

    def _wait(self, seconds: float, why: str) -> None:
        left = self.budget - self.state["waited"]
        if seconds > self.max_wait or seconds > left:
            raise WaitTooLong(seconds, why)
        if seconds >= 1:
            self.notify(f"waiting {seconds:.0f} s for {why} ...")
        self.state["waited"] += seconds
        time.sleep(seconds)


def make_retry(*, retries: int = 5, max_wait: float = 60.0, backoff: float = 1.0,
               notify: Notify = say_on_stderr, replayable: bool = True) -> GithubRetry:
    """Retries for 5xx, rate limits and refused connections.

    A read timeout is retried once only: a server that never answers must not
    hold contrib for ``retries`` timeouts.  A request that is not
    ``replayable`` (creating an issue or a comment: a second one would be a
    duplicate) is retried only when GitHub cannot have acted on it: rate
    limits and connections that never opened; a 5xx or a timeout then fails
    at once, and the caller looks before it tries again.
    """
    extra: dict[str, Any] = {} if replayable else {"status_forcelist": [429]}
    return BoundedRetry(
        max_wait=max_wait,
        budget=2 * max_wait,
        notify=notify,
        total=retries,
        read=min(retries, 1) if replayable else 0,
        backoff_factor=backoff,
        backoff_max=max_wait,
        # Above max_wait GithubRetry raises RateLimitExceededExceedsMaxWait at once.
        secondary_rate_wait=min(60.0, max_wait),
        max_rate_limit_wait=max_wait,
        **extra,
    )


# -- failures as one line ---------------------------------------------------------------


def _retry_at(seconds: float) -> str:
    when = datetime.now(UTC) + timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def too_long(exc: WaitTooLong, action: str, max_wait: float) -> RateLimited:
    """The wait was past the bound: say so, and when to try again."""
    at = _retry_at(exc.seconds)
    return RateLimited(scrub(
        f"could not {action}: {exc.why} asks to wait {exc.seconds:.0f} s, more than contrib "
        f"waits ({max_wait:.0f} s at once, {2 * max_wait:.0f} s in all); try again after {at}"),
        retry_at=at)


def _message(e: GithubException) -> str:
    data = e.data if isinstance(e.data, dict) else {}
    return " ".join(str(data.get("message") or e.message or "no message").split())[:200]


def _errors_text(e: GithubException) -> str:
    data = e.data if isinstance(e.data, dict) else {}
    errors = data.get("errors")
    parts = []
    for err in errors if isinstance(errors, list) else []:
        if isinstance(err, dict):
            parts.append(err.get("message") or f"{err.get('field', '?')} {err.get('code', 'invalid')}")
        else:
            parts.append(str(err))
    return "; ".join(str(p) for p in parts)


def _is_rate_limit(e: GithubException) -> bool:
    return isinstance(e, RateLimitExceededExceedsMaxWait) or "rate limit" in _message(e).lower()


def github_error(e: GithubException, *, repo: str, action: str, thing: str | None = None,
                 need: str = "Pull requests: write") -> GitHubError:
    """One clear, scrubbed line for a PyGithub exception raised while doing ``action``.

    ``thing`` names the object a 404 means is missing ("pull request #3");
    ``need`` is the token permission a 403 means is missing.
    """
    status, msg = e.status, _message(e)
    if status == 401:
        text = f"GitHub rejected the token (401 {msg}): set GITHUB_TOKEN to a valid token"
    elif status in (403, 429) and _is_rate_limit(e):
        wait = getattr(e, "wait", None)
        when = f"; try again after {_retry_at(float(wait))}" if wait else ": try again later"
        return RateLimited(scrub(
            f"GitHub rate limit hit while trying to {action} ({status} {msg}){when}"))
    elif status == 403:
        text = f"token lacks {need} on {repo} ({status} {msg}): could not {action}"
    elif status == 404 and thing is not None:
        text = f"{thing} not found on {repo} (404): could not {action}"
    elif status == 404:
        text = (f"{repo} not found or the token cannot see it (404): check the repository's "
                "OWNER/NAME in contrib.toml and that the token may read it")
    elif status == 422:
        detail = _errors_text(e)
        if "already exists" in detail:
            return PullRequestExists(scrub(f"{action}: {detail}"))
        text = f"GitHub refused to {action} (422 {msg}{': ' + detail if detail else ''})"
    elif status >= 500:
        return ForgeUnavailable(scrub(f"GitHub failed to {action} ({status} {msg}): try again later"))
    else:
        text = f"GitHub answered {status} {msg} while trying to {action}"
    return GitHubError(scrub(text))


def network_error(e: requests.exceptions.RequestException, api_url: str, action: str) -> GitHubError:
    """One clear line for a network failure, a timeout or exhausted 5xx retries."""
    if isinstance(e, requests.exceptions.RetryError) and "too many 403" in str(e):
        # The network is fine here: advice about it would send the user the wrong way.
        return ForgeUnavailable(scrub(
            f"could not {action} at {api_url}: it kept answering 403 rate limit "
            "(Retry-After) after retries; try again later"))
    if isinstance(e, requests.exceptions.TooManyRedirects):
        return MalformedAnswer(scrub(f"could not {action} at {api_url}: it redirected in a loop"))
    if isinstance(e, requests.exceptions.RetryError):
        why = "it kept answering 5xx after retries"
    elif isinstance(e, requests.exceptions.Timeout) or "timed out" in str(e).lower():
        why = "the request timed out"
    elif isinstance(e, requests.exceptions.ConnectionError):
        why = "could not connect"
    else:
        why = type(e).__name__
    return ForgeUnavailable(
        scrub(f"could not {action} at {api_url}: {why}; check the network or [github] api_url")
    )
