"""Checkouts and JIT build folders that outlive a run, so a GPU run reuses its builds.

An upstream's JIT (flashinfer's ninja builds of ``trtllm_comm``) keys its cache on
absolute source paths and file times: a fresh per-run worktree and a fresh per-run
cache folder rebuild the module from scratch every time (4 to 5 minutes).  Here a
run checks its trees out into *slots*, ``<contrib cache>/builds/<slot>/src``, one
per upstream cache and role (the patched tree, the base a bench compares with),
and keeps the JIT cache beside them (``jit-<key>``: the checkout's path, the arch
variables and the interpreter).  A slot is brought to a new tree the way git
switches branches (``read-tree -m -u`` on the slot's own index): only the files
that differ are rewritten, every other one keeps its time.  So a re-validation of
the same content builds nothing, whichever worktree or history the content came
from, and a changed header rebuilds only what includes it.
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


def checkout_path(slot: str) -> Path:
    """Where the checkout of ``slot`` lives."""
    return builds_dir() / slot / "src"


def slot_of(cache: Path, role: str) -> str:
    """The slot of an upstream cache's ``role`` ("patched", "base") checkouts."""
    return f"{cache.name.removesuffix('.git')}-{role}"


def jit_dir(checkout: Path, env: Mapping[str, str], python: str | None) -> Path:
    """The JIT cache folder of ``checkout`` for these arch variables and interpreter.

    ``checkout`` is content-keyed already (its path holds the tree sha), so the
    folder is too; the base and patched trees of a bench are two checkouts, hence
    two caches."""
    body = json.dumps({"path": str(checkout), "env": dict(sorted(env.items())),
                       "python": python or ""}, sort_keys=True)
    return checkout.parent / f"jit-{hashlib.sha256(body.encode()).hexdigest()[:16]}"


@contextmanager
def locked(slot: str) -> Iterator[None]:
    """Hold ``slot``'s lock: two validations take turns on its folder."""
    folder = builds_dir() / slot
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def checkout(git: Git, commit: str, slot: str) -> Path:
    """``slot``'s checkout, brought to ``commit``'s tree.

    Files the tree shares with what the slot held keep their modification times,
    so a build tool that compares times (ninja) rebuilds only what depends on the
    others.  A slot whose last update did not finish is checked out afresh.  Call
    it under :func:`locked`."""
    tree = git.run("rev-parse", f"{commit}^{{tree}}")
    path = checkout_path(slot)
    marker, index = path / MARKER, path.parent / "index"
    held = marker.read_text(encoding="utf-8").strip() if marker.is_file() else ""
    env = {"GIT_INDEX_FILE": str(index)}
    work = f"--work-tree={path}"
    if held == tree and index.is_file() and _put_back(git, work, env):
        return path
    if held and index.is_file():
        marker.unlink()  # incomplete until the update is done
        git.try_run(work, "update-index", "-q", "--refresh", env=env)  # times, not contents
        clean, _, _ = git.try_run(work, "diff-files", "--quiet", env=env)
        status = clean or git.try_run(work, "read-tree", "-m", "-u", held, tree, env=env)[0]
        if status == 0:
            marker.write_text(tree + "\n", encoding="utf-8")
            return path
        # a run changed a checked-out file: start the slot again from the tree alone
    shutil.rmtree(path, ignore_errors=True)
    index.unlink(missing_ok=True)
    path.mkdir(parents=True)
    git.run(work, "read-tree", tree, env=env)
    git.run(work, "checkout-index", "-a", "-f", "-u", env=env)
    marker.write_text(tree + "\n", encoding="utf-8")
    return path


def _put_back(git: Git, work: str, env: Mapping[str, str]) -> bool:
    """Restore the tracked files a run changed or deleted in a checkout of the tree it
    holds; True when it is whole again.  Only those files are rewritten, so every
    other file keeps its time and the JIT's builds stay valid.  Files a run added
    (build outputs) are left alone."""
    git.try_run(work, "update-index", "-q", "--refresh", env=env)
    status, out, _ = git.try_run(work, "diff-files", "--name-only", "-z", env=env)
    changed = [name for name in out.split("\0") if name]
    if status != 0 or not changed:
        return status == 0
    restored, _, _ = git.try_run(work, "checkout-index", "-f", "-u", "--", *changed, env=env)
    return restored == 0


def jit_folder(tree: Path, env: Mapping[str, str], python: str | None, fallback: Path) -> Path:
    """The JIT cache for a run in ``tree``: content-keyed when ``tree`` is one of
    :func:`checkout`'s folders, else ``fallback`` (a per-run folder: a tree we did
    not check out ourselves may change under the same path)."""
    try:
        keyed = tree.resolve().is_relative_to(builds_dir().resolve()) and (tree / MARKER).is_file()
    except OSError:
        keyed = False
    return jit_dir(tree, env, python) if keyed else fallback
