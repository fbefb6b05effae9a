"""Fixtures for the validate tests: the mini-upstream as trees and the usual target."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrib.arch import Arch, parse_arch
from contrib.validate.tree import DictTree
from testing import miniupstream
from testing import miniupstream as mu
from testing.gitutil import Repo
from testing.workspace import Workspace


@pytest.fixture
def sm120() -> Arch:
    """The seed story's target: RTX PRO 6000 Blackwell."""
    return parse_arch("sm_120a")


@pytest.fixture
def base_tree() -> DictTree:
    """The mini-upstream as upstream has it."""
    return DictTree(miniupstream.files("base"))


@pytest.fixture
def gate_only_tree() -> DictTree:
    """The mini-upstream with only the gate widened (the seed's one-line patch)."""
    return DictTree(miniupstream.files("gate-only"))


@pytest.fixture
def full_fix_tree() -> DictTree:
    """The mini-upstream with the gate widened and the guards fixed."""
    return DictTree(miniupstream.files("full-fix"))


@pytest.fixture
def fi(tmp_path: Path) -> Workspace:
    """A workspace carrying patches for a mini flashinfer-shaped upstream."""
    repo = Repo(tmp_path / "flashinfer")
    repo.commit("Initial import", mu.files("base"))
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, {"flashinfer": repo})
    ws.write_config()
    return ws
