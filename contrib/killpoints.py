"""Test-only: stop this process with SIGKILL at a named point of a command's durable work.

The crash tests (``testing/crash.py``) must kill a command before, inside and after
its commit point by construction, not by timing: a kill after a delay scaled from one
reference run lands wherever the machine's load puts it.  So every durable step passes
:func:`reached` with its point's name: ``git-SUBCOMMAND`` (a git process is about to
start: ``git-fetch``, ``git-push``), ``step`` (a command announces a step), ``stage``
(a transaction staged a path), ``write`` and ``written`` (an atomic write is about to
rename its file into place, and has; a transaction's plan is one), ``commit`` (a
transaction's plan is in place: past its commit point, nothing installed yet) and
``install`` (a transaction renamed one staged path into place).  A point passed on a
thread other than the main one is named ``POINT@THREAD``.

Two variables, read once at import and named so that nothing but a test sets them:

- ``CONTRIB_TEST_KILL_LOG=FILE``: append each point passed to FILE, one name a line
  (the "count" run, which enumerates the points a test may kill at);
- ``CONTRIB_TEST_KILL_AT=POINT:N``: on passing POINT the N-th time (from 1), send this
  process SIGKILL: no handler, ``finally`` or atexit runs, as with a kill from outside.

Unset, :func:`reached` tests one module constant and returns.
"""

from __future__ import annotations

import os

_KILL_AT = os.environ.get("CONTRIB_TEST_KILL_AT", "")
_KILL_LOG = os.environ.get("CONTRIB_TEST_KILL_LOG", "")
_ARMED = bool(_KILL_AT or _KILL_LOG)
_passed: dict[str, int] = {}


def reached(point: str) -> None:
    """This process passes ``point``: counted, logged or killed when a test asks."""
    if _ARMED:
        _pass(point)


def _pass(point: str) -> None:
    import threading

    if threading.current_thread() is not threading.main_thread():
        point = f"{point}@{threading.current_thread().name}"
    count = _passed[point] = _passed.get(point, 0) + 1
    if _KILL_LOG:
        with open(_KILL_LOG, "a", encoding="utf-8") as log:
            log.write(point + "\n")
    if f"{point}:{count}" == _KILL_AT:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
