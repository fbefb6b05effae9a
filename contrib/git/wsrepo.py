"""The workspace's own git repository: one commit of what a run changed, and its push.

autopilot commits the files it changed under ``patchsets/`` as ONE commit and
pushes it to the current branch of the workspace repository's ``origin``.  A
push that loses a race (someone pushed meanwhile) fetches, rebases the local
commits onto what arrived and tries again; it never forces.  The token for an
HTTPS remote reaches git only through the environment of that one command
(:func:`contrib.credentials.push_env`), never a URL or ``.git/config``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contrib.credentials import push_env
from contrib.errors import NeedsAttention, UsageError
from contrib.git.repo import Git, enclosing_repo

BOT_NAME = "contrib autopilot"
BOT_EMAIL = "contrib-autopilot@users.noreply.github.com"
PUSH_ATTEMPTS = 3
REMOTE = "origin"


@dataclass
class WorkspaceRepo:
    """The git repository holding a workspace, and the branch it is on."""

    git: Git
    top: Path
    branch: str

    @classmethod
    def find(cls, root: Path) -> WorkspaceRepo:
        """The repository holding ``root``; UsageError when there is none or HEAD is detached."""
        folder = enclosing_repo(root)
        if folder is None:
            raise UsageError(f"{root}: autopilot commits its changes, so the workspace must be "
                             "in a git repository: run `git init` there and commit contrib.toml")
        git = Git(folder)
        status, out, _ = git.try_run("symbolic-ref", "--quiet", "--short", "HEAD")
        if status != 0 or not out.strip():
            raise UsageError(f"{folder}: HEAD is detached; check out the branch "
                             "autopilot should commit to")
        return cls(git, folder, out.strip())

    def commit(self, paths: list[Path], message: str) -> str | None:
        """Commit every change under ``paths`` in one commit; its sha, None if nothing changed."""
        rels = [str(p.relative_to(self.top)) for p in paths if p.exists() or self._tracked(p)]
        if not rels or not self.git.run("status", "--porcelain", "--", *rels):
            return None
        return self.git.commit_paths(rels, message, env=self._identity(), verify=False)

    def _tracked(self, path: Path) -> bool:
        rel = str(path.relative_to(self.top))
        return bool(self.git.run("ls-files", "--", rel))

    def _identity(self) -> dict[str, str]:
        """A bot identity when git has none configured (a fresh CI runner)."""
        status, out, _ = self.git.try_run("config", "user.email")
        if status == 0 and out.strip():
            return {}
        return {"GIT_AUTHOR_NAME": BOT_NAME, "GIT_AUTHOR_EMAIL": BOT_EMAIL,
                "GIT_COMMITTER_NAME": BOT_NAME, "GIT_COMMITTER_EMAIL": BOT_EMAIL}

    def remote_url(self) -> str:
        status, out, _ = self.git.try_run("remote", "get-url", REMOTE)
        if status != 0 or not out.strip():
            raise UsageError(f"{self.top}: --push needs a remote named {REMOTE!r}: add one with "
                             f"`git remote add {REMOTE} URL`")
        return out.strip()

    def push(self, token: str | None) -> str:
        """Push the branch to origin: 'pushed', 'rebased and pushed' or 'up to date'.

        A rejected push (the remote moved) fetches, rebases and retries; a
        rebase that conflicts is aborted and reported, nothing forced.
        """
        url = self.remote_url()
        env = push_env(url, token)
        rebased = False
        for _ in range(PUSH_ATTEMPTS):
            remote = self._fetch(url, env)
            if remote is not None and self.git.is_ancestor("HEAD", remote):
                return "up to date"
            if remote is not None and not self.git.is_ancestor(remote, "HEAD"):
                self._rebase(remote)
                rebased = True
            status, _, err = self.git.try_run("push", "--porcelain", "--no-verify", "--", url,
                                              f"HEAD:refs/heads/{self.branch}", env=env)
            if status == 0:
                return "rebased and pushed" if rebased else "pushed"
            if "rejected" not in err and "fetch first" not in err and "non-fast-forward" not in err:
                raise NeedsAttention(f"push of {self.branch} to {url} failed: "
                                     f"{_last_line(err)}; the commit is kept here, run again")
        raise NeedsAttention(f"push of {self.branch} to {url} kept losing races with other "
                             f"pushes ({PUSH_ATTEMPTS} attempts); the commit is kept, run again")

    def _fetch(self, url: str, env: dict[str, str]) -> str | None:
        """The remote branch's sha after fetching it; None when it does not exist yet."""
        ref = f"refs/heads/{self.branch}"
        status, out, err = self.git.try_run("ls-remote", "--", url, ref, env=env)
        if status != 0:
            raise NeedsAttention(f"cannot read {url}: {_last_line(err)}; check the remote and "
                                 "the token (CONTRIB_WORKSPACE_TOKEN or GITHUB_TOKEN)")
        if not out.strip():
            return None
        status, _, err = self.git.try_run("fetch", "--quiet", "--no-tags", "--", url, ref,
                                          env=env)
        if status != 0:
            raise NeedsAttention(f"cannot fetch {self.branch} from {url}: {_last_line(err)}")
        return self.git.rev_parse("FETCH_HEAD")

    def _rebase(self, onto: str) -> None:
        status, _, err = self.git.try_run("rebase", "--quiet", onto, env=self._identity())
        if status != 0:
            self.git.try_run("rebase", "--abort")
            raise NeedsAttention(f"{self.branch} moved on the remote and autopilot's commit does "
                                 f"not rebase onto it ({_last_line(err)}); nothing was pushed. "
                                 f"Merge {onto[:12]} by hand, or run autopilot again")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
