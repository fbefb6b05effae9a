"""Open a patchset as commits on a git branch, for ``contrib edit``.

Materialises the current version as commits on its base -- the patches'
authors, dates and messages, committer = author, so the same version always
gives the same commits -- on a branch: in a worktree of the upstream cache
(default ``.contrib/edit/UPSTREAM--NAME/``; a ``--path`` anywhere but inside
``patchsets/`` and ``.contrib/``) on ``contrib/WSID/NAME``, kept apart from
the other workspaces sharing the cache, or as branch ``contrib/NAME`` of the
user's clone.  A branch holding commits contrib did not make is never moved
without ``--force``; what was made is recorded for ``contrib refresh``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contrib.carry import edits
from contrib.carry.edits import Edit, Mode
from contrib.carry.rangediff import Built, build
from contrib.clock import now_iso
from contrib.errors import GitError, UsageError
from contrib.git import worktree
from contrib.git.cache import Mirror
from contrib.git.process import ProgressFn
from contrib.git.repo import Git
from contrib.workspace.model import Patchset, Workspace
from contrib.workspace.txn import check_inside


@dataclass
class Opened:
    """An edit as ``contrib edit`` made (or found) it."""

    record: Edit
    where: Path
    built: Built
    moved: bool  # False: already open as it should be


def open_edit(ws: Workspace, target: str, *, path: Path | None, repo: Path | None,
              force: bool, progress: ProgressFn | None = None) -> Opened:
    """Open the current version of ``target`` as a branch; UsageError on a refusal."""
    if path is not None and repo is not None:
        raise UsageError("give --path DIR (a new worktree) or --repo CLONE, not both")
    ps = ws.patchset(target)
    if len(ps.branches) > 1 and "@" not in target:
        choices = ", ".join(ps.on(b).selector for b in ps.branches)
        raise UsageError(f"{target}: carried on {len(ps.branches)} branches ({ps.targets_at}); "
                         f"say which target to edit: {choices}")
    if path is not None:
        _check_path(ws, ps, path)
    mirror = Mirror(ws.config.upstream(ps.upstream)).ensure(fetch_now=False,
                                                            progress=progress)
    mirror.resolve(ps.current.base)  # fetches once if the cache lacks the base
    built = build(mirror.git, ps.current)
    state = edits.load(ws)
    previous = state.get(ps.target)
    ours = {built.tip, *(previous.known_tips if previous else ())}
    if repo is not None:
        where, moved = _into_clone(ws, ps, mirror, built, repo.resolve(), ours, force)
        mode, branch = Mode.REPO, edits.branch_of(ps)
    else:
        where, moved, branch = _into_worktree(ws, ps, mirror.git, built, path, previous, ours,
                                              force)
        mode = Mode.WORKTREE
    record = Edit(ps.target, built.base, ps.current.base, [a.commit for a in built.commits],
                  mode, edits.stored_where(ws, where), branch, now_iso(), sorted(ours))
    state[ps.target] = record
    edits.save(ws, state)
    return Opened(record, where, built, moved)


# -- a worktree of the upstream cache ----------------------------------------------

def _check_path(ws: Workspace, ps: Patchset, path: Path) -> None:
    """Refuse (exit 2, before anything is made) a --path inside the folders contrib keeps:
    ``patchsets/`` (the patchsets themselves) and ``.contrib/`` (its state)."""
    resolved = path.resolve()
    for folder in (ws.root / "patchsets", ws.state_dir):
        if resolved.is_relative_to(folder.resolve()):
            raise UsageError(
                f"--path {path}: inside the workspace's {folder.name}/, which contrib "
                f"manages; choose a folder outside {ws.root / 'patchsets'} and "
                f"{ws.state_dir}, or leave out --path (the worktree is then "
                f"{edits.default_path(ws, ps)})")


def _into_worktree(ws: Workspace, ps: Patchset, git: Git, built: Built, path: Path | None,
                   previous: Edit | None, ours: set[str],
                   force: bool) -> tuple[Path, bool, str]:
    """This workspace's branch of the patchset in the cache (contrib/WSID/NAME) at
    ``built.tip``, checked out at the location; (location, moved, branch)."""
    if path is None:  # inside the workspace: no symlinked folder may redirect it
        check_inside(ws.root, edits.default_path(ws, ps))
    location = (path or edits.default_path(ws, ps)).resolve()
    branch = edits.cache_branch(ws, ps)
    git.try_run("worktree", "prune")
    marker = edits.marker_folder(ws, ps)
    if previous is not None and previous.mode == Mode.WORKTREE and previous.branch != branch:
        # An edit recorded on another branch of the cache: contrib/NAME (made before
        # branches were kept apart per workspace), or made before the workspace moved.
        if _still_open(ws, git, previous, built, location, marker):
            return location, False, previous.branch
        _leave(ws, git, ps, previous, ours, force)
    have = _ours_or_forced(git, ps, branch, ours, force)
    half_made = (marker / worktree.PREPARING).exists()  # a run killed while making it
    checked_out = _worktrees_on(git, branch)
    if have == built.tip and checked_out == [location] and worktree.is_whole(marker, location):
        return location, False, branch  # already open as asked
    for old in checked_out:
        if old == location and half_made:
            worktree.remove(git, old)
        else:
            _release(git, old, force, previous)
    _check_free(location)
    # The old value (or "" for none) makes git refuse if the branch moved meanwhile.
    git.run("update-ref", f"refs/heads/{branch}", built.tip, have or "")
    with worktree.preparing(marker, built.tip):
        worktree.add(git, location, built.tip, branch=branch)
    return location, True, branch


def _ours_or_forced(git: Git, ps: Patchset, branch: str, ours: set[str],
                    force: bool) -> str | None:
    """``branch``'s tip in the cache; UsageError when it holds commits contrib did not make
    for this version (they are the user's until refreshed), unless ``force``."""
    have = git.try_rev_parse(f"refs/heads/{branch}")
    if have is not None and have not in ours and not force:
        raise UsageError(
            f"{git.path}: branch {branch} is at {have[:12]}, which contrib did not make for "
            f"this version ({ps.target}): `contrib refresh {ps.target}` takes those commits "
            "in; --force replaces them")
    return have


def _still_open(ws: Workspace, git: Git, previous: Edit, built: Built, location: Path,
                marker: Path) -> bool:
    """The recorded edit is open at ``location`` exactly as ``edit`` would make it now."""
    have = git.try_rev_parse(f"refs/heads/{previous.branch}")
    return (have == built.tip and previous.location(ws) == location
            and location in _worktrees_on(git, previous.branch)
            and worktree.is_whole(marker, location))


def _leave(ws: Workspace, git: Git, ps: Patchset, previous: Edit, ours: set[str],
           force: bool) -> None:
    """Move off the recorded branch: refuse while it holds commits not refreshed (unless
    --force), then remove this workspace's worktree of it.  The branch itself stays:
    another workspace's edit may stand on it."""
    _ours_or_forced(git, ps, previous.branch, ours, force)
    mine = previous.location(ws)
    if mine in _worktrees_on(git, previous.branch):
        _release(git, mine, force, previous)


def _worktrees_on(git: Git, branch: str) -> list[Path]:
    """The worktrees of ``git`` that have ``branch`` checked out."""
    found, current = [], None
    for line in git.run("worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            current = Path(line.removeprefix("worktree ")).resolve()
        elif line == f"branch refs/heads/{branch}" and current is not None:
            found.append(current)
    return found


def _release(git: Git, old: Path, force: bool, previous: Edit | None) -> None:
    """Remove an earlier worktree of the branch: ours and clean, or with --force."""
    if not force:
        if previous is None or previous.mode != Mode.WORKTREE:
            raise UsageError(f"{old}: branch is checked out there by someone else; "
                             "--force removes that worktree")
        worktree.check_clean(old, "run contrib edit")
    worktree.remove(git, old)


def _check_free(location: Path) -> None:
    if location.exists() and any(location.iterdir()):
        raise UsageError(f"{location}: exists and is not empty; choose another --path, or "
                         "remove it")


# -- the user's clone ----------------------------------------------------------------

def _into_clone(ws: Workspace, ps: Patchset, mirror: Mirror, built: Built, clone: Path,
                ours: set[str], force: bool) -> tuple[Path, bool]:
    """Branch contrib/NAME of ``clone`` at ``built.tip`` (fetched from the cache)."""
    try:
        local = Git(clone)
    except GitError:
        raise UsageError(f"--repo {clone}: not a git repository") from None
    branch = edits.branch_of(ps)
    have = local.try_rev_parse(f"refs/heads/{branch}")
    if have == built.tip:
        return clone, False
    if have is not None and have not in ours and not force:
        raise UsageError(
            f"{clone}: branch {branch} already exists at {have[:12]} with commits contrib did "
            f"not make; rename or delete it, or pass --force to replace it")
    status, head, _ = local.try_run("symbolic-ref", "-q", "HEAD")
    if have is not None and status == 0 and head.strip() == f"refs/heads/{branch}":
        raise UsageError(f"{clone}: {branch} is checked out there; check out another branch "
                         "so contrib can move it, then run contrib edit again")
    ref = edits.cache_ref(ws, ps)
    mirror.git.run("update-ref", ref, built.tip)
    try:
        local.run("fetch", "--no-tags", "--no-write-fetch-head", "--", str(mirror.path),
                  f"+{ref}:refs/heads/{branch}")
    except GitError as exc:
        raise UsageError(f"--repo {clone}: cannot fetch the commits into it: {exc.reason}"
                         ) from None
    return clone, True
