"""A conflict worktree that a killed run left missing, half-made or stale.

`sync` and `sync --continue` build the conflict worktree in several git steps.
A run killed among them must not turn the next `--continue` into an error
that only `--abort` (losing the user's earlier resolutions) gets out of, nor
read a half-made worktree as "resolved to nothing" (dropping the patch).
The next `--continue` re-creates the worktree from the recorded state and
says so; resolving it there then records everything, earlier resolutions
included.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import contrib.carry.conflict
import contrib.carry.syncstate
import contrib.git.worktree
from testing.audit import FIGURES
from testing.gitutil import Repo
from testing.histories import Change, fast_import, filler
from testing.synchelp import add_patchset, series, version_dir
from testing.workspace import SAMPLE, Workspace, run_contrib

CORE = SAMPLE["pkg/core.py"]
F3 = CORE.replace("    return 3\n", "    return 33\n")
F3_F4 = F3.replace("    return 4\n", "    return 44\n")
BOTH_BROKEN = CORE.replace("    return 3\n", "    return 3 + 0\n").replace(
    "    return 4\n", "    return 4 + 0\n")


def _sync(ws: Workspace, *args: str) -> tuple[int, dict[str, Any]]:
    result = run_contrib("sync", "--json", *args, cwd=ws.root)
    doc = result.json
    assert isinstance(doc, dict) and "results" in doc, (result.out, result.err)
    return result.code, doc["results"][0]


def _two_patch_conflict(ws: Workspace, upstream: Repo, tmp_path: Path) -> Path:
    add_patchset(ws, upstream, tmp_path, "f34", [("core: f3 returns 33", {"pkg/core.py": F3}),
                                                 ("core: f4 returns 44", {"pkg/core.py": F3_F4})])
    fast_import(upstream, [*filler(4), Change("core: + 0 everywhere", {"pkg/core.py": BOTH_BROKEN}),
                           *filler(4, start=4)])
    code, res = _sync(ws)
    assert code == 1 and res["conflict"]["patch"].startswith("0001-")
    return Path(res["conflict"]["worktree"])


def _resolve(worktree: Path, old: str, new: str) -> None:
    path = worktree / "pkg/core.py"
    text = path.read_text()
    assert "<<<<<<<" in text, text
    start, end = text.index("<<<<<<<"), text.index(">>>>>>>")
    end = text.index("\n", end) + 1
    path.write_text(text[:start] + _resolved_block(text, old, new) + text[end:])


def _resolved_block(text: str, old: str, new: str) -> str:
    """The resolved lines for the conflict block: upstream's side with ``old`` -> ``new``."""
    block = text[text.index("<<<<<<<"):text.index("\n", text.index(">>>>>>>")) + 1]
    ours = block.split("=======\n")[0].split("\n", 1)[1]
    if "|||||||" in ours:
        ours = ours.split("|||||||")[0]
    theirs_side = [part for part in (ours, block.split("=======\n")[1].rsplit(">>>>>>>", 1)[0])
                   if old in part]
    assert theirs_side, block
    return theirs_side[0].replace(old, new)


@pytest.mark.parametrize("damage", ["worktree deleted", "left half-made"])
def test_continue_recreates_a_missing_or_half_made_worktree(
        workspace: Workspace, upstream: Repo, tmp_path: Path, damage: str) -> None:
    worktree = _two_patch_conflict(workspace, upstream, tmp_path)
    if damage == "worktree deleted":
        shutil.rmtree(worktree)
    else:  # killed inside prepare(): the marker says the worktree is not whole
        (worktree.parent / contrib.git.worktree.PREPARING).write_text("x\n")
        (worktree / "pkg/core.py").write_text(BOTH_BROKEN)  # patch not applied yet
    code, res = _sync(workspace, "--continue")
    assert code == 1 and res["result"] == "conflict", res
    assert "was missing or half-made" in res["notes"][0]
    assert res["conflict"]["patch"].startswith("0001-")
    assert "<<<<<<<" in (worktree / "pkg/core.py").read_text()
    assert not (worktree.parent / contrib.git.worktree.PREPARING).exists()
    _finish_both(workspace, worktree)
    FIGURES["faults survived: conflict worktree missing/half-made after a kill"] += 1


@pytest.mark.parametrize("when", ["before re-making the worktree", "while re-making it"])
def test_kill_between_recording_and_remaking_the_next_conflict(
        workspace: Workspace, upstream: Repo, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """--continue resolves patch 1, patch 2 conflicts next; the run dies after saving
    the new state: before the worktree is re-made (the old one is left), or after
    git built it but before prepare() finished."""
    worktree = _two_patch_conflict(workspace, upstream, tmp_path)
    _resolve(worktree, "return 3 + 0", "return 33 + 0")
    name = "prepare" if when.startswith("before") else "_fill"
    real = getattr(contrib.carry.conflict, name)

    def killed(*args: object, **kw: object) -> list[str]:
        if name == "_fill":
            real(*args, **kw)
        raise SystemExit(137)  # stands in for SIGKILL: nothing after this runs

    monkeypatch.setattr(contrib.carry.conflict, name, killed)
    with pytest.raises(SystemExit):
        run_contrib("sync", "--continue", cwd=workspace.root)
    monkeypatch.setattr(contrib.carry.conflict, name, real)
    code, res = _sync(workspace, "--continue")
    assert code == 1 and res["conflict"]["patch"].startswith("0002-"), res
    assert "was missing or half-made" in res["notes"][0]
    text = (worktree / "pkg/core.py").read_text()
    assert "return 33 + 0" in text and "<<<<<<<" in text  # patch 1's resolution is kept
    _resolve(worktree, "return 4 + 0", "return 44 + 0")
    code, res = _sync(workspace, "--continue")
    assert code == 0 and res["result"] == "rebased", res
    carried = b"".join((version_dir(workspace, "f34", res["version"]) / name).read_bytes()
                       for name in series(workspace, "f34", res["version"]))
    assert b"+    return 33 + 0" in carried and b"+    return 44 + 0" in carried
    FIGURES["faults survived: conflict worktree missing/half-made after a kill"] += 1


def _finish_both(workspace: Workspace, worktree: Path) -> None:
    _resolve(worktree, "return 3 + 0", "return 33 + 0")
    code, res = _sync(workspace, "--continue")
    assert code == 1 and res["conflict"]["patch"].startswith("0002-"), res
    _resolve(worktree, "return 4 + 0", "return 44 + 0")
    code, res = _sync(workspace, "--continue")
    assert code == 0 and res["result"] == "rebased", res


@pytest.mark.parametrize("when", ["before removing the worktree", "halfway through removing it"])
def test_kill_after_recording_before_cleaning_up(workspace: Workspace, upstream: Repo,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 when: str) -> None:
    """The resolution is recorded, the run dies while removing the worktree: the next
    --continue finishes the clean-up; it never asks to resolve again."""
    add_patchset(workspace, upstream, tmp_path, "f3", [("core: f3 returns 33", {"pkg/core.py": F3})])
    fast_import(upstream, [*filler(2), Change("core: + 0", {"pkg/core.py": BOTH_BROKEN})])
    code, res = _sync(workspace)
    worktree = Path(res["conflict"]["worktree"])
    _resolve(worktree, "return 3 + 0", "return 33 + 0")

    def killed(git: object, pending: contrib.carry.syncstate.Pending) -> None:
        if when.startswith("halfway"):
            (pending.worktree / ".git").unlink()
            (pending.worktree / "pkg" / "core.py").unlink()
        raise SystemExit(137)  # stands in for SIGKILL

    real = contrib.carry.conflict.remove
    monkeypatch.setattr(contrib.carry.conflict, "remove", killed)
    with pytest.raises(SystemExit):
        run_contrib("sync", "--continue", cwd=workspace.root)
    monkeypatch.setattr(contrib.carry.conflict, "remove", real)
    recorded = (workspace.root / "patchsets/proj/f3/patchset.toml").read_bytes()
    code, res = _sync(workspace, "--continue")
    assert code == 0 and res["result"] == "unchanged", res
    assert "already recorded by an interrupted --continue" in res["notes"][0]
    assert (workspace.root / "patchsets/proj/f3/patchset.toml").read_bytes() == recorded
    assert not worktree.parent.exists()
    assert not (workspace.root / ".contrib" / "sync-state.json").exists()
    tip = upstream.head()
    carried = b"".join((version_dir(workspace, "f3", tip) / n).read_bytes()
                       for n in series(workspace, "f3", tip))
    assert b"+    return 33 + 0" in carried
    FIGURES["faults survived: conflict worktree missing/half-made after a kill"] += 1
