"""Waivers applied: a finding a ``[[waivers]]`` entry covers is marked waived, never hidden."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from contrib.record.finding import Finding
from contrib.workspace.validation import Waiver


def covers(waiver: Waiver, finding: Finding) -> bool:
    """Whether ``waiver`` covers ``finding`` (the line may be the finding's or its guard's)."""
    if not _same_file(waiver.file, finding.file):
        return False
    if waiver.line is not None:
        guard_line = finding.guard.rsplit(":", 1)[-1] if finding.guard else ""
        if waiver.line != finding.line and str(waiver.line) != guard_line:
            return False
    if waiver.pattern is not None:
        regex = waiver.regex or re.compile(waiver.pattern)
        if not regex.search(finding.message):
            return False
    return True


def _same_file(waived: str, actual: str) -> bool:
    return actual == waived or actual.endswith("/" + waived.lstrip("/"))


def apply_waivers(findings: Iterable[Finding], waivers: Iterable[Waiver]) -> list[Finding]:
    """Mark each finding a waiver covers as waived (with its reason); keep them all."""
    waivers = list(waivers)
    result = []
    for finding in findings:
        waiver = next((w for w in waivers if covers(w, finding)), None)
        result.append(replace(finding, waived=waiver.reason) if waiver else finding)
    return result
