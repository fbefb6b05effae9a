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
from collections.abc import Callable
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


def trial_cache(ws: Path) -> Path:
    """The upstream cache copy of the trial whose workspace copy is ``ws``."""
    return ws.parent / f"{ws.name}-cache"


def own_cache(cache: Path, env: dict[str, str]) -> Callable[[Path], dict[str, str]]:
    """A trial ``setup`` giving each workspace copy its own copy of ``cache`` (so the
    killed window can cover a fetch), returning the environment that points at it."""
    def setup(ws: Path) -> dict[str, str]:
        shutil.copytree(cache, trial_cache(ws), symlinks=True)
        return {**env, "CONTRIB_CACHE": str(trial_cache(ws))}
    return setup


def fsck_cache(cache: Path) -> list[Path]:
    """``git fsck`` every cached upstream (raises on damage); the repositories checked."""
    from testing.gitutil import git

    repos = sorted((cache / "upstreams").glob("*.git"))
    for repo in repos:
        git(repo, "fsck", "--no-progress", "--no-dangling")
    return repos


def contrib_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "contrib", *args]


def run(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run contrib in a subprocess; its output goes to the token audit."""
    from testing.audit import AUDIT

    done = subprocess.run(contrib_cmd(*args), cwd=root, env=env, capture_output=True, text=True,
                          check=False, timeout=120)
    AUDIT.record(done.stdout, done.stderr)
    return done


@dataclass
class TrialResult:
    delay: float
    outcome: str  # "before" | "after" | a state named by ``verify``
    killed: bool = True  # False when the command had already finished
    ran: float | None = None  # seconds the command took, when it finished before the kill


Setup = Callable[[Path], dict[str, str]]
Verify = Callable[[Path, str], str | None]


def kill_trial(prepared: Path, scratch: Path, args: tuple[str, ...], delay: float,
               expected_after: dict[str, bytes] | None, env: dict[str, str], *,
               setup: Setup | None = None, verify: Verify | None = None,
               again: Callable[[Path, str], tuple[str, ...]] | None = None) -> TrialResult:
    """One kill at ``delay`` seconds; returns which consistent state was left.

    ``setup(ws)`` prepares the copy (returns the env to run with); ``verify(ws,
    outcome)`` adds command-specific checks and may name an intermediate state
    (open-pr records its push before the PR); ``again(ws, outcome)`` gives the
    follow-up command (default: ``args`` again), which must succeed and leave
    ``expected_after``.
    """
    from testing.audit import AUDIT

    ws = scratch / f"trial-{delay:.4f}-{random.random():.6f}"
    shutil.copytree(prepared, ws, symlinks=True)
    env = setup(ws) if setup else env
    before = snapshot(ws)
    log = ws.parent / f"{ws.name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(contrib_cmd(*args), cwd=ws, env=env, stdout=out, stderr=out,
                                start_new_session=True)
        started = time.monotonic()
        ran: float | None = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=delay)
            ran = time.monotonic() - started
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = proc.returncode == -signal.SIGKILL
    AUDIT.record(log.read_bytes())
    # The next run must not be blocked by a dangling lock, and recovers.
    status = run(ws, "status", "--no-fetch", env=env)
    assert status.returncode == 0, (delay, status.stderr)
    after = snapshot(ws)
    for text in after.values():  # no half-written patchset.toml or series
        assert b"\0" not in text
    outcome = "before" if after == before else "after"
    if verify is not None:
        outcome = verify(ws, outcome) or outcome
    elif outcome == "after":
        assert expected_after is not None
        assert after == expected_after, (delay, _diff(after, expected_after))
    follow = again(ws, outcome) if again else args
    result = run(ws, *follow, env=env)
    assert result.returncode == 0, (delay, outcome, follow, result.stdout, result.stderr)
    if expected_after is not None:
        assert snapshot(ws) == expected_after, (delay, outcome,
                                                _diff(snapshot(ws), expected_after))
    if verify is not None:
        verify(ws, "final")
    hits = AUDIT.scan_tree(ws)
    assert not hits, f"planted token written to {hits}"
    shutil.rmtree(ws, ignore_errors=True)
    return TrialResult(delay, outcome, killed, None if killed else ran)


def kill_trials(prepared: Path, scratch: Path, args: tuple[str, ...], reference: float,
                fractions: list[float], expected_after: dict[str, bytes] | None,
                env: dict[str, str], *, setup: Setup | None = None,
                verify: Verify | None = None,
                again: Callable[[Path, str], tuple[str, ...]] | None = None) -> list[TrialResult]:
    """One ``kill_trial`` per fraction of the reference run's seconds, in order.

    The reference is one run, timed under whatever load the machine had then; a
    CI runner sharing two cores with another test worker once timed a 0.4 s
    ``sync --continue`` at 0.77 s, and half the kills came after the trials had
    finished.  So a trial whose command finished before its kill names the
    shorter span, and the later fractions (``delays`` sorts them) apply to it:
    the kills keep covering the whole run whatever the reference's moment.
    """
    span = reference
    results = []
    for frac in fractions:
        result = kill_trial(prepared, scratch, args, span * frac, expected_after, env,
                            setup=setup, verify=verify, again=again)
        if result.ran is not None:
            span = min(span, result.ran)
        results.append(result)
    return results


def tally(command: str, results: list[TrialResult]) -> str:
    """Record the figures of one batch of trials; returns a one-line summary."""
    from testing.audit import FIGURES

    mid = sum(r.killed for r in results)
    FIGURES[f"crash {command}: trials survived"] += len(results)
    FIGURES[f"crash {command}: killed mid-run"] += mid
    outcomes = sorted({r.outcome for r in results})
    return f"{command}: {len(results)} trials, {mid} killed mid-run, outcomes {outcomes}"


def _diff(a: dict[str, bytes], b: dict[str, bytes]) -> str:
    keys = sorted(set(a) | set(b))
    return "differs at: " + ", ".join(k for k in keys if a.get(k) != b.get(k))


def delays(seed: int, count: int, low: float, high: float) -> list[float]:
    rng = random.Random(seed)
    return sorted(rng.uniform(low, high) for _ in range(count))


def timed(root: Path, *args: str, env: dict[str, str]) -> float:
    """Seconds one uninterrupted run takes (kill delays are seeded fractions of it,
    so they span the run on a fast laptop and a slow CI runner alike).

    A read-only ``status`` runs first: the interpreter, the installed packages and
    contrib's modules are then read from a warm page cache, as in the trials that
    follow.  Without it a CI run measured its `sync --continue` reference at 0.60 s
    (0.45 s here) and only 5 of 12 kills landed before the trials had finished;
    ``kill_trials`` also shortens the span when a trial shows the run is faster.
    """
    run(root, "status", "--no-fetch", env=env)
    started = time.monotonic()
    done = run(root, *args, env=env)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started
