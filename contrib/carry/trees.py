"""Small trees: apply patches without loading a 50,000-file index.

``git apply --cached`` only looks at the index entries of the files a patch
touches, so a carry probe loads just those entries (``ls-tree`` piped into
``update-index --index-info``) instead of ``read-tree`` of the whole upstream
(tens of milliseconds per probe on sglang-sized trees, every probe of a
bisection).  The trees written from such an index hold only the touched
paths; they are compared, diffed and scanned as they are.  When a real commit
is needed (the exported version, a conflict worktree) :func:`graft` puts the
changed entries into the full tree with ``mktree``, one tree per directory
level, still without an index.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contrib.carry.series import MailPatch
from contrib.errors import PatchError
from contrib.git.repo import Git, Tree

MAX_SPARSE = 400  # beyond this many paths a plain read-tree is as cheap
_DIFF_GIT = re.compile(r"^diff --git (.*)$", re.M)


def touched_paths(patches: list[MailPatch]) -> list[str] | None:
    """Every path the patches touch, or None when one cannot be read back exactly."""
    paths: set[str] = set()
    for patch in patches:
        for rest in _DIFF_GIT.findall(patch.diff):
            # Exported without renames, so the line is "a/P b/P"; quoted names
            # (unusual characters) are left to the full-tree path.
            size = (len(rest) - 5) // 2
            path = rest[2:2 + size]
            if rest.startswith('"') or rest != f"a/{path} b/{path}":
                return None
            paths.add(path)
    return sorted(paths) if len(paths) <= MAX_SPARSE else None


@contextmanager
def small_index(git: Git, tree: str, paths: list[str] | None) -> Iterator[dict[str, str]]:
    """A temporary index holding ``paths`` of ``tree`` (all of it when None)."""
    with git.temp_index() as env:
        load(git, env, tree, paths)
        yield env


def load(git: Git, env: dict[str, str], tree: str, paths: list[str] | None) -> None:
    """(Re)load the temporary index in ``env`` with ``paths`` of ``tree``."""
    if paths is None:
        git.run("read-tree", tree, env=env)
        return
    # No index file is an empty index to git: one process fewer than `read-tree --empty`.
    Path(env["GIT_INDEX_FILE"]).unlink(missing_ok=True)
    if paths:
        entries = git.run("ls-tree", "-r", "-z", "--full-tree", tree, "--", *paths, strip=False)
        if entries:
            git.run("update-index", "-z", "--index-info", env=env, input=entries)


def changes(git: Git, old: str, new: str) -> dict[str, tuple[str, str] | None]:
    """path -> (mode, blob) or None (deleted), between two (small) trees."""
    out = git.run("diff-tree", "-r", "-z", "--no-renames", "--full-index", old, new,
                  strip=False)
    fields = out.split("\0")
    result: dict[str, tuple[str, str] | None] = {}
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(":"):
            continue
        _, mode, _, sha, status = meta[1:].split(" ")
        result[path] = None if status == "D" else (mode, sha)
    return result


def graft(git: Git, tree: str, edits: dict[str, tuple[str, str] | None]) -> Tree:
    """``tree`` with ``edits`` applied (path -> (mode, blob) or None to delete)."""
    new = _graft(git, tree, edits, "")
    return new if new is not None else Tree(git.run("mktree", input=""))


def _graft(git: Git, tree: str | None, edits: dict[str, tuple[str, str] | None],
           prefix: str) -> Tree | None:
    entries: dict[str, tuple[str, str, str]] = {}
    if tree is not None:
        for line in git.run("ls-tree", "-z", tree, strip=False).split("\0"):
            if line:
                meta, name = line.split("\t", 1)
                mode, kind, sha = meta.split(" ")
                entries[name] = (mode, kind, sha)
    nested: dict[str, dict[str, tuple[str, str] | None]] = {}
    for path, value in edits.items():
        head, sep, rest = path.partition("/")
        if sep:
            nested.setdefault(head, {})[rest] = value
        elif value is None:
            entries.pop(head, None)
        else:
            entries[head] = (value[0], "commit" if value[0] == "160000" else "blob", value[1])
    for name, sub in nested.items():
        current = entries.get(name)
        if current is not None and current[1] != "tree":
            raise PatchError(f"{prefix}{name}: is a file upstream, but the patch puts files "
                             "under it; resolve by hand")
        new = _graft(git, current[2] if current else None, sub, f"{prefix}{name}/")
        if new is None:
            entries.pop(name, None)
        else:
            entries[name] = ("040000", "tree", new)
    if not entries:
        return None
    listing = "".join(f"{m} {k} {s}\t{n}\0" for n, (m, k, s) in sorted(entries.items()))
    return Tree(git.run("mktree", "-z", input=listing))
