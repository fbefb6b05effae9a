"""The one user-facing exception family.

Every error a user, a file, the environment or a server can cause is a
:class:`ContribError`; :mod:`contrib.runner` turns it into one line and an exit
code, in exactly one place (modelled on pre-commit's ``error_handler.py``).
Nothing below the CLI calls ``sys.exit``.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ATTENTION = 1  # something needs the user: conflict, failed validation, PR trouble
EXIT_USAGE = 2  # bad usage, bad config, bad input


class ContribError(Exception):
    """An error the user can act on.  ``str(exc)`` is the whole message."""

    exit_code: int = EXIT_USAGE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(ContribError):
    """Bad command-line usage or an unknown target."""


class ConfigError(ContribError):
    """contrib.toml or patchset.toml is malformed."""


class PatchError(ContribError):
    """A patch file or series is malformed or does not apply."""


class GitError(ContribError):
    """A git command failed; the message keeps the command and stderr, scrubbed.

    ``reason`` is git's own verdict on one line (its first ``fatal:``/``error:``
    message), for callers that wrap the failure in a message of their own.
    """

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or (message.splitlines() or ["git failed"])[0]


class GitTimeout(GitError):
    """A git command outlived the time contrib gives it (e.g. an unreachable remote)."""


class UpstreamUnreachable(ContribError):
    """An upstream could not be cloned or fetched; ``reason`` is git's one line."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class LockError(ContribError):
    """Another contrib process holds the workspace."""


class NeedsAttention(ContribError):
    """Not bad input, but the user must act (exit 1)."""

    exit_code = 1


class GitHubError(NeedsAttention):
    """GitHub refused or failed; one clear line, never the token."""
