"""A workspace left to autopilot: a local upstream that moves, a bare fork, the
workspace's own repository with an origin to push to, and the fake GitHub."""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path
from typing import Any

from contrib.commands.autopilot import autopilot
from contrib.forge.github import GitHubForge
from contrib.ui import UI
from contrib.workspace.model import Workspace
from testing.fake_github import FakeGitHub
from testing.gitutil import Repo, git
from testing.workspace import SAMPLE, run_contrib

UPSTREAM, FORK, WSREPO = "upstream-org/proj", "me/proj", "me/ws"
CORE = SAMPLE["pkg/core.py"]
WRITES = ("POST", "PATCH", "PUT", "DELETE")
fast_forge = functools.partial(GitHubForge, retries=2, max_wait=2.0, backoff=0.0,
                               write_interval=0.0, timeout=5)
IDENTITY = {"GIT_AUTHOR_NAME": "Maintainer", "GIT_AUTHOR_EMAIL": "m@example.com",
            "GIT_COMMITTER_NAME": "Maintainer", "GIT_COMMITTER_EMAIL": "m@example.com"}


def run_autopilot(ws: Workspace, *targets: str, push: bool = True, dry_run: bool = False,
                  gpu_missing: tuple[str, ...] = ()) -> tuple[int, dict[str, Any], str]:
    """One autopilot run in-process with a fast forge: (exit code, --json, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), ws.lock():
        code = autopilot(ws, UI(json_mode=True), list(targets), push=push,
                         dry_run=dry_run, fetch=True, gpu_missing=list(gpu_missing),
                         forge_factory=fast_forge)
    return code, json.loads(out.getvalue()), err.getvalue()


def patched(old: str, new: str, text: str = CORE) -> str:
    assert old in text
    return text.replace(old, new)


class Scene:
    """Two patchsets (f3 -> 33, f7 -> 77) on a small upstream, autopilot's policy ``prs``."""

    def __init__(self, tmp_path: Path, upstream: Repo, fake: FakeGitHub, prs: str) -> None:
        self.tmp, self.upstream, self.fake = tmp_path, upstream, fake
        self.root = tmp_path / "ws"
        self.root.mkdir()
        self.fork = tmp_path / "fork.git"
        self.origin = tmp_path / "ws-origin.git"
        for bare in (self.fork, self.origin):
            git(tmp_path, "init", "-q", "--bare", str(bare))
        (self.root / "contrib.toml").write_text(
            f'[github]\napi_url = "{fake.url}"\n\n[upstreams.proj]\nurl = "{upstream.path}"\n'
            f'branch = "main"\ngithub = "{UPSTREAM}"\nfork = "{FORK}"\n'
            f'push_url = "{self.fork}"\n\n[autopilot]\nrepo = "{WSREPO}"\nprs = "{prs}"\n',
            encoding="utf-8")
        fake.add_repo(UPSTREAM, git_dir=str(upstream.path / ".git"))
        fake.add_repo(FORK, fork_of=UPSTREAM, git_dir=str(self.fork))
        fake.add_repo(WSREPO)
        self.new("f3", "core: f3 returns 33", patched("    return 3\n", "    return 33\n"))
        self.new("f7", "core: f7 returns 77", patched("    return 7\n", "    return 77\n"))
        git(self.root, "init", "-q", "-b", "main")
        git(self.root, "add", "-A")
        git(self.root, "commit", "-qm", "workspace", env=IDENTITY)
        git(self.root, "remote", "add", "origin", str(self.origin))
        git(self.root, "push", "-q", "origin", "main")

    def new(self, name: str, subject: str, core: str) -> None:
        base = self.upstream.head()
        git(self.upstream.path, "checkout", "-q", "-b", f"side-{name}")
        self.upstream.commit(subject, {"pkg/core.py": core})
        paths = self.upstream.format_patch(f"{base}..HEAD", self.tmp / f"p-{name}")
        git(self.upstream.path, "checkout", "-q", "main")
        git(self.upstream.path, "branch", "-q", "-D", f"side-{name}")
        done = run_contrib("new", "proj", name, "--base", base, "--patch", str(paths[0]),
                           cwd=self.root)
        assert done.code == 0, done.err

    @property
    def ws(self) -> Workspace:
        return Workspace(self.root)

    def run(self, *targets: str, push: bool = True, dry_run: bool = False,
            gpu_missing: tuple[str, ...] = ()) -> tuple[int, dict[str, Any], str]:
        """One autopilot run in-process with a fast forge: (exit code, --json, stderr)."""
        return run_autopilot(self.ws, *targets, push=push, dry_run=dry_run,
                             gpu_missing=gpu_missing)

    def writes(self, since: int = 0) -> list[str]:
        """The GitHub writes the fake saw after request number ``since``."""
        return [f"{r.method} {r.path}" for r in self.fake.requests[since:]
                if r.method in WRITES]

    def dashboards(self) -> list[dict[str, Any]]:
        return [i for i in self.fake.issues(WSREPO)
                if (i.get("body") or "").startswith("<!-- contrib:dashboard -->")]

    def dashboard(self) -> str:
        (issue,) = self.dashboards()
        return str(issue["body"])

    def prs(self) -> list[dict[str, Any]]:
        return self.fake.pulls(UPSTREAM)

    def head(self) -> str:
        return git(self.root, "rev-parse", "HEAD")

    def pushed(self) -> str:
        return git(self.origin, "rev-parse", "refs/heads/main")

    def clean(self) -> bool:
        return git(self.root, "status", "--porcelain", "--", "patchsets") == ""


def enabling_workspace(tmp: Path, fake: FakeGitHub, upstream: Repo,
                       name: str = "upstream-org/mini", fork_name: str = "me/mini") -> Path:
    """A workspace of its own repository carrying ``upstream`` as ``mini`` with
    ``[autopilot] enable = ["sm_120a"]``: a bare fork to push to, and the upstream, the
    fork and the workspace's repository known to the fake GitHub."""
    fork = tmp / "fork.git"
    git(tmp, "init", "-q", "--bare", str(fork))
    root = tmp / "ws"
    root.mkdir()
    (root / "contrib.toml").write_text(
        f'[github]\napi_url = "{fake.url}"\n\n[upstreams.mini]\nurl = "{upstream.path}"\n'
        f'branch = "main"\ngithub = "{name}"\nfork = "{fork_name}"\npush_url = "{fork}"\n\n'
        f'[autopilot]\nrepo = "{WSREPO}"\nenable = ["sm_120a"]\n', encoding="utf-8")
    fake.add_repo(name, git_dir=str(upstream.path / ".git"))
    fake.add_repo(fork_name, fork_of=name, git_dir=str(fork))
    fake.add_repo(WSREPO)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "workspace", env=IDENTITY)
    return root
