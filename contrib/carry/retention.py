"""Which version folders a patchset keeps in the working tree; the rest is left to git.

Every carry writes a version folder, and an autopilot that runs every six hours
would leave about 1,400 of them a year per patchset, paid for by every
``status``, ``log`` and clone.  The workspace is a git repository whose history
already holds the old folders, so the working tree keeps only:

- the current version (of each target branch the patchset is carried on);
- every version a PR was pushed from (``[[history]]`` push events, ``[pr]``);
- every version whose validation record holds a run on GPUs (runs that cannot
  be repeated on a laptop);
- every version at a tagged upstream commit (a release);
- the last ``keep`` others (``[versions] keep`` in contrib.toml, default 5).

A folder leaves only when the workspace repository's HEAD holds it exactly as it
is on disk, so nothing is lost; with no repository, or with ``keep = "all"``,
everything stays and ``contrib doctor`` says why.  The removal is part of the
transaction that wrote the new version (:meth:`Transaction.remove`), together
with the folder's ``.contrib/superseded/`` copies.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from contrib.carry.versions import How, chronological, read_history, superseded
from contrib.errors import ContribError
from contrib.git.repo import Git
from contrib.record import read_record
from contrib.workspace.model import Patchset, Version
from contrib.workspace.txn import Transaction


@dataclass
class Retention:
    """What the rule decided for one patchset: the versions kept (and why) and pruned."""

    kept: dict[str, str] = field(default_factory=dict)  # base -> why it stays
    pruned: list[str] = field(default_factory=list)
    held: str = ""  # why nothing could be pruned, when that is so


def decide(ps: Patchset, upstream: Git, keep: int | None, repo: WorkspaceHistory | None,
           *, current: str | None = None) -> Retention:
    """Apply the rule to ``ps``'s version folders (``current`` overrides ``ps.current``
    for a version the caller is writing now)."""
    currents = {ps.on(branch).current.base for branch in ps.branches} | {
        current or ps.current.base}
    versions = chronological(ps, upstream)
    bases = [v.base for v in versions]
    known, releases = set(upstream.commit_dates(bases)), _tags(upstream)
    out = Retention()
    if keep is None:
        out.held = 'keep = "all" in [versions] of contrib.toml'
    elif repo is None:
        out.held = "the workspace is not in a git repository, which would keep the history"
    pushed = _pushed(ps)
    others = []
    for version in versions:
        why = _protected(version, currents, pushed, known, releases)
        if why:
            out.kept[version.base] = why
        else:
            others.append(version)
    recent = others[-keep:] if keep else []
    for version in others:
        if out.held or version in recent:
            out.kept[version.base] = "recent" if version in recent else "kept"
        elif repo is not None and not repo.holds(version.dir):
            out.kept[version.base] = "not committed yet"
        else:
            out.pruned.append(version.base)
    return out


def prune(txn: Transaction, ps: Patchset, retention: Retention) -> None:
    """Stage the removal of the pruned folders (and their superseded copies) in ``txn``."""
    for base in retention.pruned:
        txn.remove(ps.dir / base)
        for kept in superseded(ps, base):
            txn.remove(kept.dir)


def _pushed(ps: Patchset) -> set[str]:
    pushed = {e.version for e in read_history(ps) if e.how == How.PUSH}
    for target in (ps.on(branch) for branch in ps.branches):
        if target.pr is not None:
            pushed |= {v for v in (target.pr.version, target.pr.previous_version) if v}
    return pushed


def _tags(upstream: Git) -> dict[str, str]:
    """Commit -> a tag naming it, for every tag of the upstream cache, in one git run."""
    out = upstream.run("for-each-ref", "--format=%(objectname) %(*objectname) %(refname:short)",
                       "refs/tags")
    found: dict[str, str] = {}
    for line in out.splitlines():
        sha, peeled, name = (line.split(" ", 2) + ["", ""])[:3]
        found.setdefault(peeled or sha, name)  # an annotated tag names the commit it peels to
    return found


def _protected(version: Version, currents: set[str], pushed: set[str], known: set[str],
               releases: dict[str, str]) -> str:
    """Why ``version`` must stay in the working tree ("" when nothing protects it)."""
    if version.base in currents:
        return "current"
    if version.base in pushed:
        return "a PR was pushed from it"
    if _gpu_run(version):
        return "its validation record holds a run on GPUs"
    if version.base in releases:
        return f"at upstream tag {releases[version.base]}"
    if version.base not in known:  # an unknown commit is kept too: nothing is certain
        return "base not in the cache"
    return ""


def _gpu_run(version: Version) -> bool:
    try:
        record = read_record(version.validation_path)
    except ContribError:
        return True  # unreadable: keep it for a person to look at
    return record is not None and any(run.host.gpus for run in record.runs)


class WorkspaceHistory:
    """The git repository holding a workspace, asked whether HEAD keeps a folder."""

    def __init__(self, git: Git, top: Path) -> None:
        self.git, self.top = git, top

    @classmethod
    def find(cls, root: Path) -> WorkspaceHistory | None:
        """The repository holding ``root`` with at least one commit; None otherwise."""
        for folder in (root, *root.parents):
            if (folder / ".git").exists():
                git = Git(folder)
                return cls(git, folder) if git.try_rev_parse("HEAD") else None
        return None

    def holds(self, folder: Path) -> bool:
        """Whether HEAD has ``folder`` exactly as it is in the working tree."""
        rel = folder.relative_to(self.top).as_posix()
        if not self.git.run("ls-tree", "-d", "HEAD", "--", rel):
            return False
        status, out, _ = self.git.try_run("status", "--porcelain", "--untracked-files=all",
                                          "--ignored=no", "--", rel)
        return status == 0 and not out.strip()


def apply(txn: Transaction, ps: Patchset, upstream: Git) -> Retention:
    """Decide for ``ps`` (whose new version ``txn`` is writing) and stage the pruning."""
    ws = ps.workspace
    retention = decide(ps, upstream, ws.config.keep_versions, WorkspaceHistory.find(ws.root))
    prune(txn, ps, retention)
    return retention


# -- pruned versions, read back from the workspace's git history ---------------------------

@dataclass
class Pruned(Version):
    """A version folder the rule removed, as the commit ``kept_in`` still holds it.

    Its files are written out under ``.contrib/pruned/`` when first read, so every
    reader of a :class:`Version` (log, diff, range-diff) works on it unchanged."""

    kept_in: str = ""  # a commit of the workspace repository whose tree has the folder
    folder: Path = Path()

    @property
    def dir(self) -> Path:
        return self.folder


def pruned_versions(ps: Patchset) -> list[Pruned]:
    """The versions of ``ps`` that left the working tree and live in the workspace's git
    history: for each, the last commit that still held its folder."""
    repo = WorkspaceHistory.find(ps.workspace.root)
    if repo is None:
        return []
    rel = ps.dir.relative_to(repo.top).as_posix()
    status, out, _ = repo.git.try_run("log", "--no-renames", "--format=commit %H", "--diff-filter=D",
                                      "--name-only", "--", f"{rel}/")
    found: dict[str, str] = {}
    commit = ""
    for line in out.splitlines() if status == 0 else []:
        if line.startswith("commit "):
            commit = line.split()[1]
        elif line.endswith("/series") and line.count("/") == rel.count("/") + 2:
            base = line.split("/")[-2]
            if not (ps.dir / base).is_dir():
                found.setdefault(base, commit)  # newest first: the last deletion wins
    cache = ps.workspace.state_dir / "pruned" / f"{ps.upstream}--{ps.name}"
    return [_materialize(repo, ps, rel, base, f"{commit}^", cache)
            for base, commit in sorted(found.items())]


def _materialize(repo: WorkspaceHistory, ps: Patchset, rel: str, base: str, rev: str,
                 cache: Path) -> Pruned:
    folder = cache / base
    if not folder.is_dir():  # written aside and renamed: a folder here is whole
        names = repo.git.run("ls-tree", "--name-only", rev, "--", f"{rel}/{base}/").split("\n")
        blobs = repo.git.read_blobs(rev, [n for n in names if n])
        aside = cache / f".{base}.tmp"
        shutil.rmtree(aside, ignore_errors=True)
        aside.mkdir(parents=True)
        for name, data in blobs.items():
            if data is not None:
                (aside / name.rsplit("/", 1)[-1]).write_bytes(data)
        os.replace(aside, folder)
    return Pruned(ps, base, repo.git.rev_parse(rev), folder)
