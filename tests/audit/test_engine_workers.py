"""An audit worker's setup: Ctrl-C left to the parent, no cycle collector."""

from __future__ import annotations

import gc
import signal

from contrib.audit import engine


def test_a_worker_ignores_ctrl_c_and_runs_without_the_cycle_collector() -> None:
    previous, was = signal.getsignal(signal.SIGINT), gc.isenabled()
    try:
        engine._worker_start({"pkg/a.py": "x = 1\n"}, ["pkg/a.py"])
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert not gc.isenabled()  # what a worker holds is acyclic and lives until it ends
    finally:
        signal.signal(signal.SIGINT, previous)
        if was:
            gc.enable()
        engine._TREE.clear()
