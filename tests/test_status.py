"""`contrib status`: base, tip, commits behind, sync/validation/PR columns."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Workspace, make_patch
from tests.gitutil import Repo


def _new(workspace: Workspace, upstream: Repo, tmp_path: Path) -> str:
    base = upstream.head()
    patches = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x")
    assert workspace.run("new", "proj", "x", "--base", base, "--patch", str(patches[0])).code == 0
    return base


def test_status_before_and_after_upstream_moves(workspace: Workspace, upstream: Repo,
                                                tmp_path: Path) -> None:
    base = _new(workspace, upstream, tmp_path)
    first = workspace.run("status", "--json")
    assert first.code == 0, first.err
    row = first.json["patchsets"][0]  # type: ignore[index]
    assert row["patchset"] == "proj/x" and row["base"] == base
    assert row["tip"] == base and row["behind"] == 0
    assert row["sync"] is None and row["validation"] is None and row["pr"] is None
    for i in range(3):
        upstream.commit(f"upstream work {i}", {f"pkg/w{i}.py": f"W = {i}\n"})
    # --no-fetch: the cache has not seen the new commits yet.
    stale = workspace.run("status", "--no-fetch", "--json").json["patchsets"][0]  # type: ignore[index]
    assert stale["behind"] == 0
    fresh = workspace.run("status", "proj/x", "--json").json["patchsets"][0]  # type: ignore[index]
    assert fresh["tip"] == upstream.head() and fresh["behind"] == 3
    human = workspace.run("status", "--no-fetch")
    assert human.code == 0 and "proj/x" in human.out and base[:10] in human.out


def test_status_shows_validation_and_pr(workspace: Workspace, upstream: Repo,
                                        tmp_path: Path) -> None:
    base = _new(workspace, upstream, tmp_path)
    version = workspace.root / "patchsets" / "proj" / "x" / base
    (version / "validation.json").write_text(json.dumps({"overall": "failed", "arch": "sm_120a"}))
    meta = workspace.root / "patchsets" / "proj" / "x" / "patchset.toml"
    meta.write_text(meta.read_text() + "\n[pr]\nnumber = 7\nstate = \"open\"\nurl = \"u\"\n")
    row = workspace.run("status", "--json", "--no-fetch").json["patchsets"][0]  # type: ignore[index]
    assert row["validation"] == "failed (sm_120a)"
    assert row["pr"] == {"number": 7, "state": "open", "url": "u"}
    assert "#7 open" in workspace.run("status", "--no-fetch").out


def test_status_unknown_target_and_no_workspace(workspace: Workspace, tmp_path: Path) -> None:
    result = workspace.run("status", "other/x")
    assert result.code == 2 and "unknown target 'other/x'" in result.err
    result = workspace.run("status", "proj/missing")
    assert result.code == 2 and "no patchset 'missing'" in result.err
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    from tests.conftest import run_contrib

    result = run_contrib("status", cwd=elsewhere)
    assert result.code == 2 and "no contrib.toml" in result.err
    result = run_contrib("status", "--json", cwd=elsewhere)
    assert json.loads(result.out)["exit_code"] == 2
