"""The test-only kill points (:mod:`contrib.killpoints`) the crash tests stand on.

Each case runs a small interpreter that passes a few points, as a command would:
counted, it logs them in order (a thread's with its name); asked to, it dies by its
own SIGKILL at exactly the N-th passage, and nothing after it runs; any other value,
or none, changes nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testing.crash import KILL_AT, KILL_LOG

PASSES = """\
import threading
from contrib.killpoints import reached

reached("git-fetch")
reached("write")
reached("write")
thread = threading.Thread(target=reached, args=("git-blame",), name="beside")
thread.start()
thread.join()
reached("commit")
print("finished", flush=True)
"""


def _passes(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in (KILL_AT, KILL_LOG)}
    (tmp_path / "cwd").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", PASSES], cwd=tmp_path / "cwd",
                          env={**clean, **env},
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_count_run_logs_each_point_in_order(tmp_path: Path) -> None:
    log = tmp_path / "points"
    done = _passes(tmp_path, **{KILL_LOG: str(log)})
    assert done.returncode == 0 and done.stdout == "finished\n", done.stderr
    assert log.read_text().split() == ["git-fetch", "write", "write", "git-blame@beside",
                                       "commit"]


@pytest.mark.parametrize("point", ["write:2", "git-blame@beside:1", "commit:1"])
def test_the_nth_passage_kills_the_process_and_nothing_after_it_runs(
        tmp_path: Path, point: str) -> None:
    log = tmp_path / "points"
    done = _passes(tmp_path, **{KILL_AT: point, KILL_LOG: str(log)})
    assert done.returncode == -signal.SIGKILL and done.stdout == "", done
    name, _, n = point.rpartition(":")
    assert log.read_text().split().count(name) == int(n)  # it died on that passage
    assert log.read_text().split()[-1] == name


@pytest.mark.parametrize("value", ["", "write", "write:3", "write:0", "git-fetch:one",
                                   "commit:1 ", "git-blame:1"])
def test_any_other_value_changes_nothing(tmp_path: Path, value: str) -> None:
    done = _passes(tmp_path, **{KILL_AT: value})
    assert done.returncode == 0 and done.stdout == "finished\n", done.stderr
    assert list((tmp_path / "cwd").iterdir()) == []  # no log either
