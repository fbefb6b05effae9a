"""Fixtures shared by the analysis and validate tests: the mini-upstream as trees, the usual target.

Imported by name into those packages' conftest files.
"""

from __future__ import annotations

import pytest

from contrib.analysis.tree import DictTree
from contrib.arch import Arch, parse_arch
from testing import miniupstream


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
