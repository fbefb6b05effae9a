"""The conflicts ``contrib sync`` has open: one versioned file,
``.contrib/sync-state.json`` (``"state_version": 1``), read by every sync.

Kept apart from the conflict worktrees (:mod:`contrib.carry.conflict`): a sync
that finds nothing to carry reads this file and loads nothing more.  The file
mechanics are shared with ``contrib edit`` in :mod:`contrib.git.worktree`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contrib.errors import ContribError
from contrib.git import worktree
from contrib.ui import counted
from contrib.workspace.config import TARGET_RE
from contrib.workspace.layout import SYNC_STATE_NAME

STATE_VERSION = 1
STATE_NAME = SYNC_STATE_NAME


@dataclass
class Pending:
    """One patchset waiting for the user to resolve a conflict."""

    patchset: str  # UPSTREAM/NAME
    base: str  # the version the carry started from
    target: str  # where the sync was going
    breaking: str  # the upstream commit that broke it
    head: str  # the earlier patches carried onto ``breaking`` (the worktree's HEAD)
    index: int  # the failing patch's position in the base version's series
    patch: str  # the failing patch's file name
    reason: str  # "conflict" or "moved"
    folder: str  # holds worktree/, BREAKING.diff and the failing patch
    files: list[str] = field(default_factory=list)
    previous_meta: str | None = None  # patchset.toml before the conflict was recorded
    # patch file -> the upstream commit that landed it in its own form (dropped from
    # the carry by --continue when that commit is already in ``breaking``)
    landed: dict[str, str] = field(default_factory=dict)

    @property
    def worktree(self) -> Path:
        return Path(self.folder) / "worktree"


def state_path(state_dir: Path) -> Path:
    return state_dir / STATE_NAME


def load_state(state_dir: Path) -> dict[str, Pending]:
    """Every pending conflict of the workspace, by patchset; ContribError (exit 2) naming
    the file and what to do when it is not a state contrib wrote."""
    path = state_path(state_dir)
    advice = (f"remove it and the worktrees under {state_dir / 'conflicts'} to start over "
              "(the pending conflicts are then forgotten; no version is lost)")
    pending = worktree.load_state(path, STATE_VERSION, "pending", advice)
    return {key: _pending(path, state_dir, key, value, advice) for key, value in pending.items()}


_TYPES: dict[str, tuple[type, ...]] = {
    "patchset": (str,), "base": (str,), "target": (str,), "breaking": (str,), "head": (str,),
    "index": (int,), "patch": (str,), "reason": (str,), "folder": (str,), "files": (list,),
    "previous_meta": (str, type(None)), "landed": (dict,),
}
_SHA = re.compile(r"[0-9a-f]{40}")


def _pending(path: Path, state_dir: Path, key: str, value: object, advice: str) -> Pending:
    where = f"{path}: pending[{key!r}]"
    if not isinstance(value, dict):
        raise ContribError(f"{where} must be an object; {advice}")
    for name, kinds in _TYPES.items():
        required = name not in ("files", "previous_meta", "landed")
        if (name not in value and required) or (name in value and (
                not isinstance(value[name], kinds) or isinstance(value[name], bool))):
            raise ContribError(f"{where}.{name} must be a {kinds[0].__name__}; {advice}")
    value = _anchored(state_dir, key, value)
    unknown = set(value) - set(_TYPES)
    files = value.get("files", [])
    landed = value.get("landed", {})
    shas = [value[n] for n in ("base", "target", "breaking", "head")] + list(landed.values())
    if (unknown or value["patchset"] != key or not TARGET_RE.fullmatch(key) or value["index"] < 0
            or not all(isinstance(f, str) for f in files)
            or not all(isinstance(s, str) and _SHA.fullmatch(s) for s in shas)
            or value["reason"] not in ("conflict", "moved")
            or Path(value["folder"]) != folder_for(state_dir, key)
            or Path(value["patch"]).name != value["patch"]):
        bad = f"unknown {'key' if len(unknown) == 1 else 'keys'} {', '.join(sorted(unknown))}" if unknown else "inconsistent values"
        raise ContribError(f"{where}: {bad}; {advice}")
    return Pending(**value)


def check_index(state_dir: Path, pending: Pending, patches: int) -> None:
    """Refuse (exit 2, naming the state file) a pending conflict whose failing patch is
    not in its base version's series: the state was edited by hand or belongs elsewhere."""
    if not 0 <= pending.index < patches:
        raise ContribError(
            f"{state_path(state_dir)}: pending[{pending.patchset!r}].index is {pending.index}, "
            f"but the series of {pending.base[:12]} has {counted(patches, 'patch')}; remove the file "
            f"and the worktrees under {state_dir / 'conflicts'} to start over (the pending "
            "conflicts are then forgotten; no version is lost)")


def _anchored(state_dir: Path, key: str, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with its folder at this workspace's ``.contrib/conflicts/NAME`` when it
    names that same place in another (a workspace moved or copied, the dry run's copy):
    the conflict is still the user's, pending, and never to be dropped for a path."""
    folder, expected = value.get("folder"), folder_for(state_dir, key)
    if not isinstance(folder, str) or Path(folder) == expected:
        return value
    parts = Path(folder).parts
    if len(parts) >= 3 and parts[-3:] == expected.parts[-3:]:
        return {**value, "folder": str(expected)}
    return value


def save_state(state_dir: Path, pending: dict[str, Pending]) -> None:
    """Write the state atomically (removed when nothing is pending)."""
    worktree.save_state(state_path(state_dir), STATE_VERSION, "pending",
                        {key: asdict(value) for key, value in pending.items()})


def folder_for(state_dir: Path, patchset: str) -> Path:
    return state_dir / "conflicts" / patchset.replace("/", "--")



def pending_dict(pending: Pending) -> dict[str, Any]:
    """A pending conflict as a report shows it (the start of its ``conflict`` key)."""
    return {"commit": {"sha": pending.breaking}, "patch": pending.patch,
            "reason": pending.reason, "files": pending.files,
            "worktree": str(pending.worktree),
            "breaking_diff": str(Path(pending.folder) / "BREAKING.diff")}
