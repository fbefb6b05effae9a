"""Faults: unreachable upstreams, a fetch killed midway, a full disk, a crash's log.

Each ends in one clear message and the right exit code, with the workspace as
it was (or fully updated) and the next run succeeding.  GitHub's faults are
in test_github_faults.py.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from testing.audit import FIGURES, PLANTED
from testing.crash import (
    Midway,
    Point,
    choose,
    counted,
    fsck_cache,
    kill_trials,
    outcomes,
    own_cache,
    snapshot,
    tally,
    trial_cache,
)
from testing.gitutil import Repo, git
from testing.histories import Change, fast_import, filler
from testing.synchelp import add_patchset
from testing.workspace import SAMPLE, Workspace

CORE = SAMPLE["pkg/core.py"]
F3_PATCH = CORE.replace("    return 3\n", "    return 33\n")


def _one_clear_line(err: str) -> str:
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("contrib: error: ")]
    assert len(errors) == 1 and all(line.startswith("fetching ") for line in lines
                                    if line not in errors), err
    assert "Traceback" not in err and PLANTED not in err
    return errors[0]


def _patchset(ws: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(ws, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])


# -- unreachable upstreams ---------------------------------------------------------

@pytest.mark.parametrize(("url", "says"), [
    ("{tmp}/no/such/repo", "does not exist; fix url in contrib.toml"),
    ("http://127.0.0.1:1/x.git", "cannot clone http://127.0.0.1:1/x.git"),
    ("file://{tmp}/no/such/repo.git", "does not exist; fix url in contrib.toml"),
])
@pytest.mark.parametrize("command", [("sync",), ("new", "proj", "x", "--base", "main",
                                                 "--patch", "{patch}")])
def test_unreachable_upstream_is_one_line_exit_2(workspace: Workspace, upstream: Repo,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 url: str, says: str,
                                                 command: tuple[str, ...]) -> None:
    _patchset(workspace, upstream, tmp_path)
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file:http")
    config = workspace.root / "contrib.toml"
    config.write_text(config.read_text().replace(str(upstream.path), url.format(tmp=tmp_path)))
    patch = next((tmp_path / "patches-f3").glob("*.patch"))
    before = snapshot(workspace.root)
    result = workspace.run(*[part.format(patch=patch) for part in command])
    assert result.code == 2, result.err
    line = _one_clear_line(result.err)
    assert "upstream proj:" in line and says in line, line
    assert snapshot(workspace.root) == before
    assert not list((workspace.root.parent / "home" / "contrib-cache").rglob(".clone-*"))
    FIGURES["faults survived: unreachable upstream"] += 1


@pytest.mark.parametrize("url", ["{tmp}/no/such/repo", "http://127.0.0.1:1/x.git"])
def test_status_past_an_unreachable_upstream_is_exit_1_with_the_row_marked(
        workspace: Workspace, upstream: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        url: str) -> None:
    _patchset(workspace, upstream, tmp_path)
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file:http")
    config = workspace.root / "contrib.toml"
    config.write_text(config.read_text().replace(str(upstream.path), url.format(tmp=tmp_path)))
    before = snapshot(workspace.root)
    result = workspace.run("status")
    assert result.code == 1, result.err
    warnings = [line for line in result.err.splitlines() if not line.startswith("fetching ")]
    assert len(warnings) == 1 and warnings[0].startswith("upstream proj is unreachable: ")
    assert "unreachable: " in result.out and "proj/f3" in result.out
    assert "Traceback" not in result.err + result.out and PLANTED not in result.err
    assert snapshot(workspace.root) == before
    FIGURES["faults survived: unreachable upstream"] += 1


def test_upstream_gone_after_caching_is_one_line_and_cache_kept(
        workspace: Workspace, upstream: Repo, tmp_path: Path, isolated: Path) -> None:
    _patchset(workspace, upstream, tmp_path)
    moved = tmp_path / "moved-away"
    upstream.path.rename(moved)
    before = snapshot(workspace.root)
    result = workspace.run("sync")
    assert result.code == 2
    line = _one_clear_line(result.err)
    assert line == (f"contrib: error: upstream proj: fetch from {upstream.path} failed: "
                    f"'{upstream.path}' does not appear to be a git repository. Check url in "
                    "contrib.toml and the network (--no-fetch works from the cache)")
    assert snapshot(workspace.root) == before
    offline = workspace.run("sync", "--no-fetch")  # the cache still serves
    assert offline.code == 0 and "unchanged" in offline.out
    moved.rename(upstream.path)
    assert workspace.run("sync").code == 0
    FIGURES["faults survived: upstream gone after caching"] += 1


# -- a fetch killed midway ------------------------------------------------------------

@pytest.mark.slow
def test_fetch_killed_midway_leaves_a_working_cache(workspace: Workspace, upstream: Repo,
                                                    tmp_path: Path, isolated: Path) -> None:
    """A big upstream push (incompressible blobs), then sync killed while it fetches."""
    _patchset(workspace, upstream, tmp_path)
    noise = os.urandom(6 << 20).hex()  # 12 MB of text no delta or zlib can shrink
    big = {f"data/blob{i:03d}.txt": noise[i * 48_000:(i + 1) * 48_000] for i in range(250)}
    moved = CORE.replace("def f0():\n", "# header\n\n\ndef f0():\n")
    fast_import(upstream, [Change("data: big import", big), *filler(5),
                           Change("core: header", {"pkg/core.py": moved})])
    env = dict(os.environ)
    setup = own_cache(isolated / "contrib-cache", env)

    def verify(ws: Path, outcome: str) -> None:
        for repo in fsck_cache(trial_cache(ws)):
            assert not list(repo.glob("refs/**/*.lock")), "a dangling git ref lock"
            if outcome == "final":
                assert git(repo, "rev-parse", "refs/remotes/origin/main") == upstream.head()

    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference)
    points = counted(reference, "sync", env=setup(reference))
    expected = snapshot(reference)
    fetch = points.index(Point("git-fetch", 1))
    # Just before the fetch, just after it and at the end; then inside it, from outside
    # (no named point lies within a git process): once its pack is being received, and
    # once 2 MiB of it are in.
    kills = [*choose(points, 7_20261129, 3, must=lambda _: [fetch, fetch + 1, len(points) - 1]),
             Midway("receiving", _pack_over(0)), Midway("2MiB-in", _pack_over(2 << 20))]
    trials = kill_trials(workspace.root, tmp_path, ("sync",), kills,
                         expected, env, setup=setup, verify=verify)
    print(tally("sync during a big fetch", trials, points))
    FIGURES["faults survived: fetch killed midway"] += sum(isinstance(t.point, Midway)
                                                           for t in trials)
    assert outcomes(trials) == {"before", "after"}
    assert {t.outcome for t in trials if isinstance(t.point, Midway)} == {"before"}


def _pack_over(size: int) -> Callable[[Path], bool]:
    """Whether the fetch into the trial's cache is receiving a pack of more than ``size``."""
    def seen(ws: Path) -> bool:
        for pack in trial_cache(ws).glob("upstreams/*.git/objects/pack/tmp_pack_*"):
            with suppress(OSError):  # renamed into place meanwhile
                if pack.stat().st_size > size:
                    return True
        return False
    return seen


def test_ref_locks_a_killed_fetch_left_are_cleared(workspace: Workspace, upstream: Repo,
                                                   tmp_path: Path, isolated: Path) -> None:
    """The deterministic form of a crash trial that once failed: git killed between
    taking ``refs/remotes/origin/main.lock`` and renaming it left the lock, and every
    later fetch failed ("cannot lock ref ... File exists").  The next contrib clears
    the fetch's locks under the cache lock; another writer's lock is left alone."""
    _patchset(workspace, upstream, tmp_path)
    (repo,) = fsck_cache(isolated / "contrib-cache")
    planted = [repo / "refs/remotes/origin/main.lock", repo / "packed-refs.lock",
               repo / "refs/tags/v1.lock"]
    for lock in planted:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text("0" * 40 + "\n")
    others = repo / "refs/contrib/edit/ws/proj--f3.lock"  # contrib edit's, not a fetch's
    others.parent.mkdir(parents=True)
    others.write_text("0" * 40 + "\n")
    moved = CORE.replace("def f0():\n", "# header\n\n\ndef f0():\n")
    fast_import(upstream, [Change("core: header", {"pkg/core.py": moved})])
    result = workspace.run("sync")
    assert result.code == 0, result.err
    assert not [lock for lock in planted if lock.exists()] and others.exists()
    assert git(repo, "rev-parse", "refs/remotes/origin/main") == upstream.head()
    FIGURES["faults survived: ref locks of a killed fetch"] += 1


# -- a full disk ----------------------------------------------------------------------

@contextmanager
def full_disk(root: Path, budget: int) -> Iterator[list[str]]:
    """Writes into files under ``root`` fail with ENOSPC once ``budget`` bytes are spent.

    Patches io.open, which open(), os.fdopen() and Path.write_bytes/text all use,
    so every writer contrib has goes through it; git children are unaffected.
    """
    real_open = io.open
    state = {"left": budget}
    failures: list[str] = []

    class Full:
        def __init__(self, handle: Any, where: str) -> None:
            self._handle, self._where = handle, where

        def write(self, data: Any) -> int:
            size = len(data)
            if size > state["left"]:
                taken = max(state["left"], 0)
                if taken:
                    self._handle.write(data[:taken])
                state["left"] = 0
                failures.append(self._where)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            state["left"] -= size
            return int(self._handle.write(data))

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self._handle.close()

        def __getattr__(self, name: str) -> Any:
            return getattr(self._handle, name)

    def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        if not any(m in mode for m in "wax+"):
            return handle
        where = os.readlink(f"/proc/self/fd/{file}") if isinstance(file, int) else str(file)
        if isinstance(file, int) and not where.startswith("/"):
            return handle  # a pipe to a child ("pipe:[N]"), not a file on the full disk
        return Full(handle, where) if Path(where).resolve().is_relative_to(root) else handle

    io.open = fake_open  # type: ignore[assignment]
    try:
        yield failures
    finally:
        io.open = real_open


@pytest.mark.parametrize("budget", [0, 40, 400, 1500, 3000, 6000])
@pytest.mark.parametrize("command", ["sync", "new"])
def test_disk_full_is_exit_2_and_changes_nothing(workspace: Workspace, upstream: Repo,
                                                 tmp_path: Path, budget: int,
                                                 command: str) -> None:
    _patchset(workspace, upstream, tmp_path)
    moved = CORE.replace("def f0():\n", "# header\n\n\ndef f0():\n")
    fast_import(upstream, [*filler(3), Change("core: header", {"pkg/core.py": moved})])
    patch = next((tmp_path / "patches-f3").glob("*.patch"))
    args = ("sync",) if command == "sync" else (
        "new", "proj", "again", "--base", "main", "--patch", str(patch))
    reference = tmp_path / "reference"
    shutil.copytree(workspace.root, reference)
    done = Workspace(reference, workspace.upstreams).run(*args)
    assert done.code == 0, done.err
    expected = snapshot(reference)
    before = snapshot(workspace.root)
    with full_disk(workspace.root, budget) as failures:
        result = workspace.run(*args)
    if not failures:  # enough room for everything: it simply worked
        assert result.code == 0 and snapshot(workspace.root) == expected, result.err
        return
    assert result.code == 2, (budget, result.code, result.err)
    line = _one_clear_line(result.err)
    assert "No space left on device" in line and str(workspace.root) in line, line
    assert snapshot(workspace.root) == before
    txn = workspace.root / ".contrib" / "txn"
    assert not txn.exists() or not list(txn.iterdir())  # nothing staged is left behind
    again = workspace.run(*args)
    assert again.code == 0, again.err
    assert snapshot(workspace.root) == expected
    FIGURES["faults survived: disk full (exit 2, nothing changed)"] += 1


# -- a crash (a bug) --------------------------------------------------------------------

def test_internal_error_log_is_scrubbed(workspace: Workspace, upstream: Repo, tmp_path: Path,
                                        isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug whose exception text carries the token: exit 3, a log, no token anywhere."""
    _patchset(workspace, upstream, tmp_path)
    import contrib.commands.status as status_module

    def broken(*args: object) -> object:
        raise RuntimeError(f"boom while holding {os.environ['GITHUB_TOKEN']}")

    monkeypatch.setattr(status_module, "describe", broken)
    result = workspace.run("status", "--no-fetch")
    assert result.code == 3
    log = isolated / "contrib-cache" / "contrib-error.log"
    assert f"details in {log}" in result.err and "Please report it" in result.err
    text = log.read_text()
    assert "RuntimeError: boom while holding ***" in text and "Traceback" in text
    assert PLANTED not in text + result.err + result.out
    FIGURES["faults survived: internal error, token scrubbed from log"] += 1


@pytest.mark.parametrize("variable", ["GH_TOKEN", "CONTRIB_WORKSPACE_TOKEN"])
def test_internal_error_log_scrubs_every_token_variable(
        workspace: Workspace, upstream: Repo, tmp_path: Path, isolated: Path,
        monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    """The autopilot's workspace token too: a crash before anything read it logs no token."""
    _patchset(workspace, upstream, tmp_path)
    import contrib.commands.status as status_module

    secret = f"ghs_{variable.lower()}_0123456789abcdef"
    monkeypatch.setenv(variable, secret)

    def broken(*args: object) -> object:
        raise RuntimeError(f"boom while holding {secret}")

    monkeypatch.setattr(status_module, "describe", broken)
    result = workspace.run("status", "--no-fetch")
    assert result.code == 3
    text = (isolated / "contrib-cache" / "contrib-error.log").read_text()
    assert "RuntimeError: boom while holding ***" in text
    assert secret not in text + result.err + result.out
