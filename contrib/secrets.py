"""Keep credentials out of every byte contrib prints, logs or writes.

Any token contrib obtains is registered here; :func:`scrub` replaces every
registered secret (and anything that looks like credentials embedded in a URL)
before text reaches a message, an exception, a file or a PR body.  GitPython
issue #1284 is the classic leak: a token in a remote URL ends up in the
``GitCommandError`` text.
"""

from __future__ import annotations

import base64
import os
import re

_SECRETS: set[str] = set()
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s:]+(?::[^/@\s]*)?@")
_AUTH_HEADER = re.compile(r"(?i)(authorization:\s*(?:basic|bearer|token)\s+)\S+")
REDACTED = "***"


# Every environment variable contrib takes a token from (the autopilot's workspace
# token too): scrubbed even when the command that crashed never read it.
SCRUBBED_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN", "CONTRIB_WORKSPACE_TOKEN")


def register_secret(secret: str | None) -> None:
    """Remember ``secret`` (and its basic-auth encodings) so scrub() hides it."""
    if not secret or len(secret) < 4:
        return
    _SECRETS.add(secret)
    for user in ("x-access-token", "oauth2", ""):
        raw = f"{user}:{secret}".encode()
        _SECRETS.add(base64.b64encode(raw).decode())


def forget_secrets() -> None:
    """Drop every registered secret (tests use this between cases)."""
    _SECRETS.clear()


def scrub(text: str) -> str:
    """Return ``text`` with every registered secret and URL credential redacted.

    The token variables of the environment count as registered even when the
    command never looked them up (a crash in `status` must not log them).
    """
    for variable in SCRUBBED_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value and value not in _SECRETS:
            register_secret(value)
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _URL_CREDENTIALS.sub(lambda m: m.group("scheme") + REDACTED + "@", text)
    return _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
