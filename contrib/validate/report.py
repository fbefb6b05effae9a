"""Stage results, validation.json, JUnit XML and the human table."""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from xml.etree import ElementTree

from contrib import __version__
from contrib.analysis.ptx import find_nvcc, nvcc_version
from contrib.arch import Arch
from contrib.record import Gpu as RecordedGpu
from contrib.record import (
    Host,
    Run,
    RunKind,
    Stage,
    StageStatus,
    Verdict,
    run_dict,
    stage_dict,
    verdict_of,
)
from contrib.record.finding import Finding
from contrib.record.schema import HOST_KEYS
from contrib.secrets import scrub
from contrib.validate.testrun import PROBE, GpuSource, gpus_of, probe_driver

PASSED, FAILED = StageStatus.PASSED, StageStatus.FAILED
SKIPPED, NOT_APPLICABLE = StageStatus.SKIPPED, StageStatus.NOT_APPLICABLE


@dataclass
class StageResult:
    """One stage's outcome.  ``passed`` only ever means the stage ran and found nothing wrong."""

    name: str
    status: StageStatus | str
    reason: str
    findings: list[Finding] = field(default_factory=list)
    duration: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def to_stage(self) -> Stage:
        """The recorded form (:class:`contrib.record.Stage`)."""
        counts = {
            "errors": sum(1 for f in self.findings if f.blocking),
            "waived": sum(1 for f in self.findings if f.waived is not None),
            "info": sum(1 for f in self.findings if f.severity == "info"),
        }
        details = json.loads(json.dumps(self.details, default=str))  # plain JSON values only
        counts.update({f"tests_{k}": int(v) for k, v in details.pop("counts", {}).items()})
        return Stage(self.name, StageStatus(self.status), self.reason, round(self.duration, 3),
                     {k: v for k, v in counts.items() if v}, tuple(self.findings), details)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return stage_dict(self.to_stage())


@dataclass
class Validation:
    """Everything one ``contrib validate`` of one patchset version found for one arch."""

    upstream: str
    patchset: str
    base: str
    arch: Arch
    stages: list[StageResult]
    host: dict[str, Any]
    applied: str | None = None  # sha of the patched tree's commit, when there is one
    started: str = field(default_factory=lambda: now())
    finished: str = field(default_factory=lambda: now())
    kind: RunKind = RunKind.TARGET
    compute: str | None = None  # the virtual arch as the upstream builds it (default arch.compute)

    @property
    def verdict(self) -> Verdict:
        """failed if a stage failed; incomplete if one was skipped; else passed."""
        return verdict_of({s.name: StageStatus(s.status) for s in self.stages})

    @property
    def skipped(self) -> list[str]:
        """Names of the stages that did not run."""
        return [s.name for s in self.stages if s.status == SKIPPED]

    def run(self) -> Run:
        """This validation as one recorded run; its id is a hash of its content."""
        stages = tuple(s.to_stage() for s in self.stages)
        run = Run("pending", self.kind, self.arch.name, self.arch.cuda_arch,
                  self.compute or self.arch.compute, host_from_facts(self.host), __version__,
                  self.started, self.finished, stages, self.applied)
        body = json.dumps(run_dict(run), sort_keys=True).encode("utf-8")
        return replace(run, id="run-" + hashlib.sha256(body).hexdigest()[:16])


def host_from_facts(facts: dict[str, Any]) -> Host:
    """A :class:`Host` from :func:`host_facts` (or a test's dict)."""
    gpus = tuple(RecordedGpu(str(g["name"]), str(g["compute_capability"]))
                 for g in facts.get("gpus") or [])
    return Host(str(facts.get("hostname") or "unknown"), str(facts.get("python") or ""),
                str(facts.get("platform") or ""), facts.get("nvcc"), facts.get("nvcc_path"),
                bool(facts.get("nvidia_smi")), gpus,
                {k: v for k, v in facts.items() if k not in HOST_KEYS},
                str(facts["driver"]) if facts.get("driver") else None)


def now() -> str:
    """UTC timestamp, ISO 8601, seconds."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def host_facts(gpus: GpuSource = PROBE) -> dict[str, Any]:
    """Facts about where validation ran: Python, platform, nvcc, GPUs and their driver
    (nvidia-smi; the driver only when the GPUs are probed here)."""
    nvcc = find_nvcc()
    found = gpus_of(gpus)
    return {
        "hostname": platform.node(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "nvcc": nvcc_version(nvcc) if nvcc else None,
        "nvcc_path": nvcc,
        "nvidia_smi": found is not None,
        "gpus": [{"name": g.name, "compute_capability": g.capability} for g in found or []],
        "driver": probe_driver() if gpus is PROBE and found else None,
    }


def junit_xml(validations: Validation | list[Validation]) -> str:
    """JUnit XML: per validation a suite, one testcase per stage and per upstream test it ran."""
    root = ElementTree.Element("testsuites")
    for validation in validations if isinstance(validations, list) else [validations]:
        root.append(_suite(validation))
    ElementTree.indent(root)
    return scrub(ElementTree.tostring(root, encoding="unicode", xml_declaration=True)) + "\n"


def _suite(validation: Validation) -> ElementTree.Element:
    name = f"contrib validate {validation.upstream}/{validation.patchset} {validation.arch.name}"
    suite = ElementTree.Element("testsuite", name=name, timestamp=validation.started)
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    klass = f"contrib.{validation.upstream}.{validation.patchset}"
    for stage in validation.stages:
        case = ElementTree.SubElement(suite, "testcase", classname=klass, name=stage.name,
                                      time=f"{stage.duration:.3f}")
        _mark(case, stage.status, stage.reason, "\n".join(str(f) for f in stage.findings), counts)
        for test in stage.details.get("cases", []):
            sub = ElementTree.SubElement(suite, "testcase", classname=f"upstream.{validation.upstream}",
                                         name=test["name"], time=str(test.get("time", "0")))
            _mark(sub, test["status"], test.get("message", ""), "", counts)
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("errors", "0")
    return suite


def _mark(
    case: ElementTree.Element, status: str, reason: str, text: str, counts: dict[str, int]
) -> None:
    counts["tests"] += 1
    if status in (FAILED, "error"):
        child = ElementTree.SubElement(case, "failure", message=reason)
        child.text = text or reason
        counts["failures"] += 1
    elif status == SKIPPED:
        ElementTree.SubElement(case, "skipped", message=reason)
        counts["skipped"] += 1
    elif text:
        ElementTree.SubElement(case, "system-out").text = text


def render_table(validation: Validation) -> str:
    """Compact human summary: one row per stage, then the findings that matter."""
    skipped = f" (skipped: {', '.join(validation.skipped)})" if validation.skipped else ""
    lines = [f"{validation.upstream}/{validation.patchset} @ {validation.base[:12]} for "
             f"{validation.arch.name}: {validation.verdict.upper()}{skipped}"]
    width = max(len(s.name) for s in validation.stages) if validation.stages else 8
    for stage in validation.stages:
        lines.append(f"  {stage.name:<{width}}  {stage.status:<14}  {stage.reason}")
    for stage in validation.stages:
        for finding in stage.findings:
            if finding.severity == "error" or finding.waived is not None:
                lines.append(f"    [{stage.name}] {finding}")
    return "\n".join(lines)
