"""Checkouts and JIT build folders keyed by content, so a GPU run reuses its builds.

An upstream's JIT (flashinfer's ninja builds of ``trtllm_comm``) keys its cache on
absolute source paths: a fresh per-run worktree and a fresh per-run cache folder
rebuild the module from scratch every time (4 to 5 minutes).  Here the checkout of
a tree lives at ``<contrib cache>/builds/<tree sha>/src`` (written once, from the
tree's blobs, with a marker written last) and its JIT cache at
``<contrib cache>/builds/<tree sha>/jit-<key>``, the key being the sha256 of the
checkout's path, the arch variables and the interpreter: the same patched sources,
arch and flags find the same folder and build nothing, and a changed header gives
a new tree, hence a new folder (ninja there rebuilds only what includes it, once
the first build of that tree is done).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from contrib.git.cache import cache_root
from contrib.git.repo import Git

MARKER = ".contrib-tree"  # written last: a checkout without it is incomplete and made again


def builds_dir() -> Path:
    """``<contrib cache>/builds``."""
    return cache_root() / "builds"


def checkout_path(tree: str) -> Path:
    """Where the checkout of ``tree`` (a tree sha) lives."""
    return builds_dir() / tree / "src"


def jit_dir(checkout: Path, env: Mapping[str, str], python: str | None) -> Path:
    """The JIT cache folder of ``checkout`` for these arch variables and interpreter.

    ``checkout`` is content-keyed already (its path holds the tree sha), so the
    folder is too; the base and patched trees of a bench are two checkouts, hence
    two caches."""
    body = json.dumps({"path": str(checkout), "env": dict(sorted(env.items())),
                       "python": python or ""}, sort_keys=True)
    return checkout.parent / f"jit-{hashlib.sha256(body.encode()).hexdigest()[:16]}"


@contextmanager
def locked(tree: str) -> Iterator[None]:
    """Hold ``tree``'s lock: two validations of one content take turns on its folder."""
    folder = builds_dir() / tree
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def checkout(git: Git, commit: str) -> Path:
    """A checkout of ``commit``'s tree, reused when one of that tree is complete.

    Files keep their modification times across validations, so a build tool that
    compares times (ninja) sees nothing changed.  Call it under :func:`locked`."""
    tree = git.run("rev-parse", f"{commit}^{{tree}}")
    path = checkout_path(tree)
    marker = path / MARKER
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == tree:
        return path
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    with git.temp_index(tree) as env:
        git.run(f"--work-tree={path}", "checkout-index", "-a", "-f", env=env)
    marker.write_text(tree + "\n", encoding="utf-8")
    return path


def jit_folder(tree: Path, env: Mapping[str, str], python: str | None, fallback: Path) -> Path:
    """The JIT cache for a run in ``tree``: content-keyed when ``tree`` is one of
    :func:`checkout`'s folders, else ``fallback`` (a per-run folder: a tree we did
    not check out ourselves may change under the same path)."""
    try:
        keyed = tree.resolve().is_relative_to(builds_dir().resolve()) and (tree / MARKER).is_file()
    except OSError:
        keyed = False
    return jit_dir(tree, env, python) if keyed else fallback
