"""Test helpers around the mini upstream that ``contrib demo`` also uses.

The tree itself lives in :mod:`contrib.demo.upstream`; this module adds the
git plumbing the tests need (fixed identity and dates).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from contrib.demo.upstream import (
    GATE_FILE,
    HEADER,
    NEW_GATE,
    NEW_GUARD,
    OLD_GATE,
    OLD_GUARD,
    SOURCE,
    files,
    line_of,
)
from testing.workspace import Workspace, make_patch

__all__ = ["GATE_FILE", "HEADER", "NEW_GATE", "NEW_GUARD", "OLD_GATE", "OLD_GUARD", "SOURCE",
           "SMI", "commit_variant", "files", "format_patch", "git", "init_repo", "line_of",
           "new_variant", "variant_diff", "write"]


def write(root: Path, variant: str = "base") -> None:
    """Write the ``variant`` tree under ``root`` (creating folders)."""
    for path, text in files(variant).items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


GIT_ENV = {
    "GIT_AUTHOR_NAME": "Mini Upstream",
    "GIT_AUTHOR_EMAIL": "mini@example.com",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "Mini Upstream",
    "GIT_COMMITTER_EMAIL": "mini@example.com",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
}


def git(root: Path, *args: str) -> str:
    """Run git in ``root`` with a fixed identity and date; return stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_ENV)
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def init_repo(root: Path, variant: str = "base") -> str:
    """Create a git repository at ``root`` with ``variant`` committed on main; return its sha."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write(root, variant)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "mini upstream")
    return git(root, "rev-parse", "HEAD")


def commit_variant(root: Path, variant: str, message: str) -> str:
    """Write ``variant`` over the checkout at ``root``, commit it, return the sha."""
    write(root, variant)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def format_patch(root: Path, base: str, out: Path) -> list[Path]:
    """``git format-patch base..HEAD`` into ``out``; returns the patch files in order."""
    out.mkdir(parents=True, exist_ok=True)
    names = git(root, "format-patch", "-q", "-o", str(out), f"{base}..HEAD").splitlines()
    return [Path(n) for n in names]


def variant_diff(tmp_path: Path, variant: str) -> str:
    """``git diff`` from the mini-upstream base to ``variant`` (a real git diff)."""
    root = tmp_path / f"diff-{variant}"
    base = init_repo(root)
    commit_variant(root, variant, f"apply {variant}")
    return git(root, "diff", base, "HEAD") + "\n"


# Answers like nvidia-smi: the columns the query asks for.
SMI = """#!/bin/sh
case "$1" in
  *index*) echo "0, NVIDIA H200, 9.0" ;;
  *) echo "NVIDIA H200, 9.0" ;;
esac
"""


def new_variant(ws: Workspace, tmp_path: Path, name: str, variant: str) -> Path:
    """Patchset flashinfer/``name``: the mini upstream's ``variant`` as one patch."""
    repo = ws.upstreams["flashinfer"]
    changed = {k: v for k, v in files(variant).items() if v != files("base")[k]}
    patches = make_patch(repo, tmp_path, changed, f"{name}: admit SM120", name=name)
    result = ws.run("new", "flashinfer", name, "--base", "main", "--patch", *map(str, patches))
    assert result.code == 0, result.err
    return ws.root / "patchsets" / "flashinfer" / name
