"""Fixtures for the analysis tests: the mini-upstream as trees."""

from __future__ import annotations

from testing.trees import base_tree, full_fix_tree, gate_only_tree, sm120

__all__ = ["base_tree", "full_fix_tree", "gate_only_tree", "sm120"]
