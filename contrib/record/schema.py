"""The validation record's schema: its types, its digest and its one writer.

See :mod:`contrib.record` for the format and the API.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from contrib.record.finding import Finding
from contrib.secrets import scrub

if TYPE_CHECKING:
    from contrib.workspace.model import Version

SCHEMA = 2
_SHA = re.compile(r"^[0-9a-f]{40}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ARCH = re.compile(r"^sm_\d{2,3}[af]?$")
_COMPUTE = re.compile(r"^compute_\d{2,3}[af]?$")
_STAGE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
_RERUN = "re-run `contrib validate`"

class StageStatus(StrEnum):
    """What one stage of one run did."""

    PASSED = "passed"  # it ran and found nothing blocking
    FAILED = "failed"
    SKIPPED = "skipped"  # it had something to check and could not check it here
    NOT_APPLICABLE = "not-applicable"  # nothing to check (e.g. no [[requires]] declared)


class Verdict(StrEnum):
    """A version's verdict for one architecture."""

    PASSED = "passed"  # every stage ran and passed (not-applicable ones aside)
    INCOMPLETE = "incomplete"  # nothing failed, something was skipped
    FAILED = "failed"
    NOT_VALIDATED = "not-validated"  # no record bound to exactly this version


class RunKind(StrEnum):
    """A run for the patchset's target arch, or a regression run for an arch admitted before."""

    TARGET = "target"
    REGRESSION = "regression"

# -- the schema ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi names it."""

    name: str
    compute_capability: str  # "12.0"


# A host's keys in a record; any other key is kept in ``Host.extra``.
HOST_KEYS = frozenset({"hostname", "python", "platform", "nvcc", "nvcc_path", "nvidia_smi",
                       "gpus", "driver"})


@dataclass(frozen=True)
class Host:
    """Where a run ran.  ``extra`` keeps further facts a newer contrib records."""

    hostname: str
    python: str = ""
    platform: str = ""
    nvcc: str | None = None
    nvcc_path: str | None = None
    nvidia_smi: bool = False
    gpus: tuple[Gpu, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    driver: str | None = None  # the NVIDIA driver nvidia-smi reports ("580.65.06")

    def describe(self) -> str:
        """``vm, 2x NVIDIA H200 (sm 9.0), driver 580.65.06, nvcc release 13.0``."""
        bits = [self.hostname or "unknown host"]
        labels: dict[str, int] = {}
        for gpu in self.gpus:
            label = f"{gpu.name} (sm {gpu.compute_capability})"
            labels[label] = labels.get(label, 0) + 1
        bits += [f"{n}x {label}" if n > 1 else label for label, n in labels.items()]
        if not self.gpus:
            bits.append("no GPU" if self.nvidia_smi else "no GPU (no nvidia-smi)")
        if self.driver:
            bits.append(f"driver {self.driver}")
        if self.nvcc:
            bits.append(f"nvcc {self.nvcc}")
        return ", ".join(bits)


@dataclass(frozen=True)
class Stage:
    """One stage of one run."""

    name: str
    status: StageStatus
    reason: str
    duration_s: float = 0.0
    counts: Mapping[str, int] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Run:
    """One ``contrib validate`` of one version for one arch on one host."""

    id: str
    kind: RunKind
    arch: str  # sm_120a
    cuda_arch: int  # __CUDA_ARCH__ of the device pass, 1200
    compute: str  # the virtual arch as the upstream builds it: compute_120a or compute_120f
    host: Host
    contrib_version: str
    started_at: str
    finished_at: str
    stages: tuple[Stage, ...]
    applied: str | None = None  # the patched commit, when the series applied

    def stage(self, name: str) -> Stage | None:
        """This run's stage called ``name``."""
        return next((s for s in self.stages if s.name == name), None)


@dataclass(frozen=True)
class Record:
    """validation.json: every run of one version, and what that version was."""

    upstream: str
    patchset: str
    base: str
    digest: str
    runs: tuple[Run, ...] = ()

    @property
    def target(self) -> str:
        return f"{self.upstream}/{self.patchset}"

    def archs(self) -> list[str]:
        """Archs with a run, in first-run order."""
        return list(dict.fromkeys(r.arch for r in self.runs))

# -- the digest ---------------------------------------------------------------------------


def digest(upstream: str, patchset: str, base: str, series: Sequence[str],
           patches: Sequence[bytes], settings: Mapping[str, Any]) -> str:
    """sha256 over what a record validated: names, base, series, patch bytes, and the
    settings that change what validation finds (``Settings.digest_view()``, plain data)."""
    head = {"upstream": upstream, "patchset": patchset, "base": base, "series": list(series),
            "settings": settings}
    h = hashlib.sha256(b"contrib-validation-2\0")
    h.update(json.dumps(head, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    for name, data in zip(series, patches, strict=True):
        h.update(b"\0%d\0%s\0" % (len(data), name.encode("utf-8")))
        h.update(data)
    return "sha256:" + h.hexdigest()


def version_digest(version: Version) -> str:
    """The digest of a version as it is on disk now, with its patchset's ``[validation]``
    (PatchError if its series is broken)."""
    ps = version.patchset
    texts = version.patch_texts()
    return digest(ps.upstream, ps.name, version.base, [n for n, _ in texts],
                  [b for _, b in texts], ps.validation.digest_view())

# -- the writer ---------------------------------------------------------------------------


def _host_dict(host: Host) -> dict[str, Any]:
    return {"hostname": host.hostname, "python": host.python, "platform": host.platform,
            "nvcc": host.nvcc, "nvcc_path": host.nvcc_path, "nvidia_smi": host.nvidia_smi,
            "gpus": [{"name": g.name, "compute_capability": g.compute_capability}
                     for g in host.gpus], **({"driver": host.driver} if host.driver else {}),
            **host.extra}


def stage_dict(stage: Stage) -> dict[str, Any]:
    """One stage as validation.json (and ``--json``) holds it."""
    return {"name": stage.name, "status": str(stage.status), "reason": stage.reason,
            "duration_s": round(stage.duration_s, 3), "counts": dict(stage.counts),
            "findings": [f.to_dict() for f in stage.findings], "details": dict(stage.details)}


def run_dict(run: Run) -> dict[str, Any]:
    """One run as validation.json holds it."""
    return {"id": run.id, "kind": str(run.kind), "arch": run.arch, "cuda_arch": run.cuda_arch,
            "compute": run.compute, "host": _host_dict(run.host),
            "contrib_version": run.contrib_version, "started_at": run.started_at,
            "finished_at": run.finished_at, "applied": run.applied,
            "stages": [stage_dict(s) for s in run.stages]}


def _head(upstream: str, patchset: str, base: str, dig: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "upstream": upstream, "patchset": patchset, "base": base,
            "digest": dig}


def _text(data: dict[str, Any]) -> str:
    return scrub(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"


def record_json(record: Record) -> str:
    """validation.json text (scrubbed: no token ever reaches a file)."""
    return _text({**_head(record.upstream, record.patchset, record.base, record.digest),
                  "runs": [run_dict(r) for r in record.runs]})
