"""An upstream commit as a sync names it: the one that broke a patch, or landed it.

Kept apart from the carry itself: a report shows landings (``Landing.short``)
without loading the engine that found them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contrib.git.repo import Git

if TYPE_CHECKING:
    from contrib.carry.landed import Evidence

_PR = re.compile(r"\(#(\d+)\)\s*$")


def pr_number(subject: str) -> int | None:
    """The PR number of a squash-merged subject like ``feat: x (#1234)``."""
    match = _PR.search(subject)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Landing:
    """An upstream commit named in a report: the one that broke or landed a patch."""

    sha: str
    subject: str
    pr: int | None
    author: str
    date: str

    @classmethod
    def of(cls, git: Git, rev: str) -> Landing:
        info = git.commit_info(rev)
        return cls(info.sha, info.subject, pr_number(info.subject),
                   f"{info.author_name} <{info.author_email}>", info.author_date)

    def as_dict(self) -> dict[str, object]:
        return {"sha": self.sha, "subject": self.subject, "pr": self.pr,
                "author": self.author, "date": self.date}

    def short(self) -> str:
        pr = f" (#{self.pr})" if self.pr and f"(#{self.pr})" not in self.subject else ""
        return f"{self.sha[:10]} {self.subject}{pr}"


def evidence_dict(git: Git, evidence: Evidence) -> dict[str, Any]:
    """The landed evidence for --json and the [sync] record: shares and named commits."""
    def named(sha: str) -> dict[str, object]:
        return Landing.of(git, sha).as_dict()

    return {"share": round(evidence.share, 3), "lines": evidence.lines,
            "present": evidence.present, "removed": evidence.removed, "gone": evidence.gone,
            "threshold": evidence.threshold,
            "landed_by": named(evidence.landed_by) if evidence.landed_by else None,
            "changed_by": [named(sha) for sha in evidence.changed_by],
            "by": [named(sha) | {"lines": n} for sha, n in evidence.by],
            "summary": evidence.summary()}

