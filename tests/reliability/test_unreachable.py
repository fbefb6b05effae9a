"""One unreachable upstream hides nothing else; an empty workspace says so everywhere.

`contrib status` shows every row it can, marks the unreachable upstream's rows
with git's one-line reason (in the table and in --json), and exits 1, with or
without --no-fetch, cached or never cached.  In a workspace with no
patchsets, status, sync, validate and open-pr all say the same line.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from testing.audit import FIGURES
from testing.crash import snapshot
from testing.gitutil import Repo
from testing.workspace import Workspace, two_upstreams

NO_PATCHSETS = "no patchsets yet: create one with `contrib new`"


@pytest.fixture
def two(tmp_path: Path, upstream: Repo) -> tuple[Workspace, Repo]:
    """proj (reachable) and gone (its repository about to disappear), one patchset each."""
    return two_upstreams(tmp_path, upstream)


def _cache_of(name: str) -> list[Path]:
    return list((Path(os.environ["CONTRIB_CACHE"]) / "upstreams").glob(f"{name}-*.git"))


@pytest.mark.parametrize("how", ["fetch", "no-fetch, never cached", "fetch, never cached"])
def test_status_marks_the_unreachable_upstream_and_shows_the_rest(
        two: tuple[Workspace, Repo], how: str) -> None:
    ws, other = two
    shutil.rmtree(other.path)
    if "never cached" in how:
        for cache in _cache_of("gone"):
            shutil.rmtree(cache)
    before = snapshot(ws.root)
    args = ["status", "--json"] + (["--no-fetch"] if how.startswith("no-fetch") else [])
    result = ws.run(*args)
    assert result.code == 1, result.err
    assert "Traceback" not in result.err and "internal error" not in result.err
    rows = {r["patchset"]: r for r in result.json["patchsets"]}
    assert set(rows) == {"proj/x", "gone/x"}
    assert rows["proj/x"]["unreachable"] is None and rows["proj/x"]["tip"]
    offline_empty = how == "no-fetch, never cached"  # --no-fetch never clones: nothing tried
    assert rows["gone/x"]["unreachable"]
    assert ("cache is empty" if offline_empty else str(other.path)) in rows["gone/x"]["unreachable"]
    assert rows["gone/x"]["patches"] == ["0001-add-x.patch"]
    human = ws.run(*[a for a in args if a != "--json"])
    assert human.code == 1
    assert ("not cached" if offline_empty else "unreachable:") in human.out
    assert "proj/x" in human.out
    assert len(human.err.strip().splitlines()) == 1 + ("--no-fetch" not in args) * 2
    assert snapshot(ws.root) == before
    FIGURES["status rows shown past an unreachable upstream"] += 1


def test_a_failed_fetch_still_shows_the_cached_tip(two: tuple[Workspace, Repo]) -> None:
    ws, other = two
    tip = other.head()
    shutil.rmtree(other.path)
    result = ws.run("status", "--json")
    gone = next(r for r in result.json["patchsets"] if r["patchset"] == "gone/x")
    assert result.code == 1 and gone["tip"] == tip and gone["behind"] == 0


@pytest.mark.parametrize("command", [("status", "--no-fetch"), ("sync",), ("validate",),
                                     ("open-pr", "--dry-run")])
def test_every_command_says_there_are_no_patchsets_yet(workspace: Workspace,
                                                       command: tuple[str, ...]) -> None:
    human = workspace.run(*command)
    assert human.code == 0, human.err
    assert NO_PATCHSETS in human.out
    data = workspace.run(*command, "--json")
    assert data.code == 0 and data.json["message"] == NO_PATCHSETS
    assert not (workspace.root / "patchsets").exists()
