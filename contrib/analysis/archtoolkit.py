"""The CUDA toolkit's version: as a user names it, as this machine's nvcc says it, and as
the tree's code reads it with a concrete release.

An upstream asks its toolkit's version to choose what it builds: flashinfer's
``is_cuda_version_at_least("13.0")`` is ``get_cuda_version() >= Version(version_str)``,
where ``get_cuda_version`` parses ``nvcc --version`` (``release 12.9, V12.9.86``) and
falls back to ``torch.version.cuda``.  With a concrete release the evaluator reads those
as that release (:func:`toolkit_call`): ``nvcc --version`` run as a process is the
toolkit, ``Version("13.0")`` is the numbers ``(13, 0)``, and a comparison of the two is
decided (:func:`~contrib.analysis.archvalues.compare`).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from enum import StrEnum

from contrib.analysis.archvalues import NVCC, Toolkit, Values, release
from contrib.errors import UsageError

# Where a path is made or found: its last argument names the program.
_PATHS = frozenset({"os.path.join", "shutil.which", "posixpath.join"})
# What runs a process and gives its output (or a result whose ``.stdout`` is it).
_RUNS = frozenset({"subprocess.check_output", "subprocess.run", "subprocess.getoutput",
                   "subprocess.Popen"})
# What parses a version text into something ordered.
_VERSIONS = frozenset({"packaging.version.Version", "packaging.version.parse",
                       "pkg_resources.parse_version"})
# The CUDA releases PyTorch publishes wheels for (cu126, cu128, cu129, cu130): the
# toolkits a JIT build meets most, each asked where no release is named.
WHEEL_RELEASES: tuple[tuple[int, int], ...] = ((12, 6), (12, 8), (12, 9), (13, 0))
_GIVEN = re.compile(r"(?P<major>[0-9]{1,2})\.(?P<minor>[0-9]{1,2})", re.ASCII)
_NVCC_SAYS = re.compile(r"release (?P<major>[0-9]+)\.(?P<minor>[0-9]+)", re.ASCII)


def toolkit_call(dotted: str, args: tuple[Values, ...], toolkit: Toolkit) -> Values | None:
    """What a call of the outside name ``dotted`` is worth with a concrete ``toolkit``;
    None when it is none of these: a path to nvcc, nvcc's ``--version`` run as a
    process (the toolkit's version), a version text parsed (its numbers)."""
    if dotted in _PATHS and args and any(_names_nvcc(v) for v in args[-1]):
        return frozenset({NVCC})
    if dotted in _RUNS and args and any(_asks_nvcc(v) for v in args[0]):
        return frozenset({toolkit})
    if dotted in _VERSIONS and len(args) == 1:
        numbers = [release(v) for v in args[0] if isinstance(v, str)]
        if numbers and len(numbers) == len(args[0]) and all(numbers):
            return frozenset(numbers)
    return None


def _names_nvcc(value: object) -> bool:
    return isinstance(value, str) and posixpath.basename(value.strip()) in ("nvcc", "nvcc.exe")


def _asks_nvcc(value: object) -> bool:
    """``[nvcc, "--version"]`` (a path to nvcc, or its name) or ``"nvcc --version"``."""
    if isinstance(value, str):
        words = value.split()
        return "--version" in words and any(_names_nvcc(w) for w in words)
    return isinstance(value, tuple) and "--version" in value and any(
        v is NVCC or _names_nvcc(v) for v in value)


class CudaSource(StrEnum):
    """Where the release a question is asked with comes from."""

    GIVEN = "given"  # --cuda X.Y
    NVCC = "nvcc"  # this machine's nvcc, as `contrib doctor` reads it
    ASSUMED = "assumed"  # none: a toolkit new enough for every test of it


@dataclass(frozen=True)
class Cuda:
    """The CUDA toolkit a JIT build is asked about: a release, or (``version`` None) one
    new enough for every version test the code makes."""

    version: tuple[int, int] | None
    source: CudaSource

    @property
    def name(self) -> str:
        """``12.9``, or ``new`` for a toolkit new enough (a cache key's part)."""
        return release_name(self.version)

    def text(self) -> str:
        """How a chain says it: ``CUDA 12.9 (--cuda)``, ``CUDA 13.0 (nvcc here)``."""
        if self.version is None:
            return "a CUDA new enough for every version test (no --cuda, no nvcc here)"
        where = {CudaSource.GIVEN: "--cuda", CudaSource.NVCC: "nvcc here"}[self.source]
        return f"CUDA {self.name} ({where})"


def release_name(version: tuple[int, int] | None) -> str:
    """``12.9`` of ``(12, 9)``; ``new`` of None (a release new enough for every test)."""
    return "new" if version is None else f"{version[0]}.{version[1]}"


ASSUMED = Cuda(None, CudaSource.ASSUMED)


def parse_cuda(text: str) -> Cuda:
    """``--cuda 12.9`` as a release; UsageError (exit 2) for anything else."""
    found = _GIVEN.fullmatch(text.strip())
    if found is None:
        raise UsageError(f"--cuda {text!r}: expected a CUDA release as MAJOR.MINOR "
                         "(e.g. 12.9 or 13.0)")
    return Cuda((int(found["major"]), int(found["minor"])), CudaSource.GIVEN)


def nvcc_cuda(says: str | None) -> Cuda:
    """The release this machine's nvcc names (``release 13.0, V13.0.88``, as
    :func:`contrib.analysis.ptx.nvcc_version` reads it), else :data:`ASSUMED`."""
    found = _NVCC_SAYS.search(says or "")
    if found is None:
        return ASSUMED
    return Cuda((int(found["major"]), int(found["minor"])), CudaSource.NVCC)
