"""Audit the upstreams of a workspace: the cache, the commits, the patchsets, the history."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys

from packaging.utils import canonicalize_name

from contrib import environ
from contrib.analysis.archtoolkit import Cuda, nvcc_cuda
from contrib.analysis.ptx import find_nvcc, nvcc_version
from contrib.analysis.tree import GitTree
from contrib.arch import Arch
from contrib.audit.classing.ptxcheck import compile_gates
from contrib.audit.coverage import mark_covered, mark_history, patch_coverage
from contrib.audit.engine import TreeAudit, audit_commit
from contrib.audit.feature.explain import Choose, explain, lower_of
from contrib.audit.model import Step
from contrib.audit.report import UpstreamAudit
from contrib.audit.stack.link import audit_and_link
from contrib.audit.stack.pins import find_pin, package_name, required_names, tag_of
from contrib.audit.stack.walk import Walker
from contrib.errors import ContribError
from contrib.git.cache import Mirror
from contrib.git.process import ProgressFn
from contrib.workspace.model import Workspace
from contrib.workspace.txn import atomic_write, check_inside


def audit_upstream(ws: Workspace, name: str, arch: Arch, *, at: str | None, since: str | None,
                   fetch: bool, progress: ProgressFn | None = None, step: Step | None = None,
                   nvcc: str | None = None, features: Choose | None = None,
                   cuda: Cuda | None = None) -> UpstreamAudit:
    """The audit of upstream ``name`` at ``at`` (default: the tip), compared with ``since``;
    with ``nvcc`` (``--compile``), the excluding gates' units compiled to PTX too; and
    followed into the workspace's other upstreams it pins (the stack below).
    ``features``: which of its features to follow, each to its verdict (none if None);
    ``cuda``: the toolkit their JIT modules are built with (default: :func:`cuda_here`)."""
    mirror = Mirror(ws.config.upstream(name)).ensure(fetch_now=fetch, progress=progress)
    commit = mirror.resolve(at, allow_fetch=fetch) if at else mirror.tip()
    since_commit = mirror.resolve(since, allow_fetch=fetch) if since else None
    git = mirror.git
    result = audit_commit(git, commit, arch, step)
    audit = UpstreamAudit(name, commit, at or f"{mirror.upstream.branch} tip", result.gates,
                          since, since_commit, result.seconds, result.cached)
    audit.notes += result.notes
    if since_commit is not None:
        old = audit_commit(git, since_commit, arch, step)
        audit.seconds += old.seconds
        audit.gates = mark_history(git, since_commit, commit, old.gates, audit.gates)
    below: list[tuple[tuple[str, str, str, TreeAudit, GitTree], Walker | None]] = []
    _stack_below(ws, audit, GitTree(git, commit), result.tree, arch, fetch, step, below)
    if features is not None:
        if step is not None:
            step(0, 1, "following its features")
        lower, walker = below[0] if below else (None, None)
        key = f"{result.tree}\0{lower[2] if lower else ''}\0{arch.name}"
        audit.features = explain(name, commit, GitTree(git, commit), audit.gates, lower,
                                 walker=walker, key=f"{key}\0{at or ''}", choose=features, ref=at or "",
                                 arch=arch, settings_class=mirror.upstream.settings_class,
                                 cuda=cuda or cuda_here())
    if nvcc is not None:
        python = ws.config.upstream(name).python or sys.executable
        audit.gates, summary = compile_gates(GitTree(git, commit), audit.gates, arch,
                                             nvcc=nvcc, python=python, step=step)
        audit.compiled = summary.to_dict()
    coverages = []
    for ps in ws.patchsets():
        if ps.upstream != name:
            continue
        version = ps.current
        try:
            patches = [raw for _, raw in version.patch_texts()]
        except ContribError as exc:
            audit.notes.append(f"{ps.target}: {exc}; not counted for covered_by")
            continue
        coverages.append(patch_coverage(ps.target, git, version.base, patches))
    audit.gates = mark_covered(audit.gates, coverages)
    return audit


@functools.cache
def cuda_here() -> Cuda:
    """The CUDA release this machine's nvcc names (as `contrib doctor` finds it), else a
    release new enough for every version test: what a JIT build is asked about when no
    release is named (`why` and `audit` alike, so they share the features' cache)."""
    return nvcc_cuda(_nvcc_says())


def _nvcc_says() -> str | None:
    """``nvcc --version``'s release line, kept in the cache by nvcc's path, the file it
    resolves to and that file's size and mtime: a warm run starts no process.  (A
    wrapper script is keyed by itself: ``--cuda`` names a release past it.)"""
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    try:
        real = os.path.realpath(nvcc)
        stat = os.stat(real)
    except OSError:
        return None
    key = f"{nvcc}\0{real}\0{stat.st_size}\0{stat.st_mtime_ns}"
    path = environ.cache_root() / "audit" / "nvcc.json"
    with contextlib.suppress(OSError, ValueError, ContribError):
        check_inside(environ.cache_root(), path)
        kept = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(kept, dict) and kept.get("key") == key and isinstance(kept.get("says"), str):
            return str(kept["says"])
    says = nvcc_version(nvcc)
    if says is not None:  # a failing nvcc is asked again next time
        with contextlib.suppress(ContribError):
            check_inside(environ.cache_root(), path)
            atomic_write(path, json.dumps({"key": key, "says": says}))
    return says


def _stack_below(ws: Workspace, audit: UpstreamAudit, tree: GitTree, tree_sha: str, arch: Arch,
                 fetch: bool, step: Step | None,
                 below: list[tuple[tuple[str, str, str, TreeAudit, GitTree], Walker | None]]
                 ) -> None:
    """Link the audit to each other upstream of the workspace whose package its tree
    pins: ``below`` on its gates, ``mismatches`` and ``stack`` on the audit.  An upstream
    whose cache cannot be read is one note; the audit goes on without it."""
    required = required_names(tree)
    for other in sorted(ws.config.upstreams):
        if other == audit.name or not required:
            continue
        try:
            found = _lower_package(ws, other, required, fetch)
        except ContribError as exc:
            audit.notes.append(f"{other}: {exc}; the stack below is not audited")
            continue
        pin = find_pin(tree, found[1]) if found else None
        if found is None or pin is None:
            continue  # not a Python package, or not stacked on it
        mirror, package = found
        lower = _pinned(audit, other, pin.where, pin.requirement, pin.version, mirror)
        if lower is not None:
            below.append(_link(audit, mirror, other, lower, tree, tree_sha, arch, step))
            audit.stack[-1] |= {"package": package, "pin": pin.where, "version": pin.version}


def _lower_package(ws: Workspace, other: str, required: set[str],
                   fetch: bool) -> tuple[Mirror, str] | None:
    """The cache and package name of upstream ``other``; None when it has no name, or when
    it is not cloned yet and no package the tree requires looks like it (its key or
    ``package`` part of the name: ``flashinfer`` of ``flashinfer-python``)."""
    config = ws.config.upstream(other)
    mirror = Mirror(config)
    key = canonicalize_name(config.package or other)
    if not mirror.path.is_dir() and not any(key in name for name in required):
        return None  # not worth a clone
    mirror.ensure(fetch_now=fetch)
    package = config.package or package_name(GitTree(mirror.git, mirror.tip()))
    return (mirror, package) if package else None


def _link(audit: UpstreamAudit, mirror: Mirror, other: str, lower: tuple[str, str], tree: GitTree,
          tree_sha: str, arch: Arch, step: Step | None
          ) -> tuple[tuple[str, str, str, TreeAudit, GitTree], Walker | None]:
    """Audit ``other`` at the pinned tag and link the upper audit's gates to it; what
    the features' walk takes of it (the lower upstream, and the upper tree's walker
    when the link walked it: its parsed modules serve the features too)."""
    tag, commit = lower
    linked = audit_and_link(audit.gates, tree, tree_sha, mirror.git, other, tag, commit, arch, step)
    below = linked.below
    audit.gates = linked.gates
    audit.mismatches += linked.mismatches
    audit.seconds += below.seconds + linked.seconds
    audit.stack.append({"upstream": other, "tag": tag, "commit": commit,
                        "seconds": round(below.seconds, 2), "cached": below.cached,
                        "link_seconds": round(linked.seconds, 2)})
    audit.notes += [f"{other} {tag}: {n}" for n in below.notes]
    return lower_of(mirror.git, other, tag, commit, below), linked.walker


def _pinned(audit: UpstreamAudit, other: str, where: str, requirement: str, version: str,
            mirror: Mirror) -> tuple[str, str] | None:
    """The tag and commit of the pinned version, or None with the note saying why not."""
    if not version:
        audit.notes.append(f"{where}: {requirement!r} pins no one version of {other}; the "
                           f"stack below is not audited (pin it with ==, or audit {other} "
                           "on its own)")
        return None
    found = tag_of(mirror.git, version)
    if found is None:
        audit.notes.append(f"{where}: pins {other} {version}, but {other}'s cache has no tag "
                           f"v{version} or {version}; the stack below is not audited (run "
                           "without --no-fetch to fetch its tags)")
    return found
