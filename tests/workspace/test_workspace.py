"""The workspace lock and atomic, all-or-nothing writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contrib.errors import ContribError
from contrib.workspace.model import Workspace as RealWorkspace
from contrib.workspace.schema import PrRecord
from contrib.workspace.txn import Transaction, recover
from testing.gitutil import Repo
from testing.workspace import Workspace, make_patch

ROOT = Path(__file__).resolve().parents[2]
# Holds the workspace lock until told to let go (a line on its stdin): what another
# process does meanwhile is decided by the lock, not by how long anything takes.
HOLD = """
import sys
from pathlib import Path
from contrib.workspace.model import Workspace
ws = Workspace(Path(sys.argv[1]))
with ws.lock():
    print("locked", flush=True)
    sys.stdin.readline()
"""


def _holder(workspace: Workspace) -> subprocess.Popen[str]:
    """A process holding ``workspace``'s lock until a line is written to its stdin."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(workspace.root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def _release(holder: subprocess.Popen[str]) -> None:
    holder.communicate("go\n", timeout=60)


def test_second_process_waits_then_refuses(workspace: Workspace) -> None:
    holder = _holder(workspace)
    try:
        started = time.monotonic()
        result = workspace.run("sync", "--no-fetch")  # a writer; status reads without a lock
        waited = time.monotonic() - started
        assert result.code == 2
        assert "another contrib process" in result.err and f"pid {holder.pid}" in result.err
        assert waited >= 1.5  # it waited out CONTRIB_LOCK_TIMEOUT=2 (tests' value) first
    finally:
        _release(holder)
    assert workspace.run("sync", "--no-fetch").code == 0


def test_waiting_is_said_at_once_naming_the_holder(workspace: Workspace) -> None:
    """The waiter says it waits, naming the holder, while the lock is still held (the
    holder lets go only once the line is read), then takes the lock and runs."""
    holder = _holder(workspace)
    try:
        waiter = subprocess.Popen([sys.executable, "-m", "contrib", "sync", "--no-fetch"],
                                  cwd=workspace.root,
                                  env={**os.environ, "PYTHONPATH": str(ROOT),
                                       "CONTRIB_LOCK_TIMEOUT": "600"},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert waiter.stderr is not None
        said = waiter.stderr.readline()
        assert said.startswith("waiting for the workspace lock: ") and f"pid {holder.pid}" in said
        assert waiter.poll() is None  # still waiting: the lock is held
    finally:
        _release(holder)
    waiter.communicate(timeout=60)
    assert waiter.returncode == 0


def test_readers_need_no_lock(workspace: Workspace) -> None:
    """``status`` runs to the end while another process holds the lock (one that took
    the lock would wait out CONTRIB_LOCK_TIMEOUT and fail)."""
    holder = _holder(workspace)
    try:
        assert workspace.run("status", "--no-fetch").code == 0
        assert holder.poll() is None  # the lock was held throughout
    finally:
        _release(holder)


def test_lock_dies_with_its_holder(workspace: Workspace) -> None:
    holder = _holder(workspace)
    holder.kill()
    holder.wait()
    assert workspace.run("sync", "--no-fetch").code == 0


def _staged_version(tmp_path: Path) -> tuple[Path, Path, Transaction]:
    """A transaction that has staged a new version folder and a new patchset.toml."""
    state = tmp_path / ".contrib"
    target = tmp_path / "patchsets" / "a"
    target.mkdir(parents=True)
    (target / "patchset.toml").write_text("old")
    txn = Transaction(tmp_path, state)
    txn.write_dir(target / ("1" * 40), {"series": "p\n", "p": "x"})
    txn.write(target / "patchset.toml", "new")
    return state, target, txn


def test_transaction_interrupted_before_commit_changes_nothing(tmp_path: Path) -> None:
    state, target, txn = _staged_version(tmp_path)
    # The process dies here: staged, no plan written.  The next run sweeps it.
    recover(state)
    assert (target / "patchset.toml").read_text() == "old"
    assert not (target / ("1" * 40)).exists()
    assert list((state / "txn").iterdir()) == []


def test_transaction_interrupted_after_commit_point_rolls_forward(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    import contrib.workspace.txn as txn_mod

    state, target, txn = _staged_version(tmp_path)
    calls = 0
    real_replace = os.replace

    def dying_replace(src: object, dst: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:  # plan written (1), version dir installed (2), then death
            raise KeyboardInterrupt
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(txn_mod.os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        txn.commit()
    monkeypatch.setattr(txn_mod.os, "replace", real_replace)
    assert (target / "patchset.toml").read_text() == "old"  # half-way on disk...
    assert recover(state) == 1  # ...until the next run rolls it forward
    assert (target / "patchset.toml").read_text() == "new"
    assert (target / ("1" * 40) / "p").read_text() == "x"


def test_replaced_version_is_kept(tmp_path: Path) -> None:
    state = tmp_path / ".contrib"
    target = tmp_path / "patchsets" / "a" / ("2" * 40)
    target.mkdir(parents=True)
    (target / "series").write_text("user edit\n")
    with Transaction(tmp_path, state) as txn:
        txn.write_dir(target, {"series": "new\n"})
    assert (target / "series").read_text() == "new\n"
    kept = list((state / "superseded").iterdir())
    assert len(kept) == 1 and (kept[0] / "series").read_text() == "user edit\n"


def test_failed_new_leaves_workspace_untouched(workspace: Workspace, upstream: Repo,
                                               tmp_path: Path) -> None:
    patches = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x")
    assert workspace.run("new", "proj", "x", "--base", "main", "--patch", str(patches[0])).code == 0
    before = {p: p.read_bytes() for p in (workspace.root / "patchsets").rglob("*") if p.is_file()}
    bad = tmp_path / "bad.patch"
    bad.write_text(patches[0].read_text().replace("@@ -0,0 +1 @@", "@@ -0,0 +1,5 @@"))
    result = workspace.run("new", "proj", "y", "--base", "main", "--patch", str(bad))
    assert result.code == 2 and "bad.patch" in result.err
    after = {p: p.read_bytes() for p in (workspace.root / "patchsets").rglob("*") if p.is_file()}
    assert after == before


def test_workspace_find_walks_up(workspace: Workspace) -> None:
    sub = workspace.root / "patchsets" / "deep"
    sub.mkdir(parents=True)
    assert RealWorkspace.find(sub).root == workspace.root.resolve()
    with pytest.raises(ContribError):
        RealWorkspace.find(workspace.root.parent)


def test_single_file_write_killed_leaves_no_litter(workspace: Workspace, upstream: Repo,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by the open-pr crash trials in CI: a kill between writing the temp
    # file and renaming it left `.patchset.toml.XXXX.tmp` beside patchset.toml.
    import contrib.workspace.txn as txn_mod

    patches = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x")
    assert workspace.run("new", "proj", "x", "--base", "main", "--patch", str(patches[0])).code == 0
    real = RealWorkspace(workspace.root)
    ps = real.patchset("proj/x")
    before = ps.meta_path.read_bytes()

    def killed(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(txn_mod.os, "replace", killed)
    ps.set_pr(PrRecord(number=5))
    with pytest.raises(KeyboardInterrupt):
        ps.save_meta()
    monkeypatch.undo()
    assert sorted(p.name for p in ps.dir.iterdir()) == sorted(["patchset.toml", upstream.head()])
    assert ps.meta_path.read_bytes() == before
    assert list((real.state_dir / "txn").glob("*.tmp"))
    recover(real.state_dir)
    assert not list((real.state_dir / "txn").glob("*.tmp"))
