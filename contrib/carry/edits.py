"""Patchsets opened for editing as git branches: where, what was made, what changed since.

``contrib edit`` puts a version's patches as commits on branch
``contrib/NAME``, either in a worktree of the upstream cache or in the user's
own clone; ``contrib refresh`` reads the branch back.  What was made is kept
in ``.contrib/edit-state.json`` (``"state_version": 1``, one entry per
patchset), so that refresh knows the base it started from, ``edit`` can tell
its own commits from someone else's, and :func:`open_edits` can list the
edits whose branch moved and was not refreshed.

In a clone the branch is ``contrib/NAME`` of that clone.  In a worktree it
lives in the upstream cache, which every workspace using that upstream shares,
so there it is kept apart per workspace: ``contrib/WSID/NAME``, WSID a short
hash of the workspace's resolved root (:func:`workspace_id`).  The branch an
edit uses is recorded with it, so an edit made before (on ``contrib/NAME`` in
the cache) or in a workspace since moved is still read where it is.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path

from contrib.errors import ContribError, GitError, UsageError
from contrib.git import worktree
from contrib.git.cache import Mirror
from contrib.git.repo import Git, Sha
from contrib.workspace.model import Patchset, Workspace

STATE_VERSION = 1
STATE_NAME = "edit-state.json"
BRANCH_PREFIX = "contrib/"
WSID_LENGTH = 10


class Mode(StrEnum):
    WORKTREE = "worktree"  # a worktree of the upstream cache; the branch lives there
    REPO = "repo"  # a branch of the user's clone


class EditState(StrEnum):
    """Where an open edit stands (for ``contrib doctor`` and ``refresh``)."""

    REFRESHED = "refreshed"  # the branch is what contrib made or last refreshed
    CHANGED = "changed"  # the user committed on it since: refresh to take it
    STALE = "stale"  # the patchset moved on (sync, another refresh) since it was made
    MISSING = "missing"  # the branch is gone


@dataclass
class Edit:
    """One patchset opened as a branch."""

    patchset: str  # UPSTREAM/NAME
    base: str  # the upstream commit the commits sit on
    version: str  # the version folder they came from (or were refreshed into)
    commits: list[str]  # oldest first; the last is the branch tip contrib knows
    mode: str
    where: str  # the worktree (relative to the workspace when inside it) or the clone
    branch: str
    made: str = ""  # when
    known_tips: list[str] = field(default_factory=list)  # every tip contrib made or refreshed

    @property
    def tip(self) -> str:
        return self.commits[-1]

    def location(self, ws: Workspace) -> Path:
        return (ws.root / self.where).resolve()


def branch_of(ps: Patchset) -> str:
    """The branch of a clone (``--repo``): ``contrib/NAME``."""
    return BRANCH_PREFIX + ps.name


def workspace_id(ws: Workspace) -> str:
    """A short, stable id of the workspace: the hash of its resolved root."""
    return hashlib.sha256(str(ws.root.resolve()).encode()).hexdigest()[:WSID_LENGTH]


def cache_branch(ws: Workspace, ps: Patchset) -> str:
    """The branch of a worktree of the shared upstream cache: ``contrib/WSID/NAME``, so
    two workspaces with a patchset of the same name never share one."""
    return f"{BRANCH_PREFIX}{workspace_id(ws)}/{ps.name}"


def default_path(ws: Workspace, ps: Patchset) -> Path:
    return ws.state_dir / "edit" / f"{ps.upstream}--{ps.name}"


def marker_folder(ws: Workspace, ps: Patchset) -> Path:
    """Holds the PREPARING marker while the worktree of ``ps`` is being made."""
    return ws.state_dir / "edit-preparing" / f"{ps.upstream}--{ps.name}"


def cache_ref(ws: Workspace, ps: Patchset) -> str:
    """A hidden ref in the upstream cache holding a clone's branch (never a branch),
    one per workspace."""
    return f"refs/contrib/edit/{workspace_id(ws)}/{ps.upstream}--{ps.name}"


def state_path(ws: Workspace) -> Path:
    return ws.state_dir / STATE_NAME


_ADVICE = "remove it (the branches stay; run `contrib edit` again)"
_SHA = re.compile(r"[0-9a-f]{40}")


def load(ws: Workspace) -> dict[str, Edit]:
    """Every open edit of the workspace, by patchset; ContribError (exit 2) naming the
    file and what to do when an entry is not one contrib wrote."""
    path = state_path(ws)
    entries = worktree.load_state(path, STATE_VERSION, "edits", _ADVICE)
    return {key: _edit(path, key, value) for key, value in entries.items()}


def _edit(path: Path, key: str, value: object) -> Edit:
    where = f"{path}: edits[{key!r}]"
    if not isinstance(value, dict) or set(value) - {f.name for f in fields(Edit)}:
        raise ContribError(f"{where} is not an edit contrib recorded; {_ADVICE}")
    try:
        edit = Edit(**value)
    except TypeError:
        raise ContribError(f"{where} lacks keys contrib records; {_ADVICE}") from None
    lists = (edit.commits, edit.known_tips)
    texts = (edit.patchset, edit.mode, edit.where, edit.branch, edit.made)
    if (not all(isinstance(x, list) and all(isinstance(s, str) and _SHA.fullmatch(s) for s in x)
                for x in lists) or not all(isinstance(t, str) for t in texts)
            or not edit.commits or edit.patchset != key or edit.mode not in tuple(Mode)
            or not all(isinstance(s, str) and _SHA.fullmatch(s)
                       for s in (edit.base, edit.version))
            or not _branch_fits(edit, key.partition("/")[2])):
        raise ContribError(f"{where}: inconsistent values; {_ADVICE}")
    return edit


def _branch_fits(edit: Edit, name: str) -> bool:
    """``contrib/NAME``; in a worktree also ``contrib/WSID/NAME`` (kept apart per workspace)."""
    if edit.branch == BRANCH_PREFIX + name:
        return True
    wsid, _, rest = edit.branch.removeprefix(BRANCH_PREFIX).partition("/")
    return (edit.mode == Mode.WORKTREE and edit.branch.startswith(BRANCH_PREFIX)
            and re.fullmatch(f"[0-9a-f]{{{WSID_LENGTH}}}", wsid) is not None and rest == name)


def save(ws: Workspace, edits: dict[str, Edit]) -> None:
    worktree.save_state(state_path(ws), STATE_VERSION, "edits",
                        {key: asdict(value) for key, value in edits.items()})


def stored_where(ws: Workspace, path: Path) -> str:
    """``path`` relative to the workspace when inside it (a copied workspace keeps working)."""
    path = path.resolve()
    return str(path.relative_to(ws.root)) if path.is_relative_to(ws.root) else str(path)


def tip_now(ws: Workspace, edit: Edit, mirror: Mirror) -> Sha | None:
    """Where the edit's branch points now; None when it is gone."""
    if edit.mode == Mode.WORKTREE:
        return mirror.git.try_rev_parse(f"refs/heads/{edit.branch}")
    try:
        return Git(edit.location(ws)).try_rev_parse(f"refs/heads/{edit.branch}")
    except GitError:
        return None


def state_of(ws: Workspace, edit: Edit, mirror: Mirror) -> EditState:
    """Whether ``edit``'s branch was refreshed, changed since, or left behind."""
    tip = tip_now(ws, edit, mirror)
    if tip is None:
        return EditState.MISSING
    if tip != edit.tip:
        return EditState.CHANGED
    try:
        current = ws.patchset(edit.patchset).current.base
    except UsageError:
        return EditState.STALE
    return EditState.REFRESHED if current == edit.version else EditState.STALE


def open_edits(ws: Workspace) -> list[tuple[Edit, EditState]]:
    """Every open edit and where it stands; ``contrib doctor`` lists those not refreshed."""
    out = []
    mirrors: dict[str, Mirror] = {}
    for key, edit in sorted(load(ws).items()):
        upstream = key.split("/")[0]
        if upstream not in ws.config.upstreams:
            out.append((edit, EditState.STALE))
            continue
        mirror = mirrors.setdefault(upstream, Mirror(ws.config.upstream(upstream)))
        try:
            out.append((edit, state_of(ws, edit, mirror)))
        except GitError:
            out.append((edit, EditState.MISSING))
    return out
