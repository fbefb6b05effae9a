"""Ctrl-C during a parallel audit: exit 130, one line, no worker's traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import sys
from contrib.analysis.tree import DictTree
from contrib.arch import parse_arch
from contrib.audit.engine import find_all

def step(done, total, what):
    if done == 0:
        print("started", flush=True)
    elif done < total:
        print("parsing", flush=True)  # the pool is up and working

if __name__ == "__main__":
    import signal
    # A process started with SIGINT ignored (a pytest-xdist worker's child, a
    # background job) gets no KeyboardInterrupt: a terminal's Ctrl-C is the question.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    body = "import torch\\ndef gen():\\n" + (
        "    if torch.cuda.get_device_capability()[0] >= 9:\\n        x = 1\\n" * 3000)
    tree = DictTree({f"pkg/m{n}.py": body for n in range(48)})
    try:
        find_all(tree, parse_arch("sm_120a"), step)
    except KeyboardInterrupt:
        print("contrib: interrupted", file=sys.stderr)
        sys.exit(130)
    print("finished before the interrupt", flush=True)
"""


def _parsing(tmp_path: Path) -> subprocess.Popen[str]:
    """The audit script started in a session of its own, once its workers are parsing:
    the first run of files is back, so the others are under way (a fixed sleep could
    land while the pool is being spawned, when the parent ignores SIGINT so its workers
    start ignoring it too)."""
    script = tmp_path / "audit.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    assert proc.stdout.readline().strip() == "parsing"
    return proc


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the audit runs in one process here")
def test_ctrl_c_stops_the_workers_without_a_traceback(tmp_path: Path) -> None:
    proc = _parsing(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip() == "contrib: interrupted"


def test_a_ctrl_c_while_the_workers_start_is_raised_once_they_stand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent ignores SIGINT while it spawns the workers (so they start ignoring
    it); a Ctrl-C in that window was lost.  It is held now, and raised once the pool
    stands, the pool stopped."""
    import multiprocessing

    from contrib.audit import engine

    real = engine.get_context

    class Context:
        def Pool(self, *args: object, **kwargs: object) -> object:  # multiprocessing's name
            os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, as the workers start
            return real("spawn").Pool(*args, **kwargs)

    monkeypatch.setattr(engine, "get_context", lambda method: Context())
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            engine._pool(1, {}, set(), [])
    finally:
        signal.signal(signal.SIGINT, saved)
    assert multiprocessing.active_children() == []


def _running(session: int) -> list[str]:
    """The processes of a session still running (a zombie has ended)."""
    out = subprocess.run(["ps", "-o", "stat=,pid=", "-g", str(session)], capture_output=True,
                         text=True, check=False).stdout.split("\n")
    return [line for line in out if line.strip() and not line.strip().startswith("Z")]


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the audit runs in one process here")
def test_a_killed_audit_leaves_no_worker_running(tmp_path: Path) -> None:
    """A benchmark or CI job killed mid-audit: its workers end with it, not after their
    run of files (they kept parsing for seconds to minutes)."""
    import time

    proc = _parsing(tmp_path)
    assert len(_running(proc.pid)) >= 3  # the parent and its workers
    proc.kill()
    proc.wait(timeout=60)  # not communicate(): the workers hold the pipes open
    deadline = time.monotonic() + 3
    while _running(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running(proc.pid) == []
