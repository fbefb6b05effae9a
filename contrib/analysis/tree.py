"""Read-only views of a source tree: a dict (tests), a directory, or a git commit.

The static validation stages only read files, so they work on a
:class:`SourceTree`; the command hands them a :class:`GitTree` that reads blobs
straight out of the upstream cache, with no checkout.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Protocol


class SourceTree(Protocol):
    """What the analyses need from a tree: text by repo-relative POSIX path."""

    def read_text(self, path: str) -> str | None:
        """The file's text (undecodable bytes replaced), or None if absent."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` is a file in the tree."""
        ...

    def paths(self) -> list[str]:
        """Every file path in the tree, sorted."""
        ...


class BlobReader(Protocol):
    """The two calls GitTree needs; ``contrib.git.repo.Git`` provides them."""

    def read_blob(self, rev: str, path: str) -> bytes | None: ...

    def ls_tree_paths(self, rev: str) -> list[str]: ...


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class DictTree:
    """A tree held in memory: ``{"csrc/a.cu": "..."}``."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self._files = dict(files)

    def read_text(self, path: str) -> str | None:
        """The file's text, or None."""
        return self._files.get(path)

    def exists(self, path: str) -> bool:
        """Whether the file exists."""
        return path in self._files

    def paths(self) -> list[str]:
        """All paths, sorted."""
        return sorted(self._files)


class FsTree:
    """A directory on disk (a worktree); ``.git`` is skipped."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read_text(self, path: str) -> str | None:
        """The file's text, or None."""
        target = self.root / path
        return _decode(target.read_bytes()) if target.is_file() else None

    def exists(self, path: str) -> bool:
        """Whether the file exists."""
        return (self.root / path).is_file()

    def paths(self) -> list[str]:
        """All file paths, sorted, POSIX-style."""
        found: list[str] = []
        for folder, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if d != ".git"]
            rel = Path(folder).relative_to(self.root)
            found.extend((rel / name).as_posix() for name in files)
        return sorted(p[2:] if p.startswith("./") else p for p in found)


class GitTree:
    """The tree of one commit, read blob by blob (no checkout)."""

    def __init__(self, git: BlobReader, rev: str) -> None:
        self.git = git
        self.rev = rev
        self._paths: list[str] | None = None
        self._set: frozenset[str] | None = None
        self._cache: dict[str, str | None] = {}
        self._bulk: set[str] = set()

    def read_text(self, path: str) -> str | None:
        """The blob's text at ``rev``, or None (cached).

        A miss loads every file with the same suffix in one batch when the
        reader can (analyses read files of one kind: all .py, all .cuh).
        """
        if path not in self._cache:
            if not self.exists(path):
                self._cache[path] = None
                return None
            batch = getattr(self.git, "read_blobs", None)
            suffix = PurePosixPath(path).suffix
            if batch is not None and suffix and suffix not in self._bulk:
                self._bulk.add(suffix)
                wanted = [p for p in self.paths() if p.endswith(suffix) and p not in self._cache]
                for name, blob in batch(self.rev, wanted).items():
                    self._cache[name] = None if blob is None else _decode(blob)
            if path not in self._cache:
                data = self.git.read_blob(self.rev, path)
                self._cache[path] = None if data is None else _decode(data)
        return self._cache[path]

    def exists(self, path: str) -> bool:
        """Whether ``path`` is a file at ``rev``."""
        return path in self._path_set()

    def paths(self) -> list[str]:
        """All file paths at ``rev``, sorted."""
        if self._paths is None:
            self._paths = sorted(self.git.ls_tree_paths(self.rev))
        return self._paths

    def _path_set(self) -> frozenset[str]:
        if self._set is None:
            self._set = frozenset(self.paths())
        return self._set


def materialize(tree: SourceTree, paths: list[str], dest: Path) -> list[Path]:
    """Write ``paths`` from ``tree`` under ``dest`` (for nvcc); returns the written files."""
    written: list[Path] = []
    for path in paths:
        text = tree.read_text(path)
        if text is None:
            continue
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written
