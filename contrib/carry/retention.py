"""Which version folders a patchset keeps in the working tree; the rest is left to git.

Every carry writes a version folder, and an autopilot that runs every six hours
would leave about 1,400 of them a year per patchset, paid for by every
``status``, ``log`` and clone.  The workspace is a git repository whose history
already holds the old folders, so the working tree keeps only:

- the current version (of each target branch the patchset is carried on);
- the version each target's PR head shows now (``[pr] version``);
- per arch, the latest version whose validation record holds a run on GPUs
  (runs that cannot be repeated on a laptop);
- every version at a tagged upstream commit (a release);
- the last ``keep`` others (``[versions] keep`` in contrib.toml, default 5).

Older pushes and GPU runs are not kept for ever: an autopilot with PRs pushes
every version it makes, and would keep them all.  A folder leaves only when the
workspace repository's HEAD holds it exactly as it is on disk (a file git
ignores counts as one HEAD lacks), so nothing is lost; with no repository, or with ``keep = "all"``,
everything stays and ``contrib doctor`` says why.  A folder that holds a file contrib
does not write there (a person's notes, committed by ``sync --commit`` or by hand)
stays too: the file is the person's, and the working tree is where they look for it.  The removal is part of the
transaction that wrote the new version (:meth:`Transaction.remove`), together
with the folder's ``.contrib/superseded/`` copies.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from contrib.carry.versions import chronological, superseded
from contrib.errors import ConfigError, ContribError
from contrib.git.repo import Git
from contrib.record import read_record
from contrib.workspace.layout import SERIES_NAME
from contrib.workspace.model import VALIDATION_NAME, Patchset, Version
from contrib.workspace.table import SHA_RE
from contrib.workspace.txn import Transaction, check_inside


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
    pushed, validated = _pushed(ps), _gpu_validated(versions)
    others = []
    for version in versions:
        why = _protected(version, currents, pushed, validated, known, releases)
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
        elif why := _users_files(version):
            out.kept[version.base] = why
        else:
            out.pruned.append(version.base)
    return out


def _users_files(version: Version) -> str:
    """Why ``version``'s folder holds something contrib does not write there (a person's
    notes, a log of a run), "" when it does not: such a folder never leaves the working
    tree.  contrib writes ``series``, the patches it names and ``validation.json``."""
    try:
        own = {SERIES_NAME, VALIDATION_NAME, *version.series()}
    except ContribError:  # then nothing tells contrib's files from a person's
        return "its series cannot be read"
    theirs = sorted(p.name for p in version.dir.iterdir() if p.name not in own)
    return f"holds files contrib does not write: {', '.join(theirs)}" if theirs else ""


def prune(txn: Transaction, ps: Patchset, retention: Retention) -> None:
    """Stage the removal of the pruned folders (and their superseded copies) in ``txn``."""
    for base in retention.pruned:
        txn.remove(ps.dir / base)
        for kept in superseded(ps, base):
            txn.remove(kept.dir)


def _pushed(ps: Patchset) -> set[str]:
    """The versions the targets' PR heads show now (an older push is in git's history)."""
    return {target.pr.version for target in (ps.on(branch) for branch in ps.branches)
            if target.pr is not None and target.pr.version}


def _gpu_validated(versions: list[Version]) -> dict[str, str]:
    """Base -> why, for the newest version of ``versions`` (oldest first) with a GPU run
    of each arch, and for every version whose record cannot be read (for a person)."""
    out: dict[str, str] = {}
    newest: dict[str, str] = {}
    for version in versions:
        try:
            record = read_record(version.validation_path)
        except ContribError:
            out[version.base] = "its validation record cannot be read"
            continue
        for run in record.runs if record is not None else ():
            if run.host.gpus:
                newest[run.arch] = version.base
    for arch, base in sorted(newest.items()):
        out.setdefault(base, f"the latest run on GPUs for {arch}")
    return out


def _tags(upstream: Git) -> dict[str, str]:
    """Commit -> a tag naming it, for every tag of the upstream cache, in one git run."""
    out = upstream.run("for-each-ref", "--format=%(objectname) %(*objectname) %(refname:short)",
                       "refs/tags")
    found: dict[str, str] = {}
    for line in out.splitlines():
        sha, peeled, name = (line.split(" ", 2) + ["", ""])[:3]
        found.setdefault(peeled or sha, name)  # an annotated tag names the commit it peels to
    return found


def _protected(version: Version, currents: set[str], pushed: set[str],
               validated: dict[str, str], known: set[str], releases: dict[str, str]) -> str:
    """Why ``version`` must stay in the working tree ("" when nothing protects it)."""
    if version.base in currents:
        return "current"
    if version.base in pushed:
        return "a PR's head shows it"
    if version.base in validated:
        return validated[version.base]
    if version.base in releases:
        return f"at upstream tag {releases[version.base]}"
    if version.base not in known:  # an unknown commit is kept too: nothing is certain
        return "base not in the cache"
    return ""


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
        """Whether HEAD has ``folder`` exactly as it is in the working tree: no change,
        no untracked file, and no file git ignores (a notes file no commit holds)."""
        rel = folder.relative_to(self.top).as_posix()
        if not self.git.run("ls-tree", "-d", "HEAD", "--", rel):
            return False
        status, out, _ = self.git.try_run("status", "--porcelain", "--untracked-files=all",
                                          "--ignored=matching", "--", rel)
        return status == 0 and not out.strip()


def apply(txn: Transaction, ps: Patchset, upstream: Git) -> Retention:
    """Decide for ``ps`` (whose new version ``txn`` is writing) and stage the pruning."""
    ws = ps.workspace
    keep = ws.config.keep_versions
    if keep is None or len([v for v in ps.versions() if v.base != ps.current.base]) <= keep:
        # Every other version is one of the last ``keep``: nothing can leave, and the
        # upstream's dates and tags (two git runs per carry) need not be asked for.
        return Retention()
    retention = decide(ps, upstream, keep, WorkspaceHistory.find(ws.root))
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
    history: for each, the last commit that still held its folder (HEAD itself for a
    removal not committed yet).  Only a folder named by a full sha is a version."""
    repo = WorkspaceHistory.find(ps.workspace.root)
    if repo is None:
        return []
    rel = ps.dir.relative_to(repo.top).as_posix()
    found = {base: "HEAD" for base in _held_by_head(repo, rel) if not (ps.dir / base).is_dir()}
    status, out, _ = repo.git.try_run("log", "--no-renames", "--format=commit %H", "--diff-filter=D",
                                      "--name-only", "--", f"{rel}/")
    commit = ""
    for line in out.splitlines() if status == 0 else []:
        if line.startswith("commit "):
            commit = line.split()[1]
        elif line.endswith("/series") and line.count("/") == rel.count("/") + 2:
            base = line.split("/")[-2]
            if SHA_RE.fullmatch(base) and not (ps.dir / base).is_dir():
                found.setdefault(base, f"{commit}^")  # newest first: the last deletion wins
    if not found:
        return []
    cache = _pruned_cache(ps)
    return [_materialize(repo, ps, rel, base, rev, cache) for base, rev in sorted(found.items())]


def _held_by_head(repo: WorkspaceHistory, rel: str) -> list[str]:
    """The version folders (full-sha names) HEAD holds under ``rel``."""
    status, out, _ = repo.git.try_run("ls-tree", "-d", "--name-only", "HEAD", "--", f"{rel}/")
    names = [line.rsplit("/", 1)[-1] for line in out.splitlines()] if status == 0 else []
    return [name for name in names if SHA_RE.fullmatch(name)]


def _pruned_cache(ps: Patchset) -> Path:
    """``.contrib/pruned/UPSTREAM--NAME``, refused when it (or a folder above it inside
    the workspace) is a symlink: the copies would be written wherever it points."""
    cache = ps.workspace.state_dir / "pruned" / f"{ps.upstream}--{ps.name}"
    for folder in (ps.workspace.state_dir, cache.parent, cache):
        if folder.is_symlink():
            raise ConfigError(f"{folder}: is a symlink; contrib writes its copies of pruned "
                              "versions only inside the workspace: remove the link")
        _must_be_folder(folder)
    check_inside(ps.workspace.root, cache)
    return cache


def _must_be_folder(path: Path) -> None:
    """ConfigError (exit 2) naming ``path`` when something other than a folder is there."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path}: is a file where contrib keeps a folder of its copies of "
                          "pruned versions; move it away or delete it (contrib writes the "
                          "folder again from the workspace's git history)")


def _materialize(repo: WorkspaceHistory, ps: Patchset, rel: str, base: str, rev: str,
                 cache: Path) -> Pruned:
    folder = cache / base
    if folder.is_symlink():
        raise ConfigError(f"{folder}: is a symlink; remove it (contrib writes it again from "
                          "the workspace's git history)")
    _must_be_folder(folder)
    if not folder.is_dir():  # written aside and renamed: a folder here is whole
        names = repo.git.run("ls-tree", "--name-only", rev, "--", f"{rel}/{base}/").split("\n")
        blobs = repo.git.read_blobs(rev, [n for n in names if n])
        aside = cache / f".{base}.tmp"
        if aside.is_file() or aside.is_symlink():  # contrib's own scratch name, never a user's
            aside.unlink()
        shutil.rmtree(aside, ignore_errors=True)
        aside.mkdir(parents=True)
        for name, data in blobs.items():
            if data is not None:
                (aside / name.rsplit("/", 1)[-1]).write_bytes(data)
        os.replace(aside, folder)
    return Pruned(ps, base, repo.git.rev_parse(rev), folder)
