"""Audit the upstreams of a workspace: the cache, the commits, the patchsets, the history."""

from __future__ import annotations

import sys

from contrib.analysis.tree import GitTree
from contrib.arch import Arch
from contrib.audit.engine import Step, audit_commit
from contrib.audit.links import mark_covered, mark_history, patch_coverage
from contrib.audit.ptxcheck import compile_gates
from contrib.audit.report import UpstreamAudit
from contrib.errors import ContribError
from contrib.git.cache import Mirror
from contrib.git.process import ProgressFn
from contrib.workspace.model import Workspace


def audit_upstream(ws: Workspace, name: str, arch: Arch, *, at: str | None, since: str | None,
                   fetch: bool, progress: ProgressFn | None = None, step: Step | None = None,
                   nvcc: str | None = None) -> UpstreamAudit:  # fmt: skip
    """The audit of upstream ``name`` at ``at`` (default: the tip), compared with ``since``;
    with ``nvcc`` (``--compile``), the excluding gates' units compiled to PTX too."""
    mirror = Mirror(ws.config.upstream(name)).ensure(fetch_now=fetch, progress=progress)
    commit = mirror.resolve(at, allow_fetch=fetch) if at else mirror.tip()
    since_commit = mirror.resolve(since, allow_fetch=fetch) if since else None
    git = mirror.git
    result = audit_commit(git, commit, arch, step)
    audit = UpstreamAudit(name, commit, at or f"{mirror.upstream.branch} tip", result.gates,
                          since, since_commit, result.seconds, result.cached)  # fmt: skip
    audit.notes += result.notes
    if since_commit is not None:
        old = audit_commit(git, since_commit, arch, step)
        audit.seconds += old.seconds
        mark_history(git, since_commit, commit, old.gates, audit.gates)
    if nvcc is not None:
        python = ws.config.upstream(name).python or sys.executable
        audit.compiled = compile_gates(GitTree(git, commit), audit.gates, arch, nvcc=nvcc,
                                       python=python, step=step).to_dict()  # fmt: skip
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
    mark_covered(audit.gates, coverages)
    return audit
