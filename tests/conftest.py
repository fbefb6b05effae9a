"""Test isolation: no real HOME, cache or network; real git everywhere."""

from __future__ import annotations

import io
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from contrib.secrets import forget_secrets
from tests.gitutil import Repo


@pytest.fixture(autouse=True)
def isolated(tmp_path_factory: pytest.TempPathFactory,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Fresh HOME/XDG/CONTRIB_CACHE per test; the caller's GIT_* stripped."""
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith("GIT_") or key in ("GITHUB_TOKEN", "GH_TOKEN", "CONTRIB_WORKSPACE_TOKEN"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("CONTRIB_CACHE", str(home / "contrib-cache"))
    monkeypatch.setenv("CONTRIB_LOCK_TIMEOUT", "2")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n[protocol \"file\"]\n\tallow = always\n")
    yield home
    forget_secrets()


_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> None:
    host = address[0] if isinstance(address, tuple) else address
    if self.family in (socket.AF_INET, socket.AF_INET6) and host not in (
            "127.0.0.1", "::1", "localhost"):
        raise OSError(f"tests may not reach the network ({host!r})")
    _real_connect(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Block non-loopback connections made from the test process."""
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


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


@pytest.fixture
def upstream(tmp_path: Path) -> Repo:
    """A small upstream repo with a few commits."""
    repo = Repo(tmp_path / "upstream")
    repo.commit("Initial import", SAMPLE)
    repo.commit("Add docs", {"docs/index.md": "# docs\n"})
    return repo


@pytest.fixture
def workspace(tmp_path: Path, upstream: Repo) -> Workspace:
    """A workspace carrying patches for ``upstream`` (named 'proj')."""
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"proj": upstream})
    ws.write_config()
    return ws


def make_patch(repo: Repo, tmp_path: Path, files: dict[str, str], message: str,
               name: str = "patches") -> list[Path]:
    """Commit ``files`` on a side branch of ``repo`` and format-patch it; repo unchanged."""
    from tests.gitutil import git

    base = repo.head()
    git(repo.path, "checkout", "-q", "-b", f"side-{name}")
    repo.commit(message, files)
    paths = repo.format_patch(f"{base}..HEAD", tmp_path / name)
    git(repo.path, "checkout", "-q", "main")
    git(repo.path, "branch", "-q", "-D", f"side-{name}")
    return paths
