"""A conflict handed to the user: a worktree to resolve in.

When a series cannot be carried, ``contrib sync`` checks out the upstream
commit that broke it -- with the earlier patches already carried -- in a
worktree of the upstream cache, and applies the failing patch there with
``git apply --3way`` so the conflict markers sit in the files.  Beside the
worktree it leaves ``BREAKING.diff`` (``git show`` of the breaking commit) and
the failing patch.  ``contrib sync --continue`` reads the resolved files back;
``--abort`` removes it all.

The state of every pending conflict is :mod:`contrib.carry.syncstate`; the
worktree mechanics are shared with ``contrib edit`` in :mod:`contrib.git.worktree`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from contrib.carry.carrier import MOVED
from contrib.carry.series import EXPORT_ENV, MailPatch
from contrib.carry.syncstate import Pending
from contrib.errors import NeedsAttention
from contrib.git import worktree
from contrib.git.repo import Git, Tree
from contrib.workspace.txn import atomic_write, check_inside

_MARKER = re.compile(rb"^(?:<{7}|>{7})(?: |$)", re.M)
_PATCH_PATH = re.compile(r"^\+\+\+ b/(.+)$", re.M)


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
    if pending.reason == MOVED:
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
