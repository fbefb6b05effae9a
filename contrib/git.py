"""The one module that talks to git (through GitPython).

Everything else calls :class:`Git`.  Errors become :class:`GitError` with the
command and git's stderr kept and any credential scrubbed (GitPython issue
#1284: a token in a remote URL leaks through ``GitCommandError``'s text).
Leaked ``GIT_*`` variables from a calling hook or editor are stripped, as
pre-commit's ``git.no_git_env`` does, so a ``GIT_DIR`` or ``GIT_INDEX_FILE``
from the caller never points contrib at the wrong repository.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NewType

import git as gitpython
from git.exc import GitCommandError, GitCommandNotFound, InvalidGitRepositoryError, NoSuchPathError

from contrib.errors import GitError
from contrib.secrets import scrub

Sha = NewType("Sha", str)  # a commit
Tree = NewType("Tree", str)  # a tree object: what a commit records, not a commit

# Variables a caller may legitimately set for git; everything else GIT_* is dropped.
_KEEP_GIT_ENV = {
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSL_CAINFO",
    "GIT_SSL_NO_VERIFY",
    "GIT_ASKPASS",
    "GIT_HTTP_LOW_SPEED_LIMIT",
    "GIT_HTTP_LOW_SPEED_TIME",
    "GIT_ALLOW_PROTOCOL",
    "GIT_TRACE",
    "GIT_CURL_VERBOSE",
}


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a git child: caller's GIT_* stripped, no prompts."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") or k in _KEEP_GIT_ENV
    }
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    env.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    if extra:
        env.update(extra)
    return env


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


def git_reason(stderr: str) -> str:
    """git's verdict on one line: its first ``fatal:``/``error:`` message, without the
    "Cloning into ..." chatter and the access-rights hints around it."""
    found = re.search(r"(?:fatal|error): (.+)", stderr)
    return (found[1] if found else (stderr.splitlines() or ["git failed"])[0]).strip()


def _describe(args: Sequence[str]) -> str:
    shown = " ".join(str(a) for a in args)
    return scrub(shown if len(shown) < 300 else shown[:300] + " ...")


class Git:
    """A repository (bare or not) and the git commands contrib runs in it."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            self._repo = gitpython.Repo(self.path)
        except (InvalidGitRepositoryError, NoSuchPathError) as exc:
            raise GitError(f"{self.path}: not a git repository ({type(exc).__name__})") from None
        self._cmd = self._repo.git

    @classmethod
    def init(cls, path: Path, *, bare: bool = False) -> Git:
        """Create a new repository at ``path``."""
        try:
            gitpython.Repo.init(path, bare=bare, mkdir=True)
        except GitCommandError as exc:
            raise GitError(f"git init {path} failed: {scrub(str(exc.stderr)).strip()}") from None
        return cls(path)

    @property
    def bare(self) -> bool:
        return bool(self._repo.bare)

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
        try:
            with _stdin(input) as stdin:
                status, out, err = self._cmd.execute(
                    ["git", *args],
                    istream=stdin,
                    with_extended_output=True,
                    with_exceptions=False,
                    env=clean_env(env),
                    stdout_as_string=True,
                    strip_newline_in_stdout=False,
                )
        except GitCommandNotFound:
            raise GitError("git is not installed or not on PATH: install git >= 2.38") from None
        return int(status), str(out), scrub(str(err))

    def _execute(self, args: list[str], *, env: Mapping[str, str] | None,
                 input: bytes | str | None, timeout: float | None) -> bytes:
        try:
            with _stdin(input) as stdin:
                out = self._cmd.execute(
                    ["git", *args],
                    istream=stdin,
                    env=clean_env(env),
                    stdout_as_string=False,
                    strip_newline_in_stdout=False,
                    kill_after_timeout=timeout,
                )
        except GitCommandNotFound:
            raise GitError("git is not installed or not on PATH: install git >= 2.38") from None
        except GitCommandError as exc:
            stderr = scrub(str(exc.stderr or "")).strip().removeprefix("stderr: ").strip("'\n ")
            raise GitError(f"`git {_describe(args)}` failed in {self.path}: {stderr}",
                           reason=git_reason(stderr)) from None
        assert isinstance(out, bytes)
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
        status, out, _ = self.try_run("cat-file", "-e", f"{rev}:{path}")
        if status != 0:
            return None
        return self.run_bytes("cat-file", "blob", f"{rev}:{path}")

    def read_blobs(self, rev: str, paths: Sequence[str]) -> dict[str, bytes | None]:
        """Contents of many ``paths`` at ``rev`` in ONE ``git cat-file --batch``.

        Reading blob by blob costs two processes a file; test selection on
        sglang reads thousands of files.
        """
        wanted = [p for p in dict.fromkeys(paths) if "\n" not in p]
        if not wanted:
            return {}
        request = "".join(f"{rev}:{p}\n" for p in wanted)
        out = self._execute(["cat-file", "--batch"], env=None, input=request, timeout=None)
        found: dict[str, bytes | None] = {}
        pos = 0
        for path in wanted:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            pos = end + 1
            if len(header) == 3 and header[1] == b"blob":
                size = int(header[2])
                found[path] = out[pos:pos + size]
                pos += size + 1  # the content is followed by a newline
            elif len(header) == 3:  # a tree or other object at that path
                pos += int(header[2]) + 1
                found[path] = None
            else:  # "<object> missing"
                found[path] = None
        return found

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

    def count(self, range_: str) -> int:
        return int(self.run("rev-list", "--count", range_))


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

    def write_tree(self, env: Mapping[str, str]) -> Tree:
        """The tree of the (temporary) index named in ``env``."""
        return Tree(self.run("write-tree", env=env))

    def tree_of(self, rev: str) -> Tree:
        """The tree a commit records."""
        return Tree(self.run("rev-parse", f"{rev}^{{tree}}"))

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


@contextmanager
def _stdin(data: bytes | str | None) -> Iterator[BinaryIO | None]:
    """A file holding ``data`` for a child's stdin (GitPython takes a handle)."""
    if data is None:
        yield None
        return
    raw = data.encode("utf-8", errors="surrogateescape") if isinstance(data, str) else data
    with tempfile.TemporaryFile() as handle:
        handle.write(raw)
        handle.seek(0)
        yield handle


@dataclass(frozen=True)
class CommitInfo:
    sha: Sha
    subject: str
    author_name: str
    author_email: str
    author_date: str
    committer_date: str


def clone_bare(url: str, dest: Path, *, partial: bool, progress: bool) -> None:
    """``git clone --bare`` (partial where asked) into ``dest``."""
    args = ["clone", "--bare"]
    if partial:
        args.append("--filter=blob:none")
    if progress:
        args.append("--progress")
    _run_outside(args + ["--", url, str(dest)], progress=progress, what=f"clone {url}")


def fetch(repo: Git, remote: str, *, progress: bool) -> None:
    """Fetch ``remote`` (branches and tags) into ``repo``; progress to the terminal."""
    args = ["-C", str(repo.path), "fetch", "--prune", "--tags", "--force"]
    if progress:
        args.append("--progress")
    _run_outside(args + [remote], progress=progress, what=f"fetch {remote}")


def _run_outside(args: list[str], *, progress: bool, what: str) -> None:
    """Run a long git command; on a TTY git's own progress goes straight to stderr."""
    if progress:
        # GitPython always pipes stderr; for live progress let git write to the terminal.
        try:
            code = subprocess.run(["git", *args], env=clean_env(), stdin=subprocess.DEVNULL,
                                  check=False).returncode
        except FileNotFoundError:
            raise GitError("git is not installed or not on PATH: install git >= 2.38") from None
        if code != 0:
            raise GitError(f"git {scrub(what)} failed (exit {code}): see git's message above")
        return
    try:
        gitpython.Git().execute(["git", *args], env=clean_env())
    except GitCommandNotFound:
        raise GitError("git is not installed or not on PATH: install git >= 2.38") from None
    except GitCommandError as exc:
        stderr = scrub(str(exc.stderr or "")).strip().removeprefix("stderr: ").strip("'\n ")
        raise GitError(f"git {scrub(what)} failed: {stderr}", reason=git_reason(stderr)) from None
