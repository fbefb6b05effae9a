"""The patchsets this repository ships are well-formed (checked offline).

Applying them needs the real upstreams (network); what can be checked here is
that the workspace loads, every series names real `git format-patch` files whose
paths stay inside the repository, the recorded validation is bound (by its
digest) to the current version with every required stage passed, and the
cross-project requirement is declared.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.carry.series import parse_hunks, split_mail
from contrib.git.repo import Git
from contrib.record import version_standing
from contrib.validate.requires import requirements
from contrib.workspace.model import Workspace

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def shipped() -> Workspace:
    return Workspace(ROOT)


def test_workspace_lists_both_patchsets(shipped: Workspace) -> None:
    assert [ps.target for ps in shipped.patchsets()] == [
        "flashinfer/sm120-trtllm-comm@release-v0.6.16", "flashinfer/sm120-trtllm-comm@main",
        "sglang/sm120-allreduce-fusion"]
    assert shipped.patchset("flashinfer/sm120-trtllm-comm").branch == "release-v0.6.16"
    assert shipped.config.upstreams["flashinfer"].github == "flashinfer-ai/flashinfer"
    assert shipped.config.upstreams["sglang"].github == "sgl-project/sglang"


def test_series_are_real_patches(shipped: Workspace, tmp_path: Path) -> None:
    git = Git.init(tmp_path / "scratch", bare=True)
    touched: dict[str, set[str]] = {}
    for ps in (p for p in shipped.patchsets() if p.primary):
        version = ps.current
        assert len(version.base) == 40
        for name, raw in version.patch_texts():
            mail = split_mail(git, name, raw)
            assert mail.author.email == "contrib@example.invalid"
            touched.setdefault(ps.target, set()).update(h.path for h in parse_hunks(mail.diff))
    assert touched["flashinfer/sm120-trtllm-comm@release-v0.6.16"] == {
        "include/flashinfer/comm/trtllm_allreduce.cuh", "csrc/trtllm_allreduce.cu",
        "flashinfer/jit/comm.py", "tests/comm/test_trtllm_allreduce_lamport.py"}
    assert touched["sglang/sm120-allreduce-fusion"] == {
        "python/sglang/srt/layers/communicator.py",
        "python/sglang/srt/layers/flashinfer_comm_fusion.py"}


def test_flashinfer_backport_drops_every_upper_bound(shipped: Workspace, tmp_path: Path) -> None:
    git = Git.init(tmp_path / "scratch", bare=True)
    ps = shipped.patchset("flashinfer/sm120-trtllm-comm")
    hunks = [h for name, raw in ps.current.patch_texts()
             for h in parse_hunks(split_mail(git, name, raw).diff)]
    removed = [line for h in hunks for line in h.removed if "__CUDA_ARCH__ < 1200" in line]
    assert len(removed) == 13
    assert not any("1200" in line for h in hunks for line in h.added)
    gate = [h for h in hunks if h.path == "flashinfer/jit/comm.py"]
    assert gate and "supported_major_versions=[9, 10, 12]" in "".join(gate[0].added)


def test_recorded_validation_is_bound_to_the_current_version(shipped: Workspace) -> None:
    """Each shipped record is schema 2, and its digest matches the version as shipped."""
    for ps in (p for p in shipped.patchsets() if p.primary):
        standing = version_standing(ps.current)
        assert standing.bound, (ps.target, standing.reason)
        verdict = standing.for_arch("sm_120a")
        assert verdict is not None and verdict.unmet == (), ps.target
        # what ran here is said as it is: no GPU ran the tests, so "incomplete", not "passed"
        assert verdict.verdict in ("passed", "incomplete") and not verdict.failed
        if verdict.verdict == "incomplete":
            assert set(verdict.skipped) <= {"tests", "bench"} and "tests" in verdict.skipped
        assert verdict.stages["apply"] == verdict.stages["gates"] == "passed"
    fi = version_standing(shipped.patchset("flashinfer/sm120-trtllm-comm").current)
    assert fi.for_arch("sm_120a").stages["arch-guards"] == "passed"  # type: ignore[union-attr]
    assert fi.for_arch("sm_120a").stages["ptx"] == "passed"  # type: ignore[union-attr]
    sg = version_standing(shipped.patchset("sglang/sm120-allreduce-fusion").current)
    assert sg.for_arch("sm_120a").stages["requires"] == "passed"  # type: ignore[union-attr]


def test_sglang_requires_flashinfer_fix(shipped: Workspace) -> None:
    [req] = requirements(shipped.patchset("sglang/sm120-allreduce-fusion"))
    assert req.upstream == "flashinfer"
    assert req.commit.startswith("2deed6c15")
    assert req.patchset == "flashinfer/sm120-trtllm-comm"
    assert (req.pin_file, req.pin_package) == ("python/pyproject.toml", "flashinfer_python")


def test_the_backport_lives_on_its_release_line_and_landed_on_main(shipped: Workspace) -> None:
    """Carried to release-v0.6.16's tip (0.6.16.post4); on main #3903 landed patches 1-3."""
    release, main = shipped.patchsets(["flashinfer/sm120-trtllm-comm"])
    assert release.branch == "release-v0.6.16" and release.current.base.startswith("79b8ad8058")
    assert main.branch == "main" and main.sync is not None
    assert str(main.sync.result) == "partially-upstreamed"
    landed = {u.sha for u in main.sync.details.upstreamed}
    assert landed == {"2deed6c15e8c8410763d6e8adedc8ca69597e957"}
    assert main.current.series() == ["0001-tests-drive-trtllm_custom_all_reduce-s-lamport-one-s.patch"]
    assert not version_standing(main.current).bound  # left for a person: see main_target
    assert "main_target" in release.info.decisions
