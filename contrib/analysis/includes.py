"""Find the sources a gate compiles and their ``#include "..."`` closure in a tree."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from contrib.analysis.cscan import strip_comments
from contrib.analysis.tree import SourceTree

CUDA_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inl")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def is_cuda_source(path: str) -> bool:
    """Whether ``path`` names a C/C++/CUDA source or header."""
    return path.lower().endswith(CUDA_SUFFIXES)


def include_roots(tree: SourceTree) -> list[str]:
    """Folders the build puts on the include path: every ``include/`` folder, shallowest first."""
    roots = set()
    for path in tree.paths():
        parts = path.split("/")
        for depth, part in enumerate(parts[:-1]):
            if part == "include" and depth < 4:
                roots.add("/".join(parts[: depth + 1]))
                break
    return sorted(roots, key=lambda r: (r.count("/"), r))


def find_by_name(tree: SourceTree, name: str) -> str | None:
    """Resolve a file name from a build script (``"trtllm_allreduce.cu"``) to a repo path.

    Exact paths win; otherwise the file with that path suffix, preferring
    ``csrc/``, then the shallowest.  None if no such file exists.
    """
    clean = posixpath.normpath(name.replace("\\", "/")).lstrip("./")
    if tree.exists(clean):
        return clean
    hits = [p for p in tree.paths() if p == clean or p.endswith("/" + clean)]
    if not hits:
        return None
    return min(hits, key=_preferred)


def _preferred(path: str) -> tuple[bool, bool, int, str]:
    """Of several files a build's name may mean: ``csrc/`` first, then the shallowest."""
    return (not path.startswith("csrc/"), "/csrc/" not in path, path.count("/"), path)


_MAX_MATCHES = 64  # a wildcard name matching more names no family of units


def find_units(tree: SourceTree, names: Iterable[str]) -> list[str]:
    """The repo paths of the units a build names, in order, unique: each name as
    :func:`find_by_name` resolves it; a name with ``*`` (an f-string's unknown field,
    :func:`contrib.analysis.jitsources.source_literals`) is every file whose path ends so,
    in the folder the best of them is in (nothing when more than a family match)."""
    found: list[str] = []
    for name in names:
        if "*" not in name:
            hits = [hit] if (hit := find_by_name(tree, name)) else []
        else:
            hits = _matching(tree, posixpath.normpath(name.replace("\\", "/")).lstrip("./"))
        found += [h for h in hits if h not in found]
    return found


def _matching(tree: SourceTree, pattern: str) -> list[str]:
    folder, _, base = pattern.rpartition("/")
    hits = [p for p in tree.paths()
            if fnmatch.fnmatchcase(posixpath.basename(p), base)
            and (not folder or fnmatch.fnmatchcase(posixpath.dirname(p), f"*{folder}"))]
    if not hits:
        return []
    best = min(hits, key=_preferred)
    family = sorted(p for p in hits if posixpath.dirname(p) == posixpath.dirname(best))
    return family if len(family) <= _MAX_MATCHES else []


class IncludeResolver:
    """Resolve ``#include "name"`` from a file: its own folder first, then include roots."""

    def __init__(self, tree: SourceTree, roots: Iterable[str] | None = None, *,
                 extra: Iterable[str] = ()) -> None:
        """``roots`` replace the tree's own include roots; ``extra`` (folders a build
        adds, such as a JIT function's ``extra_include_paths``) come after them."""
        self.tree = tree
        self.roots = [*(list(roots) if roots is not None else include_roots(tree)), *extra]

    def __call__(self, including: str, name: str) -> str | None:
        """The repo path ``including`` gets for ``#include "name"``, or None."""
        folder = posixpath.dirname(including)
        for base in [folder, *self.roots]:
            candidate = posixpath.normpath(posixpath.join(base, name))
            if not candidate.startswith("../") and self.tree.exists(candidate):
                return candidate
        return None


@dataclass
class Closure:
    """Files reachable through quoted includes, and includes we could not resolve."""

    files: list[str] = field(default_factory=list)
    unresolved: list[tuple[str, str]] = field(default_factory=list)  # (including file, name)


def include_closure(
    tree: SourceTree, sources: Iterable[str], resolver: IncludeResolver | None = None
) -> Closure:
    """Every file reachable from ``sources`` through includes (in discovery order).

    Includes are followed whatever their ``#if`` guards say: the closure is the
    set of files any architecture might compile.  ``#include <...>`` is followed
    too when it names a file of the tree (``<flashinfer/...>``); system headers
    are not in the tree and are not listed as unresolved.
    """
    resolver = resolver or IncludeResolver(tree)
    closure = Closure()
    seen: set[str] = set()
    queue = [s for s in sources if tree.exists(s)]
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        closure.files.append(path)
        text = tree.read_text(path) or ""
        for match in INCLUDE.finditer(strip_comments(text)):
            name = match.group(1)
            target = resolver(path, name)
            if target is None:
                if '"' in match.group():
                    closure.unresolved.append((path, name))
            elif target not in seen:
                queue.append(target)
    return closure


class IncludeGraph:
    """The tree's include edges that resolve in the tree, both ways, read once.

    A plain regex, no comment stripping: this reads every C/CUDA file of the tree
    (thousands in flashinfer), and a commented-out include only adds a candidate.
    """

    def __init__(self, tree: SourceTree, resolver: IncludeResolver | None = None) -> None:
        resolver = resolver or IncludeResolver(tree)
        self.forward: dict[str, set[str]] = {}
        self.reverse: dict[str, set[str]] = {}
        for path in tree.paths():
            if not is_cuda_source(path):
                continue
            for name in INCLUDE.findall(tree.read_text(path) or ""):
                target = resolver(path, name)
                if target is not None:
                    self.forward.setdefault(path, set()).add(target)
                    self.reverse.setdefault(target, set()).add(path)

    def includers(self, headers: Iterable[str]) -> dict[str, str]:
        """Every file whose include closure reaches one of ``headers``: file -> the header."""
        found: dict[str, str] = {}
        for header in headers:
            queue, seen = [header], {header}
            while queue:
                for parent in sorted(self.reverse.get(queue.pop(), ())):
                    if parent not in seen:
                        seen.add(parent)
                        queue.append(parent)
                        found.setdefault(parent, header)
        return found

    def reach(self, paths: Iterable[str]) -> set[str]:
        """``paths`` and every file of the tree they include, directly or not."""
        seen = set(paths)
        queue = list(seen)
        while queue:
            for child in self.forward.get(queue.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
        return seen
