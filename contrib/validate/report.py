"""Stage results, validation.json, JUnit XML and the human table."""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from xml.etree import ElementTree

from contrib import __version__
from contrib.arch import Arch
from contrib.secrets import scrub
from contrib.validate import Finding
from contrib.validate.ptx import find_nvcc, nvcc_version
from contrib.validate.testsel import Gpu, probe_gpus

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
SCHEMA = 1


@dataclass
class StageResult:
    """One stage's outcome.  ``passed`` only ever means the stage ran and found nothing wrong."""

    name: str
    status: str
    reason: str
    findings: list[Finding] = field(default_factory=list)
    duration: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        counts = {
            "errors": sum(1 for f in self.findings if f.blocking),
            "waived": sum(1 for f in self.findings if f.waived is not None),
            "info": sum(1 for f in self.findings if f.severity == "info"),
        }
        details = dict(self.details)
        counts.update({f"tests_{k}": v for k, v in details.pop("counts", {}).items()})
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "duration_s": round(self.duration, 3),
            "counts": {k: v for k, v in counts.items() if v},
            "findings": [f.to_dict() for f in self.findings],
            **details,
        }


@dataclass
class Validation:
    """Everything one ``contrib validate`` of one patchset version found."""

    upstream: str
    patchset: str
    base: str
    arch: Arch
    stages: list[StageResult]
    host: dict[str, Any]
    applied: str | None = None  # sha of the patched tree's commit, when there is one
    started: str = field(default_factory=lambda: now())
    finished: str = field(default_factory=lambda: now())

    @property
    def verdict(self) -> str:
        """``failed`` if any stage failed, else ``passed``."""
        return FAILED if any(s.status == FAILED for s in self.stages) else PASSED

    @property
    def skipped(self) -> list[str]:
        """Names of the stages that did not run."""
        return [s.name for s in self.stages if s.status == SKIPPED]

    def to_dict(self) -> dict[str, Any]:
        """The content of validation.json."""
        return {
            "schema": SCHEMA,
            "contrib_version": __version__,
            "upstream": self.upstream,
            "patchset": self.patchset,
            "upstream_sha": self.base,
            "applied_sha": self.applied,
            "arch": self.arch.name,
            "cuda_arch": self.arch.cuda_arch,
            "compute": self.arch.compute,
            "overall": self.verdict,
            "skipped_stages": self.skipped,
            "started_at": self.started,
            "finished_at": self.finished,
            "host": self.host,
            "stages": [s.to_dict() for s in self.stages],
        }

    def to_json(self) -> str:
        """validation.json text (scrubbed: no token ever reaches a file)."""
        return scrub(json.dumps(self.to_dict(), indent=2, sort_keys=False)) + "\n"


def now() -> str:
    """UTC timestamp, ISO 8601, seconds."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def host_facts(gpus: list[Gpu] | None | str = "probe") -> dict[str, Any]:
    """Facts about where validation ran: Python, platform, nvcc, GPUs (nvidia-smi)."""
    nvcc = find_nvcc()
    found = probe_gpus() if gpus == "probe" else gpus
    return {
        "hostname": platform.node(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "nvcc": nvcc_version(nvcc) if nvcc else None,
        "nvcc_path": nvcc,
        "nvidia_smi": found is not None,
        "gpus": [{"name": g.name, "compute_capability": g.capability} for g in found or []],  # type: ignore[union-attr]
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
                                      time=f"{stage.duration:.3f}")  # fmt: skip
        _mark(case, stage.status, stage.reason, "\n".join(str(f) for f in stage.findings), counts)
        for test in stage.details.get("cases", []):
            sub = ElementTree.SubElement(suite, "testcase", classname=f"upstream.{validation.upstream}",
                                         name=test["name"], time=str(test.get("time", "0")))  # fmt: skip
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
    lines = [f"{validation.upstream}/{validation.patchset} @ {validation.base[:12]} for "
             f"{validation.arch.name}: {validation.verdict.upper()}"]  # fmt: skip
    width = max(len(s.name) for s in validation.stages) if validation.stages else 8
    for stage in validation.stages:
        lines.append(f"  {stage.name:<{width}}  {stage.status:<7}  {stage.reason}")
    for stage in validation.stages:
        for finding in stage.findings:
            if finding.severity == "error" or finding.waived is not None:
                lines.append(f"    [{stage.name}] {finding}")
    return "\n".join(lines)
