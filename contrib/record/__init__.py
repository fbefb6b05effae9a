"""validation.json: what ``contrib validate`` checked, bound to exactly what it checked.

This package is the one owner of the format; everything else passes its objects:
:mod:`~contrib.record.schema` (types, digest, writer), :mod:`~contrib.record.reader`
(the one reader) and :mod:`~contrib.record.verdict` (the rules below).

Rules:

- a stage is ``passed`` (ran, nothing blocking), ``failed``, ``skipped`` (had
  something to check and could not check it here) or ``not-applicable`` (nothing
  to check: no gate touched, no CUDA source reached, no ``[[requires]]``);
- across the runs of one arch a stage passed where some run passed it and none
  failed it, failed where any run failed it, is not-applicable where every run
  said so, and skipped otherwise;
- an arch's verdict is ``failed`` if a stage failed, ``incomplete`` if one was
  skipped, else ``passed``; a required stage (``[validation] require``) is met
  when passed or not-applicable;
- a record counts only when bound: its upstream, patchset, base and digest equal
  the version's as it is on disk now; anything else (stale, foreign, schema 1,
  unreadable) is "not validated" with the reason, never a verdict;
- a fresh ``contrib validate`` replaces the earlier runs of the same arch and kind
  whose settled stages (passed, failed, not-applicable) it settled too; an earlier run
  holding evidence it lacks is kept beside it, and validate says so.  The hostname is
  no run's identity.  A merged run already present (same id) is a no-op;
  ``contrib validate --drop RUN`` removes a run.

API (stable)::

    StageStatus   StrEnum passed | failed | skipped | not-applicable
    Verdict       StrEnum passed | incomplete | failed | not-validated
    RunKind       StrEnum target | regression
    Gpu, Host, Stage, Run, Record              frozen dataclasses (the schema)
    digest(upstream, patchset, base, series, patches, settings) -> "sha256:..."
        (settings: ``Settings.digest_view()``, plain data)
    version_digest(version) -> "sha256:..."    (a workspace Version, its [validation])
    read_record(path) -> Record | None     None when absent; ConfigError (file, JSON path)
    read_run_file(path) -> Record          a --out file: a record with >= 1 run; ConfigError
    record_json(record) -> str             the one writer (scrubbed); --out files too
    combine(runs) -> dict[stage name, StageStatus]   merge rule across runs of one arch
    verdict_of(stages) -> Verdict;  unmet(stages, require) -> required stages not passed
    mismatch(record, upstream, patchset, base, digest) -> "" or what differs
    ArchVerdict, arch_verdicts(record, require) -> list[ArchVerdict]
    Standing, standing(path, upstream, patchset, base, digest, require) -> Standing
        whether a version is validated: verdicts per arch, or "not validated" and why
    version_standing(version) -> Standing     the same, for a workspace Version on disk
    standing_dict(standing) -> dict           JSON for status / open-pr / dashboards
    add_run(record, run, supersede=...) -> Record
    superseded(record, run) -> (runs it replaces, [(stronger run kept, stages it lacks)])
    missing_evidence(new, old) -> stages old settled that new did not
    drop_runs(record, ids) -> Record           ids: run ids or 8+ character prefixes

Schema 2 (``"schema": 2``)::

    {"schema": 2, "upstream", "patchset", "base": <40-hex>, "digest": "sha256:<64-hex>",
     "runs": [{"id", "kind": "target"|"regression", "arch", "cuda_arch", "compute",
               "host": {"hostname", "python", "platform", "nvcc", "nvcc_path",
                        "nvidia_smi", "gpus": [{"name", "compute_capability"}], ...},
               "contrib_version", "started_at", "finished_at", "applied",
               "stages": [{"name", "status", "reason", "duration_s", "counts",
                           "findings": [...], "details": {...}}]}]}

A run file (``contrib validate --out FILE``) has the same format: a record holding
the runs made by that invocation, so ``--merge`` is a union of records.
"""

from __future__ import annotations

from contrib.record.reader import OldFormat, read_record, read_run_file
from contrib.record.schema import (
    SCHEMA,
    Gpu,
    Host,
    Record,
    Run,
    RunKind,
    Stage,
    StageStatus,
    Verdict,
    digest,
    record_json,
    run_dict,
    stage_dict,
    version_digest,
)
from contrib.record.verdict import (
    ArchVerdict,
    Standing,
    add_run,
    arch_verdicts,
    combine,
    drop_runs,
    mismatch,
    missing_evidence,
    standing,
    standing_dict,
    superseded,
    unmet,
    verdict_of,
    version_standing,
)

__all__ = [
    "SCHEMA", "ArchVerdict", "Gpu", "Host", "OldFormat", "Record", "Run", "RunKind", "Stage",
    "StageStatus", "Standing", "Verdict", "add_run", "arch_verdicts", "combine", "digest",
    "drop_runs", "missing_evidence", "superseded",
    "mismatch", "read_record", "read_run_file", "record_json", "run_dict", "stage_dict",
    "standing", "standing_dict", "unmet", "verdict_of", "version_digest", "version_standing",
]
