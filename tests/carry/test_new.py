"""`contrib new`: patch files and commit ranges become a patchset version."""

from __future__ import annotations

from pathlib import Path

import tomlkit

from testing.gitutil import Repo, git
from testing.workspace import Workspace, make_patch


def test_new_from_patch_files(workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    base = upstream.head()
    patches = make_patch(upstream, tmp_path, {"pkg/core.py": upstream.read("pkg/core.py")
                                              .replace("return 3\n", "return 33\n")},
                         "core: make f3 return 33\n\nBecause 33 is better.")
    result = workspace.run("new", "proj", "f3-fix", "--base", "main", "--patch", str(patches[0]))
    assert result.code == 0, result.err
    ps_dir = workspace.root / "patchsets" / "proj" / "f3-fix"
    meta = tomlkit.parse((ps_dir / "patchset.toml").read_text())
    assert meta["current"] == base
    assert meta["title"] == "core: make f3 return 33"
    assert meta["upstream_status"] == "Pending"
    assert meta["arch"] == "sm_120a"
    version = ps_dir / base
    series = (version / "series").read_text().split()
    assert series == ["0001-core-make-f3-return-33.patch"]
    text = (version / series[0]).read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 ")
    assert "From: Upstream Dev <upstream.dev@example.com>" in text
    assert "+    return 33" in text
    assert "Because 33 is better." in text


def test_new_from_commit_range(workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    base = upstream.head()
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream.path), str(clone))
    work = Repo.__new__(Repo)
    work.path, work.who, work.tick = clone, "Patch Author", 100
    work.commit("first change", {"pkg/a.py": "A = 1\n"})
    work.commit("second change", {"pkg/b.py": "B = 2\n"})
    result = workspace.run("new", "proj", "two", "--base", base, "--commits",
                           f"{base}..HEAD", "--repo", str(clone), "--json")
    assert result.code == 0, result.err
    doc = result.json
    assert doc == {"patchset": "proj/two", "base": base,
                   "patches": ["0001-first-change.patch", "0002-second-change.patch"]}
    version = workspace.root / "patchsets" / "proj" / "two" / base
    assert "From: Patch Author <patch.author@example.com>" in (
        version / "0002-second-change.patch").read_text()


def test_new_refuses_patch_that_needs_fuzz(workspace: Workspace, upstream: Repo,
                                           tmp_path: Path) -> None:
    patches = make_patch(upstream, tmp_path, {"pkg/core.py": upstream.read("pkg/core.py")
                                              .replace("return 3\n", "return 33\n")}, "f3")
    # Upstream changes a context line of the hunk: git apply must refuse (no fuzz).
    upstream.commit("touch context", {"pkg/core.py": upstream.read("pkg/core.py")
                                      .replace("def f3():", "def f3():  # three")})
    result = workspace.run("new", "proj", "f3", "--base", "main", "--patch", str(patches[0]))
    assert result.code == 2
    assert "does not apply" in result.err and "0001-f3.patch" in result.err
    assert "Traceback" not in result.err
    assert not (workspace.root / "patchsets" / "proj" / "f3").exists()


def test_new_refuses_existing_name_and_bad_names(workspace: Workspace, upstream: Repo,
                                                 tmp_path: Path) -> None:
    patches = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x")
    assert workspace.run("new", "proj", "x", "--base", "main", "--patch", str(patches[0])).code == 0
    again = workspace.run("new", "proj", "x", "--base", "main", "--patch", str(patches[0]))
    assert again.code == 2 and "already exists" in again.err
    bad = workspace.run("new", "proj", "Bad Name", "--base", "main", "--patch", str(patches[0]))
    assert bad.code == 2 and "invalid patchset name 'Bad Name'" in bad.err
    unknown = workspace.run("new", "nope", "x", "--base", "main", "--patch", str(patches[0]))
    assert unknown.code == 2 and "no upstream 'nope'" in unknown.err


def test_new_rejects_bad_patches(workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    good = make_patch(upstream, tmp_path, {"pkg/x.py": "X = 1\n"}, "add x")[0].read_text()
    cases = {
        "not-a-patch": "hello world\n",
        "no-diff": good.split("---\n", 1)[0],
        "outside": good.replace("pkg/x.py", "../evil.py"),
        "absolute": good.replace("a/pkg/x.py", "/etc/passwd").replace("b/pkg/x.py", "/etc/passwd"),
    }
    for label, text in cases.items():
        path = tmp_path / f"{label}.patch"
        path.write_text(text)
        result = workspace.run("new", "proj", label, "--base", "main", "--patch", str(path))
        assert result.code == 2, (label, result.err)
        assert f"{label}.patch" in result.err, (label, result.err)
        assert "Traceback" not in result.err
    missing = workspace.run("new", "proj", "m", "--base", "main", "--patch", "/nonexistent.patch")
    assert missing.code == 2 and "no such patch file" in missing.err
    badrev = workspace.run("new", "proj", "r", "--base", "v9.9", "--patch", str(path))
    assert badrev.code == 2 and "unknown revision 'v9.9'" in badrev.err
    assert not (workspace.root / "patchsets" / "proj").exists()
