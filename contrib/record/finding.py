"""What an analysis saw, anchored at ``file:line``: the unit of every stage's findings.

Findings are written into validation records and read back from them, so the
type lives with the record; the analyses in :mod:`contrib.validate` make them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    def guard_at(self) -> tuple[str, int] | None:
        """The guard's file and line (``guard`` as written: ``file:line``)."""
        if not self.guard:
            return None
        path, _, line = self.guard.rpartition(":")
        return (path, int(line)) if path and line.isdigit() else None

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
