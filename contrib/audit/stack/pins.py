"""Which version of another upstream a tree pins, read from its packaging metadata.

sglang's ``python/pyproject.toml`` names the flashinfer it runs on:
``"flashinfer_python[cu13]==0.6.17"``.  An upstream's package name is its own
``[project] name`` at its tip (flashinfer: ``flashinfer-python``), or the
``package`` key of its ``[upstreams.NAME]`` table when that cannot be read; the
two are compared PEP 503-normalised (``flashinfer_python`` is
``flashinfer-python``).  A pinned version maps to a tag of the lower upstream's
cache: ``v0.6.17``, else ``0.6.17``.
"""

from __future__ import annotations

import contextlib
import re
import tomllib
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from contrib.analysis.tree import SourceTree
from contrib.git.repo import Git

# Where a project keeps its packaging metadata: the root, or sglang's python/ folder.
PYPROJECTS = ("pyproject.toml", "python/pyproject.toml")


@dataclass(frozen=True)
class Pin:
    """What one tree says about a lower upstream's package: where, and which version.

    ``version`` is empty when the requirement is not one exact version (a range,
    no specifier at all); ``where`` is ``file:line``."""

    package: str
    where: str
    requirement: str
    version: str = ""


def package_name(tree: SourceTree) -> str | None:
    """The ``[project] name`` of the first pyproject of ``tree`` that has one, normalised."""
    for path in PYPROJECTS:
        project = (_toml(tree, path) or {}).get("project")
        name = project.get("name") if isinstance(project, dict) else None
        if isinstance(name, str) and name.strip():
            return canonicalize_name(name)
    return None


def required_names(tree: SourceTree) -> set[str]:
    """Every package ``tree``'s packaging metadata requires, normalised."""
    names: set[str] = set()
    for path in PYPROJECTS:
        for text in _requirements((_toml(tree, path) or {}).get("project", {})):
            with contextlib.suppress(InvalidRequirement):
                names.add(canonicalize_name(Requirement(text).name))
    return names


def find_pin(tree: SourceTree, package: str) -> Pin | None:
    """How ``tree``'s packaging metadata requires ``package`` (its dependencies first,
    then its optional dependencies); None when it does not name it at all."""
    wanted = canonicalize_name(package)
    for path in PYPROJECTS:
        data = _toml(tree, path)
        if not data:
            continue
        for text in _requirements(data.get("project", {})):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) == wanted:
                where = f"{path}:{_line_of(tree.read_text(path) or '', text)}"
                return Pin(wanted, where, text, _exact(req))
    return None


def _requirements(project: object) -> list[str]:
    if not isinstance(project, dict):
        return []
    found = [r for r in project.get("dependencies", []) if isinstance(r, str)]
    optional = project.get("optional-dependencies", {})
    if isinstance(optional, dict):
        for group in optional.values():
            found += [r for r in group if isinstance(r, str)] if isinstance(group, list) else []
    return found


def _exact(req: Requirement) -> str:
    """The one version ``req`` pins (``==1.2`` or ``===1.2``), or empty."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return ""


def _line_of(text: str, requirement: str) -> int:
    for number, line in enumerate(text.splitlines(), 1):
        if requirement in line:
            return number
    return 1


def _toml(tree: SourceTree, path: str) -> dict[str, object] | None:
    """The parsed file; None when absent or unreadable (bad TOML, or nesting so deep
    that the parser recurses out: a hostile pyproject in the tree pins nothing)."""
    text = tree.read_text(path)
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError, MemoryError):
        return None


def tag_of(git: Git, version: str) -> tuple[str, str] | None:
    """The tag of ``version`` in the lower upstream's cache and its commit: ``v1.2``
    first, then ``1.2``; None when neither is there."""
    if not re.fullmatch(r"[0-9A-Za-z.+!_-]+", version):
        return None
    for tag in (f"v{version}", version):
        sha = git.try_rev_parse(f"refs/tags/{tag}^{{commit}}")
        if sha is not None:
            return tag, str(sha)
    return None
