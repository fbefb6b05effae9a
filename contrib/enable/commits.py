"""A draft's files as commits on its base, one per upstream area, in upstream's words.

The area of a file is its folder's name (``flashinfer/jit/gemm/core.py`` and
``flashinfer/gemm/gemm_base.py`` are both ``gemm``, as upstream's own opening
was one commit), or a top-level module's own (``flashinfer/prefill.py``: ``prefill``).  The subject follows the style most of upstream's recent
subjects have: ``feat(gemm): ...`` (Conventional Commits), ``[gemm] ...``
(bracket tags), or a plain sentence.  Commits are made with plumbing on the
upstream cache (blobs, ``mktree`` through :func:`contrib.carry.trees.graft`,
``commit-tree``): no checkout, no index of the whole tree.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath

from contrib.arch import Arch
from contrib.carry.series import export_series
from contrib.carry.trees import graft
from contrib.clock import now_iso
from contrib.git.repo import Git, Identity, Sha
from contrib.git.wsrepo import BOT_EMAIL

AUTHOR_NAME = "contrib enable"
_CONVENTIONAL = re.compile(r"^[a-z]+(?:\([^)]*\))?!?: ")
_BRACKET = re.compile(r"^\[[^\]]+\]")
_STYLE_SAMPLE = 200  # recent subjects read to learn the style


@dataclass(frozen=True)
class AreaCommit:
    """The files of one area and the message of their commit."""

    area: str
    files: dict[str, bytes]  # path -> new content
    message: str


def area_of(path: str) -> str:
    """The upstream area a file belongs to: its folder's name (``gemm``, ``layers``), or
    for a module at the top of the package (``flashinfer/prefill.py``) its own name."""
    parts = PurePosixPath(path).parts
    return parts[-2] if len(parts) > 2 else PurePosixPath(path).stem


def subject_style(git: Git, base: str) -> str:
    """``conventional``, ``bracket`` or ``plain``: how most recent subjects at ``base`` read."""
    subjects = git.run("log", "--no-merges", f"-{_STYLE_SAMPLE}", "--format=%s", base).splitlines()
    counts = Counter("conventional" if _CONVENTIONAL.match(s) else
                     "bracket" if _BRACKET.match(s) else "plain" for s in subjects)
    return counts.most_common(1)[0][0] if counts else "plain"


def subject(style: str, area: str, what: str, arch: Arch) -> str:
    """One subject line: ``feat(gemm): enable gen_x_module on SM120`` and its siblings."""
    target = f"SM{arch.major}{arch.minor}"
    if style == "conventional":
        return f"feat({area}): enable {what} on {target}"
    if style == "bracket":
        return f"[{area}] Enable {what} on {target}"
    return f"Enable {what} on {target}"


def make_commits(git: Git, base: str, commits: list[AreaCommit]) -> list[tuple[str, bytes]]:
    """The commits on ``base``, exported as patch files (name, bytes) in order."""
    parent = git.rev_parse(base)
    author = Identity(AUTHOR_NAME, BOT_EMAIL, now_iso())
    for commit in commits:
        tree = git.tree_of(parent)
        edits: dict[str, tuple[str, str] | None] = {}
        for path, data in commit.files.items():
            blob = git.run("hash-object", "-w", "--stdin", input=data)
            edits[path] = (_mode(git, parent, path), blob)
        parent = git.commit_tree(graft(git, tree, edits), [parent], commit.message, author)
    return export_series(git, base, parent) if commits else []


def _mode(git: Git, commit: Sha, path: str) -> str:
    listing = git.run("ls-tree", commit, "--", path)
    return listing.split()[0] if listing else "100644"
