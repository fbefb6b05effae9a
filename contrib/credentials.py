"""Where the GitHub token comes from, and how git gets it for one push.

The token is looked up in ``GITHUB_TOKEN``, then ``GH_TOKEN``, then
``gh auth token`` when the GitHub CLI is installed.  It is registered with
:mod:`contrib.secrets` at once, so every message contrib prints is scrubbed.

git receives it only through the environment of the one ``git push`` that
needs it (``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``,
git >= 2.31): never on a command line (visible in ``ps``), never in a remote
URL (GitPython issue #1284 leaks those through exception text), never in
``.git/config``.  The header is the one actions/checkout uses:
``Authorization: Basic base64("x-access-token:TOKEN")``.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Mapping
from urllib.parse import urlsplit

from contrib.errors import GitHubError
from contrib.secrets import register_secret

TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")
GH_TIMEOUT_S = 15


def github_host(api_url: str) -> str:
    """The web host behind an API URL: api.github.com -> github.com,
    https://ghe.example/api/v3 -> ghe.example (what ``gh --hostname`` expects)."""
    host = urlsplit(api_url).hostname or "github.com"
    return "github.com" if host == "api.github.com" else host


def _token_from_gh(host: str, env: Mapping[str, str]) -> str | None:
    gh = shutil.which("gh", path=env.get("PATH"))
    if gh is None:
        return None
    try:
        out = subprocess.run(
            [gh, "auth", "token", "--hostname", host],
            capture_output=True, text=True, timeout=GH_TIMEOUT_S, check=False, env=dict(env),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None  # a broken or hanging gh is the same as no gh
    token = out.stdout.strip()
    return token if out.returncode == 0 and token else None


def find_token(
    api_url: str = "https://api.github.com", env: Mapping[str, str] | None = None
) -> str | None:
    """The token from GITHUB_TOKEN, GH_TOKEN or ``gh auth token``; None if none.

    The token found is registered with contrib.secrets before it is returned.
    """
    env = os.environ if env is None else env
    token = next((env[v].strip() for v in TOKEN_VARIABLES if env.get(v, "").strip()), None)
    if token is None:
        token = _token_from_gh(github_host(api_url), env)
    if token:
        register_secret(token)
    return token or None


def require_token(api_url: str = "https://api.github.com", env: Mapping[str, str] | None = None) -> str:
    """Like :func:`find_token`, but a missing token is a GitHubError saying what to set."""
    token = find_token(api_url, env)
    if token is None:
        raise GitHubError(
            f"no GitHub token for {github_host(api_url)}: set GITHUB_TOKEN (or GH_TOKEN) to a token "
            "with Contents: write on the fork and Pull requests: write on the upstream, "
            "or log in with `gh auth login`"
        )
    return token


def auth_header(token: str) -> str:
    """The HTTP header git sends: Basic auth as user ``x-access-token``."""
    raw = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    register_secret(token)
    return f"Authorization: Basic {raw}"


def needs_token(push_url: str) -> bool:
    """True when git talks HTTP(S) to ``push_url`` (a local path or file:// needs no token)."""
    return urlsplit(push_url).scheme in ("http", "https")


def push_env(push_url: str, token: str | None) -> dict[str, str]:
    """Environment for one ``git push`` to ``push_url`` carrying ``token``.

    The header is scoped to the push URL's scheme://host/ so git never sends it
    to another host, and an empty value first resets any extraheader the
    user's own config sets for that host (two Authorization headers make
    GitHub answer 400).  Credential helpers are switched off for this one
    command, so a rejected token fails instead of falling back to some other
    stored identity; prompts are off, so it never hangs.
    """
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "GCM_INTERACTIVE": "never"}
    if token is None or not needs_token(push_url):
        return env
    parts = urlsplit(push_url)
    key = f"http.{parts.scheme}://{parts.netloc.rpartition('@')[2]}/.extraheader"
    entries = [(key, ""), (key, auth_header(token)), ("credential.helper", "")]
    env["GIT_CONFIG_COUNT"] = str(len(entries))
    for i, (k, v) in enumerate(entries):
        env[f"GIT_CONFIG_KEY_{i}"] = k
        env[f"GIT_CONFIG_VALUE_{i}"] = v
    return env
