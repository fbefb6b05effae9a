"""``contrib show UPSTREAM/NAME``: one patchset without opening its folders.

Its title and status, each target branch with its current version, every version
folder (oldest name first; the current ones marked), and the current version's
patches: subject, files touched, lines added and removed, read from the patch
files themselves (``git format-patch`` mbox), as ``git am`` would apply them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from typing import Any

from contrib.errors import UsageError
from contrib.ui import UI, counted, shown_path
from contrib.workspace.model import Patchset, Version, Workspace

_PREFIX = re.compile(r"^\[PATCH[^\]]*\]\s*")
_FILE = re.compile(r"^diff --git a/(?P<old>\S+) b/(?P<new>\S+)$")


@dataclass(frozen=True)
class PatchFacts:
    """What one patch file changes."""

    name: str
    subject: str
    files: tuple[str, ...]
    added: int
    removed: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "files": list(self.files),
                "added": self.added, "removed": self.removed}


def facts(name: str, raw: bytes) -> PatchFacts:
    """Subject, files and line counts of one mbox patch."""
    headers = BytesHeaderParser().parsebytes(raw)
    subject = _PREFIX.sub("", " ".join(str(headers.get("Subject", name)).split()))
    files: list[str] = []
    added = removed = 0
    in_diff = False
    for line in raw.decode("utf-8", errors="replace").splitlines():
        found = _FILE.match(line)
        if found:
            in_diff = True
            files.append(found["new"])
        elif line == "-- " and in_diff:  # format-patch's signature
            in_diff = False
        elif in_diff and line.startswith("+") and not line.startswith("+++ "):
            added += 1
        elif in_diff and line.startswith("-") and not line.startswith("--- "):
            removed += 1
    return PatchFacts(name, subject, tuple(files), added, removed)


def show(ws: Workspace, ui: UI, target: str) -> int:
    """Print (or emit) the patchset ``target``: targets, versions, current patches."""
    if "/" not in target:
        raise UsageError(f"{target!r}: name one patchset as UPSTREAM/NAME "
                         f"(contrib status {target} lists them)")
    targets = ws.patchsets([target.split("@", 1)[0]])
    first = targets[0]
    current = {ps.current.base for ps in targets}
    patches = [facts(name, raw) for name, raw in first.current.patch_texts()]
    ui.info(f"{first.upstream}/{first.name}: {first.title}")
    ui.info(f"  status {first.upstream_status}; arch {first.arch}; "
            f"folder {shown_path(first.dir)}")
    for ps in targets:
        ui.info(f"  target {ps.branch}: current {ps.current.base[:12]}")
    versions = first.versions()
    ui.info(f"{counted(len(versions), 'version')}:")
    for version in versions:
        mark = "  (current)" if version.base in current else ""
        ui.info(f"  {version.base[:12]}  {counted(len(version.series()), 'patch')}{mark}")
    ui.info(f"patches of {first.current.base[:12]}:")
    for n, patch in enumerate(patches, 1):
        ui.info(f"  {n}. {patch.subject}  (+{patch.added} -{patch.removed})")
        for path in patch.files:
            ui.info(f"       {path}")
    ui.emit(_document(targets, versions, patches))
    return 0


def _document(targets: list[Patchset], versions: list[Version],
              patches: list[PatchFacts]) -> dict[str, Any]:
    first = targets[0]
    return {"patchset": f"{first.upstream}/{first.name}", "title": first.title,
            "upstream_status": str(first.upstream_status), "arch": first.arch,
            "targets": [{"branch": ps.branch, "current": ps.current.base} for ps in targets],
            "versions": [{"base": v.base, "patches": len(v.series())} for v in versions],
            "patches": [p.to_dict() for p in patches]}
