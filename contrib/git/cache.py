"""Upstream caches: one bare clone per upstream URL, outside the workspace.

The cache lives in platformdirs' user cache dir (``CONTRIB_CACHE`` overrides)
and is shared by every patchset and workspace using that upstream.  Remote
URLs get a partial clone (``--filter=blob:none``): sglang is ~1.2 GB and the
blobs contrib needs are few.  A clone is made aside and renamed into place,
so an interrupted first clone leaves nothing half-made; a per-cache file lock
serialises fetches from workspaces sharing the cache (git's own ref locks
protect the rest).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contrib import environ
from contrib.errors import ConfigError, ContribError, GitError, UpstreamUnreachable
from contrib.git.process import ProgressFn, fetch
from contrib.git.repo import Git, Sha, clone_bare
from contrib.secrets import scrub
from contrib.workspace.config import Upstream
from contrib.workspace.lockfile import FileLock, LockTimeout
from contrib.workspace.txn import check_inside

REMOTE = "origin"


def cache_root() -> Path:
    """Where upstream clones live: $CONTRIB_CACHE or the user cache dir."""
    return environ.cache_root()


def cache_path(upstream: Upstream) -> Path:
    digest = hashlib.sha256(upstream.url.encode()).hexdigest()[:10]
    return cache_root() / "upstreams" / f"{upstream.name}-{digest}.git"


def is_remote(url: str) -> bool:
    return "://" in url and not url.startswith("file://") or bool(
        re.match(r"^[\w.-]+@[\w.-]+:", url))


@contextmanager
def _cache_lock(path: Path) -> Iterator[None]:
    check_inside(cache_root(), path)  # no symlink below the cache folder redirects a clone
    lock = FileLock(Path(str(path) + ".lock"), 600)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except LockTimeout:
        raise ContribError(f"{path}: another contrib has held this upstream cache for 10 "
                           "minutes; try again later") from None
    except OSError as exc:
        raise ContribError(f"{path.parent}: cannot write the upstream cache "
                           f"({exc.strerror or exc}); make it writable or point CONTRIB_CACHE "
                           "at a folder you can write to") from None
    try:
        yield
    finally:
        lock.release()


# The lock files a fetch takes.  Only a fetch (and the clone) writes the refs under
# refs/remotes/ and refs/tags/ of a cache, and always under the cache lock.
_FETCH_LOCKS = ("refs/remotes/**/*.lock", "refs/tags/**/*.lock", "packed-refs.lock",
                "shallow.lock")


def _clear_fetch_locks(path: Path) -> list[Path]:
    """Remove the ref locks a git killed mid-fetch left in the cache at ``path``.

    Call with the cache lock held: no live fetch can own them then.  A kill between
    git's ``refs/remotes/origin/main.lock`` and its rename leaves the lock behind,
    and every later fetch fails ("cannot lock ref ... File exists") until someone
    deletes it by hand.  Locks elsewhere (``contrib edit``'s refs, conflict
    worktrees) belong to writers that do not take the cache lock: left alone."""
    if not path.is_dir():
        return []
    stale = [lock for pattern in _FETCH_LOCKS for lock in path.glob(pattern) if lock.is_file()]
    for lock in stale:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
    return stale


class Mirror:
    """The cached bare clone of one upstream."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.path = cache_path(upstream)
        self._git: Git | None = None
        self.fetched = False

    @property
    def git(self) -> Git:
        if self._git is None:
            self._git = Git(self.path)
        return self._git

    @property
    def tip_ref(self) -> str:
        return f"refs/remotes/{REMOTE}/{self.upstream.branch}"

    def ensure(self, *, fetch_now: bool, progress: ProgressFn | None = None) -> Mirror:
        """Create the cache on first use; fetch when asked (once per process).

        ``progress`` (``ui.progress``) gets git's own progress, one message at a
        time, labelled with the upstream's name; it is cleared when git is done.
        """
        shown = self._labelled(progress)
        with _cache_lock(self.path):
            _clear_fetch_locks(self.path)
            try:
                if not self.path.is_dir():
                    self._clone(shown)
                    self.fetched = True
                if fetch_now and not self.fetched:
                    self._fetch(shown)
            finally:
                if progress is not None:
                    progress("")
        return self

    def _labelled(self, progress: ProgressFn | None) -> ProgressFn | None:
        if progress is None:
            return None
        name = self.upstream.name
        return lambda message: progress(f"{name}: {message}")

    def _clone(self, progress: ProgressFn | None) -> None:
        url = self.upstream.url
        if not is_remote(url) and not Path(url.removeprefix("file://")).exists():
            raise UpstreamUnreachable(f"upstream {self.upstream.name}: {url} does not exist; "
                                      "fix url in contrib.toml", reason=f"{url} does not exist")
        try:
            tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=self.path.parent))
        except OSError as exc:
            raise ContribError(f"{self.path.parent}: cannot write the upstream cache "
                               f"({exc.strerror or exc}); make it writable or point "
                               "CONTRIB_CACHE elsewhere") from None
        try:
            if progress:
                progress(f"cloning from {scrub(url)} ...")
            clone_bare(url, tmp / "repo.git", partial=is_remote(url), progress=progress)
            repo = Git(tmp / "repo.git")
            repo.run("config", f"remote.{REMOTE}.fetch",
                     f"+refs/heads/*:refs/remotes/{REMOTE}/*")
            repo.run("config", "gc.auto", "0")
            fetch(str(repo.path), REMOTE, progress=progress)
            # Branches live under refs/remotes/origin/ only, so a stale clone-time
            # refs/heads/main can never shadow the fetched tip.
            for ref in repo.run("for-each-ref", "--format=%(refname)", "refs/heads/").split():
                repo.delete_ref(ref)
            os.replace(tmp / "repo.git", self.path)
        except GitError as exc:
            raise UpstreamUnreachable(
                f"upstream {self.upstream.name}: cannot clone {scrub(url)}: {exc.reason}. "
                "Check url in contrib.toml and the network", reason=scrub(exc.reason)) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._git = None

    def _fetch(self, progress: ProgressFn | None) -> None:
        try:
            fetch(str(self.git.path), REMOTE, progress=progress)
        except GitError as exc:
            raise UpstreamUnreachable(
                f"upstream {self.upstream.name}: fetch from {scrub(self.upstream.url)} failed: "
                f"{exc.reason}. Check url in contrib.toml and the network (--no-fetch works "
                "from the cache)", reason=scrub(exc.reason)) from None
        self.fetched = True

    def branch_ref(self, branch: str | None = None) -> str:
        """The cache's ref of ``branch`` (default: the upstream's branch)."""
        return f"refs/remotes/{REMOTE}/{branch or self.upstream.branch}"

    def tip(self, branch: str | None = None, *, named_at: str = "") -> Sha:
        """The tip of ``branch`` (default: the upstream's branch) as last fetched.

        ``named_at`` is the ``file:line`` that names another branch (a patchset's
        ``targets``): a branch the upstream lacks is then a ConfigError there."""
        branch = branch or self.upstream.branch
        sha = self.git.try_rev_parse(f"refs/remotes/{REMOTE}/{branch}")
        if sha is None and named_at:
            raise ConfigError(f"{named_at}: targets names branch {branch!r}, which upstream "
                              f"{self.upstream.name} does not have (at "
                              f"{scrub(self.upstream.url)}); fix targets")
        if sha is None:
            raise ContribError(f"upstream {self.upstream.name}: branch {branch!r} not found at "
                               f"{scrub(self.upstream.url)}; fix branch in contrib.toml")
        return sha

    def resolve(self, rev: str, *, allow_fetch: bool = True) -> Sha:
        """A full sha for ``rev`` (sha, tag, branch or origin/branch).

        A name (branch, tag, short sha) can move or be new, so the upstream is
        fetched first (once per process); a full sha already in the cache is
        taken as is.  When the fetch fails but the cache knows the name, the
        cached answer is used (working offline).
        """
        known = self._lookup(rev)
        if allow_fetch and not self.fetched and not (known and re.fullmatch(r"[0-9a-f]{40}", rev)):
            try:
                self.ensure(fetch_now=True)
            except ContribError:
                if known is None:
                    raise
            known = self._lookup(rev)
        if known is not None:
            return known
        raise ContribError(f"unknown revision {rev!r} in upstream {self.upstream.name} "
                           f"({scrub(self.upstream.url)}): give a commit, tag or branch it has")

    def _lookup(self, rev: str) -> Sha | None:
        for candidate in (f"refs/remotes/{REMOTE}/{rev}", f"refs/tags/{rev}", rev):
            sha = self.git.try_rev_parse(candidate)
            if sha is not None:
                return sha
        return None
