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

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contrib.carry.series import MailPatch
from contrib.errors import GitError, PatchError
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
def small_index(git: Git, tree: str, paths: list[str] | None,
                entries: str | None = None) -> Iterator[dict[str, str]]:
    """A temporary index holding ``paths`` of ``tree`` (all of it when None); ``entries``:
    their :func:`listing`, when the caller has it already."""
    with git.temp_index() as env:
        load(git, env, tree, paths, entries)
        yield env


def load(git: Git, env: dict[str, str], tree: str, paths: list[str] | None,
         entries: str | None = None) -> None:
    """(Re)load the temporary index in ``env`` with ``paths`` of ``tree``."""
    if paths is None:
        git.run("read-tree", tree, env=env)
        return
    # No index file is an empty index to git: one process fewer than `read-tree --empty`.
    Path(env["GIT_INDEX_FILE"]).unlink(missing_ok=True)
    if paths:
        entries = listing(git, tree, paths) if entries is None else entries
        if entries:
            git.run("update-index", "-z", "--index-info", env=env, input=entries)


def listing(git: Git, tree: str, paths: list[str]) -> str:
    """``ls-tree -r -z --full-tree TREE -- PATHS`` read from the tree objects through the
    batch reader, without a process: each path's entry, or every file under a folder."""
    folders: dict[str, list[tuple[str, str, str, str]]] = {}

    def entries(folder: str, sha: str) -> list[tuple[str, str, str, str]]:
        if folder not in folders:
            found = git.tree_entries(sha)
            if found is None:
                raise GitError(f"ls-tree: {sha} is not a tree in {git.path}")
            folders[folder] = found
        return folders[folder]

    def below(folder: str, sha: str) -> Iterator[tuple[str, str, str, str]]:
        for mode, kind, obj, name in entries(folder, sha):
            if kind == "tree":
                yield from below(f"{folder}{name}/", obj)
            else:
                yield mode, kind, obj, f"{folder}{name}"

    root = git.tree_of(tree)
    found: dict[str, tuple[str, str, str]] = {}
    for path in paths:
        folder, sha, parts = "", str(root), path.split("/")
        for depth, part in enumerate(parts):
            entry = next((e for e in entries(folder, sha) if e[3] == part), None)
            if entry is None:
                break
            if depth == len(parts) - 1 or entry[1] != "tree":
                if entry[1] == "tree":
                    found |= {p: (m, k, o) for m, k, o, p in below(f"{folder}{part}/", entry[2])}
                elif depth == len(parts) - 1:
                    found[f"{folder}{part}"] = entry[:3]
                break
            folder, sha = f"{folder}{part}/", entry[2]
    return "".join(f"{m} {k} {o}\t{p}\0" for p, (m, k, o) in sorted(found.items()))


def changes(git: Git, old: str, new: str) -> dict[str, tuple[str, str] | None]:
    """path -> (mode, blob) or None (deleted), between two (small) trees: what
    ``diff-tree -r`` says, read from the tree objects through the batch reader."""
    result: dict[str, tuple[str, str] | None] = {}

    def entries(tree: str | None) -> dict[str, tuple[str, str, str]]:
        if tree is None:
            return {}
        found = git.tree_entries(tree)
        if found is None:
            raise GitError(f"diff-tree: {tree} is not a tree in {git.path}")
        return {name: (mode, kind, sha) for mode, kind, sha, name in found}

    def walk(a: str | None, b: str | None, prefix: str) -> None:
        was, now = entries(a), entries(b)
        for name in sorted(was.keys() | now.keys()):
            x, y = was.get(name), now.get(name)
            if x == y:
                continue
            x_tree, y_tree = x is not None and x[1] == "tree", y is not None and y[1] == "tree"
            if x_tree or y_tree:
                walk(x[2] if x is not None and x_tree else None,
                     y[2] if y is not None and y_tree else None, f"{prefix}{name}/")
            if y is not None and not y_tree:
                result[prefix + name] = (y[0], y[2])
            elif x is not None and not x_tree:
                result[prefix + name] = None

    walk(old, new, "")
    return result


def graft(git: Git, tree: str, edits: dict[str, tuple[str, str] | None]) -> Tree:
    """``tree`` with ``edits`` applied (path -> (mode, blob) or None to delete)."""
    written: list[tuple[dict[str, tuple[str, str, str]], str]] = []
    new = _graft(git, tree, edits, "", written)
    if new is None:
        return Tree(git.run("mktree", input=""))
    return _write(git, written)


def _graft(git: Git, tree: str | None, edits: dict[str, tuple[str, str] | None],
           prefix: str, written: list[tuple[dict[str, tuple[str, str, str]], str]]) -> str | None:
    """The new tree's sha, its entries and those of every new tree below it appended to
    ``written`` (the lowest first), to be written together."""
    entries: dict[str, tuple[str, str, str]] = {}
    if tree is not None:
        found = git.tree_entries(tree)
        if found is None:
            raise GitError(f"ls-tree: {tree} is not a tree in {git.path}")
        entries = {name: (mode, kind, sha) for mode, kind, sha, name in found}
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
        new = _graft(git, current[2] if current else None, sub, f"{prefix}{name}/", written)
        if new is None:
            entries.pop(name, None)
        else:
            entries[name] = ("040000", "tree", new)
    if not entries:
        return None
    written.append((entries, _tree_sha(entries)))
    return written[-1][1]


def _tree_sha(entries: dict[str, tuple[str, str, str]]) -> str:
    """The sha git gives a tree of ``entries`` (its object: mode, name, raw sha each, in
    git's order, where a folder sorts as its name and a slash)."""
    def key(name: str) -> bytes:
        raw = name.encode("utf-8", "surrogateescape")
        return raw + b"/" if entries[name][1] == "tree" else raw

    body = b"".join(b"%d %s\0%s" % (int(entries[n][0]), n.encode("utf-8", "surrogateescape"),
                                     bytes.fromhex(entries[n][2]))
                    for n in sorted(entries, key=key))
    width = len(next(iter(entries.values()))[2])
    algorithm = hashlib.sha1 if width == 40 else hashlib.sha256
    return algorithm(b"tree %d\0" % len(body) + body).hexdigest()


_PLAIN = re.compile(r'^[^"\\\n\t\x00-\x1f]+$')  # a name mktree reads as written, unquoted


def _write(git: Git, written: list[tuple[dict[str, tuple[str, str, str]], str]]) -> Tree:
    """Write the new trees (the lowest first) with one ``mktree --batch``; the last is
    the root.  Each is written in turn (``mktree -z``) when a name would need quoting
    or git's sha is not the one computed here."""
    if all(_PLAIN.match(n) for entries, _ in written for n in entries):
        request = "\n".join("".join(f"{m} {k} {o}\t{n}\n" for n, (m, k, o) in
                                     sorted(entries.items())) for entries, _ in written)
        status, out, _ = git.try_run("mktree", "--batch", input=request)
        if status == 0 and out.split() == [sha for _, sha in written]:
            return Tree(written[-1][1])
    sha, actual = "", dict[str, str]()  # computed sha -> git's
    for entries, computed in written:
        listing = "".join(f"{m} {k} {actual.get(o, o)}\t{n}\0"
                          for n, (m, k, o) in sorted(entries.items()))
        sha = actual[computed] = git.run("mktree", "-z", input=listing)
    return Tree(sha)
