"""A workspace under test: contrib.toml over local upstreams, and the CLI run in-process."""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from testing.gitutil import Repo


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self) -> object:
        import json

        return json.loads(self.out)


def run_contrib(*args: str, cwd: Path | None = None) -> Result:
    """Run the CLI in-process, capturing stdout/stderr."""
    from contrib.cli import main

    old_out, old_err, old_cwd = sys.stdout, sys.stderr, os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    try:
        if cwd is not None:
            os.chdir(cwd)
        code = main(list(args))
    finally:
        sys.stdout, sys.stderr = old_out, old_err
        os.chdir(old_cwd)
    return Result(code, out.getvalue(), err.getvalue())


@dataclass
class Workspace:
    """A workspace folder whose contrib.toml points at local upstream repos."""

    root: Path
    upstreams: dict[str, Repo]

    def run(self, *args: str) -> Result:
        return run_contrib(*args, cwd=self.root)

    def write_config(self, extra: str = "") -> None:
        lines = []
        for name, repo in self.upstreams.items():
            lines += [f"[upstreams.{name}]", f'url = "{repo.path}"', 'branch = "main"',
                      f'github = "upstream-org/{name}"', f'fork = "me/{name}"', ""]
        (self.root / "contrib.toml").write_text("\n".join(lines) + extra, encoding="utf-8")


SAMPLE = {
    "pkg/__init__.py": "",
    "pkg/core.py": "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(20)),
    "README.md": "upstream project\n",
}


def make_patch(repo: Repo, tmp_path: Path, files: dict[str, str], message: str,
               name: str = "patches") -> list[Path]:
    """Commit ``files`` on a side branch of ``repo`` and format-patch it; repo unchanged."""
    from testing.gitutil import git

    base = repo.head()
    git(repo.path, "checkout", "-q", "-b", f"side-{name}")
    repo.commit(message, files)
    paths = repo.format_patch(f"{base}..HEAD", tmp_path / name)
    git(repo.path, "checkout", "-q", "main")
    git(repo.path, "branch", "-q", "-D", f"side-{name}")
    return paths


def two_upstreams(tmp_path: Path, upstream: Repo) -> tuple[Workspace, Repo]:
    """A workspace over ``upstream`` (proj) and a second repository (gone), patchset x in
    each; returns the workspace and the second repository, for tests that take it away."""
    other = Repo(tmp_path / "other")
    other.commit("Initial import", SAMPLE)
    root = tmp_path / "ws2"
    root.mkdir()
    ws = Workspace(root, {"proj": upstream, "gone": other})
    ws.write_config()
    for name, repo in (("proj", upstream), ("gone", other)):
        patch = make_patch(repo, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x", name=f"p-{name}")[0]
        assert ws.run("new", name, "x", "--base", "main", "--patch", str(patch)).code == 0
    return ws, other
