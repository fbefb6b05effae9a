"""Every feature of an audited tree, each with its chain and verdict.

A server's features (its settings) are walked in its own tree and followed into the
upstream below at the version it pins; a library's (its public API) in its own tree.
The trees' audits are the engine's (cached); the walk of one feature is bounded
(:data:`~contrib.audit.stack.walk.MAX_BLOCKS`), so a whole table costs one pass over
the features, and one feature, for ``contrib why``, only its own walk.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from contrib import __version__, environ
from contrib.analysis.archtoolkit import ASSUMED, Cuda
from contrib.analysis.tree import GitTree
from contrib.arch import Arch
from contrib.audit.chains import Chain, Feature, FeatureKind
from contrib.audit.engine import FORMAT, TreeAudit
from contrib.audit.feature.chain import chain_of
from contrib.audit.feature.declared import declared, opt_in, settings_elsewhere
from contrib.audit.feature.upper import Upper
from contrib.audit.model import AuditGate
from contrib.audit.serial import chain_cache, chain_from_cache
from contrib.audit.stack.link import LINK_FORMAT, walker_of
from contrib.audit.stack.lower import Lower
from contrib.audit.stack.mode import Mode
from contrib.audit.stack.sglkernel import NAMESPACE, Kernels, Shelf, with_ops
from contrib.audit.stack.walk import Walker
from contrib.errors import ContribError
from contrib.git.repo import Git
from contrib.workspace.txn import atomic_write, check_inside

FEATURE_FORMAT = 32  # bump when the chains change over the same audits

Choose = Callable[[list[Feature]], list[Feature]]


def every(features: list[Feature]) -> list[Feature]:
    """The :data:`Choose` of a feature table: every listed feature (what it follows, and
    caches); a function only its module names is ``contrib why``'s to follow."""
    return [f for f in features if f.listed]


def explain(name: str, commit: str, tree: GitTree, gates: list[AuditGate],
            below: tuple[str, str, str, TreeAudit, GitTree] | None, *, key: str,
            settings_class: str, choose: Choose | None = None, ref: str = "",
            walker: Walker | None = None, arch: Arch | None = None,
            cuda: Cuda = ASSUMED) -> list[Chain]:
    """The chains of the features of ``tree`` (``name`` at ``commit``, audited as
    ``gates``) that ``choose`` keeps (all by default).  ``below``: the upstream below
    as pinned (its name, tag, commit, audit and tree), for a server's features.
    ``key``: what the chains depend on beside contrib (the trees, the arch); every
    feature's chain is kept in the cache under it, and answers a later ``choose``.
    ``settings_class``: the name of a server's settings dataclass (its upstream's
    ``settings_class`` in ``contrib.toml``: sglang's ``ServerArgs`` by default).
    ``ref``: how a library's own links name its commit (default: the sha's start).
    ``walker``: the upper tree's, when the link walked it already (its parsed modules
    and indexes are kept).  ``arch``: the target, for the C/C++ host checks below a
    call no Python gate refuses (a crash there).  ``cuda``: the toolkit a JIT module
    of the upstream below (or the library) is built with, for the target it builds."""
    path = _cache_file(f"{key}\0{settings_class}\0{_wheels_here()}\0{cuda.text()}")
    features = declared(tree, settings_class)
    kept = _load(path, every(features))
    if choose is None:
        choose = every
    chosen = choose(features)
    if kept is not None and (choose is every or all(f.listed for f in chosen)):
        return kept if choose is every else _chosen(kept, chosen)
    if not chosen:
        return []
    if chosen[0].kind == FeatureKind.API:
        own = Lower(name, ref or commit[:10], commit, TreeAudit(commit, "", gates), tree,
                    arch=arch, cuda=cuda)
        chains = [chain_of(f, None, own, arch) for f in chosen]
    else:
        lower = Lower(*below, arch=arch, cuda=cuda) if below is not None else None
        roots = lower.roots if lower is not None else {}
        walker = walker or walker_of(gates, tree, roots)
        mode = Mode.features(settings_elsewhere(tree, settings_class))
        choices: dict[str, frozenset[str]] = {}
        for f in features:
            if f.value:
                choices[f.attr] = choices.get(f.attr, frozenset()) | {f.value}
        upper = Upper(name, commit, gates, with_ops(walker.in_mode(mode)),
                      Kernels(name, commit, tree, Shelf(NAMESPACE, tree)), choices,
                      opt_in(tree, [p for p in tree.paths() if p.endswith(".py")],
                             settings_class))
        chains = [chain_of(f, upper, lower, arch, choices.get(f.attr, frozenset()))
                  for f in chosen]
    if choose is every:
        with contextlib.suppress(ContribError):
            check_inside(environ.cache_root(), path)
            atomic_write(path, json.dumps([chain_cache(c) for c in chains]))
    return chains


def _chosen(chains: list[Chain], features: list[Feature]) -> list[Chain]:
    wanted = {f.name for f in features}
    return [c for c in chains if c.feature.name in wanted]


def _wheels_here() -> str:
    """The wheels of the find-links folders (a chain ending in a kernel wheel reads one
    there): one added or removed answers anew.  pip's cache is not listed (too large to
    list on every run): a wheel pip fetched after an answer was kept is read once the
    cache is cleared (``CONTRIB_CACHE``) or the folder named."""
    names = []
    for folder in environ.find_links():
        with contextlib.suppress(OSError):
            names += sorted(f"{p}:{p.stat().st_size}" for p in folder.glob("*.whl"))
    return "\0".join(names)


def _cache_file(key: str) -> Path:
    digest = hashlib.sha256(f"features\0{key}\0{__version__}\0{FORMAT}\0{LINK_FORMAT}\0"
                            f"{FEATURE_FORMAT}".encode()).hexdigest()
    return environ.cache_root() / "audit" / f"features-{digest[:32]}.json"


def _load(path: Path, features: list[Feature]) -> list[Chain] | None:
    """The kept chains, in ``features``' order; None when absent, damaged or of other
    features (an edit of the cache, a hash collision): follow them again."""
    try:
        check_inside(environ.cache_root(), path)
        if path.is_symlink():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list) or len(data) != len(features):
            return None
    except (OSError, ValueError, RecursionError, ContribError):
        return None
    chains = [chain_from_cache(f, item) for f, item in zip(features, data, strict=True)]
    return None if any(c is None for c in chains) else [c for c in chains if c is not None]


def lower_of(git: Git, name: str, tag: str, commit: str, audit: TreeAudit
             ) -> tuple[str, str, str, TreeAudit, GitTree]:
    """What :func:`explain` takes for the upstream below."""
    return name, tag, commit, audit, GitTree(git, commit)
