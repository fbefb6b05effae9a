"""Every git operation contrib performs.

Everything else calls :class:`Git`.  Errors become :class:`GitError` with the
command and git's stderr kept and any credential scrubbed (GitPython issue
#1284 is the classic leak: a token in a remote URL in an exception's text).

The processes start in :mod:`contrib.git.process`, which strips leaked ``GIT_*``
variables from a calling hook or editor, as pre-commit's ``git.no_git_env``
does, so a ``GIT_DIR`` or ``GIT_INDEX_FILE`` from the caller never points
contrib at the wrong repository.  git runs through :mod:`subprocess` directly:
GitPython cannot remove a caller's variables from a child's environment, and
one runner gives ``-v`` one place to show every git command.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NewType

from contrib.errors import GitError
from contrib.git.blobs import BlobReader
from contrib.git.process import ProgressFn, describe, git_reason, run_long, spawn, stream
from contrib.secrets import scrub

Sha = NewType("Sha", str)  # a commit
Tree = NewType("Tree", str)  # a tree object: what a commit records, not a commit


@dataclass(frozen=True)
class Identity:
    """An author or committer: name, email and a git date string."""

    name: str
    email: str
    date: str

    def env(self, role: str) -> dict[str, str]:
        """``GIT_<ROLE>_NAME/EMAIL/DATE`` for ``role`` in (AUTHOR, COMMITTER)."""
        return {
            f"GIT_{role}_NAME": self.name,
            f"GIT_{role}_EMAIL": self.email,
            f"GIT_{role}_DATE": self.date,
        }


_STARTING = threading.Lock()  # two threads asking first start one reader


class Git:
    """A repository (bare or not) and the git commands contrib runs in it."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not _is_repository(self.path):
            raise GitError(f"{self.path}: not a git repository")
        self._blobs: BlobReader | None = None

    @classmethod
    def init(cls, path: Path, *, bare: bool = False) -> Git:
        """Create a new repository at ``path``."""
        path.mkdir(parents=True, exist_ok=True)
        status, _, err = spawn(["init", "-q", *(["--bare"] if bare else []), str(path)],
                                cwd=path, env=None, input=None, timeout=None)
        if status != 0:
            raise GitError(f"git init {path} failed: {err.decode(errors='replace').strip()}")
        return cls(path)

    @property
    def bare(self) -> bool:
        return not (self.path / ".git").exists()

    # -- running -----------------------------------------------------------

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        input: bytes | str | None = None,
        strip: bool = True,
        timeout: float | None = None,
    ) -> str:
        """Run ``git ARGS`` here and return stdout (text); raise GitError on failure."""
        out = self._execute(list(args), env=env, input=input, timeout=timeout)
        text = out.decode("utf-8", errors="surrogateescape")
        return text.strip() if strip else text

    def run_bytes(self, *args: str, env: Mapping[str, str] | None = None) -> bytes:
        """Run ``git ARGS`` and return raw stdout bytes (blobs, patches)."""
        return self._execute(list(args), env=env, input=None, timeout=None)

    def try_run(self, *args: str, env: Mapping[str, str] | None = None,
                input: bytes | str | None = None) -> tuple[int, str, str]:
        """Run ``git ARGS``; return (status, stdout, stderr) without raising."""
        status, out, err = spawn(list(args), cwd=self.path, env=env, input=input, timeout=None)
        return (status, out.decode("utf-8", errors="surrogateescape"),
                scrub(err.decode("utf-8", errors="replace")))

    def run_reporting(self, *args: str, env: Mapping[str, str] | None = None,
                      progress: ProgressFn | None = None) -> str:
        """Like :meth:`run`, for a long command that can report (push, fetch): with
        ``progress``, git runs with ``--progress`` and each of its messages goes there."""
        if progress is None:
            return self.run(*args, env=env)
        argv = [args[0], "--progress", *args[1:]]
        status, out, err = stream(argv, cwd=self.path, env=env, progress=progress)
        if status != 0:
            raise GitError(f"`git {describe(argv)}` failed in {self.path}: {err}",
                           reason=git_reason(err))
        return out.decode("utf-8", errors="surrogateescape").strip()

    def _execute(self, args: list[str], *, env: Mapping[str, str] | None,
                 input: bytes | str | None, timeout: float | None) -> bytes:
        status, out, err = spawn(args, cwd=self.path, env=env, input=input, timeout=timeout)
        if status != 0:
            stderr = scrub(err.decode("utf-8", errors="replace")).strip()
            raise GitError(f"`git {describe(args)}` failed in {self.path}: {stderr}",
                           reason=git_reason(stderr))
        return out

    # -- objects -----------------------------------------------------------

    def rev_parse(self, rev: str) -> Sha:
        """Full sha of the commit ``rev`` names; GitError if it names none."""
        status, out, _ = self.try_run("rev-parse", "--verify", "--quiet", "--end-of-options",
                                      f"{rev}^{{commit}}")
        if status != 0:
            raise GitError(f"unknown revision {rev!r} in {self.path}")
        return Sha(out.strip())

    def try_rev_parse(self, rev: str) -> Sha | None:
        """Like rev_parse, but None when ``rev`` names no commit."""
        try:
            return self.rev_parse(rev)
        except GitError:
            return None

    def read_blob(self, rev: str, path: str) -> bytes | None:
        """Content of ``path`` at ``rev`` (commit or tree), None if absent."""
        return self.blobs.read(rev, path)

    def read_blobs(self, rev: str, paths: Sequence[str]) -> dict[str, bytes | None]:
        """Contents of many ``paths`` at ``rev`` (None where absent), in one request."""
        return self.blobs.read_many(rev, paths)

    @property
    def blobs(self) -> BlobReader:
        """This repository's persistent blob reader (started on the first read)."""
        if self._blobs is None:
            with _STARTING:
                if self._blobs is None:
                    self._blobs = BlobReader(self.path)
        return self._blobs

    def ls_tree_paths(self, rev: str) -> list[str]:
        """Every file path in the tree of ``rev``."""
        out = self.run("ls-tree", "-r", "-z", "--name-only", rev, strip=False)
        return [p for p in out.split("\0") if p]

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        status, _, _ = self.try_run("merge-base", "--is-ancestor", ancestor, descendant)
        return status == 0

    def commit_info(self, rev: str) -> CommitInfo:
        """Subject, author and dates of one commit."""
        fmt = "%H%x00%s%x00%an%x00%ae%x00%aI%x00%cI"
        sha, subject, name, email, adate, cdate = self.run(
            "show", "-s", f"--format={fmt}", rev).split("\0")
        return CommitInfo(Sha(sha), subject, name, email, adate, cdate)

    def line_time(self, rev: str, path: str, line: int) -> int | None:
        """When line ``line`` of ``path`` at ``rev`` was written (``git blame``'s author
        time, seconds since the epoch); None when the file or line is not there."""
        status, out, _ = self.try_run("blame", "--porcelain", "-L", f"{line},{line}", rev,
                                      "--", path)
        found = re.search(r"^author-time (\d+)$", out, re.MULTILINE) if status == 0 else None
        return int(found.group(1)) if found else None

    def count(self, range_: str) -> int:
        return int(self.run("rev-list", "--count", range_))

    def commit_dates(self, revs: Sequence[str]) -> dict[str, str]:
        """Committer date (ISO 8601) of each full sha in ``revs`` that the repository
        has, in one git run (status reads one per patchset)."""
        wanted = list(dict.fromkeys(revs))
        if not wanted:
            return {}
        out = self.run("log", "--no-walk=unsorted", "--ignore-missing", "--format=%H %cI",
                       *wanted)
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

    def behind_counts(self, tip: str, bases: Sequence[str]) -> dict[str, int]:
        """``git rev-list --count BASE..TIP`` for every base (all present here), in two
        git runs instead of one per base.

        Only the commits not common to every base are walked (``--not`` their
        octopus merge bases); each is marked with the bases it is an ancestor of,
        children before parents (``--topo-order``), and a base is behind by the
        commits the tip reaches and it does not.
        """
        wanted = list(dict.fromkeys(bases))
        if not wanted:
            return {}
        status, common, _ = self.try_run("merge-base", "--octopus", "--all", *wanted)
        stop = common.split() if status == 0 else []
        walked = self.run("rev-list", "--topo-order", "--parents", tip, *wanted, "--not", *stop)
        parents = {sha: rest for sha, *rest in (line.split() for line in walked.splitlines())}
        bit = {base: 1 << n for n, base in enumerate(wanted)}
        from_tip = 1 << len(wanted)
        marks = dict.fromkeys(parents, 0)
        for sha, mark in [(tip, from_tip), *bit.items()]:
            if sha in marks:
                marks[sha] |= mark
        # --topo-order lists every child before its parents, so a commit's marks are
        # final when it is reached.
        for sha, its_parents in parents.items():
            for parent in its_parents:
                if parent in marks:
                    marks[parent] |= marks[sha]
        tally = Counter(mark for mark in marks.values() if mark & from_tip)
        return {base: sum(n for mark, n in tally.items() if not mark & bit[base])
                for base in wanted}


    # -- temporary indexes -------------------------------------------------

    @contextmanager
    def temp_index(self, tree: str | None = None) -> Iterator[dict[str, str]]:
        """A throwaway index (``GIT_INDEX_FILE``), optionally loaded with ``tree``.

        Yields the env to pass to :meth:`run`.  Plumbing on a temporary index
        never touches a checkout or the repository's own index.
        """
        with tempfile.TemporaryDirectory(prefix="contrib-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if tree is not None:
                self.run("read-tree", tree, env=env)
            yield env

    def commit_paths(self, paths: Sequence[str], message: str, *,
                     env: Mapping[str, str] | None = None, verify: bool = True) -> Sha | None:
        """Commit the working tree's state of ``paths`` (new, changed and deleted files) on
        HEAD, as ``git add -A -- PATHS && git commit -- PATHS`` would; the new commit, or
        None when HEAD has them already (the index is brought in step all the same).

        The staging happens on a copy of the index, which then replaces the index as git
        itself replaces it (written as ``index.lock``, renamed over ``index``): a contrib
        killed mid-``git add`` leaves no ``index.lock`` blocking the next run and the
        user's own git until someone deletes it by hand.
        """
        real = Path(self.run("rev-parse", "--path-format=absolute", "--git-path", "index"))
        before = _stat_key(real)
        head = self.try_rev_parse("HEAD")
        with self.temp_index(None if before is not None or head is None else head) as staged:
            if before is not None:
                shutil.copyfile(real, staged["GIT_INDEX_FILE"])
            both = {**(env or {}), **staged}
            self.run("add", "-A", "--", *paths, env=both)
            status, _, _ = self.try_run("diff", "--cached", "--quiet", *(["HEAD"] if head else []),
                                        "--", *paths, env=both)
            if status != 0:
                self.run("commit", "-q", *([] if verify else ["--no-verify"]), "-m", message,
                         "--", *paths, env=both)
            if _stat_key(real) != before or not _install_index(
                    Path(staged["GIT_INDEX_FILE"]), real):
                self.run("reset", "-q", "--", *paths)  # the index moved meanwhile: git's way
        return self.rev_parse("HEAD") if status != 0 else None

    def write_tree(self, env: Mapping[str, str]) -> Tree:
        """The tree of the (temporary) index named in ``env``."""
        return Tree(self.run("write-tree", env=env))

    def tree_of(self, rev: str) -> Tree:
        """The tree a commit records (through the batch reader: no process)."""
        found = self.blobs.objects([f"{rev}^{{tree}}"])[0]
        if found is None or found[1] != "tree":
            raise GitError(f"unknown revision {rev!r} in {self.path}")
        return Tree(found[0])

    def tree_entries(self, tree: str) -> list[tuple[str, str, str, str]] | None:
        """(mode, type, sha, name) of each entry of ``tree`` (or a commit's), as
        ``ls-tree`` prints them, read through the batch reader (no process); None when
        it names no tree."""
        found = self.blobs.objects([f"{tree}^{{tree}}"])[0]
        return _entries(found[2], len(found[0]) // 2) if found and found[1] == "tree" else None

    def commit_tree(self, tree: Tree, parents: Sequence[str], message: str,
                    author: Identity, committer: Identity | None = None) -> Sha:
        """Create a commit object; committer defaults to the author (reproducible shas)."""
        env = author.env("AUTHOR") | (committer or author).env("COMMITTER")
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return Sha(self.run(*args, env=env, input=message))


    def delete_ref(self, ref: str) -> None:
        self.try_run("update-ref", "-d", ref)


@dataclass(frozen=True)
class CommitInfo:
    sha: Sha
    subject: str
    author_name: str
    author_email: str
    author_date: str
    committer_date: str


def enclosing_repo(path: Path) -> Path | None:
    """The work tree holding ``path`` (the nearest of it and its parents with a ``.git``),
    or None when it lies in none."""
    return next((f for f in (path, *path.parents) if (f / ".git").exists()), None)


def _is_repository(path: Path) -> bool:
    """A work tree (``.git`` folder or file) or a bare repository, as git sees one."""
    if (path / ".git").exists():
        return True
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (
        path / "refs").is_dir()


def run_git(args: list[str], *, timeout: float | None = None) -> str:
    """``git ARGS`` outside any repository (``--version``, ``ls-remote URL``, ``-C DIR``);
    stdout, or GitError (GitTimeout past ``timeout`` seconds)."""
    status, out, err = spawn(args, cwd=Path.cwd(), env=None, input=None, timeout=timeout)
    if status != 0:
        stderr = scrub(err.decode("utf-8", errors="replace")).strip()
        raise GitError(f"`git {describe(args)}` failed: {stderr}", reason=git_reason(stderr))
    return out.decode("utf-8", errors="surrogateescape")


def clone_bare(url: str, dest: Path, *, partial: bool, progress: ProgressFn | None) -> None:
    """``git clone --bare`` (partial where asked) into ``dest``."""
    args = ["clone", "--bare"]
    if partial:
        args.append("--filter=blob:none")
    run_long(args, ["--", url, str(dest)], progress=progress, what=f"clone {url}")


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _install_index(source: Path, index: Path) -> bool:
    """Replace ``index`` by ``source`` under git's own lock (``index.lock``, renamed into
    place); False when another git holds the lock."""
    lock = index.with_name(index.name + ".lock")
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "wb") as out, source.open("rb") as data:
            shutil.copyfileobj(data, out)
        os.replace(lock, index)
    except BaseException:
        lock.unlink(missing_ok=True)
        raise
    return True


def _entries(data: bytes, width: int) -> list[tuple[str, str, str, str]]:
    """A tree object's entries: ``<mode> <name>\\0<raw sha>`` each (``width`` bytes)."""
    out, at = [], 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        mode = data[at:space].decode("ascii").zfill(6)
        kind = "tree" if mode == "040000" else "commit" if mode == "160000" else "blob"
        sha = data[nul + 1:nul + 1 + width].hex()
        out.append((mode, kind, sha, data[space + 1:nul].decode("utf-8", "surrogateescape")))
        at = nul + 1 + width
    return out
