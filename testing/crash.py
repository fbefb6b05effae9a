"""SIGKILL a contrib command at named points of its work; check all-or-nothing.

``snapshot`` reads every byte of the user's part of a workspace (everything
but contrib's private ``.contrib/`` state).  The reference run (:func:`counted`)
records the "fully updated" state and the points the command passes
(:mod:`contrib.killpoints`: each git process, announced step, staged path, atomic
write, commit point and installed path).  A trial copies the prepared workspace,
runs the command with ``CONTRIB_TEST_KILL_AT`` so that it SIGKILLs itself at one of
those points, lets the next contrib run recover, and asserts the workspace equals
the state before or the fully-updated one, and that the command then succeeds.
:func:`choose` picks the points around every write and commit point and a seeded
sample of the rest, so kills land before, at and after each commit by construction,
whatever the machine's load.
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


KILL_AT = "CONTRIB_TEST_KILL_AT"
KILL_LOG = "CONTRIB_TEST_KILL_LOG"


@dataclass(frozen=True)
class Point:
    """The ``n``-th passage of the point ``name`` (:mod:`contrib.killpoints`)."""

    name: str
    n: int

    def __str__(self) -> str:
        return f"{self.name}:{self.n}"


def counted(root: Path, *args: str, env: dict[str, str]) -> list[Point]:
    """Run the command once, uninterrupted, in ``root`` (the reference run); the points
    it passed, in order."""
    log = root.parent / f"{root.name}.points"
    log.unlink(missing_ok=True)
    done = run(root, *args, env={**env, KILL_LOG: str(log)})
    assert done.returncode == 0, done.stderr
    seen: dict[str, int] = {}
    points = []
    for name in log.read_text(encoding="utf-8").split():
        seen[name] = seen.get(name, 0) + 1
        points.append(Point(name, seen[name]))
    return points


def around_writes(points: list[Point]) -> list[int]:
    """The indexes of the first and last points, and of the two around each atomic
    write: ``write`` (its last moment before the rename) and ``written`` (for a
    transaction's plan: past the commit point, nothing installed)."""
    chosen = {0, len(points) - 1}
    chosen |= {i for i, point in enumerate(points) if point.name in ("write", "written")}
    return sorted(chosen)


def around_commits(points: list[Point]) -> list[int]:
    """The indexes of the first and last points, and of each transaction's last moment
    before its commit point (its plan's ``write``) and first after it (``commit``): for
    a command with more atomic writes than its trials can cover."""
    chosen = {0, len(points) - 1}
    for index, point in enumerate(points):
        if point.name == "commit":
            chosen.add(index)
            chosen.add(max(i for i in range(index) if points[i].name == "write"))
    return sorted(chosen)


def choose(points: list[Point], seed: int, count: int,
           must: Callable[[list[Point]], list[int]] = around_writes) -> list[Point]:
    """Where the trials kill: the points ``must`` names, then a seeded sample of the
    others, ``count`` in all, in the order the run passes them."""
    chosen = set(must(points))
    rest = [i for i in range(len(points)) if i not in chosen]
    chosen |= set(random.Random(seed).sample(rest, max(0, min(len(rest), count - len(chosen)))))
    return [points[i] for i in sorted(chosen)]


@dataclass(frozen=True)
class Midway:
    """A kill from outside, of the command's whole process group, once ``seen(ws)`` holds:
    a git process killed midway (a fetch's temporary pack in the trial's cache), or a
    request to GitHub that ``arm(ws)`` made hang, where no named point can reach.
    ``label`` names it in the trial's folder."""

    label: str
    seen: Callable[[Path], bool]
    arm: Callable[[Path], object] | None = None

    def __str__(self) -> str:
        return self.label


Kill = Point | Midway


@dataclass
class TrialResult:
    point: Kill
    outcome: str  # "before" | "after" | a state named by ``verify``


Setup = Callable[[Path], dict[str, str]]
Verify = Callable[[Path, str], str | None]


def _killed_run(ws: Path, args: tuple[str, ...], env: dict[str, str], kill: Kill) -> None:
    """Run the command in ``ws`` until ``kill`` stops it; fails if it finished first."""
    from testing.audit import AUDIT

    log, passed = ws.parent / f"{ws.name}.log", ws.parent / f"{ws.name}.points"
    named = {KILL_AT: str(kill), KILL_LOG: str(passed)} if isinstance(kill, Point) else {}
    with open(log, "wb") as out:
        proc = subprocess.Popen(contrib_cmd(*args), cwd=ws, env={**env, **named},
                                stdout=out, stderr=out, start_new_session=True)
        try:
            if isinstance(kill, Midway):
                while proc.poll() is None and not kill.seen(ws):
                    time.sleep(0.002)
            proc.wait(timeout=0 if isinstance(kill, Midway) else 120)
        except subprocess.TimeoutExpired:
            pass
        finally:  # the git processes it left (a `cat-file --batch`) die with it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    AUDIT.record(log.read_bytes())
    trail = passed.read_text(encoding="utf-8").split() if passed.exists() else []
    assert proc.returncode == -signal.SIGKILL, (str(kill), proc.returncode, trail)


def kill_trial(prepared: Path, scratch: Path, args: tuple[str, ...], point: Kill,
               expected_after: dict[str, bytes] | None, env: dict[str, str], *,
               setup: Setup | None = None, verify: Verify | None = None,
               again: Callable[[Path, str], tuple[str, ...]] | None = None) -> TrialResult:
    """One run killed at ``point``; returns which consistent state was left.

    ``setup(ws)`` prepares the copy (returns the env to run with); ``verify(ws,
    outcome)`` adds command-specific checks and may name an intermediate state
    (open-pr records its push before the PR); ``again(ws, outcome)`` gives the
    follow-up command (default: ``args`` again), which must succeed and leave
    ``expected_after``.
    """
    from testing.audit import AUDIT

    ws = scratch / f"trial-{point}".replace(":", "-").replace("@", "-")
    shutil.copytree(prepared, ws, symlinks=True)
    env = setup(ws) if setup else env
    if isinstance(point, Midway) and point.arm is not None:
        point.arm(ws)
    before = snapshot(ws)
    _killed_run(ws, args, env, point)
    # The next run must not be blocked by a dangling lock, and recovers.
    status = run(ws, "status", "--no-fetch", env=env)
    assert status.returncode == 0, (point, status.stderr)
    after = snapshot(ws)
    for text in after.values():  # no half-written patchset.toml or series
        assert b"\0" not in text
    outcome = "before" if after == before else "after"
    if verify is not None:
        outcome = verify(ws, outcome) or outcome
    elif outcome == "after":
        assert expected_after is not None
        assert after == expected_after, (point, _diff(after, expected_after))
    follow = again(ws, outcome) if again else args
    result = run(ws, *follow, env=env)
    assert result.returncode == 0, (point, outcome, follow, result.stdout, result.stderr)
    if expected_after is not None:
        assert snapshot(ws) == expected_after, (point, outcome,
                                                _diff(snapshot(ws), expected_after))
    if verify is not None:
        verify(ws, "final")
    hits = AUDIT.scan_tree(ws)
    assert not hits, f"planted token written to {hits}"
    shutil.rmtree(ws, ignore_errors=True)
    return TrialResult(point, outcome)


def kill_trials(prepared: Path, scratch: Path, args: tuple[str, ...], points: list[Kill],
                expected_after: dict[str, bytes] | None, env: dict[str, str], *,
                setup: Setup | None = None, verify: Verify | None = None,
                again: Callable[[Path, str], tuple[str, ...]] | None = None) -> list[TrialResult]:
    """One ``kill_trial`` per point, in order.  Each must kill the command: a named
    point comes from a run of the same command on the same copy, so it is passed."""
    return [kill_trial(prepared, scratch, args, point, expected_after, env,
                       setup=setup, verify=verify, again=again) for point in points]


def tally(command: str, results: list[TrialResult], points: list[Point]) -> str:
    """Record the figures of one batch of trials; returns a one-line summary."""
    from collections import Counter

    from testing.audit import FIGURES

    FIGURES[f"crash {command}: trials survived"] += len(results)
    FIGURES[f"crash {command}: points a run passes"] += len(points)
    passed = ", ".join(f"{name} {n}" for name, n in Counter(p.name for p in points).items())
    return (f"{command}: {len(results)} trials, each killed at its point, outcomes "
            f"{sorted(outcomes(results))}; the run passes {len(points)} points ({passed})")


def outcomes(results: list[TrialResult]) -> set[str]:
    """The states the trials left."""
    return {r.outcome for r in results}


def _diff(a: dict[str, bytes], b: dict[str, bytes]) -> str:
    keys = sorted(set(a) | set(b))
    return "differs at: " + ", ".join(k for k in keys if a.get(k) != b.get(k))
