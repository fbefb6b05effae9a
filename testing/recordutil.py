"""Write validation records the way `contrib validate` does, bound to a version on disk."""

from __future__ import annotations

from typing import Any

from contrib.arch import parse_arch
from contrib.record import Record, RunKind, add_run, read_record, record_json, version_digest
from contrib.validate.report import StageResult, Validation, host_facts
from contrib.workspace.model import Version


def run_of(stages: list[StageResult], *, arch: str = "sm_120a", host: dict[str, Any] | None = None,
           kind: RunKind = RunKind.TARGET, started: str = "2026-11-30T10:00:00+00:00") -> Validation:
    """A Validation (one run) with fixed times, for any version."""
    return Validation("x", "x", "0" * 40, parse_arch(arch), stages, host or host_facts(gpus=[]),
                      started=started, finished=started, kind=kind)


def bound_record(version: Version, *runs: Validation) -> Record:
    """A record of ``runs`` bound to ``version`` as it is on disk now."""
    ps = version.patchset
    record = Record(ps.upstream, ps.name, version.base, version_digest(version))
    for validation in runs:
        record = add_run(record, validation.run(), supersede=False)
    return record


def write_bound(version: Version, *runs: Validation) -> Record:
    """Write ``bound_record`` to the version's validation.json."""
    record = bound_record(version, *runs)
    version.validation_path.write_text(record_json(record), encoding="utf-8")
    return record


def stored(version: Version) -> Record:
    record = read_record(version.validation_path)
    assert record is not None
    return record


PASSING = [StageResult(name, "passed", f"{name} ok")
           for name in ("apply", "syntax", "gates", "arch-guards", "ptx")] + [
    StageResult("tests", "passed", "3 passed"), StageResult("requires", "not-applicable", "none")]
