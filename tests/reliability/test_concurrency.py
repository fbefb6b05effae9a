"""Two `contrib sync` at once: on one workspace, and on two sharing one cache.

On one workspace the second waits for the lock (CONTRIB_LOCK_TIMEOUT) and then
finds everything done, or refuses with the clear lock message (exit 2): the
first is held mid-sync with SIGSTOP (deterministic, no sleeps to tune) while
it owns the lock, and the second is let go once it says it waits.  On two workspaces sharing one CONTRIB_CACHE both succeed,
cold (both clone at once) and warm (both fetch at once), and the cache stays
whole: `git fsck` is clean and a later sync works.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from testing.audit import AUDIT, FIGURES
from testing.crash import contrib_cmd, run, snapshot
from testing.gitutil import Repo, git
from testing.histories import Change, fast_import, filler
from testing.synchelp import add_patchset
from testing.workspace import SAMPLE, Workspace

CORE = SAMPLE["pkg/core.py"]
F3_PATCH = CORE.replace("    return 3\n", "    return 33\n")


def _moved(upstream: Repo, workspace: Workspace, tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    moved = CORE.replace("def f0():\n", "# header\n\n\ndef f0():\n")
    fast_import(upstream, [*filler(30), Change("core: header", {"pkg/core.py": moved})])


def _start(ws: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(contrib_cmd(*args), cwd=ws, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    AUDIT.record(out, err)
    return proc.returncode, out, err


def _stopped_holding_lock(ws: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """A `contrib sync` frozen (SIGSTOP) right after it took the workspace lock."""
    pid_file = ws / ".contrib" / "lock.pid"
    pid_file.unlink(missing_ok=True)
    proc = _start(ws, env, "sync", "--json")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if pid_file.read_text().split()[0] == str(proc.pid):
                proc.send_signal(signal.SIGSTOP)
                return proc
        except (OSError, IndexError):
            pass
        assert proc.poll() is None, "sync ended before it could be held"
        time.sleep(0.002)
    raise AssertionError("sync never took the lock")


def _reference(workspace: Workspace, tmp_path: Path, env: dict[str, str]) -> dict[str, bytes]:
    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference)
    done = run(reference, "sync", env=env)
    assert done.returncode == 0, done.stderr
    return snapshot(reference)


def test_second_sync_on_one_workspace_waits_then_finds_it_done(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    _moved(upstream, workspace, tmp_path)
    env = {**os.environ, "CONTRIB_LOCK_TIMEOUT": "60"}
    expected = _reference(workspace, tmp_path, env)
    first = _stopped_holding_lock(workspace.root, env)
    second = _start(workspace.root, env, "sync", "--json")
    assert second.stderr is not None
    said = second.stderr.readline()  # it says so once it waits: no sleep to tune
    AUDIT.record(said)
    assert said.startswith(f"waiting for the workspace lock: pid {first.pid} (contrib sync"), said
    assert second.poll() is None  # waiting for the lock, not failing, not racing
    first.send_signal(signal.SIGCONT)
    code1, out1, err1 = _finish(first)
    code2, out2, err2 = _finish(second)
    assert (code1, code2) == (0, 0), (err1, err2)
    results = [json.loads(out)["results"][0]["result"] for out in (out1, out2)]
    assert results == ["rebased", "unchanged"]
    assert snapshot(workspace.root) == expected
    FIGURES["concurrency: same workspace, waited then unchanged"] += 1


def test_second_sync_on_one_workspace_refuses_clearly(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    _moved(upstream, workspace, tmp_path)
    env = {**os.environ, "CONTRIB_LOCK_TIMEOUT": "0.5"}
    expected = _reference(workspace, tmp_path, env)
    before = snapshot(workspace.root)
    first = _stopped_holding_lock(workspace.root, env)
    try:
        code, out, err = _finish(_start(workspace.root, env, "sync"))
        assert code == 2, err
        lock = workspace.root / ".contrib" / "lock"
        said, refused = err.strip().splitlines()
        assert said.startswith(f"waiting for the workspace lock: pid {first.pid} (contrib sync")
        assert refused == (
            f"contrib: error: {lock}: another contrib process (pid {first.pid}) is working on "
            "this workspace; waited 0.5s (CONTRIB_LOCK_TIMEOUT). Try again when it has finished")
        assert snapshot(workspace.root) == before  # the refused one touched nothing
    finally:
        first.send_signal(signal.SIGCONT)
    code1, _, err1 = _finish(first)
    assert code1 == 0, err1
    assert snapshot(workspace.root) == expected
    FIGURES["concurrency: same workspace, refused with the lock message"] += 1


def _fsck(cache: Path) -> list[Path]:
    repos = sorted((cache / "upstreams").glob("*.git"))
    for repo in repos:
        assert git(repo, "fsck", "--no-progress", "--no-dangling") == ""
    return repos


@pytest.mark.parametrize("cache_state", ["cold", "warm"])
def test_two_workspaces_share_one_cache(workspace: Workspace, upstream: Repo, tmp_path: Path,
                                        isolated: Path, cache_state: str) -> None:
    _moved(upstream, workspace, tmp_path)
    env = dict(os.environ)
    cache = isolated / "contrib-cache"
    expected = _reference(workspace, tmp_path, {**env, "CONTRIB_CACHE": str(tmp_path / "c0")})
    for round_ in range(3):
        roots = [tmp_path / f"ws-{round_}-{i}" for i in range(2)]
        for root in roots:
            shutil.copytree(workspace.root, root)
        if cache_state == "cold":
            shutil.rmtree(cache, ignore_errors=True)
        procs = [_start(root, env, "sync", "--json") for root in roots]
        for proc in procs:
            code, _, err = _finish(proc)
            assert code == 0, err
        for root in roots:
            assert snapshot(root) == expected
        [repo] = _fsck(cache)
        assert not list((cache / "upstreams").glob(".clone-*"))  # no half-made clone left
        assert not list(repo.rglob("*.lock"))  # git's own locks released
        FIGURES["concurrency: shared cache, pairs of syncs both succeeded"] += 1
    # ... and the cache serves a later sync after upstream moves again.
    fast_import(upstream, filler(5, start=100))
    later = run(tmp_path / "ws-2-0", "sync", env=env)
    assert later.returncode == 0, later.stderr
    assert git(repo, "rev-parse", "refs/remotes/origin/main") == upstream.head()
