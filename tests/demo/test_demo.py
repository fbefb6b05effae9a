"""`contrib demo`: the whole story, offline, end to end."""

from __future__ import annotations

import time
from pathlib import Path

from contrib.record import read_record
from testing.gitutil import git
from testing.workspace import run_contrib


def test_demo_tells_the_whole_story(tmp_path: Path, isolated: Path) -> None:
    target = tmp_path / "demo"
    cache = isolated / "contrib-cache"
    started = time.monotonic()
    result = run_contrib("demo", str(target))
    elapsed = time.monotonic() - started
    assert result.code == 0, result.out + result.err
    assert elapsed < 60
    out = result.out
    steps = [line for line in out.splitlines() if line.startswith("== ")]
    assert len(steps) == 7
    # sync carried the gate-only patch across 30 upstream commits
    assert "rebased" in out.split("== 3.")[1].split("== 4.")[0]
    # validate fails the one-line fix and names the guard lines
    step4 = out.split("== 4.")[1].split("== 5.")[0]
    assert "FAILED" in step4
    assert "empty kernel lamport_allreduce_kernel on sm_120a" in step4
    assert "include/flashinfer/comm/trtllm_allreduce.cuh:11" in step4
    assert "cudaGridDependencySynchronize();` is compiled out on sm_120a" in step4
    # the whole fix passes
    step6 = out.split("== 6.")[1].split("== 7.")[0]
    # every stage passes; without a GPU the tests stage is skipped and the verdict says so
    assert "PASSED" in step6 or "INCOMPLETE (skipped: tests)" in step6
    assert "arch-guards  passed" in step6
    # open-pr is a dry run: a body with the marker, nothing pushed
    step7 = out.split("== 7.")[1]
    assert "<!-- contrib:patchset=minifer/sm120-trtllm-comm version=" in step7
    assert git(target / "fork.git", "for-each-ref") == ""
    ws = target / "workspace"
    gate_only = next((ws / "patchsets" / "minifer" / "sm120-gate-only").glob("*/validation.json"))
    record = read_record(gate_only)
    assert record is not None and record.runs[0].stage("arch-guards").status == "failed"
    # the demo keeps its cache inside its folder
    assert (target / "cache").is_dir()
    assert not cache.exists() or not any(cache.rglob("*.git"))


def test_demo_never_writes_into_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("precious")
    result = run_contrib("demo", str(tmp_path))
    assert result.code == 2 and "not empty" in result.err
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
