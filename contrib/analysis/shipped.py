"""The objects a source ships and what each carries, read in parallel and cached.

A source is a wheel, a folder (of cubins, or an unpacked package), an installed
distribution (the files its RECORD lists) or one object file.  A wheel's members are
unpacked one at a time to a scratch folder (cuobjdump reads a file), hashed as they are
written, read and removed, the largest first on every core; the wheel's sha256 keys the
list of its members' hashes and readings, so a warm run reads one cache entry.  Files on
disk are keyed by their own sha256 (:func:`contrib.analysis.binaries.file_sha256`).

Real case: sglang-kernel 0.4.10's x86_64 wheel is 373 MB and unpacks to 1.2 GB, of
which ``sgl_kernel/flash_ops.abi3.so`` is 1.1 GB: unpacking and listing it is most of
a cold run.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib.metadata
import os
import tempfile
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from contrib.analysis.binaries import (
    READER,
    Reading,
    cached_reading,
    file_sha256,
    is_object,
    load_entry,
    read_object,
    remember_reading,
    save_entry,
    tool_id,
)
from contrib.analysis.wheels import Platform, Wheel, fits, open_wheel, wheel_of
from contrib.errors import UsageError

_CHUNK = 1 << 22
Step = Callable[[int, int, str], None]  # (objects read, of N, the object)
T = TypeVar("T")


class SourceKind(StrEnum):
    WHEEL = "wheel"
    FOLDER = "folder"
    DISTRIBUTION = "distribution"
    OBJECT = "object"


@dataclass(frozen=True)
class Source:
    """Where the objects come from; ``files`` (shown path, file) for all but a wheel."""

    kind: SourceKind
    path: Path
    label: str
    files: tuple[tuple[str, Path], ...] = ()
    distribution: str | None = None
    version: str | None = None
    platform: Platform | None = None  # what a wheel is built for (None: any, or a folder)

    def to_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind.value, "path": str(self.path), "label": self.label,
                "distribution": self.distribution, "version": self.version,
                "platform": self.platform.value if self.platform else None}


@dataclass(frozen=True)
class Shipped:
    """One object of a source: its path there, its content's sha256, what it carries."""

    path: str
    sha256: str
    reading: Reading


def source_at(path: Path) -> Source:
    """A wheel file, a folder or one object file on disk."""
    if path.is_dir():
        files = []
        for root, dirs, names in os.walk(path):
            dirs.sort()
            files += [Path(root, n) for n in sorted(names) if is_object(n)]
        return Source(SourceKind.FOLDER, path, str(path),
                      tuple((f.relative_to(path).as_posix(), f) for f in files))
    if is_object(path.name):
        return Source(SourceKind.OBJECT, path, str(path), ((path.name, path),))
    open_wheel(path).close()  # one line, exit 2, when it is no wheel
    found = wheel_of(path)
    if found is None:
        return Source(SourceKind.WHEEL, path, path.name)
    return resolved(found, label=path.name)


def resolved(wheel: Wheel, *, label: str | None = None) -> Source:
    """A wheel as a source: built for one platform, or for any (``platform`` None)."""
    open_wheel(wheel.path).close()  # a damaged one in a cache is still one line, exit 2
    built_for = [p for p in Platform if fits(wheel.tags, p)]
    return Source(SourceKind.WHEEL, wheel.path, label or wheel.label, distribution=wheel.name,
                  version=str(wheel.version),
                  platform=built_for[0] if len(built_for) == 1 else None)


def installed(name: str) -> Source:
    """The distribution ``name`` installed in this Python: the objects its RECORD lists."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise UsageError(f"{name!r}: no such file, and no distribution of that name is "
                         "installed here; pass a wheel file, a folder, or a version "
                         f"({name}==VERSION) to read its wheel") from None
    where = Path(str(dist.locate_file("")))
    files = [(f.as_posix(), Path(str(dist.locate_file(f)))) for f in dist.files or []
             if is_object(f.name)]
    return Source(SourceKind.DISTRIBUTION, where, f"{dist.metadata['Name']} "
                  f"{dist.version} (installed in {where})",
                  tuple(sorted((p, f) for p, f in files if f.is_file())),
                  distribution=dist.metadata["Name"], version=dist.version)


def read_source(source: Source, cuobjdump: Path, *, only: str | None = None,
                step: Step | None = None) -> list[Shipped]:
    """Each object of ``source`` (those whose path matches the glob ``only``), by path."""
    tool = tool_id(cuobjdump)
    if source.kind is SourceKind.WHEEL:
        return _read_wheel(source, cuobjdump, tool, only, step)
    files = [(p, f) for p, f in source.files if _wanted(p, only)]
    _none_left(source, len(source.files), len(files), only)
    return _parallel(files, lambda item: _read_file(item[0], item[1], cuobjdump, tool, source),
                     step, lambda item: item[0])


def _wanted(path: str, only: str | None) -> bool:
    return only is None or fnmatch.fnmatchcase(path, only)


def _none_left(source: Source, objects: int, kept: int, only: str | None) -> None:
    if not objects:
        raise UsageError(f"{source.label}: no object in it that may carry device code (.so, "
                         ".cubin, .fatbin); pass the wheel or folder that ships the kernels")
    if only is not None and not kept:
        raise UsageError(f"{source.label}: none of its {objects} objects matches --only "
                         f"{only!r} (a glob over the whole path: '*' crosses '/')")


def _parallel(items: list[T], read: Callable[[T], Shipped], step: Step | None,
                 name: Callable[[T], str]) -> list[Shipped]:
    workers = max(1, min(len(items), os.cpu_count() or 1))
    out: list[Shipped] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for item, shipped in zip(items, pool.map(read, items), strict=True):
            out.append(shipped)
            if step is not None:
                step(len(out), len(items), name(item))
    return sorted(out, key=lambda s: s.path)


def _read_file(shown: str, path: Path, cuobjdump: Path, tool: str, source: Source) -> Shipped:
    try:
        digest = file_sha256(path)
    except OSError as exc:
        raise UsageError(f"{source.label}: {shown}: cannot read it ({exc.strerror}); "
                         "reinstall the package or fix the file's permissions") from None
    reading = cached_reading(digest, tool)
    if reading is None:
        reading = read_object(path, cuobjdump, shown=f"{source.label}: {shown}")
        remember_reading(digest, tool, reading)
    return Shipped(shown, digest, reading)


def _read_wheel(source: Source, cuobjdump: Path, tool: str, only: str | None,
                step: Step | None) -> list[Shipped]:
    key = file_sha256(source.path)
    entry = load_entry("archives", key) or {}
    same = entry.get("tool") == tool and entry.get("reader") == READER
    known = entry.get("members") if same else None
    known = known if isinstance(known, dict) else {}
    with open_wheel(source.path) as archive:
        members = [i for i in archive.infolist() if not i.is_dir() and is_object(i.filename)]
        wanted = [i for i in members if _wanted(i.filename, only)]
        _none_left(source, len(members), len(wanted), only)
        out = [_known(i.filename, known) for i in wanted]
        todo = sorted((i for i, hit in zip(wanted, out, strict=True) if hit is None),
                      key=lambda i: -i.file_size)
        if todo:
            with tempfile.TemporaryDirectory(prefix="contrib-coverage-") as scratch:
                fresh = _parallel(todo, lambda i: _unpack_and_read(
                    archive, i, Path(scratch), cuobjdump, tool, source), step,
                    lambda i: i.filename)
            known = {**known, **{s.path: {"sha256": s.sha256, "reading": s.reading.to_dict()}
                                 for s in fresh}}
            save_entry("archives", key, {"reader": READER, "tool": tool, "members": known})
            out = [_known(i.filename, known) for i in wanted]
    return sorted((s for s in out if s is not None), key=lambda s: s.path)


def _known(name: str, known: dict[str, Any]) -> Shipped | None:
    hit = known.get(name)
    if not isinstance(hit, dict):
        return None
    try:
        return Shipped(name, str(hit["sha256"]), Reading.from_dict(hit["reading"]))
    except (KeyError, TypeError, ValueError):
        return None


def _unpack_and_read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, scratch: Path,
                     cuobjdump: Path, tool: str, source: Source) -> Shipped:
    shown = f"{source.label}: {info.filename}"
    target = scratch / f"{hashlib.sha256(info.filename.encode()).hexdigest()[:12]}-" \
                       f"{info.filename.rsplit('/', 1)[-1]}"
    digest = hashlib.sha256()
    try:
        with archive.open(info) as packed, open(target, "wb") as out:
            while chunk := packed.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        target.unlink(missing_ok=True)
        raise UsageError(f"{shown}: the wheel is damaged ({exc}); download it again") from None
    try:
        reading = cached_reading(digest.hexdigest(), tool)
        if reading is None:
            reading = read_object(target, cuobjdump, shown=shown)
            remember_reading(digest.hexdigest(), tool, reading)
    finally:
        target.unlink(missing_ok=True)
    return Shipped(info.filename, digest.hexdigest(), reading)
