"""Run one command and turn every outcome into an exit code: the one place that does.

Modelled on pre-commit's ``error_handler.py``: ContribError -> its code (2 bad
input, 1 needs attention), Ctrl-C -> 130, anything else is a bug -> 3, with
the traceback written to a log file rather than the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from contrib.errors import ContribError
from contrib.secrets import scrub
from contrib.ui import UI, prose

if TYPE_CHECKING:
    from pathlib import Path

    from contrib.workspace.model import Workspace

EXIT_BUG = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


def guarded(body: Callable[[], int], json_mode: bool) -> int:
    """``body()``'s exit code, or the one line (and code) for how it failed."""
    try:
        return int(body() or 0)
    except KeyboardInterrupt:
        return interrupted(json_mode)
    except ContribError as exc:
        return fail(str(exc), exc.exit_code, json_mode)
    except Exception as exc:  # a bug: keep the traceback off the terminal, in a log
        from contrib.buglog import log_bug

        log = log_bug(exc)
        where = f"; details in {log}" if log else ""
        return fail(f"internal error ({type(exc).__name__}: {exc}){where}. "
                    "Please report it.", EXIT_BUG, json_mode)


def locked(directory: Path | None, ui: UI, body: Callable[[Workspace, UI], int]) -> int:
    """Run ``body`` on the workspace at or above ``directory`` (default: the current
    folder) while holding its lock; the environment is checked first."""
    from contrib import environ
    from contrib.workspace.model import Workspace

    environ.check()  # a bad variable is bad input: refuse before touching anything
    ws = Workspace.find(directory)

    def waiting(holder: str) -> None:
        ui.warn(f"waiting for the workspace lock: {holder} is working on {ws.root} "
                f"(up to {environ.lock_timeout():g}s, CONTRIB_LOCK_TIMEOUT) ...")

    try:
        with ws.lock(on_wait=waiting):
            return body(ws, ui)
    finally:
        ui.done()


def unlocked(directory: Path | None, ui: UI, body: Callable[[Workspace, UI], int]) -> int:
    """``locked`` without the lock, for a command that writes nothing in the workspace
    (``status``, ``log``, ``diff``, ``audit``, ``validate --out``): a long run of
    one does not hold up the others, and they never wait on one."""
    from contrib import environ
    from contrib.workspace.model import Workspace

    environ.check()
    ws = Workspace.find(directory)
    try:
        return body(ws, ui)
    finally:
        ui.done()


def reading(directory: Path | None, ui: UI, body: Callable[[Workspace, UI], int]) -> int:
    """A read-only command (``status``, ``log``, ``diff``): no lock, so it never waits
    on a sync, unless a writer that died mid-commit left a transaction to finish,
    when it takes the lock (which finishes it) to read a whole state."""
    from contrib.workspace.model import Workspace

    ws = Workspace.find(directory)
    if any((ws.state_dir / "txn").glob("*.json")):
        return locked(directory, ui, body)
    return unlocked(directory, ui, body)


def guarded_ui(ui: UI, body: Callable[[UI], int]) -> int:
    """Run ``body`` outside any workspace (``init``: there is none yet)."""
    from contrib import environ

    environ.check()
    try:
        return body(ui)
    finally:
        ui.done()


def interrupted(json_mode: bool) -> int:
    """Ctrl-C: the one line and exit 130, wherever it landed (also while contrib was
    still loading, see :mod:`contrib.__main__`)."""
    return fail("interrupted", EXIT_INTERRUPTED, json_mode)


def fail(message: str, code: int, json_mode: bool) -> int:
    """Say ``message`` as contrib's one error line (and as JSON under --json); ``code``."""
    if json_mode:
        import json

        sys.stdout.write(json.dumps({"error": scrub(message), "exit_code": code}) + "\n")
    sys.stdout.flush()
    sys.stderr.write(prose(f"contrib: error: {scrub(message)}", sys.stderr) + "\n")
    sys.stderr.flush()
    return code
