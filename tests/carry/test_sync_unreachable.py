"""`contrib sync` past an unreachable upstream: the others still sync, the run exits 1.

Two upstreams, one patchset each; ``gone``'s repository disappears (its url
points at a missing folder).  ``proj/x`` is carried onto proj's new tip as if
nothing happened; ``gone/x`` gets result ``error`` with git's reason and is
left as it was; one warning names the unreachable upstream, as `status` does.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from testing.crash import snapshot
from testing.gitutil import Repo
from testing.workspace import Workspace, two_upstreams


@pytest.fixture
def two(tmp_path: Path, upstream: Repo) -> tuple[Workspace, Repo, Repo]:
    """proj (reachable) and gone (about to disappear), patchset x in each."""
    ws, other = two_upstreams(tmp_path, upstream)
    return ws, upstream, other


def _forget_cache(name: str) -> None:
    for cache in (Path(os.environ["CONTRIB_CACHE"]) / "upstreams").glob(f"{name}-*.git"):
        shutil.rmtree(cache)


@pytest.mark.parametrize("how", ["fetch", "fetch, never cached", "no-fetch, never cached"])
def test_sync_carries_the_others_and_marks_the_unreachable_upstream(
        two: tuple[Workspace, Repo, Repo], how: str) -> None:
    ws, upstream, other = two
    newer = upstream.commit("upstream: more docs", {"docs/more.md": "more\n"})
    shutil.rmtree(other.path)
    if "never cached" in how:
        _forget_cache("gone")
    gone_folder = ws.root / "patchsets" / "gone"
    gone_before = snapshot(gone_folder)
    args = ["sync", "--json"] + (["--no-fetch"] if how.startswith("no-fetch") else [])
    if how.startswith("no-fetch"):  # the reachable upstream's cache must know the new tip
        assert ws.run("status", "proj").code == 0
    result = ws.run(*args)
    assert result.code == 1, (result.out, result.err)
    assert "Traceback" not in result.err and "internal error" not in result.err
    doc = result.json
    assert isinstance(doc, dict) and set(doc) == {"results", "commit"}
    rows = {r["patchset"]: r for r in doc["results"]}
    assert set(rows) == {"proj/x", "gone/x"}
    assert rows["proj/x"]["result"] == "rebased" and rows["proj/x"]["version"] == newer
    assert (ws.root / "patchsets" / "proj" / "x" / newer / "series").is_file()
    gone = rows["gone/x"]
    assert gone["result"] == "error" and "upstream gone" in gone["error"]
    assert str(other.path) in gone["error"]
    assert snapshot(gone_folder) == gone_before  # nothing written for the unreachable one
    [warning] = result.err.strip().splitlines()
    assert warning.startswith("upstream gone is unreachable: ") and str(other.path) in warning


def test_sync_human_output_names_the_unreachable_upstream(
        two: tuple[Workspace, Repo, Repo]) -> None:
    ws, _, other = two
    shutil.rmtree(other.path)
    result = ws.run("sync")
    assert result.code == 1, result.err
    assert "proj/x" in result.out and "unchanged" in result.out
    assert "gone/x" in result.out and "error" in result.out
    warnings = [line for line in result.err.splitlines() if not line.startswith("fetching ")]
    assert len(warnings) == 1 and warnings[0].startswith("upstream gone is unreachable: ")
    assert "Traceback" not in result.err


def test_sync_of_only_the_unreachable_upstream_stays_one_line_exit_2(
        two: tuple[Workspace, Repo, Repo]) -> None:
    """Nothing could be reached at all: the run's one error line, as before."""
    ws, _, other = two
    shutil.rmtree(other.path)
    before = snapshot(ws.root)
    result = ws.run("sync", "gone")
    assert result.code == 2, result.err
    errors = [line for line in result.err.splitlines() if line.startswith("contrib: error: ")]
    assert len(errors) == 1 and "upstream gone: fetch from" in errors[0]
    assert snapshot(ws.root) == before
