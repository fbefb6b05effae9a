"""`contrib demo`: the whole story, offline, end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from contrib.record import read_record
from testing.gitutil import git
from testing.terminal import ESCAPE, ROOT, on_terminal, widest
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
    # the audit finds the one gate, and says its kernels are compiled out
    step1 = out.split("== 1.")[1].split("== 2.")[0]
    assert "$ contrib audit\n" in step1 and "needs-kernel-work" in step1
    assert "flashinfer/jit/comm.py:gen_trtllm_comm_module" in step1 and "1 gate, 1 turn sm_120a away" in step1
    # enable drafts the one-line patch, past the audit's refusal, and says what is next
    step2 = out.split("== 2.")[1].split("== 3.")[0]
    assert "drafted minifer/sm120-gate-only at " in step2
    assert "validation: failed (skipped: tests)" in step2
    assert "include/flashinfer/comm/trtllm_allreduce.cuh:12,24" in step2
    assert "patches in patchsets/minifer/sm120-gate-only/" in step2
    assert "next: fix what arch-guards, ptx name" in step2
    # validate fails the one-line fix and names the guard lines
    step3 = out.split("== 3.")[1].split("== 4.")[0]
    assert "FAILED" in step3
    assert "empty kernel lamport_allreduce_kernel on sm_120a" in step3
    assert "include/flashinfer/comm/trtllm_allreduce.cuh:11" in step3
    assert "cudaGridDependencySynchronize();` is compiled out on sm_120a" in step3
    # sync carried both patchsets across 30 upstream commits
    step5 = out.split("== 5.")[1].split("== 6.")[0]
    assert step5.count("rebased") == 2
    # the whole fix: every stage that runs here passes; the tests stage is skipped
    step6 = out.split("== 6.")[1].split("== 7.")[0]
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
    # the demo keeps its cache inside its folder, and says how to use it
    assert (target / "cache").is_dir()
    assert not cache.exists() or not any(cache.rglob("*.git"))
    assert out.rstrip().endswith("CONTRIB_CACHE=../cache python3 -m contrib status --no-fetch")


def test_the_demo_fits_80_columns_and_its_hint_works(short_tmp: Path) -> None:
    """On a terminal 80 columns wide, as a newcomer runs it: no line is wider, the audit
    and enable are shown, and the closing hint exits 0 when run as printed."""
    shown = on_terminal(short_tmp, 80, "demo", "d", codes=(0,))
    assert widest(shown) <= 80, shown
    plain = ESCAPE.sub("", shown)
    assert "$ contrib audit\n" in plain and "$ contrib enable minifer " in plain
    hint = plain.rsplit("Explore it yourself", 1)[1].splitlines()[1:]
    assert [line.split()[0] for line in hint] == ["cd", "CONTRIB_CACHE=../cache"]
    bin_dir = short_tmp / "bin"  # `python3` on PATH: this interpreter, as a user's would be
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    env.pop("CONTRIB_CACHE", None)
    ran = subprocess.run(["bash", "-c", "set -e\n" + "\n".join(hint)], cwd=short_tmp, env=env,
                         capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "minifer/sm120-trtllm-comm" in ran.stdout and "incomplete" in ran.stdout
    assert "?" not in ran.stdout.splitlines()[2]  # the tip is known: the demo's cache was found


def test_demo_never_writes_into_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("precious")
    result = run_contrib("demo", str(tmp_path))
    assert result.code == 2 and "not empty" in result.err
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
