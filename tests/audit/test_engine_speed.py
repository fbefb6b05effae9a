"""What keeps a first audit fast: the file prefilter, a worker's setup."""

from __future__ import annotations

import gc
import os
import re
import signal

import pytest

from contrib.audit import engine


def test_a_worker_ignores_ctrl_c_and_runs_without_the_cycle_collector() -> None:
    previous, was = signal.getsignal(signal.SIGINT), gc.isenabled()
    try:
        # (it also asks to end with this process's parent, as a worker does with its own)
        engine._worker_start({"pkg/a.py": "x = 1\n"}, {"pkg/a.py"}, ["pkg/a.py"],
                             os.getppid())
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert not gc.isenabled()  # what a worker holds is acyclic and lives until it ends
    finally:
        signal.signal(signal.SIGINT, previous)
        if was:
            gc.enable()
        engine._TREE.clear()


@pytest.mark.parametrize(("text", "may"), [
    ("cc", True), ("sm = 1", True), ("x.sm >= 90", True), ("device_cc", True), ("_sm", True),
    ("f(cc)", True), ("9sm", False), ("acc = 1", False), ("sm2", False), ("ccx", False),
    ("success", False), ("smem", False), ("a_b_cc_d", False),
])
def test_the_prefilter_reads_cc_and_sm_as_tokens(text: str, may: bool) -> None:
    """The regex that skips to a `c` or an `s` tests what ``(?:\\b|_)(?:cc|sm)\\b`` tested."""
    assert engine.may_gate(text) is may
    assert bool(re.search(r"(?:\b|_)(?:cc|sm)\b", text.lower())) is may
