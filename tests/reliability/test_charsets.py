"""Patches whose headers are not UTF-8 are taken as `git am` takes them, and carried.

Older projects' patches carry Latin-1 bytes in From:/Subject:/the body, either
with a declared ``charset=ISO-8859-1`` or with none at all (``git mailinfo``
then keeps the bytes, and git stores bytes that are not UTF-8 as Latin-1).
`contrib new` must make exactly the commit `git am` makes from the same file (its DEP-3
fields added),
and `contrib sync` must carry the version's patch files byte for byte when
upstream moves elsewhere.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from testing.audit import FIGURES
from testing.gitutil import Repo, git
from testing.synchelp import version_dir
from testing.workspace import Workspace

HEADERS = (b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
           b"From: Jos\xe9 M\xfcller <jose@example.com>\n"
           b"Date: Tue, 14 Nov 2023 22:13:20 +0000\n"
           b"Subject: [PATCH] caf\xe9: cr\xe8me br\xfbl\xe9e\n")
DECLARED = (b"MIME-Version: 1.0\nContent-Type: text/plain; charset=ISO-8859-1\n"
            b"Content-Transfer-Encoding: 8bit\n")
ENCODED_WORD = (b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
                b"From: =?ISO-8859-1?q?Jos=E9?= <jose@example.com>\n"
                b"Date: Tue, 14 Nov 2023 22:13:20 +0000\n"
                b"Subject: [PATCH] =?ISO-8859-1?q?caf=E9_cr=E8me?=\n")
BODY = b"\nna\xefve r\xe9sum\xe9 of the change\n---\n"


def _diff(upstream: Repo) -> bytes:
    """A diff adding pkg/latin.py (its content is Latin-1 too), made by git."""
    git(upstream.path, "checkout", "-q", "-b", "side")
    (upstream.path / "pkg" / "latin.py").write_bytes(b"# caf\xe9\nX = 1\n")
    upstream.commit("x")
    diff = subprocess.run(["git", "diff", "--full-index", "HEAD~1", "HEAD"], cwd=upstream.path,
                          capture_output=True, check=True).stdout
    git(upstream.path, "checkout", "-q", "main")
    git(upstream.path, "branch", "-q", "-D", "side")
    return diff


def _am(upstream: Repo, tmp: Path, patch: Path, name: str) -> tuple[str, str]:
    """(author and message, tree) of what `git am` makes from ``patch`` on main."""
    clone = tmp / f"am-{name}"
    git(tmp, "clone", "-q", str(upstream.path), str(clone))
    git(clone, "am", "-q", str(patch), env={"GIT_COMMITTER_NAME": "t",
                                            "GIT_COMMITTER_EMAIL": "t@example.com"})
    return (git(clone, "log", "-1", "--format=%an <%ae> %ad%n%B"),
            git(clone, "rev-parse", "HEAD^{tree}"))


@pytest.mark.parametrize("form", ["no charset", "declared charset", "encoded words"])
def test_latin1_headers_round_trip_through_new_and_sync(
        workspace: Workspace, upstream: Repo, tmp_path: Path, form: str) -> None:
    head = {"no charset": HEADERS, "declared charset": HEADERS + DECLARED,
            "encoded words": ENCODED_WORD + DECLARED}[form]
    patch = tmp_path / "latin1.patch"
    patch.write_bytes(head + BODY + _diff(upstream))
    base = upstream.head()
    made = workspace.run("new", "proj", "latin", "--base", "main", "--patch", str(patch))
    assert made.code == 0, made.err
    folder = version_dir(workspace, "latin", base)
    [name] = (folder / "series").read_text().split()
    first = (folder / name).read_bytes()
    # The version is exactly what `git am` makes of the original file, with the DEP-3
    # fields contrib keeps (contrib.carry.dep3) as trailers.
    message, tree = _am(upstream, tmp_path, patch, "original")
    assert _am(upstream, tmp_path, folder / name, "version") == (
        f"{message}\n\nOrigin: vendor, contrib patchset proj/latin\nForwarded: no\n"
        "Last-Update: 2023-11-14", tree)
    meta = (folder.parent / "patchset.toml").read_text(encoding="utf-8")
    assert "café" in meta
    # Upstream moves elsewhere: sync carries the patch file unchanged, byte for byte.
    tip = upstream.commit("docs", {"docs/more.md": "more\n"})
    synced = workspace.run("sync", "--json")
    assert synced.code == 0, synced.err
    assert synced.json["results"][0]["result"] == "rebased"
    carried = version_dir(workspace, "latin", tip)
    assert (carried / name).read_bytes() == first
    assert (folder / name).read_bytes() == first
    FIGURES["non-UTF-8 patches carried byte for byte"] += 1
