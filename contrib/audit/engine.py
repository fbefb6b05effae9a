"""Audit one tree of an upstream cache: find, judge, and remember the answer.

The tree is read through :class:`~contrib.analysis.tree.GitTree` (the git package's
batch blob reader), never from a checkout.  Python files
that cannot hold a gate are skipped by one regex; the rest are parsed in
worker processes when there are many.  The result depends only on the tree,
the arch and the analyses, so it is kept in the cache folder under a key of
the tree sha, the arch and contrib's version: a repeat audit of a commit is a
JSON read.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import gc
import hashlib
import json
import os
import re
import signal
import time
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from contrib import __version__, environ
from contrib.analysis.pyparse import PARSE_ERRORS, unparsable
from contrib.analysis.reach.tree import PyTree
from contrib.analysis.tree import GitTree
from contrib.arch import Arch
from contrib.audit.classing.judge import judge
from contrib.audit.finding.gates import collector_paused, gates_of_file
from contrib.audit.model import AuditGate, Step, sort_key
from contrib.audit.serial import gate_cache, gate_from_cache
from contrib.errors import ContribError
from contrib.git.repo import Git
from contrib.workspace.txn import atomic_write, check_inside

FORMAT = 60  # bump when the analysis changes what it finds at the same contrib version
# Which files may hold a gate: a cheap superset of what the gate parser looks for
# (substrings of the lowered text, then one short regex).  One case-blind regex with
# every alternative ran at 7 MB/s: 9.4 s of a 20 s first audit of sglang's 66 MB.
_MAY_GATE_WORDS = (
    "supported_major_versions", "is_sm", "is_cuda_sm", "is_ampere", "is_ada", "is_hopper",
    "is_blackwell", "major", "capability", "compute_cap", "sm_version", "get_device_sm",
    "get_sm",
)
# `cc`, `sm`, `device_cc`, `_sm`: the token, not preceded by a letter or digit.  The
# lookbehind comes after the token so the regex engine can skip to a `c` or an `s`
# (`(?:\b|_)(?:cc|sm)\b`, the same test, tried every position: 4 x slower).
_MAY_GATE_SHORT = re.compile(r"(?:cc|sm)(?<![^\W_]..)\b")


def may_gate(text: str) -> bool:
    """Whether ``text`` may hold an architecture gate (never false for one that does)."""
    low = text.lower()
    return any(word in low for word in _MAY_GATE_WORDS) or bool(_MAY_GATE_SHORT.search(low))


_PARALLEL_FROM = 40  # files; below this a worker pool costs more than it saves


@dataclass
class TreeAudit:
    """The gates of one commit, and how the answer was got."""

    commit: str
    tree: str
    gates: list[AuditGate] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    notes: list[str] = field(default_factory=list)  # files it could not read, and why


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
        gates, notes = cached
        return TreeAudit(commit, tree_sha, gates, time.monotonic() - started, True, notes)
    tree = GitTree(git, commit)
    gates, notes = find_all(tree, arch, step)
    gates = sorted(judge(tree, gates, arch, step), key=sort_key)
    _save(path, gates, notes)
    return TreeAudit(commit, tree_sha, gates, time.monotonic() - started, False, notes)


Found = tuple[list[AuditGate], list[str]]  # the gates, and a note per file not audited


def find_all(tree: GitTree, arch: Arch, step: Step | None = None) -> Found:
    """Every gate of the tree's Python files, in path order, and the files it could not
    read.  The evaluator sees the files that may hold a gate and the packages'
    ``__init__`` (which re-export): a module that names no capability, predicate or
    gate word binds nothing the GPU decides, so it is never parsed."""
    files = [p for p in tree.paths() if p.endswith(".py")]
    every = {p: tree.read_text(p) or "" for p in files}
    wanted = [p for p in files if may_gate(every[p])]
    readable = set(wanted) | {p for p in files if p.endswith("/__init__.py")}
    # One counter, one unit: Python files parsed, of those that may hold a gate.
    if step is not None:
        step(0, len(wanted), f"Python files parsed ({len(files)} in the tree)")
    if len(wanted) < _PARALLEL_FROM or (os.cpu_count() or 1) < 2:
        _start(every, readable, files)
        with collector_paused():
            return _chunk((wanted, arch))
    workers = min(os.cpu_count() or 2, 8)
    chunks = [(part, arch) for part in _runs(wanted, workers * 8)]
    found: list[AuditGate] = []
    notes: list[str] = []
    parsed = 0
    pool = _pool(workers, every, readable, files)
    try:
        for (chunk, _), (part, why) in zip(chunks, pool.imap(_chunk, chunks), strict=True):
            found += part
            notes += why
            parsed += len(chunk)
            if step is not None:
                step(parsed, len(wanted), f"Python files parsed ({len(files)} in the tree)")
        pool.close()
    except BaseException:  # Ctrl-C above all: stop the workers, which print nothing
        pool.terminate()
        raise
    finally:
        pool.join()
    return sorted(found, key=lambda g: (g.file, g.line)), sorted(notes)


def _runs(paths: list[str], count: int) -> list[list[str]]:
    """``paths`` (sorted) cut into ``count`` runs of neighbours: files of one package
    import the same modules, which a worker then parses and evaluates once."""
    size = -(-len(paths) // count)
    return [paths[n:n + size] for n in range(0, len(paths), size)]


def _pool(workers: int, texts: dict[str, str], readable: set[str], files: list[str]) -> Any:
    """A spawn pool whose workers never see Ctrl-C: it is the parent's to handle (it
    stops the pool), so no worker prints a KeyboardInterrupt traceback of its own.
    Each worker holds the tree's texts and one evaluator.

    SIGINT is blocked in this thread while the workers start: they inherit the block
    across exec, so a Ctrl-C cannot reach them while they import, and they ignore it
    from their initializer on.  The parent keeps its handler, so a Ctrl-C meanwhile
    is not lost: another thread takes it, or it waits for the unblocking; the pool
    just made is then stopped and the KeyboardInterrupt goes on.  Where signal masks
    do not exist, SIGINT is ignored while the workers start (an ignored signal
    survives exec, and Python then installs no KeyboardInterrupt handler)."""
    masks = hasattr(signal, "pthread_sigmask")
    previous = None
    if masks:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    else:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    pool = None
    try:
        pool = get_context("spawn").Pool(workers, initializer=_worker_start,
                                         initargs=(texts, readable, files, os.getpid()))
    finally:
        try:
            if masks:  # a Ctrl-C held meanwhile is raised here
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            else:
                signal.signal(signal.SIGINT, previous)
        except BaseException:
            if pool is not None:
                pool.terminate()
                pool.join()
            raise
    return pool


def _worker_start(texts: dict[str, str], readable: set[str], files: list[str],
                  parent: int) -> None:
    """In a worker: Ctrl-C is the parent's to handle, so it is ignored here (a Ctrl-C
    held since the worker started is dropped with it) and unblocked; then the tree.
    The cycle collector stays off for the worker's life: what it holds (syntax trees,
    the evaluator's caches) is acyclic and lives until the pool ends, and a collection
    after each file walked all of it again (45% of a first audit of flashinfer)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    gc.disable()
    _die_with(parent)
    _start(texts, readable, files)


def _die_with(parent: int) -> None:
    """In a worker: have the kernel end it when the process that started it is gone
    (Linux's ``PR_SET_PDEATHSIG``): a killed audit or benchmark otherwise left its
    workers parsing their run of files for seconds to minutes.  A thread watching the
    parent would do it everywhere, but a second thread made the workers' parsing half
    again as slow (the GIL), so where ``prctl`` is missing nothing is done."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux
    if os.getppid() != parent:  # gone before the request was made
        os._exit(1)


_PR_SET_PDEATHSIG = 1


_TREE: dict[str, object] = {}  # this process's texts and evaluator (one tree at a time)


def _start(texts: dict[str, str], readable: set[str], files: list[str]) -> None:
    """Give this process the tree's Python texts, a fresh evaluator over the
    ``readable`` ones (``files``: every Python path, so an import of a module it
    does not read resolves to an unknown instead of a name from outside), and one
    over every file for following calls (a module getter names no capability)."""
    _TREE["texts"] = texts
    trees: dict[str, ast.Module | None] = {}  # each module parsed once for both
    _TREE["ev"] = PyTree(lambda path: texts.get(path) if path in readable else None, files,
                         trees)
    _TREE["wide"] = PyTree(texts.get, files, trees)


def _chunk(job: tuple[list[str], Arch]) -> Found:
    paths, arch = job
    texts = _TREE["texts"]
    ev, wide = _TREE["ev"], _TREE["wide"]
    assert isinstance(texts, dict) and isinstance(ev, PyTree) and isinstance(wide, PyTree)
    gates: list[AuditGate] = []
    notes: list[str] = []
    for path in paths:
        try:
            gates += gates_of_file(path, texts[path], arch, ev, wide)
        except PARSE_ERRORS as exc:  # hostile nesting: MemoryError, RecursionError
            notes.append(f"{unparsable(path, exc)}; not audited")
    return gates, notes


def _load(path: Path) -> Found | None:
    """The cached audit at ``path``; None when absent, damaged, of another shape (a hand
    edit, another version's) or reached through a symlink."""
    try:
        check_inside(environ.cache_root(), path)
        if path.is_symlink():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        gates = [gate_from_cache(item) for item in data["gates"]]
        notes = data.get("notes", [])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, ContribError):
        return None  # absent or damaged: audit again
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        return None
    kept = [g for g in gates if g is not None]
    return (kept, notes) if len(kept) == len(gates) else None


def _save(path: Path, gates: list[AuditGate], notes: list[str]) -> None:
    """Write the result atomically; a cache that cannot be written (or that a symlink
    would redirect: nothing is written through one) is only slower."""
    with contextlib.suppress(ContribError):
        check_inside(environ.cache_root(), path)
        atomic_write(path, json.dumps({"gates": [gate_cache(g) for g in gates], "notes": notes}))
