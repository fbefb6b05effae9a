"""Audit one tree of an upstream cache: find, judge, and remember the answer.

The tree is read through validate's :class:`~contrib.analysis.tree.GitTree`
(the git package's batch blob reader), never from a checkout.  Python files
that cannot hold a gate are skipped by one regex; the rest are parsed in
worker processes when there are many.  The result depends only on the tree,
the arch and the analyses, so it is kept in the cache folder under a key of
the tree sha, the arch and contrib's version: a repeat audit of a commit is a
JSON read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from contrib import __version__, environ
from contrib.analysis.tree import GitTree
from contrib.arch import Arch
from contrib.audit.find import gates_of_file
from contrib.audit.judge import judge
from contrib.audit.model import AuditGate, sort_key
from contrib.errors import ContribError
from contrib.git.repo import Git
from contrib.workspace.txn import atomic_write

FORMAT = 11  # bump when the analysis changes what it finds at the same contrib version
# Which files may hold a gate: a cheap superset of what the gate parser looks for
# (substrings of the lowered text, then one short regex).  One case-blind regex with
# every alternative ran at 7 MB/s: 9.4 s of a 20 s first audit of sglang's 66 MB.
_MAY_GATE_WORDS = (
    "supported_major_versions", "is_sm", "is_cuda_sm", "is_ampere", "is_ada", "is_hopper",
    "is_blackwell", "major", "capability", "compute_cap", "sm_version", "get_device_sm",
    "get_sm",
)
_MAY_GATE_SHORT = re.compile(r"(?:\b|_)(?:cc|sm)\b")  # `cc`, `sm`, `device_cc`, `_sm`


def may_gate(text: str) -> bool:
    """Whether ``text`` may hold an architecture gate (never false for one that does)."""
    low = text.lower()
    return any(word in low for word in _MAY_GATE_WORDS) or bool(_MAY_GATE_SHORT.search(low))


_PARALLEL_FROM = 40  # files; below this a worker pool costs more than it saves
Step = Callable[[int, int, str], None]


@dataclass
class TreeAudit:
    """The gates of one commit, and how the answer was got."""

    commit: str
    tree: str
    gates: list[AuditGate] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False


def cache_file(tree_sha: str, arch: Arch) -> Path:
    """Where the audit of ``tree_sha`` for ``arch`` is kept."""
    key = hashlib.sha256(f"{tree_sha}\0{arch.name}\0{__version__}\0{FORMAT}".encode()).hexdigest()
    return environ.cache_root() / "audit" / f"{key[:32]}.json"


def audit_commit(git: Git, commit: str, arch: Arch, step: Step | None = None) -> TreeAudit:
    """The audited gates of ``commit`` (from the result cache when it has them)."""
    started = time.monotonic()
    tree_sha = git.run("rev-parse", f"{commit}^{{tree}}").strip()
    path = cache_file(tree_sha, arch)
    cached = _load(path)
    if cached is not None:
        return TreeAudit(commit, tree_sha, cached, time.monotonic() - started, True)
    tree = GitTree(git, commit)
    gates = find_all(tree, arch, step)
    judge(tree, gates, arch, step)
    gates.sort(key=sort_key)
    _save(path, gates)
    return TreeAudit(commit, tree_sha, gates, time.monotonic() - started, False)


def find_all(tree: GitTree, arch: Arch, step: Step | None = None) -> list[AuditGate]:
    """Every gate of the tree's Python files, in path order."""
    files = [p for p in tree.paths() if p.endswith(".py")]
    texts = [(p, t) for p in files if may_gate(t := tree.read_text(p) or "")]
    # One counter, one unit: Python files parsed, of those that may hold a gate.
    if step is not None:
        step(0, len(texts), f"Python files parsed ({len(files)} in the tree)")
    if len(texts) < _PARALLEL_FROM or (os.cpu_count() or 1) < 2:
        return [g for path, text in texts for g in gates_of_file(path, text, arch)]
    workers = min(os.cpu_count() or 2, 8)
    chunks = [texts[n::workers * 4] for n in range(workers * 4)]
    found: list[AuditGate] = []
    parsed = 0
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        for chunk, part in zip(chunks, pool.map(_chunk, chunks, [arch] * len(chunks)),
                               strict=True):
            found += part
            parsed += len(chunk)
            if step is not None:
                step(parsed, len(texts), f"Python files parsed ({len(files)} in the tree)")
    return sorted(found, key=lambda g: (g.file, g.line))


def _chunk(files: list[tuple[str, str]], arch: Arch) -> list[AuditGate]:
    return [g for path, text in files for g in gates_of_file(path, text, arch)]


def _load(path: Path) -> list[AuditGate] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [AuditGate.from_dict(item) for item in data["gates"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or damaged: audit again


def _save(path: Path, gates: list[AuditGate]) -> None:
    """Write the result atomically; a cache that cannot be written is only slower."""
    with contextlib.suppress(ContribError):
        atomic_write(path, json.dumps({"gates": [g.to_dict() for g in gates]}))
