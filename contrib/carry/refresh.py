"""Take an edit branch back into its patchset, for ``contrib refresh``.

Reads branch ``contrib/NAME`` back into the patchset, in contrib's canonical
form (``git format-patch --zero-commit --full-index --no-signature``, as
``new`` writes it):

* still on the recorded base: the current version's patches are replaced;
  the old folder, its ``validation.json`` with it (it described the old
  patches), is kept under ``.contrib/superseded/``;
* rebased onto another upstream commit: a new version folder there, made
  current;
* the same patches: ``unchanged``, nothing written.

A branch that no longer sits on the recorded base or any upstream commit,
holds a merge, or has no commits is refused (exit 2) with nothing changed.
Everything is written in one workspace transaction; a ``git range-diff`` of
the old version against the new one is printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contrib.carry import edits, ranges, retention
from contrib.carry.dep3 import stamp_for, stamped
from contrib.carry.edits import Edit, Mode
from contrib.carry.rangediff import build, range_diff
from contrib.carry.ranges import Range
from contrib.carry.series import export_series
from contrib.carry.versions import Event, How, same_version, superseded_path, write_version
from contrib.clock import now_iso
from contrib.errors import ContribError, GitError, UsageError
from contrib.git import worktree
from contrib.git.cache import Mirror
from contrib.git.process import ProgressFn
from contrib.git.repo import Git, Sha
from contrib.ui import counted
from contrib.workspace.model import Patchset, Workspace

UNCHANGED, REPLACED, REBASED = "unchanged", "replaced", "rebased"


def refresh(ws: Workspace, target: str, *, path: Path | None, repo: Path | None,
            fetch: bool, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Take the edit branch back as the patchset's current version; what was done (the
    JSON document ``contrib refresh`` prints)."""
    ps = ws.patchset(target)
    mirror = Mirror(ws.config.upstream(ps.upstream)).ensure(fetch_now=False,
                                                            progress=progress)
    state = edits.load(ws)
    record = _where(ws, ps, state.get(ps.target), path, repo)
    tip = _branch_tip(ws, ps, mirror, record)
    found = _range(mirror, record.branch, tip,
                   record.base if record.commits else ps.current.base,
                   fetch=fetch, clone=record.mode == Mode.REPO)
    _check_not_behind(ps, record, found)
    doc = _take(ws, ps, mirror.git, record, found)
    _remember(ws, state, record, mirror.git, found)
    return doc


def _take(ws: Workspace, ps: Patchset, git: Git, record: Edit, found: Range) -> dict[str, Any]:
    """Export ``found`` canonically; write it unless the current version already is it."""
    at = now_iso()
    old = ps.current
    files = export_series(git, found.base, found.tip)
    if not (found.base == old.base and same_version(old.dir, files)):  # fields alone
        # never rewrite a version: that would set its validation aside
        files = stamped(git, found.base, files, stamp_for(git, ps, found.base, at))
    doc: dict[str, Any] = {"patchset": ps.target, "from": old.base, "version": found.base,
                           "branch": record.branch, "tip": found.tip,
                           "patches": [n for n, _ in files], "superseded": None,
                           "validation_set_aside": False, "untracked": []}
    location = record.location(ws)
    if record.mode == Mode.WORKTREE and location.is_dir():
        doc["untracked"] = worktree.untracked(location)
    if found.base == old.base and same_version(old.dir, files):
        doc["result"] = UNCHANGED
    else:
        doc["range_diff"] = _range_diff(git, ps, found)
        doc.update(_write(ws, ps, git, found, files, at))
    return doc


def _where(ws: Workspace, ps: Patchset, record: Edit | None, path: Path | None,
           repo: Path | None) -> Edit:
    """The edit to read: the recorded one, or one named by --path/--repo."""
    if path is not None and repo is not None:
        raise UsageError("give --path DIR or --repo CLONE, not both")
    if path is None and repo is None:
        if record is None:
            raise UsageError(f"{ps.target}: no edit is open; run `contrib edit {ps.target}` "
                             "first, or name a clone holding branch "
                             f"{edits.branch_of(ps)} with --repo CLONE")
        return record
    mode, place = (Mode.REPO, repo) if repo is not None else (Mode.WORKTREE, path)
    assert place is not None
    where = edits.stored_where(ws, place)
    if record is not None and (record.mode, record.where) == (mode, where):
        return record
    # Not what `contrib edit` made: read the branch there, from the current base.
    branch = edits.branch_of(ps) if mode == Mode.REPO else edits.cache_branch(ws, ps)
    return Edit(ps.target, ps.current.base, ps.current.base, [], mode, where, branch)


def _branch_tip(ws: Workspace, ps: Patchset, mirror: Mirror, record: Edit) -> Sha:
    """Where contrib/NAME points, with its commits available in the upstream cache."""
    location = record.location(ws)
    if record.mode == Mode.WORKTREE:
        if location.exists():
            worktree.check_clean(location, f"run contrib refresh {ps.target}")
        tip = mirror.git.try_rev_parse(f"refs/heads/{record.branch}")
        if tip is None:
            raise UsageError(f"{mirror.path}: no branch {record.branch}; run "
                             f"`contrib edit {ps.target}` first")
        return tip
    try:
        clone = Git(location)
    except GitError:
        raise UsageError(f"{location}: not a git repository (--repo)") from None
    if clone.try_rev_parse(f"refs/heads/{record.branch}") is None:
        raise UsageError(f"{location}: no branch {record.branch}; run "
                         f"`contrib edit {ps.target} --repo {location}` first")
    _, head, _ = clone.try_run("symbolic-ref", "-q", "HEAD")
    if head.strip() == f"refs/heads/{record.branch}":
        worktree.check_clean(location, f"run contrib refresh {ps.target}")
    ref = edits.cache_ref(ws, ps)
    mirror.git.run("fetch", "--no-tags", "--no-write-fetch-head", "--", str(location),
                   f"+refs/heads/{record.branch}:{ref}")
    return mirror.git.rev_parse(ref)


def _range(mirror: Mirror, branch: str, tip: Sha, recorded: str, *, fetch: bool,
           clone: bool) -> Range:
    """``base..tip``, where base is the recorded base or the upstream commit the branch
    was rebased onto: the parent of the oldest commit in neither's history.

    The cache is fetched first when the branch may sit on upstream commits it
    has not seen yet (a clone, or a branch that moved off the recorded base).
    """
    git = mirror.git
    found = _on_upstream(git, branch, tip, recorded)
    if fetch and (clone or found is None or found.base != recorded):
        mirror.ensure(fetch_now=True)
        found = _on_upstream(git, branch, tip, recorded)
    if found is None:
        raise UsageError(
            f"{branch} at {tip[:12]}: no longer contains the recorded base {recorded[:12]} and "
            f"does not sit on an upstream commit of {mirror.upstream.name}; rebase it onto "
            f"one (git rebase --onto {recorded[:12]} ...) and refresh again")
    return ranges.checked(git, found)


def _on_upstream(git: Git, branch: str, tip: Sha, recorded: str) -> Range | None:
    """The range above the newest upstream (or recorded) commit under ``tip``; None when
    the branch has no such commit (a root commit in it)."""
    known = [recorded] if git.try_rev_parse(recorded) else []
    label = f"{branch} at {tip[:12]}"
    outside = git.run("rev-list", tip, "--not", "--remotes=origin", "--tags", *known).split()
    if not outside:
        return Range(tip, tip, label)  # nothing above the upstream: checked() refuses it
    parents = git.run("rev-list", "--parents", "-n", "1", outside[-1]).split()[1:]
    return Range(Sha(parents[0]), tip, label) if parents else None


def _check_not_behind(ps: Patchset, record: Edit, found: Range) -> None:
    """Refuse to take back a branch still on a base the patchset has moved on from
    (a sync or another refresh since the edit): it would undo that move."""
    current = ps.current.base
    if record.version != current and found.base == record.base != current:
        raise UsageError(
            f"{ps.target}: moved to {current[:12]} since branch {record.branch} was made on "
            f"{record.base[:12]}; rebase the branch onto it (git rebase --onto {current[:12]} "
            f"{record.base[:12]} {record.branch}) and refresh, or start over with "
            f"`contrib edit --force {ps.target}`")


def _range_diff(git: Git, ps: Patchset, found: Range) -> str | None:
    """Old version vs the branch; None when the old one cannot be built any more."""
    try:
        old = build(git, ps.current)
    except ContribError:
        return None
    return range_diff(git, old.base, old.tip, found.base, found.tip)


def _write(ws: Workspace, ps: Patchset, git: Git, found: Range,
           files: list[tuple[str, bytes]], at: str) -> dict[str, Any]:
    """One transaction: the version folder, current, the history entry, and the
    version folders the retention rule lets go."""
    old = ps.current.base
    result = REPLACED if found.base == old else REBASED
    folder = ps.version(found.base)
    replaces = folder.dir.is_dir() and not same_version(folder.dir, files)
    set_aside = replaces and folder.validation_path.is_file()
    event = Event(How.REFRESH, found.base, at, previous=old, result=result,
                  detail=f"{counted(len(files), 'patch')} from {found.source}")
    with ws.transaction() as txn:
        write_version(txn, ps, found.base, files, event)
        pruned = retention.apply(txn, ps, git).pruned
        ps.save_meta(txn)
        kept = superseded_path(txn, ps.dir, found.base) if replaces else None
    return {"result": result, "superseded": str(kept) if kept else None,
            "validation_set_aside": set_aside, "pruned": pruned}


def _remember(ws: Workspace, state: dict[str, Edit], record: Edit, git: Git,
              found: Range) -> None:
    """The edit now stands for the refreshed branch (a second refresh finds it unchanged)."""
    commits = list(reversed(git.run("rev-list", f"{found.base}..{found.tip}").split()))
    record.base = record.version = found.base
    record.commits = commits
    record.made = record.made or now_iso()
    record.known_tips = sorted({*record.known_tips, found.tip})
    state[record.patchset] = record
    edits.save(ws, state)
