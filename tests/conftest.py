"""Test isolation: no real HOME, cache or network; real git everywhere."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contrib.secrets import forget_secrets
from testing.audit import FIGURES
from testing.gitutil import Repo
from testing.workspace import SAMPLE, Workspace


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


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A fresh folder with a short path, for output whose width a test holds to 80
    columns: a path is never split, and pytest's own temporary folders grow with each
    run on a machine (``/tmp/pytest-of-root/pytest-114/popen-gw1/test_the_demo_...``)
    until one path alone is wider than the terminal."""
    folder = Path(tempfile.mkdtemp(prefix="ct-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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


# -- the reliability suite's figures, added up across xdist workers -------------------------

def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker hands its figures to the controller (xdist's workeroutput)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["figures"] = dict(FIGURES)


def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller adds up each worker's figures as the worker finishes."""
    FIGURES.update(getattr(node, "workeroutput", {}).get("figures", {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("reliability figures")
        for key in sorted(FIGURES):
            terminalreporter.write_line(f"{key}: {FIGURES[key]}")
