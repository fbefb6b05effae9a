from __future__ import annotations

import sys
from pathlib import Path

import pytest

from contrib.analysis.tree import DictTree
from contrib.arch import parse_arch
from contrib.errors import ConfigError
from contrib.validate.report import StageResult
from contrib.validate.stages import ORDER, STAGES, Inputs, Settings, run_pipeline
from contrib.validate.testrun import Gpu
from testing import miniupstream as mu
from testing.miniupstream import variant_diff

RTX = [Gpu("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0")]


def _run(
    tmp_path: Path, variant: str, settings: Settings | None = None, **kw
) -> dict[str, StageResult]:
    inputs = Inputs(
        arch=parse_arch("sm_120a"),
        before=DictTree(mu.files("base")),
        after=DictTree(mu.files(variant)),
        diff=variant_diff(tmp_path, variant),
        apply_reason="1 patch applied at base with no fuzz",
        settings=settings or Settings(),
        workdir=tmp_path / "work",
        **kw,
    )
    (tmp_path / "work").mkdir(exist_ok=True)
    results = run_pipeline(inputs)
    assert [r.name for r in results] == list(ORDER)
    return {r.name: r for r in results}


def test_gate_only_patch_fails_naming_the_guard_lines(tmp_path):
    header = mu.files("gate-only")[mu.HEADER]
    results = _run(tmp_path, "gate-only")
    assert results["apply"].status == "passed"
    assert results["syntax"].status == "passed"
    assert results["gates"].status == "passed"
    assert results["gates"].details["gates"][0]["majors_before"] == [9, 10]
    guards = results["arch-guards"]
    assert guards.status == "failed"
    kernel_line = mu.line_of(header, "lamport_allreduce_kernel(")
    sync_line = mu.line_of(header, "cudaGridDependencySynchronize")
    assert f"{mu.HEADER}:{kernel_line}" in guards.reason
    assert f"{mu.HEADER}:{sync_line}" in guards.reason
    assert guards.details["compared"] == ["sm_90a", "sm_100a"]
    assert guards.details["files"] == [
        mu.SOURCE,
        mu.HEADER,
        "include/flashinfer/comm/arch_utils.cuh",
    ]
    # Without a worktree the tests stage is skipped with the selected list; never passed.
    assert results["tests"].status == "skipped"
    assert results["tests"].details["selected"] == [
        "tests/jit/test_comm_jit.py",
        "tests/comm/test_trtllm_allreduce.py",
    ]
    assert results["requires"].status == "not-applicable"  # no [[requires]]: nothing to check


@pytest.mark.slow
def test_gate_only_ptx_stage_flags_the_empty_entry(tmp_path):
    results = _run(tmp_path, "gate-only")
    ptx = results["ptx"]
    if ptx.status == "skipped":
        assert "nvcc not found" in ptx.reason
        pytest.skip("nvcc not installed here")
    assert ptx.status == "failed"
    (finding,) = [f for f in ptx.findings if f.blocking]
    header = mu.files("gate-only")[mu.HEADER]
    assert finding.location == f"{mu.HEADER}:{mu.line_of(header, 'lamport_allreduce_kernel(')}"
    assert "lamport_allreduce_kernel" in finding.message and "ret;" in finding.message
    assert "1 of 1 PTX entries for compute_120a (csrc/trtllm_allreduce.cu)" in finding.message


def test_full_fix_passes_static_stages(tmp_path):
    results = _run(tmp_path, "full-fix")
    for name in ("apply", "syntax", "gates", "arch-guards"):
        assert results[name].status == "passed", (name, results[name].reason)
    assert results["ptx"].status in ("passed", "skipped")
    if results["ptx"].status == "passed":
        assert results["ptx"].details["entries"] == 2


def test_waivers_turn_the_failure_into_a_pass_that_shows_them(tmp_path):
    header = mu.files("gate-only")[mu.HEADER]
    meta = {"waivers": [
        {"file": mu.HEADER, "line": mu.line_of(header, "lamport_allreduce_kernel("), "reason": "lamport unused on SM120"},
        {"file": mu.HEADER, "pattern": "cudaGridDependencySynchronize", "reason": "no PDL on SM120"},
    ]}
    results = _run(tmp_path, "gate-only", Settings.from_meta(meta))
    guards = results["arch-guards"]
    assert guards.status == "passed" and "(2 waived)" in guards.reason
    assert {f.waived for f in guards.findings if f.severity == "error"} == {
        "lamport unused on SM120",
        "no PDL on SM120",
    }
    assert results["ptx"].status in ("passed", "skipped")  # the ptx finding is waived by line too


def test_failed_apply_skips_every_later_stage(tmp_path):
    inputs = Inputs(
        parse_arch("sm_120a"),
        DictTree(mu.files("base")),
        None,
        "",
        "0001-gate.patch: does not apply",
    )
    results = run_pipeline(inputs)
    assert results[0].status == "failed" and results[0].reason == "0001-gate.patch: does not apply"
    assert [r.status for r in results[1:]] == ["skipped"] * (len(ORDER) - 1)
    assert all("apply failed (0001-gate.patch: does not apply)" in r.reason for r in results[1:])


def test_patch_touching_no_gate_skips_gates_and_guards(tmp_path):
    inputs = Inputs(parse_arch("sm_120a"), DictTree({"README.md": "a\n"}), DictTree({"README.md": "b\n"}),
                    "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n",
                    "applied")
    results = {r.name: r for r in run_pipeline(inputs)}
    assert results["syntax"].status == "not-applicable"
    assert (
        results["gates"].status == "not-applicable"
        and "no architecture gate" in results["gates"].reason
    )
    assert results["arch-guards"].status == "not-applicable"
    assert results["ptx"].status == "not-applicable"
    assert not any(r.status == "passed" for n, r in results.items() if n != "apply")


def test_tests_stage_runs_in_a_worktree(tmp_path):
    tree = tmp_path / "checkout"
    mu.write(tree, "full-fix")
    results = _run(tmp_path, "full-fix", worktree=lambda: tree, python=sys.executable, gpus=RTX)
    tests = results["tests"]
    # The mini upstream's tests pass but launch no kernel: they prove nothing about the
    # kernels the patch un-guards, so the stage is not passed.
    assert tests.status == "skipped", tests.reason
    assert "could not see whether the tests launched 2 kernels the patch changes" in tests.reason
    assert tests.details["counts"]["passed"] == 2
    assert len(tests.details["cases"]) == 2
    assert tests.details["gpus"] == [f"0: {RTX[0].name} (12.0)"]


def test_tests_stage_passes_when_the_unlaunched_kernels_are_waived(tmp_path):
    tree = tmp_path / "checkout"
    mu.write(tree, "full-fix")
    waivers = Settings.from_meta({"waivers": [{"file": mu.HEADER, "pattern": "the tests say nothing about it",
                                               "reason": "exercised by the JIT build test only"}]})
    results = _run(tmp_path, "full-fix", waivers, worktree=lambda: tree, python=sys.executable, gpus=RTX)
    tests = results["tests"]
    assert tests.status == "passed", tests.reason
    assert [f.waived for f in tests.findings] == ["exercised by the JIT build test only"] * 2


def test_stage_table_is_the_one_order():
    assert tuple(stage.name for stage in STAGES) == ORDER
    assert all(callable(stage.run) for stage in STAGES)  # each name has its stage_NAME
    assert Settings().required() == ("apply", "syntax", "gates", "arch-guards", "ptx")
    assert Settings.from_meta({"validation": {"require": ["apply", "tests"]}}).required() == (
        "apply", "tests")


def test_settings_from_meta_and_errors():
    settings = Settings.from_meta({"validation": {"python": "/usr/bin/python3", "tests": ["tests/a.py"],
                                                  "compile": "nvcc -arch={compute} --ptx a.cu -o {out}/a.ptx",
                                                  "compare": [9, 10], "tests_need_gpu": False}})
    assert settings.python == "/usr/bin/python3" and settings.tests == ["tests/a.py"]
    assert settings.compile[:2] == ["nvcc", "-arch={compute}"] and settings.compare == [9, 10]
    assert not settings.tests_need_gpu
    for bad, needle in [
        ({"validation": {"tset": []}}, "unknown key 'tset' in [validation]"),
        ({"validation": {"tests": "a.py"}}, "validation.tests must be a list"),
        ({"validation": {"compare": ["9"]}}, "validation.compare"),
        ({"validation": {"test_limit": 0}}, "test_limit"),
        ({"validation": {"compile": "nvcc -o 'a.ptx"}}, "validation.compile cannot be split"),
        ({"validation": {"require": ["ptx", "lint"]}}, "validation.require names unknown stage 'lint'"),
        ({"validation": {"require": "ptx"}}, "validation.require must be a list"),
        ({"validation": {"compare": [True]}}, "validation.compare"),
        ({"waivers": [{"file": "a.cuh", "line": 3}]}, "waivers.reason is required"),
        ({"waivers": [{"file": "a.cuh", "reason": "x"}]}, "waivers.line or pattern is required"),
        ({"waivers": [{"file": "a.cuh", "reason": "x", "pattern": "("}]}, "waivers.pattern is not a regular expression"),
        ({"waivers": "a"}, "waivers must be [[waivers]] tables"),
    ]:
        with pytest.raises(ConfigError) as info:
            Settings.from_meta(bad)
        assert needle in str(info.value)
        assert info.value.exit_code == 2


def test_compile_command_from_patchset_toml(tmp_path):
    tree = tmp_path / "checkout"
    mu.write(tree, "gate-only")
    settings = Settings.from_meta({"validation": {
        "compile": f"{sys.executable} -c \"import pathlib,sys; pathlib.Path(sys.argv[1]).write_text("
                   f"'.visible .entry _Z3fooPi(\\n)\\n{{\\n\\tret;\\n}}\\n')\" {{out}}/foo.ptx"}})
    results = _run(tmp_path, "gate-only", settings, worktree=lambda: tree)
    ptx = results["ptx"]
    assert ptx.status == "failed" and "empty kernel foo on sm_120a" in ptx.reason
    assert "foo" in ptx.findings[0].message
