"""Where a missing header comes from when the upstream has it as a git submodule.

flashinfer includes spdlog and CUTLASS from ``3rdparty/spdlog`` and
``3rdparty/cutlass``, git submodules (``.gitmodules`` at the commit): the
cure for ``spdlog/spdlog.h`` is that submodule, not a pip package.  contrib
reads the upstream's blobs, where a submodule is only a commit id, so the
hint says how to get the files (``git submodule update --init PATH`` in a
checkout, its include folder in ``validation.ptx_include_dirs``) and, where
the upstream's package ships the same folder (flashinfer-python's
``flashinfer/data/spdlog/include``), that it does.  A header is the
submodule's when the library it belongs to (its first path component:
``spdlog/``, ``cutlass/``, and CUTLASS's ``cute/``, CCCL's ``cub/``,
``thrust/``, ``cuda/``) is the submodule's name or its URL's repository.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from contrib.analysis.headers import cure, shipped_by
from contrib.analysis.profiles import Profile
from contrib.analysis.tree import SourceTree

# A header folder that ships inside another library's repository.
_LIBRARY_OF = {"cute": "cutlass", "cub": "cccl", "thrust": "cccl", "cuda": "cccl"}
_SECTION = re.compile(r"^\s*\[submodule\s+\"([^\"]*)\"\s*\]\s*$")
_KEY = re.compile(r"^\s*(path|url)\s*=\s*(.*?)\s*$")


@dataclass(frozen=True)
class Submodule:
    """One ``.gitmodules`` entry."""

    path: str
    url: str

    def names(self) -> set[str]:
        """What the submodule is called: its folder's name, its URL's repository."""
        repo = self.url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
        return {posixpath.basename(self.path).lower(), repo.lower()} - {""}


def submodules(tree: SourceTree) -> list[Submodule]:
    """The tree's ``.gitmodules`` entries, in order (none without the file)."""
    text = tree.read_text(".gitmodules") or ""
    found: list[Submodule] = []
    path = url = ""
    for line in [*text.splitlines(), "[submodule \"\"]"]:
        if _SECTION.match(line):
            if path:
                found.append(Submodule(path.strip("/"), url))
            path = url = ""
        elif key := _KEY.match(line):
            path, url = (key.group(2), url) if key.group(1) == "path" else (path, key.group(2))
    return found


def owner(header: str, entries: Iterable[Submodule]) -> Submodule | None:
    """The submodule ``header`` belongs to (``spdlog/spdlog.h`` -> 3rdparty/spdlog), if any."""
    name = header.strip().strip("<>\"").lstrip("./")
    if "/" not in name:
        return None
    top = name.split("/", 1)[0].lower()
    library = _LIBRARY_OF.get(top, top)
    return next((s for s in entries if library in s.names()), None)


def hint(headers: Iterable[str], tree: SourceTree, profile: Profile) -> str:
    """``a.h, b.h (the upstream's git submodule 3rdparty/spdlog: ...); c.h (from ...)``:
    every missing header once, those of a submodule by submodule, the rest as
    :func:`contrib.analysis.headers.cure` says."""
    entries = submodules(tree)
    by_submodule: dict[Submodule, list[str]] = {}
    rest: list[str] = []
    for header in dict.fromkeys(headers):
        sub = owner(header, entries)
        if sub is None:
            rest.append(header)
        else:
            by_submodule.setdefault(sub, []).append(header)
    parts = [f"{', '.join(names)} ({_cure(sub, names, profile)})"
             for sub, names in by_submodule.items()]
    if rest:
        parts.append(cure(rest))
    return "; ".join(parts)


def _cure(sub: Submodule, headers: list[str], profile: Profile) -> str:
    inside = [d for d in profile.submodule_includes if d.startswith(sub.path + "/")]
    folder = inside[0] if inside else sub.path
    text = (f"the upstream's git submodule {sub.path}, which contrib does not check out: "
            f"`git submodule update --init {sub.path}` in a checkout and add its "
            f"{folder} to validation.ptx_include_dirs")
    shipped = [pkg for link, submodule, pkg in profile.package_links if submodule == sub.path]
    if shipped:
        package = shipped_by(headers[0])
        who = package.split(" (", 1)[0] if package else f"the {profile.name} package"
        text += f", or install {who}, which ships it in {profile.name}/{shipped[0]}"
    return text
