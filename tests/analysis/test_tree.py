from __future__ import annotations

from pathlib import Path

from contrib.analysis.tree import DictTree, FsTree, GitTree, materialize
from contrib.git.repo import Git
from testing import miniupstream as mu


def test_git_tree_reads_blobs_without_checkout(tmp_path: Path):
    root = tmp_path / "up"
    base = mu.init_repo(root)
    head = mu.commit_variant(root, "full-fix", "fix")
    bare = tmp_path / "bare.git"
    mu.git(tmp_path, "clone", "-q", "--bare", str(root), str(bare))
    git = Git(bare)
    before, after = GitTree(git, base), GitTree(git, head)
    assert before.paths() == sorted(mu.files("base"))
    assert before.read_text(mu.HEADER) == mu.files("base")[mu.HEADER]
    assert after.read_text(mu.HEADER) == mu.files("full-fix")[mu.HEADER]
    assert after.exists(mu.GATE_FILE) and not after.exists("nope.py")
    assert after.read_text("nope.py") is None
    assert not (bare / mu.HEADER).exists()  # nothing was checked out


def test_fs_tree_and_materialize(tmp_path: Path):
    mu.write(tmp_path / "src", "base")
    (tmp_path / "src" / ".git").mkdir()
    (tmp_path / "src" / ".git" / "HEAD").write_text("ref\n")
    tree = FsTree(tmp_path / "src")
    assert tree.paths() == sorted(mu.files("base"))
    assert tree.read_text(mu.SOURCE) == mu.files("base")[mu.SOURCE]
    assert tree.read_text("missing") is None
    written = materialize(DictTree(mu.files("base")), [mu.SOURCE, "missing.cu"], tmp_path / "out")
    assert written == [tmp_path / "out" / mu.SOURCE]
    assert (tmp_path / "out" / mu.SOURCE).read_text() == mu.files("base")[mu.SOURCE]
