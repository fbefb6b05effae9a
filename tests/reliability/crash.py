"""SIGKILL a contrib command at a random moment; check all-or-nothing.

``snapshot`` reads every byte of the user's part of a workspace (everything
but contrib's private ``.contrib/`` state).  A trial copies a prepared
workspace, records the reference "fully updated" state from an uninterrupted
run on another copy, then starts the command, kills it after a seeded random
delay, lets the next contrib run recover, and asserts the workspace equals the
state before or the fully-updated one, and that the command then succeeds.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the workspace except contrib's private state."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in (".contrib", ".git") or not path.is_file():
            continue
        out[str(rel)] = path.read_bytes()
    return out


def contrib_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "contrib", *args]


def run(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(contrib_cmd(*args), cwd=root, env=env, capture_output=True, text=True,
                          check=False, timeout=120)


@dataclass
class TrialResult:
    delay: float
    outcome: str  # "before" | "after"


def kill_trial(prepared: Path, scratch: Path, args: tuple[str, ...], delay: float,
               expected_after: dict[str, bytes], env: dict[str, str]) -> TrialResult:
    """One kill at ``delay`` seconds; returns which consistent state was left."""
    ws = scratch / f"trial-{delay:.4f}-{random.random():.6f}"
    shutil.copytree(prepared, ws, symlinks=True)
    before = snapshot(ws)
    proc = subprocess.Popen(contrib_cmd(*args), cwd=ws, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # The next run must not be blocked by a dangling lock, and recovers.
    status = run(ws, "status", "--no-fetch", env=env)
    assert status.returncode == 0, status.stderr
    after = snapshot(ws)
    if after == before:
        outcome = "before"
    else:
        assert after == expected_after, _diff(after, expected_after)
        outcome = "after"
    again = run(ws, *args, env=env)
    if outcome == "before":
        assert again.returncode == 0, again.stderr
        assert snapshot(ws) == expected_after
    shutil.rmtree(ws, ignore_errors=True)
    return TrialResult(delay, outcome)


def _diff(a: dict[str, bytes], b: dict[str, bytes]) -> str:
    keys = sorted(set(a) | set(b))
    return "differs at: " + ", ".join(k for k in keys if a.get(k) != b.get(k))


def delays(seed: int, count: int, low: float, high: float) -> list[float]:
    rng = random.Random(seed)
    return sorted(rng.uniform(low, high) for _ in range(count))
