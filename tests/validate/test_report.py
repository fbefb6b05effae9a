from __future__ import annotations

import json
from xml.etree import ElementTree

from contrib import __version__
from contrib.arch import parse_arch
from contrib.record import Record, record_json
from contrib.record.finding import Finding
from contrib.secrets import forget_secrets, register_secret
from contrib.validate.report import (
    StageResult,
    Validation,
    host_facts,
    junit_xml,
    render_table,
)
from contrib.validate.testrun import Gpu
from contrib.workspace.txn import atomic_write


def _validation() -> Validation:
    stages = [
        StageResult("apply", "passed", "1 patch applied"),
        StageResult("arch-guards", "failed", "1 error(s)", [
            Finding("empty-kernel", "error", "k.cuh", 12, "empty kernel k on sm_120a", "k.cuh:13"),
            Finding("dropped-statement", "error", "k.cuh", 30, "sync dropped", waived="no PDL"),
            Finding("arch-difference", "info", "k.cuh", 40, "alt"),
        ], 0.25),
        StageResult("ptx", "skipped", "nvcc not found"),
        StageResult("tests", "passed", "1 passed", details={
            "selected": ["tests/test_a.py"], "counts": {"passed": 1, "failed": 0},
            "cases": [{"name": "tests.test_a::test_x", "status": "passed", "message": "", "time": "0.1"},
                      {"name": "tests.test_a::test_y", "status": "skipped", "message": "no GPU", "time": "0"}]}),
    ]
    host = host_facts(gpus=[Gpu("NVIDIA RTX PRO 6000", "12.0")])
    return Validation(
        "flashinfer", "sm120", "a" * 40, parse_arch("sm_120a"), stages, host, applied="b" * 40
    )


def _json(validation: Validation) -> dict:
    record = Record("flashinfer", "sm120", "a" * 40, "sha256:" + "0" * 64, (validation.run(),))
    return json.loads(record_json(record))


def test_validation_json_content():
    validation = _validation()
    record = _json(validation)
    (data,) = record["runs"]
    assert data["contrib_version"] == __version__
    assert record["base"] == "a" * 40 and data["applied"] == "b" * 40
    assert (data["arch"], data["cuda_arch"], data["compute"]) == ("sm_120a", 1200, "compute_120a")
    assert validation.verdict == "failed" and validation.skipped == ["ptx"]
    assert data["host"]["gpus"] == [{"name": "NVIDIA RTX PRO 6000", "compute_capability": "12.0"}]
    guards = data["stages"][1]
    assert guards["counts"] == {"errors": 1, "waived": 1, "info": 1}
    assert (
        guards["findings"][0]["location"] == "k.cuh:12"
        and guards["findings"][0]["guard"] == "k.cuh:13"
    )
    assert guards["findings"][1]["waived"] == "no PDL"
    tests = data["stages"][3]
    assert tests["details"]["selected"] == ["tests/test_a.py"] and tests["counts"] == {"tests_passed": 1}


def test_verdict_passes_only_without_failed_stages():
    validation = _validation()
    validation.stages[1].status = "passed"
    assert validation.verdict == "incomplete"  # ptx was skipped: not "passed"
    assert validation.skipped == ["ptx"]
    validation.stages[2].status = "not-applicable"
    assert validation.verdict == "passed"


def test_junit_has_a_case_per_stage_and_upstream_test():
    root = ElementTree.fromstring(junit_xml(_validation()).split("?>", 1)[1])
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "apply",
        "arch-guards",
        "ptx",
        "tests",
        "tests.test_a::test_x",
        "tests.test_a::test_y",
    ]
    assert (
        suite.get("tests") == "6" and suite.get("failures") == "1" and suite.get("skipped") == "2"
    )
    failure = cases[1].find("failure")
    assert failure is not None and "k.cuh:12" in failure.text
    assert cases[2].find("skipped").get("message") == "nvcc not found"


def test_render_table_and_scrubbing(tmp_path):
    validation = _validation()
    table = render_table(validation)
    assert "FAILED" in table and "arch-guards  failed" in table
    assert "k.cuh:12: error: empty kernel k on sm_120a" in table
    assert "waived (no PDL)" in table
    assert "alt" not in table  # info stays in the JSON, out of the summary
    register_secret("ghp_supersecret123")
    try:
        validation.stages[0].reason = "pushed with ghp_supersecret123"
        assert "ghp_supersecret123" not in json.dumps(_json(validation))
        assert "ghp_supersecret123" not in junit_xml(validation)
    finally:
        forget_secrets()


def test_validation_json_is_written_atomically(tmp_path):
    # validate writes validation.json through the one atomic writer (contrib.workspace.txn).
    target = tmp_path / "v" / "validation.json"
    atomic_write(target, "{}\n")
    atomic_write(target, '{"a": 1}\n')
    assert target.read_text() == '{"a": 1}\n'
    assert [p.name for p in target.parent.iterdir()] == ["validation.json"]
