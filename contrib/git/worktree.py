"""Worktrees handed to the user, and the versioned state that lets contrib resume.

Two commands give the user a checkout of the upstream cache to work in: a sync
conflict (:mod:`contrib.carry.conflict`) and ``contrib edit`` (:mod:`contrib.carry.edits`).
Both need the same things, kept here:

* a worktree made in a way that a kill half-way is *seen*: a ``PREPARING``
  marker sits in its folder until it is whole, so the next run re-makes it
  rather than reading a half-made checkout as the user's work;
* refusing to read a worktree that is dirty or in the middle of a rebase or
  merge;
* removal that tolerates a worktree already (half) gone, and repair of one whose
  workspace was moved;
* one JSON state file per kind under ``.contrib/``, with a ``state_version``
  that is refused when different, never guessed at (git-imerge keeps its
  ``STATE_VERSION`` the same way).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from contrib.errors import ContribError, GitError
from contrib.git.repo import Git, Sha
from contrib.workspace.txn import atomic_write

PREPARING = "PREPARING"  # present in a folder while its worktree is being made
_IN_PROGRESS = {"rebase-merge": "a rebase", "rebase-apply": "a rebase or am",
                "MERGE_HEAD": "a merge", "CHERRY_PICK_HEAD": "a cherry-pick",
                "REVERT_HEAD": "a revert"}


# -- state files ------------------------------------------------------------------

def load_state(path: Path, version: int, key: str, hint: str) -> dict[str, Any]:
    """The entries under ``key`` of the state file at ``path`` ({} when absent);
    ContribError (exit 2) naming the file when it is not a state contrib wrote.

    ``hint`` says what to remove to start over.  Each entry is the caller's to check.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # a folder there, bad bytes, bad JSON
        raise ContribError(f"{path}: unreadable ({exc}); {hint}") from None
    except RecursionError:  # hand-made nesting deeper than Python's JSON reader goes
        raise ContribError(f"{path}: unreadable (nested too deeply to be a state contrib "
                           f"wrote); {hint}") from None
    if not isinstance(data, dict):
        raise ContribError(f"{path}: must be a JSON object, not {type(data).__name__}; {hint}")
    if data.get("state_version") != version:
        raise ContribError(f"{path}: state_version {data.get('state_version')!r} is not "
                           f"{version}; finish with the contrib that wrote it, or {hint}")
    entries = data.get(key, {})
    if set(data) - {"state_version", key} or not isinstance(entries, dict):
        raise ContribError(f"{path}: only state_version and a {key!r} object belong there; "
                           f"{hint}")
    return entries


def save_state(path: Path, version: int, key: str, entries: dict[str, Any]) -> None:
    """Write the state atomically; the file is removed when no entry is left."""
    if not entries:
        path.unlink(missing_ok=True)
        return
    doc = {"state_version": version, key: dict(sorted(entries.items()))}
    atomic_write(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


# -- worktrees --------------------------------------------------------------------

@contextmanager
def preparing(folder: Path, head: str) -> Iterator[None]:
    """Mark ``folder`` as half-made for the duration of the block."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / PREPARING, f"{head}\n")
    yield
    (folder / PREPARING).unlink()


def is_whole(folder: Path, worktree: Path) -> bool:
    """Whether ``worktree`` exists and was completely made (no PREPARING in ``folder``)."""
    return (worktree / ".git").is_file() and not (folder / PREPARING).exists()


def head_of(worktree: Path) -> Sha | None:
    """The commit checked out in ``worktree``; None when it is not a usable worktree."""
    try:
        return Git(worktree).rev_parse("HEAD")
    except GitError:
        return None


def add(git: Git, worktree: Path, rev: str, *, branch: str | None = None) -> None:
    """``git worktree add`` at ``rev``: detached, or on ``branch`` (which must point there)."""
    if branch is None:
        git.run("worktree", "add", "--detach", str(worktree), rev)
    else:
        git.run("worktree", "add", str(worktree), branch)


def check_clean(worktree: Path, what: str) -> None:
    """ContribError (exit 2) when ``worktree`` is mid-operation or has uncommitted changes."""
    tree = Git(worktree)
    gitdir = Path(tree.run("rev-parse", "--path-format=absolute", "--git-dir"))
    for name, operation in _IN_PROGRESS.items():
        if (gitdir / name).exists():
            raise ContribError(f"{worktree}: {operation} is in progress; finish it (or "
                               f"--abort it) with git, then {what} again")
    dirty = [line for line in tree.run("status", "--porcelain", "--untracked-files=no",
                                       strip=False).splitlines() if line.strip()]
    if dirty:
        files = ", ".join(line[3:] for line in dirty[:5]) + (" ..." if len(dirty) > 5 else "")
        raise ContribError(f"{worktree}: uncommitted changes in {files}; commit them "
                           f"(git commit, or git commit --amend), then {what} again")


def untracked(worktree: Path) -> list[str]:
    """Files in ``worktree`` that git does not track and does not ignore."""
    out = Git(worktree).run("ls-files", "--others", "--exclude-standard", "-z", strip=False)
    return [p for p in out.split("\0") if p]


def repair(git: Git, worktree: Path) -> None:
    """Tell ``git``'s repository where ``worktree`` is now (its workspace was moved with
    ``mv``).  Until then the repository still names the old place, and its next
    ``git worktree prune`` (contrib's own, after removing another worktree, or a
    ``git gc``) forgets the worktree: the checkout left, with the user's edits in
    it, is no worktree any more.  A worktree already gone is left alone."""
    if (worktree / ".git").is_file():
        git.try_run("worktree", "repair", str(worktree))


def remove(git: Git, worktree: Path, folder: Path | None = None) -> None:
    """Remove ``worktree`` (and ``folder`` around it); tolerate either being gone."""
    if worktree.exists():
        try:
            git.run("worktree", "remove", "--force", "--force", str(worktree))
        except GitError:
            shutil.rmtree(worktree, ignore_errors=True)
    git.try_run("worktree", "prune")
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
