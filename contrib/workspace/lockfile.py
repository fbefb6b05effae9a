"""Advisory file locks: the workspace lock and the per-upstream cache lock.

``flock(2)`` on a lock file, waiting up to a timeout.  The kernel drops the
lock when its holder dies, so a killed contrib never leaves a stale lock.  A
process that already holds a path takes it again without waiting (the lock
counts), as the ``filelock`` package does, without its 44 modules of imports
(logging, hashing, its settings machinery) on every command's start.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

_POLL_S = 0.05
_held: dict[str, list[int]] = {}  # absolute path -> [fd, depth]


class LockTimeout(Exception):
    """Another process held the lock for the whole timeout."""


class FileLock:
    """The lock at ``path`` (created if absent): :meth:`acquire`, then :meth:`release`."""

    def __init__(self, path: Path | str, timeout: float) -> None:
        self.key = os.path.abspath(path)
        self.timeout = timeout

    def acquire(self) -> None:
        """Wait up to ``timeout`` seconds for another process to let go, else
        raise :class:`LockTimeout`."""
        if self.key in _held:
            _held[self.key][1] += 1
            return
        _held[self.key] = [_acquire(self.key, self.timeout), 1]

    def release(self) -> None:
        entry = _held[self.key]
        entry[1] -= 1
        if entry[1] == 0:
            del _held[self.key]
            fcntl.flock(entry[0], fcntl.LOCK_UN)
            os.close(entry[0])


def _acquire(path: str, timeout: float) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise LockTimeout(path) from None
            time.sleep(_POLL_S)
        except BaseException:
            os.close(fd)
            raise


def note_holder(path: Path | str) -> None:
    """Write ``PID TIME`` to ``path`` (replaced whole), for the message a waiting
    contrib gives when the lock stays taken; OSError when it cannot be written (a
    read-only workspace, a full disk).  Only a hint: not synced to disk."""
    tmp = f"{os.fspath(path)}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {time.time():.0f}\n")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
