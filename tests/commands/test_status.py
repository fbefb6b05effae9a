"""`contrib status`: base, tip, commits behind, sync/validation/PR columns."""

from __future__ import annotations

import json
from pathlib import Path

from contrib.record import RunKind
from contrib.validate.report import StageResult, host_facts
from contrib.validate.testrun import Gpu
from contrib.workspace.model import Workspace as ContribWorkspace
from testing.gitutil import Repo
from testing.recordutil import PASSING, run_of, write_bound
from testing.workspace import Workspace, make_patch


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
    assert row["sync"] is None and row["pr"] is None
    assert row["validation"]["validated"] is False and "no validation.json" in row["validation"]["reason"]
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
    # A hand-written verdict is not a record: "not validated", never "failed" or "passed".
    (version / "validation.json").write_text(json.dumps({"overall": "passed", "arch": "sm_120a"}))
    row = workspace.run("status", "--json", "--no-fetch").json["patchsets"][0]  # type: ignore[index]
    assert row["validation"]["validated"] is False and "$.schema: missing" in row["validation"]["reason"]
    meta = workspace.root / "patchsets" / "proj" / "x" / "patchset.toml"
    meta.write_text(meta.read_text() + "\n[pr]\nnumber = 7\nstate = \"open\"\nurl = \"u\"\n")
    gpu = {**host_facts([Gpu("NVIDIA H200", "9.0")] * 2), "hostname": "h200-box", "nvcc": None}
    failed = [*PASSING[:5], StageResult("tests", "failed", "1 failed")]
    write_bound(ContribWorkspace(workspace.root).patchset("proj/x").current,
                run_of(PASSING), run_of(failed, arch="sm_90a", host=gpu, kind=RunKind.REGRESSION))
    row = workspace.run("status", "--json", "--no-fetch").json["patchsets"][0]  # type: ignore[index]
    assert row["validation"]["summary"] == "sm_120a: passed; sm_90a: failed (failed: tests)"
    assert [r["host"] for r in row["validation"]["runs"]][1] == "h200-box, 2x NVIDIA H200 (sm 9.0)"
    assert row["pr"] == {"number": 7, "state": "open", "url": "u"}
    human = workspace.run("status", "--no-fetch").out
    assert "#7 open" in human


def test_status_unknown_target_and_no_workspace(workspace: Workspace, tmp_path: Path) -> None:
    result = workspace.run("status", "other/x")
    assert result.code == 2 and "unknown target 'other/x'" in result.err
    result = workspace.run("status", "proj/missing")
    assert result.code == 2 and "no patchset 'missing'" in result.err
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    from testing.workspace import run_contrib

    result = run_contrib("status", cwd=elsewhere)
    assert result.code == 2 and "no contrib.toml" in result.err
    result = run_contrib("status", "--json", cwd=elsewhere)
    assert json.loads(result.out)["exit_code"] == 2


def test_no_fetch_never_clones_and_says_the_cache_is_empty(workspace: Workspace, upstream: Repo,
                                                           tmp_path: Path) -> None:
    _new(workspace, upstream, tmp_path)
    from contrib.git.cache import Mirror

    mirror = Mirror(ContribWorkspace.find(workspace.root).config.upstream("proj"))
    import shutil

    shutil.rmtree(mirror.path)
    result = workspace.run("status", "--no-fetch", "--json")
    assert result.code == 1 and "the cache is empty" in result.err
    assert not mirror.path.exists()
    assert result.json["patchsets"][0]["tip"] is None  # type: ignore[index]


def test_dash_c_after_the_command_and_a_missing_one(workspace: Workspace, tmp_path: Path) -> None:
    from testing.workspace import run_contrib

    assert run_contrib("status", "--no-fetch", "-C", str(workspace.root), cwd=tmp_path).code == 0
    missing = run_contrib("status", "-C", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert missing.code == 2 and "does not exist" in missing.err
