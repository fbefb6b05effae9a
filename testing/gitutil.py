"""Build real git histories for tests, with fixed identities and dates.

Every commit gets author/committer "Upstream Dev" and a date derived from a
counter, so SHAs are the same on every machine and every run.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

BASE_EPOCH = 1_700_000_000


def git(cwd: Path, *args: str, env: Mapping[str, str] | None = None,
        input: str | None = None, check: bool = True) -> str:
    """Run real git in ``cwd`` and return stdout."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    full.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
                 "LC_ALL": "C", "GIT_ALLOW_PROTOCOL": "file"})
    if env:
        full.update(env)
    proc = subprocess.run(["git", *args], cwd=cwd, env=full, input=input, text=True,
                          capture_output=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}:\n{proc.stderr}")
    return proc.stdout.strip()


class Repo:
    """A non-bare repository we commit to, with a deterministic clock."""

    def __init__(self, path: Path, *, branch: str = "main", who: str = "Upstream Dev") -> None:
        self.path = path
        self.who = who
        self.tick = 0
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", branch)

    def env(self) -> dict[str, str]:
        self.tick += 1
        date = f"{BASE_EPOCH + self.tick * 60} +0000"
        email = self.who.lower().replace(" ", ".") + "@example.com"
        return {"GIT_AUTHOR_NAME": self.who, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
                "GIT_COMMITTER_NAME": self.who, "GIT_COMMITTER_EMAIL": email,
                "GIT_COMMITTER_DATE": date}

    def write(self, files: Mapping[str, str | None]) -> None:
        """Write (or with None, delete) files relative to the repo."""
        for rel, content in files.items():
            path = self.path / rel
            if content is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")

    def commit(self, message: str, files: Mapping[str, str | None] | None = None) -> str:
        """Write ``files`` and commit everything; returns the new sha."""
        if files:
            self.write(files)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "--allow-empty", "-m", message, env=self.env())
        return self.head()

    def merge(self, branch: str, message: str) -> str:
        git(self.path, "merge", "-q", "--no-ff", "-m", message, branch, env=self.env())
        return self.head()

    def head(self) -> str:
        return git(self.path, "rev-parse", "HEAD")

    def read(self, rel: str) -> str:
        return (self.path / rel).read_text(encoding="utf-8")

    def format_patch(self, rev_range: str, out: Path) -> list[Path]:
        """``git format-patch`` the range into ``out``; returns the files in order."""
        out.mkdir(parents=True, exist_ok=True)
        names = git(self.path, "format-patch", "-o", str(out), rev_range).splitlines()
        return [Path(n) for n in names]


def only_git_on_path(folder: Path) -> str:
    """A PATH holding git and nothing else (to prove a tool is missing): ``folder``."""
    import shutil

    real = shutil.which("git")
    assert real is not None, "git is not on PATH"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "git").symlink_to(real)
    return str(folder)
