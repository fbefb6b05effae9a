"""The ``others`` stage: a patch for SM12x leaves the archs the upstream ships as they were.

The mini upstream's ``gen_trtllm_comm_module`` builds ``csrc/trtllm_allreduce.cu``
for majors 9 and 10; its header guards the lamport kernel with
``__CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200``.  Dropping the ``< 1200`` leaves
``compute_90a`` and ``compute_100a`` identical; raising the lower bound to 1000
empties the kernel on sm_90a, which the stage names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.analysis.ptx import find_nvcc
from contrib.analysis.tree import DictTree
from contrib.arch import parse_arch
from contrib.validate.report import StageResult
from contrib.validate.stages import Inputs, run_pipeline
from contrib.workspace.validation import Settings, Waiver
from testing import miniupstream as mu
from testing.gitutil import Repo, git

SM120 = parse_arch("sm_120a")
NVCC = pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
WRONG = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000))"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRIB_CACHE", str(tmp_path / "cache"))


def _others(tmp_path: Path, before: dict[str, str], after: dict[str, str],
            settings: Settings | None = None, work: str = "work") -> StageResult:
    repo = Repo(tmp_path / f"repo-{work}")
    base = repo.commit("base", before)
    repo.commit("patched", {**{p: None for p in before if p not in after}, **after})
    diff = git(repo.path, "diff", base, "HEAD") + "\n"
    results = run_pipeline(Inputs(SM120, DictTree(before), DictTree(after), diff, "applied",
                                  settings or Settings(), workdir=tmp_path / work, gpus=None))
    return next(r for r in results if r.name == "others")


def _wrong() -> dict[str, str]:
    """The header's first guard (the lamport kernel's) raised to 1000: sm_90a loses its body."""
    files = mu.files("base")
    return {**files, mu.HEADER: files[mu.HEADER].replace(mu.OLD_GUARD, WRONG, 1)}


@NVCC
@pytest.mark.slow
def test_dropping_the_1200_bound_leaves_sm90_and_sm100_identical_and_a_repeat_compiles_nothing(
        tmp_path: Path) -> None:
    done = _others(tmp_path, mu.files("base"), mu.files("full-fix"))
    assert done.status == "passed", done.reason
    assert done.reason == ("unchanged for sm_90a, sm_100a: 2 kernels identical on each (1 unit); "
                           "1 touched gate decides the 8 other archs (sm_70 to sm_110a) as before")
    details = done.details
    assert (details["archs"], details["identical"], details["differences"]) == \
        (["sm_90a", "sm_100a"], 4, [])
    assert details["computes"] == {"sm_90a": "compute_90a", "sm_100a": "compute_100a"}
    (unit,) = details["units"]
    assert unit["path"] == mu.SOURCE and unit["archs"] == ["sm_90a", "sm_100a"]
    assert "supported_major_versions=[9, 10]" in unit["arch_list"]  # the list before the patch
    assert details["gates"][0]["moved"] == []
    assert (details["compiled"], details["cached"]) == (4, 0)  # the header changed: both trees
    again = _others(tmp_path, mu.files("base"), mu.files("full-fix"), work="again")
    assert (again.status, again.details["compiled"], again.details["cached"]) == ("passed", 0, 4)


@NVCC
@pytest.mark.slow
def test_a_wrong_edit_of_the_sm90_path_is_caught_and_its_kernel_named(tmp_path: Path) -> None:
    done = _others(tmp_path, mu.files("base"), _wrong())
    assert done.status == "failed"
    # no gate is touched: the arch list is the tree's JIT list for the unit
    assert "gen_trtllm_comm_module" in done.details["units"][0]["arch_list"]
    (moved,) = done.details["differences"]
    assert (moved["arch"], moved["name"], moved["how"], moved["kernel"]) == \
        ("sm_90a", "flashinfer::trtllm_allreduce::lamport_allreduce_kernel", "changed", True)
    assert moved["instructions_after"] < moved["instructions_before"]
    assert moved["removed"].get("st.global.f32") == 1 and moved["added"] == {}
    (finding,) = [f for f in done.findings if f.blocking]
    kernel_line = mu.line_of(mu.files("base")[mu.HEADER], "lamport_allreduce_kernel(")
    assert (finding.kind, finding.file, finding.line) == ("other-arch-changed", mu.HEADER, kernel_line)
    assert done.reason.startswith("changed elsewhere: sm_90a: kernel "
                                  "flashinfer::trtllm_allreduce::lamport_allreduce_kernel")
    assert done.reason.endswith("; unchanged for sm_100a")
    # a patch that means to change sm_90a says so in a waiver, and passes
    waiver = Waiver(mu.HEADER, "sm_90a gives up the lamport path", pattern="lamport_allreduce_kernel")
    waived = _others(tmp_path, mu.files("base"), _wrong(), Settings(waivers=[waiver]), work="w")
    assert waived.status == "passed" and waived.reason.endswith("(1 waived)")
    assert waived.details["compiled"] == 0  # every build came from the cache


GATE = '''import torch


def use_fast_path():
    major, _ = torch.cuda.get_device_capability()
    return major in (9, 10)
'''


def test_a_gate_edit_is_compared_on_every_other_arch_the_gate_decides(tmp_path: Path) -> None:
    before = {"pkg/fast.py": GATE}
    widened = _others(tmp_path, before, {"pkg/fast.py": GATE.replace("(9, 10)", "(9, 10, 12)")})
    assert widened.status == "passed", widened.reason
    assert widened.reason == "1 touched gate decides the 8 other archs (sm_70 to sm_110a) as before"
    dropped = _others(tmp_path, before, {"pkg/fast.py": GATE.replace("(9, 10)", "(10, 12)")},
                      work="dropped")
    assert dropped.status == "failed"
    (moved,) = dropped.details["gates"][0]["moved"]
    assert moved == {"arch": "sm_90a", "before": True, "after": False}
    (finding,) = dropped.findings
    assert (finding.kind, finding.location) == ("gate-changed-elsewhere", "pkg/fast.py:6")
    untouched = _others(tmp_path, before, {**before, "README.md": "docs\n"}, work="readme")
    assert untouched.status == "not-applicable"


@NVCC
def test_an_unset_variable_in_the_include_dirs_is_named_by_ptx_and_others_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTRIB_TEST_UNSET", raising=False)
    settings = Settings(ptx_include_dirs=["$CONTRIB_TEST_UNSET/include"])
    repo = Repo(tmp_path / "repo")
    base = repo.commit("base", mu.files("base"))
    repo.commit("patched", mu.files("full-fix"))
    diff = git(repo.path, "diff", base, "HEAD") + "\n"
    results = {r.name: r for r in run_pipeline(Inputs(
        SM120, DictTree(mu.files("base")), DictTree(mu.files("full-fix")), diff, "applied",
        settings, workdir=tmp_path / "work", gpus=None))}
    why = ("validation.ptx_include_dirs names $CONTRIB_TEST_UNSET/include, an environment "
           "variable that is not set here")
    assert (results["ptx"].status, results["ptx"].reason) == ("skipped", why)
    assert (results["others"].status, results["others"].reason) == ("skipped", why)
