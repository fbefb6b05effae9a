"""`contrib validate` end to end: real git upstream, workspace, CLI, validation.json."""

from __future__ import annotations

import json
import os
from pathlib import Path
from xml.etree import ElementTree

import pytest

from testing import miniupstream as mu
from testing.workspace import Workspace


def _stages(doc: dict) -> dict[str, dict]:
    run = doc.get("run", doc)
    return {s["name"]: s for s in run["stages"]}


def test_gate_only_patch_fails_naming_the_guards(fi: Workspace, tmp_path: Path) -> None:
    ps_dir = mu.new_variant(fi, tmp_path, "gate-only", "gate-only")
    junit = tmp_path / "out" / "junit.xml"
    result = fi.run(
        "validate", "flashinfer/gate-only", "--arch", "sm_120a", "--json", "--junit", str(junit)
    )
    assert result.code == 1, result.err
    doc = result.json
    assert doc["verdict"] == "failed"
    (validation,) = doc["validations"]
    stages = _stages(validation)
    assert list(stages) == [
        "apply",
        "syntax",
        "gates",
        "arch-guards",
        "ptx",
        "others",
        "tests",
        "bench",
        "requires",
    ]
    assert stages["apply"]["status"] == "passed"
    assert stages["gates"]["details"]["gates"][0]["majors_after"] == [9, 10, 12]
    header = mu.files("gate-only")[mu.HEADER]
    errors = {f["location"] for f in stages["arch-guards"]["findings"] if f["severity"] == "error"}
    assert errors == {
        f"{mu.HEADER}:{mu.line_of(header, 'lamport_allreduce_kernel(')}",
        f"{mu.HEADER}:{mu.line_of(header, 'cudaGridDependencySynchronize')}",
    }
    assert stages["tests"]["status"] in ("skipped", "failed")  # never passed without a GPU
    if stages["tests"]["status"] == "skipped":
        assert stages["tests"]["details"]["selected"] == [
            "tests/jit/test_comm_jit.py",
            "tests/comm/test_trtllm_allreduce.py",
        ]
    # validation.json is written in the version folder and holds the same document.
    base = fi.upstreams["flashinfer"].head()
    stored = json.loads((ps_dir / base / "validation.json").read_text())
    assert stored["schema"] == 2 and stored["base"] == base and stored["digest"] == validation["digest"]
    (run,) = stored["runs"]
    assert run == validation["run"] and run["arch"] == "sm_120a" and run["kind"] == "target"
    assert run["applied"] and run["applied"] != base
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert [c.get("name") for c in suite.findall("testcase")][:9] == list(stages)
    # The cache stays a bare mirror: no checkout or worktree was left behind.
    status = fi.run("status", "--no-fetch", "--json")
    assert status.json["patchsets"][0]["validation"]["summary"].startswith("sm_120a: failed")


def test_whole_fix_passes_and_a_waiver_shows(fi: Workspace, tmp_path: Path) -> None:
    mu.new_variant(fi, tmp_path, "whole", "full-fix")
    result = fi.run("validate", "flashinfer/whole", "--json")
    assert result.code == 0, result.out
    stages = _stages(result.json["validations"][0])
    assert stages["arch-guards"]["status"] == "passed"
    assert all(s["status"] in ("passed", "skipped", "not-applicable") for s in stages.values())

    ps_dir = mu.new_variant(fi, tmp_path, "waived", "gate-only")
    header = mu.files("gate-only")[mu.HEADER]
    meta = ps_dir / "patchset.toml"
    meta.write_text(
        meta.read_text()
        + (
            f'\n[[waivers]]\nfile = "{mu.HEADER}"\nline = {mu.line_of(header, "lamport_allreduce_kernel(")}\n'
            'reason = "lamport path never launched on SM120"\n'
            f'\n[[waivers]]\nfile = "{mu.HEADER}"\npattern = "cudaGridDependencySynchronize"\n'
            'reason = "PDL is disabled on SM120"\n'
        )
    )
    result = fi.run("validate", "flashinfer/waived")
    assert result.code == 0, result.out
    assert "waived (lamport path never launched on SM120)" in result.out
    assert "waived (PDL is disabled on SM120)" in result.out


def test_bad_arch_and_apply_failure(fi: Workspace, tmp_path: Path) -> None:
    ps_dir = mu.new_variant(fi, tmp_path, "gate-only", "gate-only")
    bad = fi.run("validate", "--arch", "sm_999")
    assert bad.code == 2 and "sm_999" in bad.err
    base = fi.upstreams["flashinfer"].head()
    patch = next((ps_dir / base).glob("0001-*.patch"))
    patch.write_text(
        patch.read_text().replace("     return gen_jit_spec(", "     return other_spec(")
    )
    result = fi.run("validate", "flashinfer/gate-only", "--json")
    assert result.code == 1
    stages = result.json["validations"][0]["run"]["stages"]
    assert stages[0]["status"] == "failed" and "does not apply" in stages[0]["reason"]
    assert all(s["status"] == "skipped" and "apply failed" in s["reason"] for s in stages[1:])


def test_a_90_gpu_here_adds_a_regression_run_to_the_run_file(
        fi: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi lists an H200 (9.0): the gate admitted major 9 before, so the tests run there too."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(mu.SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    mu.new_variant(fi, tmp_path, "whole", "full-fix")
    out = tmp_path / "runs" / "h200.json"
    result = fi.run("validate", "flashinfer/whole", "--out", str(out), "--json")
    assert result.code == 0, result.out
    runs = json.loads(out.read_text())["runs"]
    assert [(r["kind"], r["arch"], r["compute"]) for r in runs] == [
        ("target", "sm_120a", "compute_120a"), ("regression", "sm_90a", "compute_90a")]
    assert [g["name"] for g in runs[1]["host"]["gpus"]] == ["NVIDIA H200"]
    tests = {s["name"]: s for s in runs[1]["stages"]}["tests"]
    assert tests["counts"]["tests_passed"] == 2
    assert tests["details"]["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    # the mini upstream's tests are pure Python: the un-guarded kernels never ran
    assert tests["status"] == "skipped" and "could not see whether the tests launched" in tests["reason"]
    assert len(result.json["validations"][0]["regression_runs"]) == 1


def test_a_weaker_run_keeps_the_stronger_one_loudly_and_drop_removes_a_run(
        fi: Workspace, tmp_path: Path) -> None:
    ps_dir = mu.new_variant(fi, tmp_path, "whole", "full-fix")
    assert fi.run("validate", "flashinfer/whole").code == 0
    record_path = next(ps_dir.glob("*/validation.json"))
    record = json.loads(record_path.read_text())
    # as if an earlier run on a machine with the right GPU had run the tests
    (stronger,) = record["runs"]
    stronger["id"] = "run-" + "a" * 16
    tests = next(s for s in stronger["stages"] if s["name"] == "tests")
    tests.update(status="passed", reason="3 passed")
    record_path.write_text(json.dumps(record))
    again = fi.run("validate", "flashinfer/whole", "--json")
    assert again.code == 0, again.err
    assert f"kept run {stronger['id']}" in again.err and "tests passed there, skipped now" in again.err
    ids = [r["id"] for r in json.loads(record_path.read_text())["runs"]]
    assert ids[0] == stronger["id"] and len(ids) == 2  # same hostname, and still not replaced
    assert again.json["validations"][0]["kept_stronger_runs"]
    unknown = fi.run("validate", "flashinfer/whole", "--drop", "run-bbbbbbbbbbbb")
    assert unknown.code == 2 and "no such run" in unknown.err
    assert fi.run("validate", "flashinfer/whole", "--drop", "run-aaaa").code == 2  # too short
    dropped = fi.run("validate", "flashinfer/whole", "--drop", stronger["id"])
    assert dropped.code == 0, dropped.err
    assert [r["id"] for r in json.loads(record_path.read_text())["runs"]] == ids[1:]
