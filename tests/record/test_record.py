"""contrib.record: the schema, its one reader and writer, the digest and the verdict rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contrib.errors import ConfigError
from contrib.record import (
    OldFormat,
    Record,
    RunKind,
    StageStatus,
    Verdict,
    add_run,
    arch_verdicts,
    combine,
    digest,
    drop_runs,
    read_record,
    read_run_file,
    record_json,
    standing,
    superseded,
)
from contrib.validate.report import StageResult, host_facts
from contrib.validate.testrun import Gpu
from contrib.workspace.validation import Settings
from testing.recordutil import PASSING, run_of

BASE = "a" * 40
DIGEST = digest("proj", "x", BASE, ["0001-a.patch"], [b"patch bytes"], Settings().digest_view())
H200 = {**host_facts([Gpu("NVIDIA H200", "9.0")] * 2), "hostname": "h200", "nvcc": None}


def _with(stages: list[StageResult], name: str, status: str) -> list[StageResult]:
    return [StageResult(s.name, status, "changed") if s.name == name else s for s in stages]


def _record(*validations: Any) -> Record:
    record = Record("proj", "x", BASE, DIGEST)
    for validation in validations:
        record = add_run(record, validation.run(), supersede=False)
    return record


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "validation.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_writer_and_reader_round_trip(tmp_path: Path) -> None:
    record = _record(run_of(PASSING), run_of(PASSING, arch="sm_90a", host=H200,
                                              kind=RunKind.REGRESSION))
    path = _write(tmp_path, record_json(record))
    assert read_record(path) == record
    assert read_record(tmp_path / "absent.json") is None
    assert read_run_file(path) == record
    with pytest.raises(ConfigError, match="no such file"):
        read_run_file(tmp_path / "absent.json")


def test_digest_binds_names_base_series_bytes_and_settings() -> None:
    same = digest("proj", "x", BASE, ["0001-a.patch"], [b"patch bytes"], Settings().digest_view())
    assert same == DIGEST and DIGEST.startswith("sha256:") and len(DIGEST) == 71
    changed = [
        digest("proj", "y", BASE, ["0001-a.patch"], [b"patch bytes"], Settings().digest_view()),
        digest("other", "x", BASE, ["0001-a.patch"], [b"patch bytes"], Settings().digest_view()),
        digest("proj", "x", "b" * 40, ["0001-a.patch"], [b"patch bytes"], Settings().digest_view()),
        digest("proj", "x", BASE, ["0001-b.patch"], [b"patch bytes"], Settings().digest_view()),
        digest("proj", "x", BASE, ["0001-a.patch"], [b"patch bytez"], Settings().digest_view()),
        digest("proj", "x", BASE, ["0001-a.patch", "0002-b.patch"], [b"patch bytes", b""],
               Settings().digest_view()),
        digest("proj", "x", BASE, ["0001-a.patch"], [b"patch bytes"],
               Settings.from_meta({"validation": {"ptx_flags": ["-O0"]}}).digest_view()),
        digest("proj", "x", BASE, ["0001-a.patch"], [b"patch bytes"],
               Settings.from_meta({"waivers": [{"file": "a", "line": 1, "reason": "r"}]}).digest_view()),
    ]
    assert DIGEST not in changed and len(set(changed)) == len(changed)
    # `require` changes what open-pr needs, not what validation found
    assert digest("proj", "x", BASE, ["0001-a.patch"], [b"patch bytes"],
                  Settings.from_meta({"validation": {"require": ["apply"]}}).digest_view()) == DIGEST


@pytest.mark.parametrize(("edit", "path"), [
    (lambda d: d.update(schema="2"), "$.schema: expected 2"),
    (lambda d: d.pop("digest"), "$.digest: missing"),
    (lambda d: d.update(digest="md5:abc"), "$.digest: 'md5:abc' is not of the form"),
    (lambda d: d.update(base="abc"), "$.base: 'abc' is not of the form"),
    (lambda d: d.update(patchset="x\n"), "$.patchset: 'x\\n' is not of the form"),
    (lambda d: d.update(runs={}), "$.runs: expected a list, got an object"),
    (lambda d: d["runs"][0].update(kind="nightly"), "$.runs[0].kind: 'nightly' is not one of"),
    (lambda d: d["runs"][0].update(cuda_arch="1200"), "$.runs[0].cuda_arch: expected an integer"),
    (lambda d: d["runs"][0].update(arch=120), "$.runs[0].arch: expected a string, got an integer"),
    (lambda d: d["runs"][0]["host"].update(gpus=None), "$.runs[0].host.gpus: expected a list"),
    (lambda d: d["runs"][0]["host"].update(nvidia_smi="no"), "$.runs[0].host.nvidia_smi"),
    (lambda d: d["runs"][0]["stages"][1].update(status="ok"),
     "$.runs[0].stages[1].status: 'ok' is not one of passed, failed, skipped, not-applicable"),
    (lambda d: d["runs"][0]["stages"][0].update(duration_s=-1), "$.runs[0].stages[0].duration_s"),
    (lambda d: d["runs"][0]["stages"][0].update(counts={"errors": True}),
     "$.runs[0].stages[0].counts.errors: expected an integer"),
    (lambda d: d["runs"][0]["stages"][0].update(findings=[{"kind": "k"}]),
     "$.runs[0].stages[0].findings[0].severity: missing"),
    (lambda d: d["runs"].append(d["runs"][0]), "$.runs: two runs share one id"),
])
def test_every_field_is_checked_at_its_json_path(tmp_path: Path, edit: Any, path: str) -> None:
    data = json.loads(record_json(_record(run_of(PASSING))))
    edit(data)
    file = _write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        read_record(file)
    assert str(info.value).startswith(f"{file}: {path}"), str(info.value)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)
    # where a command only needs a verdict, the same problem is "not validated"
    seen = standing(file, "proj", "x", BASE, DIGEST, Settings().required())
    assert not seen.bound and path in seen.summary() and seen.summary().startswith("not validated")


@pytest.mark.parametrize("text", ["", "{", "[]", "null", '"passed"', '{"overall": "passed"}',
                                  '{"overall": "passed", "arch": "sm_120a", "stages": []}'])
def test_a_hand_written_or_broken_file_is_not_validated(tmp_path: Path, text: str) -> None:
    seen = standing(_write(tmp_path, text), "proj", "x", BASE, DIGEST, ())
    assert seen.record is None and seen.verdicts == () and "not validated" in seen.summary()


def test_a_schema_1_file_is_old_format(tmp_path: Path) -> None:
    old = {"schema": 1, "overall": "passed", "upstream_sha": BASE, "stages": []}
    with pytest.raises(OldFormat):
        read_record(_write(tmp_path, old))
    seen = standing(_write(tmp_path, old), "proj", "x", BASE, DIGEST, ())
    assert seen.summary() == "not validated (old format; re-run `contrib validate`)"


@pytest.mark.parametrize(("who", "why"), [
    (("other", "x", BASE, DIGEST), "foreign: recorded for proj/x"),
    (("proj", "y", BASE, DIGEST), "foreign: recorded for proj/x"),
    (("proj", "x", "b" * 40, DIGEST), "foreign: recorded for base aaaaaaaaaaaa"),
    (("proj", "x", BASE, "sha256:" + "0" * 64), "stale: the series, a patch or the "),
])
def test_a_record_for_something_else_is_not_validated(tmp_path: Path, who: tuple[str, ...],
                                                     why: str) -> None:
    path = _write(tmp_path, record_json(_record(run_of(PASSING))))
    seen = standing(path, *who, ())
    assert seen.record is None and why in seen.reason


def test_verdicts_passed_incomplete_failed(tmp_path: Path) -> None:
    require = Settings().required()
    [passed] = arch_verdicts(_record(run_of(PASSING)).runs, require)
    assert passed.verdict == Verdict.PASSED and passed.unmet == ()
    assert passed.line() == "sm_120a: passed"
    # a skipped ptx: incomplete, named on the line, and unmet (ptx is required by default)
    [ptx] = arch_verdicts(_record(run_of(_with(PASSING, "ptx", "skipped"))).runs, require)
    assert ptx.verdict == Verdict.INCOMPLETE and ptx.unmet == ("ptx",)
    assert ptx.line() == "sm_120a: incomplete (skipped: ptx)"
    # a skipped tests stage (not required by default): incomplete, nothing unmet
    [tests] = arch_verdicts(_record(run_of(_with(PASSING, "tests", "skipped"))).runs, require)
    assert tests.verdict == Verdict.INCOMPLETE and tests.unmet == ()
    # not-applicable is nothing to check: it neither fails nor makes the verdict incomplete
    [na] = arch_verdicts(_record(run_of(_with(PASSING, "ptx", "not-applicable"))).runs, require)
    assert na.verdict == Verdict.PASSED and na.unmet == ()
    [failed] = arch_verdicts(_record(run_of(_with(PASSING, "gates", "failed"))).runs, require)
    assert failed.verdict == Verdict.FAILED and failed.unmet == ("gates",)
    # a required stage no run has is unmet
    [missing] = arch_verdicts(_record(run_of(PASSING[:2])).runs, require)
    assert missing.unmet == ("gates", "arch-guards", "ptx")


def test_runs_of_one_arch_combine() -> None:
    S = StageStatus
    stages = {"a": [S.PASSED, S.SKIPPED], "b": [S.PASSED, S.FAILED], "c": [S.NOT_APPLICABLE] * 2,
              "d": [S.NOT_APPLICABLE, S.SKIPPED], "e": [S.SKIPPED, S.SKIPPED]}
    runs = [run_of([StageResult(n, v[i], "") for n, v in stages.items()], started=f"t{i}").run()
            for i in (0, 1)]
    assert combine(runs) == {"a": S.PASSED, "b": S.FAILED, "c": S.NOT_APPLICABLE,
                             "d": S.SKIPPED, "e": S.SKIPPED}


def test_two_hosts_kept_and_a_failed_run_fails_the_arch() -> None:
    here = run_of(_with(PASSING, "tests", "skipped"))
    there = run_of(PASSING, host={**H200, "hostname": "b200"})
    record = _record(here, there)
    [both] = arch_verdicts(record.runs, Settings().required())
    assert both.verdict == Verdict.PASSED and len(both.runs) == 2  # b200 ran the tests
    conflicting = run_of(_with(PASSING, "tests", "failed"), host={**H200, "hostname": "c"})
    [worse] = arch_verdicts(add_run(record, conflicting.run(), supersede=False).runs, ())
    assert worse.verdict == Verdict.FAILED and worse.failed == ["tests"]


def test_add_run_is_idempotent_and_replaces_runs_of_the_same_arch_and_kind_it_knows_as_much_as() -> None:
    first = run_of(PASSING, started="2026-11-30T09:00:00+00:00")
    record = _record(first, run_of(PASSING, host=H200), run_of(PASSING, arch="sm_90a"))
    assert add_run(record, first.run(), supersede=False) is record
    again = run_of(_with(PASSING, "ptx", "failed"), started="2026-11-30T11:00:00+00:00").run()
    replaced = add_run(record, again, supersede=True)
    # the hostname is no identity: the h200 run is superseded as well, it knew no more
    assert [r.id for r in replaced.runs if r.arch == "sm_120a"] == [again.id]
    assert [r.arch for r in replaced.runs] == ["sm_90a", "sm_120a"]


def test_a_weaker_run_never_replaces_a_stronger_one_and_says_which_stages_it_lacks() -> None:
    strong = run_of(PASSING, host={**H200, "hostname": "vm"}).run()
    weak = run_of(_with(PASSING, "ptx", "skipped"), host={**H200, "hostname": "vm"},
                  started="2026-11-30T12:00:00+00:00").run()
    record = add_run(_record(), strong, supersede=True)
    replaced, kept = superseded(record, weak)
    assert replaced == [] and kept == [(strong, ["ptx"])]
    after = add_run(record, weak, supersede=True)
    assert [r.id for r in after.runs] == [strong.id, weak.id]
    [verdict] = arch_verdicts(after.runs, Settings().required())
    assert verdict.stages["ptx"] == StageStatus.PASSED and not verdict.unmet
    assert [r.id for r in drop_runs(after, [strong.id[4:14]]).runs] == [weak.id]
    assert drop_runs(after, ["run-1234"]) == after  # fewer than 8 characters names nothing
