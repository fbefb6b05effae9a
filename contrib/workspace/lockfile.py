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
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

_POLL_S = 0.05
_held: dict[str, list[int]] = {}  # absolute path -> [fd, depth]


class LockTimeout(Exception):
    """Another process held the lock for the whole timeout."""


class FileLock:
    """The lock at ``path`` (created if absent): :meth:`acquire`, then :meth:`release`."""

    def __init__(self, path: Path | str, timeout: float,
                 on_wait: Callable[[], None] | None = None) -> None:
        self.key = os.path.abspath(path)
        self.timeout = timeout
        self.on_wait = on_wait

    def acquire(self) -> None:
        """Wait up to ``timeout`` seconds for another process to let go, else
        raise :class:`LockTimeout`; ``on_wait`` is called once, as soon as the
        first try finds the lock taken, so a person is told at once why nothing
        happens."""
        if self.key in _held:
            _held[self.key][1] += 1
            return
        _held[self.key] = [_acquire(self.key, self.timeout, self.on_wait), 1]

    def release(self) -> None:
        entry = _held[self.key]
        entry[1] -= 1
        if entry[1] == 0:
            del _held[self.key]
            fcntl.flock(entry[0], fcntl.LOCK_UN)
            os.close(entry[0])


def _acquire(path: str, timeout: float, on_wait: Callable[[], None] | None) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
                on_wait = None
            if time.monotonic() >= deadline:
                os.close(fd)
                raise LockTimeout(path) from None
            time.sleep(_POLL_S)
        except BaseException:
            os.close(fd)
            raise


def note_holder(path: Path | str) -> None:
    """Write ``PID TIME COMMAND`` to ``path`` (replaced whole), for the message a
    waiting contrib gives (:func:`describe_holder`); OSError when it cannot be
    written (a read-only workspace, a full disk).  Only a hint: not synced to disk."""
    tmp = f"{os.fspath(path)}.{os.getpid()}.tmp"
    command = " ".join(["contrib", *sys.argv[1:]])[:200].replace("\n", " ")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {time.time():.0f} {command}\n")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def describe_holder(path: Path | str) -> str:
    """``pid 4242 (contrib sync --commit, for 12s)`` from what :func:`note_holder`
    wrote; ``another process`` when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            pid, started, *command = handle.read().split(" ", 2)
        since = max(time.time() - float(started), 0.0)
    except (OSError, ValueError):
        return "another process"
    what = command[0].strip() if command and command[0].strip() else "contrib"
    return f"pid {pid} ({what}, for {since:.0f}s)"
