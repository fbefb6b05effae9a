"""Unusual but legitimate patches: carried exactly, or refused with one clear line.

Binary files, renames, deletes, mode changes, a 1 MB line, non-UTF-8 bytes,
CRLF content and a whole patch mangled to CRLF.  For each: `contrib new`
either refuses it (exit 2, one line naming the patch file, nothing created)
or records a version whose `git am` on the base gives exactly the tree of the
original commit; then upstream moves and `contrib sync` carries it to the
tree `git cherry-pick` gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from testing.audit import FIGURES
from testing.crash import snapshot
from testing.gitutil import Repo, git
from testing.histories import Change, fast_import, filler
from testing.synchelp import series, version_dir
from testing.workspace import SAMPLE, Workspace

BLOB = bytes(range(256)) * 8 + b"\0tail"
LATIN1 = "caf\xe9 cr\xe8me\n".encode("latin-1")
CRLF = b"line one\r\nline two\r\nline three\r\n"
EXTRA = {"assets/blob.bin": BLOB, "tools/run.sh": b"#!/bin/sh\necho run\n",
         "docs/latin1.txt": LATIN1 + b"second\n", "docs/crlf.txt": CRLF,
         "pkg/old_name.py": b"".join(b"X%d = %d\n" % (i, i) for i in range(30))}


@dataclass
class Shape:
    """A commit made on top of the upstream with ``edit(repo_path)``; format-patch flags."""

    edit: Callable[[Path], None]
    flags: tuple[str, ...] = ()
    mangle: Callable[[bytes], bytes] | None = None
    must_carry: bool = False  # git am takes it, so contrib must too


def _crlf(raw: bytes) -> bytes:
    """What a mail client or a Windows checkout does to a patch file."""
    return raw.replace(b"\n", b"\r\n")


def _write(rel: str, data: bytes) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return edit


def _git(*args: str) -> Callable[[Path], None]:
    return lambda root: git(root, *args) and None


def _chmod_x(rel: str) -> Callable[[Path], None]:
    return lambda root: (root / rel).chmod(0o755)


def _both(*edits: Callable[[Path], None]) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        for one in edits:
            one(root)
    return edit


SHAPES = {
    "binary add": Shape(_write("assets/new.bin", BLOB[::-1])),
    "binary modify": Shape(_write("assets/blob.bin", BLOB + b"\x01\x02")),
    "rename with -M": Shape(_git("mv", "pkg/old_name.py", "pkg/new_name.py"), ("-M",)),
    "rename and edit": Shape(_both(_git("mv", "pkg/old_name.py", "pkg/new_name.py"),
                                   _write("pkg/new_name.py", EXTRA["pkg/old_name.py"] + b"Y = 1\n")),
                             ("-M",)),
    "delete": Shape(_git("rm", "-q", "docs/latin1.txt")),
    "mode change": Shape(_chmod_x("tools/run.sh")),
    "mode and content": Shape(_both(_write("tools/run.sh", b"#!/bin/sh\necho run fast\n"),
                                    _chmod_x("tools/run.sh"))),
    "1 MB line": Shape(_write("pkg/huge.py", b"HUGE = '" + b"x" * (1 << 20) + b"'\n")),
    "non-UTF-8 bytes": Shape(_write("docs/latin1.txt", LATIN1 + b"\xff\xfe changed\n")),
    "CRLF content": Shape(_write("docs/crlf.txt", CRLF.replace(b"two", b"2"))),
    "whole patch CRLF-mangled": Shape(_write("pkg/core.py", SAMPLE["pkg/core.py"].replace(
        "return 3\n", "return 33\n").encode()), mangle=_crlf, must_carry=True),
    "CRLF content, whole patch CRLF-mangled": Shape(
        _write("docs/crlf.txt", CRLF.replace(b"three", b"3")), mangle=_crlf, must_carry=True),
}


def _tree_after_am(repo: Repo, tmp: Path, base: str, patches: list[Path]) -> str:
    clone = tmp / f"am-{base[:8]}-{len(list(tmp.iterdir()))}"
    git(tmp, "clone", "-q", "--no-checkout", str(repo.path), str(clone))
    git(clone, "checkout", "-q", base)
    git(clone, "am", "-q", "--keep-cr", *map(str, patches), env={
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})
    return git(clone, "rev-parse", "HEAD^{tree}")


def _tree_after_pick(repo: Repo, tmp: Path, onto: str, commit: str) -> str:
    clone = tmp / f"pick-{onto[:8]}"
    git(tmp, "clone", "-q", "--no-checkout", str(repo.path), str(clone))
    git(clone, "checkout", "-q", onto)
    git(clone, "fetch", "-q", str(repo.path), commit)
    git(clone, "cherry-pick", commit, env={"GIT_COMMITTER_NAME": "t",
                                           "GIT_COMMITTER_EMAIL": "t@example.com"})
    return git(clone, "rev-parse", "HEAD^{tree}")


@pytest.mark.parametrize("label", list(SHAPES))
def test_unusual_patch_is_carried_exactly_or_refused_clearly(
        workspace: Workspace, upstream: Repo, tmp_path: Path, label: str) -> None:
    shape = SHAPES[label]
    for rel, data in EXTRA.items():
        _write(rel, data)(upstream.path)
    base = upstream.commit("extras")
    git(upstream.path, "checkout", "-q", "-b", "side")
    shape.edit(upstream.path)
    git(upstream.path, "add", "-A")
    git(upstream.path, "commit", "-q", "-m", f"shape: {label}", env=upstream.env())
    side = upstream.head()
    out = tmp_path / "patch"
    [name] = git(upstream.path, "format-patch", *shape.flags, "-o", str(out),
                 f"{base}..{side}").splitlines()
    patch = Path(name)
    if shape.mangle is not None:
        patch.write_bytes(shape.mangle(patch.read_bytes()))
    git(upstream.path, "checkout", "-q", "main")
    before = snapshot(workspace.root)
    result = workspace.run("new", "proj", "shape", "--base", base, "--patch", str(patch))
    if result.code != 0:
        assert result.code == 2 and not shape.must_carry, result.err
        assert patch.name in result.err and "Traceback" not in result.err
        assert snapshot(workspace.root) == before
        FIGURES["patch shapes: refused clearly"] += 1
        return
    stored = [version_dir(workspace, "shape", base) / n for n in series(workspace, "shape", base)]
    assert _tree_after_am(upstream, tmp_path, base, stored) == git(upstream.path, "rev-parse",
                                                                  f"{side}^{{tree}}")
    # Upstream moves on (unrelated commits, and the next line of core.py changes).
    core = SAMPLE["pkg/core.py"].replace("return 19\n", "return 190\n")
    fast_import(upstream, [*filler(5), Change("core: f19", {"pkg/core.py": core})])
    tip = upstream.head()
    synced = workspace.run("sync", "--json")
    assert synced.code == 0, synced.err + synced.out
    [res] = synced.json["results"]  # type: ignore[index]
    assert res["result"] == "rebased" and res["version"] == tip, res
    carried = [version_dir(workspace, "shape", tip) / n for n in series(workspace, "shape", tip)]
    assert _tree_after_am(upstream, tmp_path, tip, carried) == _tree_after_pick(
        upstream, tmp_path, tip, side)
    FIGURES["patch shapes: carried exactly"] += 1
