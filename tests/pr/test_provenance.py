"""What a PR says of its numbers and its provenance: the figures with where they were
measured, "no figure was measured" for a kernel path without them, the sign-off an
upstream's guide asks for, and commits without contrib's DEP-3 bookkeeping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contrib.pr.body import BodyInput, CommitLine, render_body
from contrib.record import Record, Standing, arch_verdicts
from contrib.validate.report import StageResult, host_facts
from contrib.validate.testrun import Gpu
from contrib.workspace.validation import Settings
from testing.fake_github import FakeGitHub, fake_github_fixture  # noqa: F401
from testing.gitutil import Repo, git
from testing.pr_scene import TARGET, Scene
from testing.recordutil import run_of

DCO = "# Contributing\n\nAll commits must be signed off (`git commit -s`), per the DCO.\n"
H200 = {**host_facts([Gpu("NVIDIA H200", "9.0")] * 2), "hostname": "box",
        "nvcc": "release 13.0, V13.0.88", "driver": "580.65.06"}
BASIC = [StageResult(n, "passed", f"{n} ok") for n in ("apply", "syntax", "gates")]


def _body(stages: list[StageResult], kernel: tuple[str, ...] = (), host: Any = None) -> str:
    run = run_of(stages, host=host or H200).run()
    record = Record("proj", "sm120", "a" * 40, "sha256:" + "0" * 64, (run,))
    standing = Standing(record, "", tuple(arch_verdicts(record.runs, Settings().required())))
    return render_body(BodyInput(TARGET, "a" * 40, "main", "Fix it.",
                                 [CommitLine("b" * 40, "0001-x.patch", "Fix", "Dev")], standing,
                                 kernel=kernel))


def test_a_kernel_path_without_a_figure_says_none_was_measured() -> None:
    body = _body(BASIC, kernel=("csrc/x.cu", "include/x.cuh"))
    assert ("**Performance:** no figure was measured (the record has no bench stage); it "
            "changes `csrc/x.cu`, `include/x.cuh`.") in body
    skipped = StageResult("bench", "skipped", "no GPU of compute capability 12.0 (sm_120a) here")
    assert ("no figure was measured (bench skipped: no GPU of compute capability 12.0 "
            "(sm_120a) here)") in _body([*BASIC, skipped], kernel=("csrc/x.cu",))
    # a JIT module's gate: no CUDA source changed, but the ptx stage had units to build
    ptx = StageResult("ptx", "passed", "12 kernel entries in 1 unit for compute_120f")
    assert "no figure was measured (the record has no bench stage); its ptx stage found " \
           "CUDA units at stake." in _body([*BASIC, ptx])
    # Python only, nothing for the ptx stage: no line
    quiet = StageResult("ptx", "not-applicable", "no CUDA translation unit at stake")
    assert "**Performance:**" not in _body([*BASIC, quiet])


def test_figures_say_the_gpu_driver_and_cuda() -> None:
    figure = {"metric": "latency_us", "better": "lower", "base_median": 10.0,
              "patched_median": 9.0, "ratio": 0.9, "ci95": [0.85, 0.95], "verdict": "faster"}
    bench = StageResult("bench", "passed", "1 metric faster", details={
        "gpus": ["0: NVIDIA H200 (9.0)", "1: NVIDIA H200 (9.0)"], "metrics": [figure]})
    body = _body([*BASIC, bench], kernel=("csrc/x.cu",))
    assert "| sm_120a (target) | latency_us (lower is better) | 10 | 9 | 0.900 | 0.85 to 0.95 |" \
        in body
    assert ("- sm_120a (target): GPU 0: NVIDIA H200 (9.0), 1: NVIDIA H200 (9.0); driver "
            "580.65.06; CUDA: nvcc release 13.0, V13.0.88") in body
    assert "no figure was measured" not in body
    older = {k: v for k, v in H200.items() if k != "driver"}  # a record from before drivers
    assert "driver not recorded" in _body([*BASIC, bench], host=older)


@pytest.fixture
def dco_scene(tmp_path: Path, upstream: Repo, fake_github: FakeGitHub,
              monkeypatch: pytest.MonkeyPatch) -> Scene:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    upstream.commit("docs: contributing", {"CONTRIBUTING.md": DCO})
    return Scene(tmp_path, upstream, fake_github)


def test_the_pr_is_signed_off_where_asked_and_carries_no_bookkeeping(dco_scene: Scene) -> None:
    patch = next(dco_scene.version_dir().glob("*.patch")).read_text()
    assert "\nOrigin: vendor, contrib patchset proj/sm120\nForwarded: no\n" in patch
    assert "\nSigned-off-by: Test User <test@example.com>\n---\n" in patch
    code, [res] = dco_scene.run()
    assert code == 0, res
    message = git(dco_scene.fork, "log", "-1", "--format=%B", "refs/heads/contrib/sm120")
    assert message == ("Admit SM120 in f3\n\nWiden the gate to sm_120.\n\n"
                       "Signed-off-by: Test User <test@example.com>")
    [pr] = dco_scene.prs()
    assert ("**Sign-off:** each commit carries `Signed-off-by:` (`Test User "
            "<test@example.com>`), as the upstream's `CONTRIBUTING.md` (line 3: git commit "
            "-s) asks.") in pr["body"]


def test_no_sign_off_where_the_guide_does_not_ask(tmp_path: Path, upstream: Repo,
                                                  fake_github: FakeGitHub,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.token)
    upstream.commit("docs: contributing", {"CONTRIBUTING.md": "# Contributing\n\nOpen a PR.\n"})
    scene = Scene(tmp_path, upstream, fake_github)
    assert "Signed-off-by" not in next(scene.version_dir().glob("*.patch")).read_text()
    code, [res] = scene.run()
    assert code == 0, res
    assert "Sign-off" not in scene.prs()[0]["body"]
