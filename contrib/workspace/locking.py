"""The workspace lock: one contrib at a time on a workspace, and who holds it.

Taking it also finishes or rolls back a transaction an earlier run left
interrupted (:func:`contrib.workspace.txn.recover`), before anything is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from contrib.environ import lock_timeout
from contrib.errors import ContribError, LockError
from contrib.workspace.lockfile import FileLock, LockTimeout, describe_holder, note_holder
from contrib.workspace.txn import atomic_write, cannot_write, check_inside, recover


@contextmanager
def hold(root: Path, state_dir: Path,
         on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the lock of the workspace at ``root``; a second contrib waits, then refuses
    (exit 2).  ``on_wait`` hears at once, once, who holds it (``pid 42 (contrib sync, ...)``)."""
    timeout = lock_timeout()
    path = state_dir / "lock"
    pid_file = state_dir / "lock.pid"
    lock = FileLock(path, timeout, None if on_wait is None
                    else lambda: on_wait(describe_holder(pid_file)))
    try:
        check_inside(root, state_dir)
        state_dir.mkdir(exist_ok=True)
        ignore = state_dir / ".gitignore"
        if not ignore.exists():
            atomic_write(ignore, "*\n")
        lock.acquire()
    except LockTimeout:
        holder = _read_pid(pid_file)
        raise LockError(f"{path}: another contrib process{holder} is working on this "
                        f"workspace; waited {timeout:g}s (CONTRIB_LOCK_TIMEOUT). "
                        "Try again when it has finished") from None
    except OSError as exc:
        raise ContribError(f"{state_dir}: cannot write ({exc.strerror or exc}); "
                           "contrib needs a writable workspace: fix its permissions; "
                           "nothing was changed") from None
    try:
        try:
            note_holder(pid_file)
        except OSError as exc:
            raise cannot_write(pid_file, exc) from None
        recover(state_dir)
        yield
    finally:
        lock.release()


def _read_pid(path: Path) -> str:
    try:
        return f" (pid {path.read_text().split()[0]})"
    except (OSError, IndexError):
        return ""
