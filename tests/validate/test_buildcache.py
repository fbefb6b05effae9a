"""Checkouts and JIT build folders that outlive a run: the same content builds nothing,
a changed header rebuilds only what includes it."""

from __future__ import annotations

import os
from pathlib import Path

from contrib.git.repo import Git
from contrib.validate import buildcache
from testing.gitutil import Repo

ENV = {"FLASHINFER_CUDA_ARCH_LIST": "9.0a"}


def _fake_build(checkout: Path, python: str = "/usr/bin/python3") -> tuple[Path, bool]:
    """What a JIT does: build into its cache folder unless its output is already there."""
    folder = buildcache.jit_folder(checkout, ENV, python, checkout / "per-run")
    marker = folder / "trtllm_comm" / "trtllm_comm.so"
    if marker.is_file():
        return folder, False
    marker.parent.mkdir(parents=True)
    marker.write_text(str(checkout))
    return folder, True


def test_two_worktrees_with_the_same_content_share_one_build(tmp_path: Path) -> None:
    files = {"include/comm.cuh": "__global__ void k() {}\n", "csrc/comm.cu": "#include \"comm.cuh\"\n"}
    one, two = Repo(tmp_path / "one"), Repo(tmp_path / "two", who="Someone Else")
    first = one.commit("import", files)
    second = two.commit("the same files, another history", files)
    assert first != second
    with buildcache.locked("up-patched"):
        a = buildcache.checkout(Git(one.path), first, "up-patched")
    b = buildcache.checkout(Git(two.path), second, "up-patched")
    assert a == b and a.is_relative_to(buildcache.builds_dir())
    assert (a / "include" / "comm.cuh").read_text() == files["include/comm.cuh"]
    folder, built = _fake_build(a)
    assert built and folder.parent == a.parent
    assert _fake_build(b) == (folder, False)  # the second validation builds nothing
    assert _fake_build(b, "/other/python")[1]  # another interpreter: its own build


def test_a_changed_header_rewrites_only_that_file(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "up")
    first = repo.commit("import", {"include/comm.cuh": "// v1\n", "csrc/comm.cu": "// unit\n",
                                   "docs/gone.md": "x\n"})
    second = repo.commit("header change", {"include/comm.cuh": "// v2\n", "docs/gone.md": None})
    a = buildcache.checkout(Git(repo.path), first, "up-patched")
    unit, header = a / "csrc" / "comm.cu", a / "include" / "comm.cuh"
    os.utime(unit, ns=(1, 1))  # an old build input: ninja compares these times
    os.utime(header, ns=(1, 1))
    b = buildcache.checkout(Git(repo.path), second, "up-patched")
    assert a == b and header.read_text() == "// v2\n" and not (b / "docs" / "gone.md").exists()
    assert unit.stat().st_mtime_ns == 1  # untouched: what only it builds stays built
    assert header.stat().st_mtime_ns > 1  # rewritten: what includes it rebuilds
    assert _fake_build(a)[0] == _fake_build(b)[0]  # one JIT cache for the slot
    assert buildcache.checkout(Git(repo.path), first, "up-patched") == a  # and back again
    assert header.read_text() == "// v1\n" and (a / "docs" / "gone.md").is_file()


def test_an_incomplete_checkout_is_made_again(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "up")
    commit = repo.commit("import", {"a.txt": "a\n"})
    path = buildcache.checkout(Git(repo.path), commit, "up-patched")
    (path / buildcache.MARKER).unlink()
    (path / "a.txt").write_text("edited\n")
    assert (buildcache.checkout(Git(repo.path), commit, "up-patched") / "a.txt").read_text() == "a\n"


def test_a_tree_contrib_did_not_check_out_keeps_a_per_run_cache(tmp_path: Path) -> None:
    assert buildcache.jit_folder(tmp_path, ENV, None, tmp_path / "run") == tmp_path / "run"


def test_a_checked_out_file_a_run_changed_is_put_back(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "up")
    first = repo.commit("import", {"a.txt": "a\n", "b.txt": "b\n"})
    second = repo.commit("b", {"b.txt": "b2\n"})
    path = buildcache.checkout(Git(repo.path), first, "up-patched")
    (path / "a.txt").write_text("a test wrote here\n")
    assert buildcache.checkout(Git(repo.path), second, "up-patched") == path
    assert (path / "a.txt").read_text() == "a\n" and (path / "b.txt").read_text() == "b2\n"


def test_a_file_a_run_changed_is_put_back_before_the_checkout_is_reused(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "up")
    files = {"bench.py": "print('orig')\n", "include/comm.cuh": "k\n", "gone.txt": "x\n"}
    commit = repo.commit("import", files)
    path = buildcache.checkout(Git(repo.path), commit, "up-base")
    header = path / "include" / "comm.cuh"
    os.utime(header, (1_000_000, 1_000_000))
    (path / "bench.py").write_text("print('a run edited me')\n")
    (path / "gone.txt").unlink()
    (path / "build.log").write_text("a run's own output\n")
    again = buildcache.checkout(Git(repo.path), commit, "up-base")
    assert again == path
    assert (path / "bench.py").read_text() == files["bench.py"]
    assert (path / "gone.txt").read_text() == files["gone.txt"]
    assert header.stat().st_mtime == 1_000_000  # untouched files keep their times: no rebuild
    assert (path / "build.log").is_file()  # what a run added is its own
