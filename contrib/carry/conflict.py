"""A conflict handed to the user: a worktree to resolve in, and resumable state.

When a series cannot be carried, ``contrib sync`` checks out the upstream
commit that broke it -- with the earlier patches already carried -- in a
worktree of the upstream cache, and applies the failing patch there with
``git apply --3way`` so the conflict markers sit in the files.  Beside the
worktree it leaves ``BREAKING.diff`` (``git show`` of the breaking commit) and
the failing patch.  ``contrib sync --continue`` reads the resolved files back;
``--abort`` removes it all.

The state of every pending conflict lives in one versioned file,
``.contrib/sync-state.json`` (``"state_version": 1``); the worktree and state
mechanics are shared with ``contrib edit`` in :mod:`contrib.git.worktree`.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contrib.carry.series import EXPORT_ENV, MailPatch
from contrib.errors import ContribError, NeedsAttention
from contrib.git import worktree
from contrib.git.repo import Git, Tree
from contrib.ui import counted
from contrib.workspace.config import TARGET_RE
from contrib.workspace.layout import SYNC_STATE_NAME
from contrib.workspace.txn import atomic_write, check_inside

STATE_VERSION = 1
STATE_NAME = SYNC_STATE_NAME
_MARKER = re.compile(rb"^(?:<{7}|>{7})(?: |$)", re.M)
_PATCH_PATH = re.compile(r"^\+\+\+ b/(.+)$", re.M)


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


def prepare(git: Git, pending: Pending, patch: MailPatch, raw_patch: bytes) -> list[str]:
    """Create the worktree at ``pending.head`` with ``patch`` applied 3-way.

    Returns the files left with conflict markers (or ``.rej`` files).  A
    ``moved`` patch is not applied at all (it would land in the wrong place
    again); the user applies it by hand from the copy beside the worktree.
    """
    folder = Path(pending.folder)
    check_inside(folder.parents[2], folder)  # WORKSPACE/.contrib/conflicts/NAME, no symlink
    remove(git, pending)
    # Until the worktree is whole, say so: a run killed in here leaves a
    # half-made worktree that --continue must re-create, not read as resolved.
    with worktree.preparing(folder, pending.head):
        return _fill(git, pending, patch, raw_patch)


def ready(pending: Pending) -> bool:
    """Whether the conflict worktree exists, was completely prepared, and is not an
    older one that the state has moved past (a run killed before re-making it)."""
    head = worktree.head_of(pending.worktree)
    if not worktree.is_whole(Path(pending.folder), pending.worktree) or head is None:
        return False
    return head == pending.head or not Git(pending.worktree).is_ancestor(head, pending.head)


def _fill(git: Git, pending: Pending, patch: MailPatch, raw_patch: bytes) -> list[str]:
    folder = Path(pending.folder)
    worktree.add(git, pending.worktree, pending.head)
    show = git.run_bytes("show", "--stat", "--patch", "--diff-merges=first-parent",
                         pending.breaking, env=EXPORT_ENV)
    atomic_write(folder / "BREAKING.diff", show)
    atomic_write(folder / pending.patch, raw_patch)
    tree = Git(pending.worktree)
    if pending.reason == "moved":
        # Applying it would land the hunk in the look-alike again: the user
        # applies the change where it belongs, from the patch file beside.
        return []
    status, _, _ = tree.try_run("apply", "--3way", "--whitespace=nowarn", "-", input=patch.diff)
    if status != 0 and not _unmerged(tree):
        # No pre-image blobs for a merge: apply what applies, leave *.rej for the rest.
        tree.try_run("apply", "--reject", "--whitespace=nowarn", "-", input=patch.diff)
    _name_sides(Path(pending.worktree), _unmerged(tree), f"upstream {pending.breaking[:12]}",
                pending.patch)
    return unresolved(pending, patch)


_OURS = re.compile(rb"^<<<<<<< ours$", re.M)
_THEIRS = re.compile(rb"^>>>>>>> theirs$", re.M)


def _name_sides(root: Path, paths: list[str], upstream: str, patch: str) -> None:
    """git apply --3way labels the sides "ours" and "theirs"; say which is which: the
    upstream commit the worktree is at, and the patch being carried."""
    for path in paths:
        file = root / path
        try:
            text = file.read_bytes()
        except OSError:  # a deleted or replaced path: nothing to label
            continue
        named = _OURS.sub(b"<<<<<<< " + upstream.encode(), text)
        named = _THEIRS.sub(b">>>>>>> " + patch.encode(), named)
        if named != text:
            file.write_bytes(named)


def _unmerged(tree: Git) -> list[str]:
    out = tree.run("diff", "--name-only", "--diff-filter=U", "-z", strip=False)
    return [p for p in out.split("\0") if p]


def unresolved(pending: Pending, patch: MailPatch) -> list[str]:
    """Files in the worktree that still hold conflict markers, and leftover .rej files."""
    root = pending.worktree
    tree = Git(root)
    modified = tree.run("diff", "--name-only", "-z", "HEAD", strip=False).split("\0")
    candidates = set(_unmerged(tree)) | set(_PATCH_PATH.findall(patch.diff)) | set(modified)
    bad = []
    for rel in sorted(p for p in candidates if p):
        path = root / rel
        if path.is_file() and _MARKER.search(path.read_bytes()):
            bad.append(rel)
        if (root / f"{rel}.rej").is_file():
            bad.append(f"{rel}.rej")
    return bad


def resolved_tree(pending: Pending, patch: MailPatch) -> Tree:
    """The tree of the resolved worktree (tracked changes plus the patch's new files)."""
    tree = Git(pending.worktree)
    head = tree.rev_parse("HEAD")
    if head != pending.head and not tree.is_ancestor(pending.head, head):
        raise NeedsAttention(f"{pending.worktree}: HEAD moved to {head[:12]}, which does not "
                             f"build on {pending.head[:12]}; check out {pending.head[:12]} "
                             "again (keeping your edits) or run --abort")
    # Stage on a copy of the worktree's index, never the index itself: a contrib
    # killed mid-`git add` must not leave an index.lock that blocks the next
    # --continue (and the user's git) until someone deletes it by hand.
    real_index = Path(tree.run("rev-parse", "--path-format=absolute", "--git-path", "index"))
    with tree.temp_index(None if real_index.is_file() else head) as env:
        if real_index.is_file():
            shutil.copyfile(real_index, env["GIT_INDEX_FILE"])
        tree.run("add", "-u", env=env)
        created = [p for p in _PATCH_PATH.findall(patch.diff)
                   if (pending.worktree / p).is_file()]
        if created:
            tree.run("add", "--", *created, env=env)
        return tree.write_tree(env)


def repair(git: Git, pending: Pending) -> None:
    """Re-attach the worktree of ``pending`` to the upstream cache where it is now (a
    moved workspace): see :func:`contrib.git.worktree.repair`."""
    worktree.repair(git, pending.worktree)


def remove(git: Git, pending: Pending) -> None:
    """Remove the worktree and its folder; tolerate either being gone already."""
    worktree.remove(git, pending.worktree, Path(pending.folder))
