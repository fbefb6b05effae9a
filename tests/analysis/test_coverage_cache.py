"""The coverage cache: a reading kept by content, its file's hash by stat, neither read
nor written through a symlink (the PTX cache's store)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from contrib.analysis.binaries import (
    READER,
    Reading,
    cache_dir,
    cached_reading,
    file_sha256,
    remember_reading,
)
from contrib.analysis.cudacompat import Image, ImageKind

DIGEST = "ab" * 32
READ = Reading(((Image(ImageKind.SASS, 12, 0), 1),), ("rmsnorm",))


def test_a_reading_is_kept_by_content_and_tool() -> None:
    remember_reading(DIGEST, "cuobjdump:1", READ)
    assert cached_reading(DIGEST, "cuobjdump:1") == READ
    assert cached_reading(DIGEST, "cuobjdump:2") is None
    assert READER in (cache_dir() / "objects" / "ab" / f"{DIGEST}.json").read_text()


def test_a_symlinked_entry_is_neither_read_nor_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (cache_dir() / "objects").mkdir(parents=True)
    os.symlink(outside, cache_dir() / "objects" / "ab")
    remember_reading(DIGEST, "cuobjdump:1", READ)
    assert list(outside.iterdir()) == []
    entry = {"reader": READER, "tool": "t", "reading": Reading().to_dict()}
    (outside / f"{DIGEST}.json").write_text(json.dumps(entry))
    assert cached_reading(DIGEST, "t") is None


def test_a_file_is_hashed_once_while_it_stays(tmp_path: Path) -> None:
    path = tmp_path / "x.so"
    path.write_bytes(b"one")
    first = file_sha256(path)
    assert file_sha256(path) == first
    path.write_bytes(b"two")
    assert file_sha256(path) != first


def _wheel_with_stale_entry(tmp_path: Path, members: object) -> Path:
    from contrib.analysis.binaries import save_entry
    from testing.devicecode import wheel

    path = wheel(tmp_path, "pkg", "1.0", "py3-none-manylinux2014_x86_64", {"pkg/ops.so": b"x"})
    save_entry("archives", file_sha256(path), {"reader": "binaries-0", "tool": "t",
                                               "members": members})
    return path


def test_a_wheel_entry_of_another_reader_or_shape_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contrib.analysis import shipped

    stale = {"pkg/ops.so": {"sha256": DIGEST, "reading": Reading().to_dict()}}
    monkeypatch.setattr(shipped, "tool_id", lambda _: "t")
    monkeypatch.setattr(shipped, "read_object", lambda *_, **__: READ)
    for n, members in enumerate([stale, ["not", "a", "mapping"]]):
        folder = tmp_path / str(n)
        folder.mkdir()
        path = _wheel_with_stale_entry(folder, members)
        read = shipped.read_source(shipped.source_at(path), Path("cuobjdump"))
        assert [s.reading for s in read] == [READ]


def test_a_find_links_wheel_wins_and_pip_cache_is_looked_in_only_without_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from packaging.requirements import Requirement

    from contrib.analysis.wheels import Platform, resolve
    from testing.devicecode import wheel

    tag = "py3-none-manylinux2014_x86_64"
    links, pip = tmp_path / "links", tmp_path / "pip" / "http-v2" / "a"
    links.mkdir()
    pip.mkdir(parents=True)
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip"))
    mine = wheel(links, "pkg", "1.0", tag, {"pkg/a.so": b"x"})
    wheel(pip, "pkg", "1.0", tag, {"pkg/a.so": b"x"}).rename(pip / "z.body")
    want = Requirement("pkg==1.0")
    assert resolve(want, Platform.X86_64, [links], download=False).path == mine
    assert resolve(want, Platform.X86_64, [], download=False).path == pip / "z.body"
