"""Analyses behind ``contrib validate`` and the findings they share.

Every analysis reports :class:`Finding` objects (file:line, severity, message);
a patchset may waive a finding in ``patchset.toml`` with a reason, and a waived
finding is still reported, marked waived, never hidden.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from contrib.errors import ConfigError

ERROR = "error"
INFO = "info"


@dataclass(frozen=True)
class Finding:
    """One thing an analysis saw, anchored at ``file:line``."""

    kind: str  # e.g. "empty-kernel", "dropped-statement", "arch-difference"
    severity: str  # ERROR or INFO
    file: str
    line: int
    message: str
    guard: str | None = None  # "file:line" of the #if that causes it, when there is one
    waived: str | None = None  # the waiver's reason, when waived

    @property
    def location(self) -> str:
        """``file:line``."""
        return f"{self.file}:{self.line}"

    @property
    def blocking(self) -> bool:
        """An unwaived error fails its stage."""
        return self.severity == ERROR and self.waived is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "severity": self.severity,
            "location": self.location,
            "file": self.file,
            "line": self.line,
            "message": self.message,
        }
        if self.guard:
            data["guard"] = self.guard
        if self.waived is not None:
            data["waived"] = self.waived
        return data

    def __str__(self) -> str:
        tag = f"waived ({self.waived})" if self.waived is not None else self.severity
        return f"{self.location}: {tag}: {self.message}"


@dataclass(frozen=True)
class Waiver:
    """``[[waivers]]`` in patchset.toml: file plus line or pattern, and a reason."""

    file: str
    reason: str
    line: int | None = None
    pattern: str | None = None
    _regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def matches(self, finding: Finding) -> bool:
        """Whether this waiver covers ``finding`` (the line may be the finding's or its guard's)."""
        if not _same_file(self.file, finding.file):
            return False
        if self.line is not None:
            guard_line = finding.guard.rsplit(":", 1)[-1] if finding.guard else ""
            if self.line != finding.line and str(self.line) != guard_line:
                return False
        if self.pattern is not None:
            regex = self._regex or re.compile(self.pattern)
            if not regex.search(finding.message):
                return False
        return True


def _same_file(waived: str, actual: str) -> bool:
    return actual == waived or actual.endswith("/" + waived.lstrip("/"))


def parse_waivers(raw: object, source: str = "patchset.toml") -> list[Waiver]:
    """Read ``[[waivers]]`` entries; raise ConfigError naming the bad one."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{source}: waivers must be an array of tables ([[waivers]])")
    waivers = []
    for index, entry in enumerate(raw):
        where = f"{source}: [[waivers]] #{index + 1}"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where} must be a table with file, reason and line or pattern")
        file, reason = entry.get("file"), entry.get("reason")
        line, pattern = entry.get("line"), entry.get("pattern")
        if not isinstance(file, str) or not file:
            raise ConfigError(f"{where}: 'file' (a repo path) is required")
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(f"{where}: 'reason' is required: say why the finding is safe")
        if line is None and pattern is None:
            raise ConfigError(f"{where}: give 'line' or 'pattern' so the waiver is specific")
        if line is not None and (not isinstance(line, int) or isinstance(line, bool)):
            raise ConfigError(f"{where}: 'line' must be an integer")
        regex = None
        if pattern is not None:
            try:
                regex = re.compile(str(pattern))
            except re.error as exc:
                raise ConfigError(f"{where}: bad 'pattern' {pattern!r}: {exc}") from exc
        waivers.append(Waiver(file, reason.strip(), line, pattern, regex))
    return waivers


def apply_waivers(findings: Iterable[Finding], waivers: Iterable[Waiver]) -> list[Finding]:
    """Mark each finding a waiver covers as waived (with its reason); keep them all."""
    waivers = list(waivers)
    result = []
    for finding in findings:
        waiver = next((w for w in waivers if w.matches(finding)), None)
        result.append(replace(finding, waived=waiver.reason) if waiver else finding)
    return result
