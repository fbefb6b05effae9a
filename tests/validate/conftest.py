"""Fixtures for the validate tests: the mini-upstream as trees and the usual target."""

from __future__ import annotations

import pytest

from contrib.arch import Arch, parse_arch
from contrib.validate.tree import DictTree
from tests.validate import miniupstream


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


def variant_diff(tmp_path, variant: str) -> str:
    """``git diff`` from the mini-upstream base to ``variant`` (a real git diff)."""
    root = tmp_path / f"diff-{variant}"
    base = miniupstream.init_repo(root)
    miniupstream.commit_variant(root, variant, f"apply {variant}")
    return miniupstream.git(root, "diff", base, "HEAD") + "\n"
