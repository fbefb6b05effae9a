"""What one shipped object carries: its SASS and PTX images, read with cuobjdump, and the
torch ops it declares; each reading cached by the file's sha256.

``cuobjdump -lelf -lptx`` lists a shared object's (or cubin's, or fatbin's) images in
one pass (``common_ops.abi3.2.sm_80.cubin``, ``k.1.sm_90.ptx``); the binary comes from
the ``nvidia-cuda-cuobjdump`` wheel contrib depends on, else a CUDA toolkit.  No fat
binary is parsed here.  One limit of the listing: an ``sm_XYf`` cubin is listed as
``sm_XY`` (its ``f`` is kept only in the fatbin's entry header, and a lone cubin's ELF
header does not tell them apart, as ``cuobjdump -elf`` shows); both serve X.Z for Z >= Y
(:data:`contrib.analysis.cudacompat.RULES`), so the verdicts are the same.  PTX keeps its
suffix (``sm_120f.ptx``).

The ops: ``m.def("rmsnorm(Tensor! output, Tensor input, ...) -> ()")`` leaves its schema
as a C string in the object, and a schema string is read back only where it is a whole
NUL-terminated string whose arguments start with a schema type.  An op registered
without a schema (``m.def("name", &fn)``, its schema inferred) leaves only its bare name,
which is not read; nor is the namespace (``TORCH_LIBRARY(sgl_kernel, m)``), which the
compiler may fold into the code.  Real case: sglang-kernel 0.4.10's
``sm90/common_ops.abi3.so`` declares 66 ops this way.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import mmap
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrib.analysis.cudacompat import Image, ImageKind
from contrib.analysis.ptx_cache import read_cached, write_cached
from contrib.environ import cache_root
from contrib.errors import UsageError

CUOBJDUMP_DIST = "nvidia-cuda-cuobjdump"
INSTALL_HINT = (f"pip install {CUOBJDUMP_DIST} (contrib depends on it), or put a CUDA "
                "toolkit's cuobjdump on PATH")
READER = "binaries-1"  # bump when what a reading holds changes: old entries read again
HOST_SUFFIXES = (".so",)
DEVICE_SUFFIXES = (".cubin", ".fatbin")
_LISTED = re.compile(r"^(?P<kind>ELF|PTX) file\s+\d+:\s+\S*?\.(?P<target>sm_[0-9]+[af]?)"
                     r"\.(?:cubin|ptx)\s*$", re.ASCII)
_SCHEMA = re.compile(r"(?P<name>[A-Za-z_]\w*(?:\.\w+)?)\((?P<args>.*)\) -> (?P<ret>.+)",
                     re.ASCII | re.DOTALL)
# The types a torch schema's argument may start with (c10's schema grammar).
_SCHEMA_TYPE = re.compile(r"\s*(?:\*\s*$|(?:Tensor|int|float|bool|str|SymInt|SymFloat|SymBool|"
                          r"ScalarType|Scalar|Device|Layout|MemoryFormat|Generator|Storage|"
                          r"Stream|Dimname|complex|Any|QScheme|t)\b)", re.ASCII)
_ARROW = b") -> "
_LONGEST = 4096  # a schema string longer than this is no schema


def is_object(name: str) -> bool:
    """Whether a file of this name may carry device code: ``.so`` (also ``.so.1``),
    ``.cubin``, ``.fatbin``."""
    base = name.rsplit("/", 1)[-1]
    return base.endswith(HOST_SUFFIXES + DEVICE_SUFFIXES) or ".so." in base


def find_cuobjdump() -> Path | None:
    """cuobjdump from the installed ``nvidia-cuda-cuobjdump`` wheel, else a toolkit's
    (on PATH, then beside nvcc); None without either."""
    try:
        dist = importlib.metadata.distribution(CUOBJDUMP_DIST)
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        for file in dist.files or []:
            path = Path(str(dist.locate_file(file)))
            if file.name == "cuobjdump" and os.access(path, os.X_OK):
                return path
    found = shutil.which("cuobjdump")
    if found:
        return Path(found)
    nvcc = shutil.which("nvcc")
    beside = Path(nvcc).with_name("cuobjdump") if nvcc else None
    return beside if beside is not None and os.access(beside, os.X_OK) else None


def require_cuobjdump() -> Path:
    """:func:`find_cuobjdump`, or a one-line error saying how to get it (exit 2)."""
    found = find_cuobjdump()
    if found is None:
        raise UsageError(f"no cuobjdump here to read device code: {INSTALL_HINT}")
    return found


@dataclass(frozen=True)
class Reading:
    """One object's images, each with how many the object holds (one per translation
    unit built for it), and the ops it declares; ``device_code`` False for a host-only
    shared object."""

    images: tuple[tuple[Image, int], ...] = ()
    ops: tuple[str, ...] = ()
    device_code: bool = True

    def of(self, kind: ImageKind) -> list[Image]:
        return [image for image, _ in self.images if image.kind is kind]

    def to_dict(self) -> dict[str, Any]:
        return {"device_code": self.device_code, "ops": list(self.ops),
                "images": [{"kind": i.kind.value, "target": i.target, "count": n}
                           for i, n in self.images]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reading:
        images = []
        for entry in data["images"]:
            kind = ImageKind(entry["kind"])
            image = Image.parse(kind, str(entry["target"]))
            if image is None:
                raise ValueError(entry)
            images.append((image, int(entry["count"])))
        return cls(tuple(images), tuple(str(op) for op in data["ops"]),
                   bool(data["device_code"]))


def read_object(path: Path, cuobjdump: Path, *, shown: str) -> Reading:
    """``path``'s images (``cuobjdump -lelf -lptx``) and, for a shared object, its ops.
    ``shown`` names the object in an error (``wheel.whl: sgl_kernel/x.so``)."""
    try:
        done = subprocess.run([str(cuobjdump), "-lelf", "-lptx", str(path)],
                              capture_output=True, text=True, errors="replace", timeout=900)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"{shown}: cuobjdump ({cuobjdump}) did not run ({exc}); "
                         f"reinstall it: {INSTALL_HINT}") from None
    host = not path.name.endswith(DEVICE_SUFFIXES)
    said = " ".join(done.stderr.split())
    if done.returncode != 0:
        if host and "does not contain device code" in said and _is_elf(path):
            return Reading(device_code=False)
        raise UsageError(f"{shown}: cuobjdump cannot read its device code "
                         f"({said or f'exit {done.returncode}'}); the file is damaged or "
                         "not a CUDA object: download or reinstall it")
    counts: dict[Image, int] = {}
    for line in done.stdout.splitlines():
        listed = _LISTED.match(line)
        kind = ImageKind.SASS if listed and listed["kind"] == "ELF" else ImageKind.PTX
        image = Image.parse(kind, listed["target"]) if listed else None
        if image is not None:
            counts[image] = counts.get(image, 0) + 1
    ops = declared_ops(path) if host else ()
    return Reading(tuple(sorted(counts.items())), ops)


def _is_elf(path: Path) -> bool:
    """Whether the file starts as an ELF object does (cuobjdump says "no device code" of
    any file it finds no fatbin in, a damaged one too)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def declared_ops(path: Path) -> tuple[str, ...]:
    """The torch ops whose schema strings ``path`` holds, in order, each once."""
    found: dict[str, None] = {}
    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0,
                                                   access=mmap.ACCESS_READ) as data:
            at = data.find(_ARROW)
            while at >= 0:
                name = _schema_at(data, at)
                if name:
                    found[name] = None
                at = data.find(_ARROW, at + len(_ARROW))
    except (OSError, ValueError):
        return ()  # an empty file maps to nothing: no ops
    return tuple(found)


def _schema_at(data: mmap.mmap, arrow: int) -> str | None:
    """The op's name when the C string around ``arrow`` is a torch schema."""
    start = data.rfind(b"\0", max(0, arrow - _LONGEST), arrow) + 1
    end = data.find(b"\0", arrow, arrow + _LONGEST)
    if start <= 0 or end < 0:
        return None
    try:
        text = data[start:end].decode("ascii")
    except UnicodeDecodeError:
        return None
    schema = _SCHEMA.fullmatch(text)
    if schema is None or not text.replace("\n", " ").replace("\t", " ").isprintable():
        return None
    args = schema["args"].strip()
    if args and not _SCHEMA_TYPE.match(args.split(",", 1)[0]):
        return None
    return schema["name"]


# --- the cache: a reading per file content, and each file's sha256 per its stat ---------

def cache_dir() -> Path:
    """``<contrib cache>/coverage``."""
    return cache_root() / "coverage"


def tool_id(cuobjdump: Path) -> str:
    """Which cuobjdump read an entry (another one may list more targets: read again)."""
    try:
        stat = cuobjdump.stat()
    except OSError:
        return str(cuobjdump)
    return f"{cuobjdump}:{stat.st_size}:{stat.st_mtime_ns}"


def file_sha256(path: Path) -> str:
    """sha256 of ``path``'s content; remembered per path while its size, times and inode
    stay (git's index does the same), so a warm run hashes nothing."""
    stat = path.stat()
    stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
    real = os.path.realpath(path)
    memo = hashlib.sha256(real.encode()).hexdigest()
    known = load_entry("hashes", memo)
    if known and known.get("stamp") == stamp and known.get("path") == real:
        return str(known["sha256"])
    with open(path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    save_entry("hashes", memo, {"path": real, "stamp": stamp, "sha256": digest})
    return digest


def cached_reading(digest: str, tool: str) -> Reading | None:
    entry = load_entry("objects", digest)
    if not entry or entry.get("reader") != READER or entry.get("tool") != tool:
        return None
    try:
        return Reading.from_dict(entry["reading"])
    except (KeyError, TypeError, ValueError):
        return None


def remember_reading(digest: str, tool: str, reading: Reading) -> None:
    save_entry("objects", digest, {"reader": READER, "tool": tool, "reading": reading.to_dict()})


def load_entry(kind: str, key: str) -> dict[str, Any] | None:
    """The cache entry ``<coverage cache>/KIND/KEY[:2]/KEY.json``, or None when absent,
    unreadable or behind a symlink (read again then): the PTX cache's store."""
    return read_cached(key, cache_dir() / kind)


def save_entry(kind: str, key: str, data: dict[str, Any]) -> None:
    """Write a cache entry aside, then rename it in, never through a symlink; a cache
    that cannot be written only costs a reading next time."""
    write_cached(key, data, cache_dir() / kind)
