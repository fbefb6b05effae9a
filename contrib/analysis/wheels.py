"""Where shipped device code is read from: a wheel file, a folder, an installed
distribution, or a requirement (``sglang-kernel==0.4.10``) resolved for a platform.

A requirement is resolved offline: from the folders given with ``--find-links`` and the
wheels ``--download`` fetched before (under contrib's cache), else pip's cache, where a
wheel pip once fetched lies as a response body (``http-v2/**/*.body``, its name and tags
read from its own ``.dist-info``) or as a built wheel (``wheels/**/*.whl``).  The index
is asked only with ``--download`` (``pip download --no-deps --only-binary=:all:`` for the
platform), so a run that names no such flag never reaches the network.

The platform a GPU ships in: the integrated parts are sold with an Arm host only (Xavier
7.2, Orin 8.7, Thor 11.0, GB10 12.1, as in a DGX Spark), every other board mostly with
x86_64.  The wheel differs: sglang-kernel 0.4.10's x86_64 ``common_ops`` carries
``sm_120a`` only, its aarch64 one ``sm_121a`` too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from contrib.analysis.binaries import cache_dir
from contrib.arch import Arch
from contrib.environ import pip_cache_dir
from contrib.errors import UsageError


class Platform(StrEnum):
    """The host CPU a wheel is built for."""

    X86_64 = "x86_64"
    AARCH64 = "aarch64"


# Compute capabilities sold only with an Arm host (the integrated parts).
ARM_ONLY = frozenset({(7, 2), (8, 7), (11, 0), (12, 1)})
_PACKED = b"PK\x03\x04"  # a zip archive's first bytes


def platform_for(arch: Arch) -> Platform:
    """The platform a GPU of ``arch`` ships in: aarch64 for an integrated part (GB10)."""
    return Platform.AARCH64 if (arch.major, arch.minor) in ARM_ONLY else Platform.X86_64


def fits(tags: frozenset[Tag], platform: Platform) -> bool:
    """Whether a wheel of ``tags`` installs on Linux on ``platform`` (``any`` does)."""
    return any(t.platform == "any" or (t.platform.startswith(("manylinux", "musllinux", "linux"))
                                       and t.platform.endswith(f"_{platform.value}"))
               for t in tags)


@dataclass(frozen=True)
class Wheel:
    """A wheel found for a requirement: its name, version, tags and where it lies."""

    name: str
    version: Version
    tags: frozenset[Tag]
    path: Path

    @property
    def label(self) -> str:
        """The wheel's file name (for a pip cache body, the name pip would have given)."""
        if self.path.suffix == ".whl":
            return self.path.name
        tag = sorted(self.tags, key=str)[0]
        return f"{self.name.replace('-', '_')}-{self.version}-{tag}.whl"


def open_wheel(path: Path) -> zipfile.ZipFile:
    """``path`` opened as a wheel, or one line saying what it is instead (exit 2)."""
    fix = "download it again, or pass the wheel file pip fetched"
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror}); {fix}") from None
    if size == 0:
        raise UsageError(f"{path}: the file is empty, not a wheel; {fix}")
    try:
        archive = zipfile.ZipFile(path)
    except OSError as exc:  # unreadable (permissions, a read error), not damaged
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc}); fix its "
                         f"permissions, or {fix}") from None
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise UsageError(f"{path}: not a wheel (not a zip archive: {exc}); {fix}") from None
    if not any(n.count("/") == 1 and n.endswith(".dist-info/WHEEL") for n in archive.namelist()):
        archive.close()
        raise UsageError(f"{path}: a zip archive but not a wheel (no .dist-info/WHEEL in it); "
                         f"{fix}")
    return archive


def wheel_of(path: Path) -> Wheel | None:
    """The wheel a file is, by its name (``*.whl``) or, for a pip cache body or a renamed
    wheel, by the ``.dist-info`` inside; None for anything else."""
    if path.suffix == ".whl":
        try:
            name, version, _, tags = parse_wheel_filename(path.name)
            return Wheel(str(name), version, frozenset(tags), path)
        except (InvalidWheelFilename, InvalidVersion):
            pass  # renamed: read what it is from inside
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != _PACKED:
                return None
        with zipfile.ZipFile(path) as archive:
            return _inside(archive, path)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, InvalidVersion):
        return None


def _inside(archive: zipfile.ZipFile, path: Path) -> Wheel | None:
    info = next((n for n in archive.namelist()
                 if n.count("/") == 1 and n.endswith(".dist-info/WHEEL")), None)
    if info is None:
        return None
    name, _, version = info.split("/")[0].removesuffix(".dist-info").partition("-")
    tags: set[Tag] = set()
    for line in archive.read(info).decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Tag" and value.count("-") == 2:
            interpreter, abi, plat = value.strip().split("-")
            tags.add(Tag(interpreter, abi, plat))
    return Wheel(str(canonicalize_name(name)), Version(version), frozenset(tags), path)


def downloads_dir() -> Path:
    """Where ``--download`` puts wheels (and where a later offline run finds them)."""
    return cache_dir() / "wheels"


def parse_requirement(text: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        first = (str(exc).splitlines() or ["not a requirement"])[0]
        raise UsageError(f"{text!r}: not a wheel, a folder, an installed distribution or a "
                         f"requirement like sglang-kernel==0.4.10 ({first})") from None


def resolve(requirement: Requirement, platform: Platform, find_links: list[Path], *,
            download: bool) -> Wheel:
    """The highest version of ``requirement`` built for ``platform`` found offline; with
    ``download``, fetched from the index when none is."""
    found = _best(requirement, platform, find_links)
    if found is None and download:
        fetch(requirement, platform)
        found = _best(requirement, platform, find_links)
    if found is not None:
        return found
    places = ", ".join(str(p) for p in [*find_links, downloads_dir(), pip_cache_dir()])
    raise UsageError(f"no wheel of {requirement} for {platform.value} here (looked in {places}); "
                     "pass the wheel file, a folder holding it with --find-links DIR, or "
                     "--download to fetch it from the index")


def _best(requirement: Requirement, platform: Platform, find_links: list[Path]) -> Wheel | None:
    """The highest matching version in the folders (``--find-links``, ``--download``'s);
    pip's cache, whose every response body is opened to see what it is, only where they
    hold none."""
    name = canonicalize_name(requirement.name)
    ours = {(t.interpreter, t.abi) for t in sys_tags()}
    for tier in (in_folders(find_links), in_pip_cache()):
        matching = [w for w in tier
                    if canonicalize_name(w.name) == name and fits(w.tags, platform)
                    and requirement.specifier.contains(w.version, prereleases=True)]
        if matching:
            return max(matching, key=lambda w: (w.version, any((t.interpreter, t.abi) in ours
                                                               for t in w.tags), str(w.path)))
    return None


def in_folders(find_links: list[Path]) -> Iterator[Wheel]:
    """Every wheel in the ``--find-links`` folders and the one ``--download`` fills."""
    for folder in [*find_links, downloads_dir()]:
        for path in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
            wheel = wheel_of(path)
            if wheel is not None:
                yield wheel


def in_pip_cache() -> Iterator[Wheel]:
    """Every wheel in pip's cache: built ones, and response bodies that are wheels."""
    pip = pip_cache_dir()
    for pattern in ("wheels/**/*.whl", "http-v2/**/*.body"):
        for path in sorted(pip.glob(pattern)) if pip.is_dir() else []:
            wheel = wheel_of(path)
            if wheel is not None:
                yield wheel


# pip does not widen ``--platform manylinux_2_28_x86_64`` to older glibc tags: name them.
def _pip_platforms(platform: Platform) -> list[str]:
    arch = platform.value
    return [f"manylinux2014_{arch}", *(f"manylinux_2_{m}_{arch}" for m in range(17, 41)),
            f"linux_{arch}"]


def fetch(requirement: Requirement, platform: Platform) -> None:
    """``pip download`` the wheel of ``requirement`` for ``platform`` (no dependencies)."""
    target = downloads_dir()
    target.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", str(requirement), "--no-deps",
               "--only-binary=:all:", "--disable-pip-version-check", "-d", str(target),
               *(f"--platform={p}" for p in _pip_platforms(platform))]
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace",
                              timeout=1800, env={**os.environ, "PIP_NO_INPUT": "1"})
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"pip download {requirement} did not run ({exc}); download the "
                         "wheel yourself and pass the file") from None
    if done.returncode != 0:
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        last = said[-1] if said else f"exit {done.returncode}"
        raise UsageError(f"pip could not download {requirement} for {platform.value} ({last}); "
                         "check the name and version, or pass the wheel file")
