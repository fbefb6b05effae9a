"""GPU test runs: the target and regression runs on the GPUs here, and which kernels they reached."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from contrib.analysis.tree import DictTree, FsTree
from contrib.arch import parse_arch
from contrib.record import RunKind
from contrib.validate import gputests
from contrib.validate.gputests import GpuSlot, launched, plan_runs, split_runs, world_sizes
from contrib.validate.report import Validation
from contrib.validate.stages import Context, Inputs, stage_apply, stage_gates, stage_tests
from contrib.workspace.validation import Settings
from testing import miniupstream

SM120, SM90 = parse_arch("sm_120a"), parse_arch("sm_90a")
H200 = "NVIDIA H200"

# Answers like nvidia-smi: the columns the query asks for.
SMI = """#!/bin/sh
case "$1" in
  *index*) echo "0, NVIDIA H200, 9.0" ;;
  *) echo "NVIDIA H200, 9.0" ;;
esac
"""


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An nvidia-smi on PATH that lists one H200 (compute capability 9.0)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    return smi


# A test that reports one kernel launch the way contrib's probe does (its file per process).
LAUNCHES_ONESHOT = """\
import os


def test_launches_the_oneshot_kernel():
    folder = os.environ["CONTRIB_KERNEL_LOG"]
    with open(os.path.join(folder, "kernels-%d.txt" % os.getpid()), "w") as out:
        out.write("void flashinfer::oneshot_allreduce_kernel<float, 2>(float*)\\n")
"""


def _tests_stage(tmp_path: Path, extra_test: str | None = None,
                 helpers: Callable[[str], str] | None = None) -> object:
    """apply, gates and tests on the mini upstream's full fix (a real checkout).

    ``helpers`` rewrites the header in the base and the fix alike (say, a kernel calling
    a helper), and once more in a commit of the patch's own (a helper's change)."""
    root = tmp_path / "up"
    base = miniupstream.init_repo(root)
    header = root / miniupstream.HEADER
    if helpers is not None:
        header.write_text(helpers(header.read_text()))
        miniupstream.git(root, "commit", "-qam", "kernels call helpers")
        base = miniupstream.git(root, "rev-parse", "HEAD")
    miniupstream.commit_variant(root, "full-fix", "sm120: gate and guards")
    if helpers is not None:
        header.write_text(_changed_helpers(helpers(header.read_text())))
        miniupstream.git(root, "commit", "-qam", "helpers change")
    settings = Settings()
    if extra_test is not None:
        (root / "tests" / "test_probe.py").write_text(extra_test)
        miniupstream.git(root, "add", "-A")
        miniupstream.git(root, "commit", "-q", "-m", "a test that launches a kernel")
        settings = Settings(tests=["tests/test_probe.py"])
    diff = miniupstream.git(root, "diff", base, "HEAD") + "\n"
    inputs = Inputs(SM120, DictTree(miniupstream.files("base")), FsTree(root), diff, "applied",
                    settings=settings, workdir=tmp_path / "work", worktree=lambda: root,
                    python=sys.executable)
    ctx = Context(inputs, workdir=tmp_path / "work")
    (tmp_path / "work").mkdir()
    assert stage_apply(ctx).status == "passed" and stage_gates(ctx).status == "passed"
    return stage_tests(ctx)


def test_a_90_gpu_gets_a_regression_run_for_sm90a(tmp_path: Path, fake_smi: Path) -> None:
    result = _tests_stage(tmp_path)
    assert result.status == "skipped"  # type: ignore[attr-defined]
    assert result.reason.startswith("no GPU of compute capability 12.0 (sm_120a) here")  # type: ignore[attr-defined]
    assert "regression run on sm_90a" in result.reason  # type: ignore[attr-defined]
    validation = Validation("mini", "sm120", "0" * 40, SM120, [result], {"hostname": "box"})  # type: ignore[list-item]
    target, regression = split_runs(validation)
    assert gputests.REGRESSIONS not in target.stages[0].details
    assert (regression.kind, regression.arch.name) == (RunKind.REGRESSION, "sm_90a")
    run = regression.run()
    assert (run.kind, run.arch, run.compute) == (RunKind.REGRESSION, "sm_90a", "compute_90a")
    tests = run.stage("tests")
    assert tests is not None
    assert tests.details["gpus"] == [f"0: {H200} (9.0)"]
    assert tests.details["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert tests.counts["tests_passed"] == 2


def test_a_kernel_the_patch_unguards_that_no_test_launched_is_a_finding(tmp_path: Path, fake_smi: Path) -> None:
    result = _tests_stage(tmp_path, LAUNCHES_ONESHOT)
    regression = result.details[gputests.REGRESSIONS][0]  # type: ignore[attr-defined]
    assert regression.details["counts"]["passed"] == 3
    assert regression.details["launched_kernels"] == ["void flashinfer::oneshot_allreduce_kernel<float, 2>(float*)"]
    assert sorted(regression.details["changed_kernels"]) == ["lamport_allreduce_kernel", "oneshot_allreduce_kernel"]
    # the oneshot kernel ran; the lamport kernel, whose whole body the patch un-guards, did not
    (missing,) = regression.findings
    assert (missing.kind, missing.file) == ("kernel-not-launched", miniupstream.HEADER)
    assert "kernel lamport_allreduce_kernel, and no selected test launched it on sm_90a" in missing.message
    assert regression.status == "skipped"
    assert regression.reason.endswith("but no test launched 1 kernel the patch changes: lamport_allreduce_kernel")


def test_without_a_probe_nothing_shows_a_kernel_ran(tmp_path: Path, fake_smi: Path) -> None:
    result = _tests_stage(tmp_path)
    regression = result.details[gputests.REGRESSIONS][0]  # type: ignore[attr-defined]
    # The mini upstream's tests pass, but no process was profiled (no PyTorch here).
    assert regression.details["counts"]["passed"] == 2
    assert regression.details["launched_kernels"] is None
    assert regression.status == "skipped"
    assert "the kernel probe could not see whether the tests launched 2 kernels" in regression.reason
    assert all(f.kind == "kernel-not-launched" for f in regression.findings)


def test_launched_kernels_match_by_name_in_demangled_signatures() -> None:
    names = ["void flashinfer::trtllm_allreduce::oneShotAllReduceKernel<__half, 2, true, false>"
             "(flashinfer::trtllm_allreduce::AllReduceParams<__half>)", "ncclDevKernel_AllReduce"]
    assert launched("oneShotAllReduceKernel", names)
    assert not launched("oneShot", names) and not launched("twoShotAllReduceKernel", names)
    assert launched("ncclDevKernel_AllReduce", names)


def test_plans_runs_for_the_target_and_each_earlier_arch_present() -> None:
    slots = [GpuSlot(0, H200, "9.0"), GpuSlot(1, H200, "9.0"), GpuSlot(2, "RTX PRO 6000", "12.0")]
    runs = plan_runs(SM120, [SM90, parse_arch("sm_100a")], slots)
    assert [(r.kind, r.arch.name, r.visible) for r in runs] == [("target", "sm_120a", "2"),
                                                                 ("regression", "sm_90a", "0,1")]
    assert plan_runs(SM120, [SM90], None)[0].gpus == []


def test_multi_gpu_tests_say_when_there_are_too_few() -> None:
    tree = DictTree({"tests/a.py": '@pytest.mark.parametrize("world_size", [2, 4])\n',
                     "tests/b.py": "WORLD_SIZE = 2\n", "tests/c.py": "x = 1\n"})
    wanted = world_sizes(tree, ["tests/a.py", "tests/b.py::test_x", "tests/c.py"])
    assert wanted == {"tests/a.py": 4, "tests/b.py::test_x": 2}
    assert gputests.gpu_shortfall(wanted, 2) == ["tests/a.py asks for up to 4 GPUs, 2 here: those cases skip"]


def test_probe_records_kernels_written_by_every_process(tmp_path: Path) -> None:
    site, log = gputests.install_probe(tmp_path)
    assert "CONTRIB_KERNEL_LOG" in (site / "sitecustomize.py").read_text()
    (log / "kernels-1.txt").write_text("b_kernel\na_kernel\n")
    (log / "kernels-2.txt").write_text("a_kernel\n")
    assert gputests.launched_kernels(log) == ["a_kernel", "b_kernel"]


def test_a_run_whose_test_files_all_need_more_gpus_is_not_started() -> None:
    tree = DictTree({"tests/a.py": '@pytest.mark.parametrize("world_size", [2, 4])\n',
                     "tests/b.py": "WORLD_SIZE = 2\n", "tests/c.py": "x = 1\n"})
    one = gputests.PlannedRun("regression", SM90, [GpuSlot(0, H200, "9.0")])
    held = gputests.not_started(tree, ["tests/a.py", "tests/b.py::test_x"], one)
    assert held is not None and held.status == "skipped"
    assert held.reason.startswith("not started: every selected test file asks for more GPUs than "
                                  "the 1 of sm_90a here (tests/a.py (2), tests/b.py::test_x (2))")
    assert gputests.not_started(tree, ["tests/a.py", "tests/c.py"], one) is None  # c.py may run
    two = gputests.PlannedRun("regression", SM90, [GpuSlot(0, H200, "9.0"), GpuSlot(1, H200, "9.0")])
    assert gputests.not_started(tree, ["tests/a.py"], two) is None


_INDEX = "  int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"


def _calls_helpers(header: str) -> str:
    """The lamport kernel calls maybe_prefetch(), the oneshot kernel fence_peers()."""
    lamport, oneshot, rest = header.split(_INDEX)
    return f"{lamport}{_INDEX}  maybe_prefetch(in);\n{oneshot}{_INDEX}  fence_peers();\n{rest}"


def _changed_helpers(header: str) -> str:
    """maybe_prefetch, fence_peers and vector_width (which no kernel calls) change."""
    for old, new in [("prefetch.global.L2", "prefetch.global.L1"), ("  __threadfence();", "  __threadfence_block();"),
                     ("  return 8;", "  return 16;")]:
        assert old in header
        header = header.replace(old, new)
    return header


def test_a_changed_helper_counts_through_the_kernels_that_call_it(tmp_path: Path, fake_smi: Path) -> None:
    result = _tests_stage(tmp_path, LAUNCHES_ONESHOT, _calls_helpers)
    regression = result.details[gputests.REGRESSIONS][0]  # type: ignore[attr-defined]
    lines = {line.split(" (")[0]: line for line in regression.details["changed_helpers"]}
    assert lines["helper maybe_prefetch"].endswith("): called by lamport_allreduce_kernel")
    assert lines["helper fence_peers"].endswith("): called by oneshot_allreduce_kernel")
    assert lines["helper vector_width"].endswith("): no __global__ caller found in the tree")
    # the oneshot kernel ran, so fence_peers is covered; nothing launched maybe_prefetch's caller
    by_message = sorted(f.message.split(",")[0] for f in regression.findings)
    assert by_message == ["the patch changes helper maybe_prefetch", "the patch changes kernel lamport_allreduce_kernel"]
    assert regression.reason.endswith("but no test launched 2 kernels the patch changes: "
                                      "lamport_allreduce_kernel, a caller of helper maybe_prefetch")


def test_nvidia_smi_gives_the_gpus_and_their_driver(fake_smi: Path) -> None:
    from contrib.validate.testrun import probe_driver, probe_gpus

    fake_smi.write_text('#!/bin/sh\ncase "$1" in\n  *driver_version*) echo "580.65.06" ;;\n'
                        '  *) echo "NVIDIA H200, 9.0" ;;\nesac\n')
    gpus = probe_gpus()
    assert gpus is not None and [(g.name, g.capability) for g in gpus] == [(H200, "9.0")]
    assert probe_driver() == "580.65.06"
    fake_smi.write_text("#!/bin/sh\nexit 9\n")  # a failing nvidia-smi: no GPU, no driver
    assert probe_gpus() == [] and probe_driver() is None
