"""GPU architecture names: ``sm_120a`` -> major, minor, suffix, ``__CUDA_ARCH__``.

nvcc spells a real architecture ``sm_XY[a|f]`` (``sm_90a``, ``sm_100a``,
``sm_89``); the matching virtual architecture is ``compute_XY[a|f]`` and the
device pass sees ``__CUDA_ARCH__ == X*100 + Y*10`` (1200 for ``sm_120a``).  Every
spelling of one GPU parses to one name (:func:`parse_arch`: ``sm_121``, ``121`` and
``12.1`` are ``sm_121a``), the name every cache key and record holds.
Python gates speak in *major* versions (``supported_major_versions=[9, 10]``),
so this module also maps a set of majors to the architectures it admits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from contrib.errors import UsageError

# (major, minor) pairs nvcc knows (CUDA 12.x/13.x).  Anything else is a typo.
KNOWN: tuple[tuple[int, int], ...] = (
    (7, 0), (7, 2), (7, 5),
    (8, 0), (8, 6), (8, 7), (8, 9),
    (9, 0),
    (10, 0), (10, 1), (10, 3),
    (11, 0),
    (12, 0), (12, 1),
)
# A GPU of each family the upstreams build for, as (major, minor): Ampere, Hopper,
# Blackwell and Blackwell's GeForce/RTX parts.  What is false on all of them is false on
# any NVIDIA GPU, whatever its arch (a ROCm switch, a platform's flag).
NVIDIA_FAMILIES: tuple[tuple[int, int], ...] = ((8, 0), (9, 0), (10, 0), (12, 0))
EXAMPLES = "sm_90a, sm_100a, sm_103a, sm_110a, sm_120a, sm_120f, sm_121a"
# every spelling but the dotted one: sm_121a, sm121, SM_121, compute_121a, 121 (ASCII digits
# only: ``\d`` takes any script's)
_NAMED = re.compile(r"(?:sm_?|compute_?)?(?P<digits>[0-9]{2,3})(?P<suffix>[af]?)", re.ASCII)
_CAPABILITY = re.compile(r"(?P<major>[0-9]{1,2})\.(?P<minor>[0-9])(?P<suffix>[af]?)", re.ASCII)


@dataclass(frozen=True)
class Arch:
    """One GPU architecture, e.g. ``Arch("sm_120a", 12, 0, "a")``."""

    name: str
    major: int
    minor: int
    suffix: str = ""

    @property
    def cuda_arch(self) -> int:
        """The value of ``__CUDA_ARCH__`` in this architecture's device pass."""
        return self.major * 100 + self.minor * 10

    @property
    def compute(self) -> str:
        """The virtual architecture nvcc targets with ``-arch=compute_XY``."""
        return f"compute_{self.major}{self.minor}{self.suffix}"

    @property
    def capability(self) -> str:
        """Compute capability as ``nvidia-smi`` prints it: ``"12.0"``."""
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        return self.name


def parse_arch(text: str) -> Arch:
    """Parse an architecture name into an Arch; one normalisation for every spelling.

    The rule: the digits name the GPU (``121``, ``sm_121``, ``sm121``, ``SM_121``,
    ``compute_121`` and the compute capability ``12.1`` are all GB10's 12.1); a suffix
    given (``a`` arch-specific, ``f`` family) is taken as written; without one, a GPU
    from 9.0 on means its arch-specific target, so ``sm_121``, ``121`` and ``12.1`` are
    all ``sm_121a`` and never a second arch (nor a second audit in the cache) beside
    it.  Below 9.0 there is no ``a`` target: ``sm_89`` stays plain.  flashinfer
    normalises its ``FLASHINFER_CUDA_ARCH_LIST`` the same way (``_normalize_cuda_arch``
    in ``compilation_context.py``: a suffix respected as-is, else ``a`` from 9.0 on),
    and the upstreams build these GPUs' kernels for ``compute_120a``/``compute_121a``;
    a plain ``sm_120`` build would lose every kernel behind
    ``__CUDA_ARCH_FEAT_SM120_ALL``, a question about no build anyone runs.  Digits must
    be ASCII.  Raises UsageError (exit 2) naming the bad value and listing examples.
    """
    cleaned = text.strip().lower()
    named = _NAMED.fullmatch(cleaned)
    dotted = None if named else _CAPABILITY.fullmatch(cleaned)
    if named is not None:
        digits, suffix = named["digits"], named["suffix"]
    elif dotted is not None:
        digits, suffix = dotted["major"] + dotted["minor"], dotted["suffix"]
    else:
        raise UsageError(f"unknown GPU architecture {text!r}: expected e.g. {EXAMPLES}")
    major, minor = int(digits[:-1]), int(digits[-1])
    if (major, minor) not in KNOWN:
        known = ", ".join(f"sm_{a}{b}" for a, b in KNOWN)
        raise UsageError(
            f"unknown GPU architecture {text!r}: sm_{digits} does not exist "
            f"(known: {known}; e.g. {EXAMPLES})"
        )
    if not suffix and major >= 9:
        suffix = "a"
    if suffix == "a" and major < 9:
        raise UsageError(f"{text!r}: arch-specific 'a' targets start at sm_90a (e.g. {EXAMPLES})")
    if suffix == "f" and major < 10:
        raise UsageError(f"{text!r}: family 'f' targets start at sm_100f (e.g. {EXAMPLES})")
    return Arch(f"sm_{major}{minor}{suffix}", major, minor, suffix)


def parse_archs(text: str) -> list[Arch]:
    """A family side by side, ``sm_120a,sm_121a``: each name parsed
    (:func:`parse_arch`), an empty one too (``""``, ``"sm_120a,"`` are exit 2)."""
    return [parse_arch(name) for name in text.split(",")]


def representative(major: int) -> Arch:
    """The architecture a gate admitting ``major`` builds first: ``sm_X0``, ``a`` from 9 on."""
    minors = sorted(minor for maj, minor in KNOWN if maj == major)
    if not minors:
        raise UsageError(f"no known GPU architecture has major version {major}")
    suffix = "a" if major >= 9 else ""
    return Arch(f"sm_{major}{minors[0]}{suffix}", major, minors[0], suffix)


def archs_of_major(major: int) -> list[Arch]:
    """Every known architecture with this major version, lowest first."""
    suffix = "a" if major >= 9 else ""
    return [Arch(f"sm_{a}{b}{suffix}", a, b, suffix) for a, b in KNOWN if a == major]


def admitted_archs(majors: Iterable[int]) -> list[Arch]:
    """The representative architecture of each known major in ``majors``, lowest first."""
    known_majors = {major for major, _ in KNOWN}
    return [representative(m) for m in sorted(set(majors)) if m in known_majors]


def admits(majors: Iterable[int], arch: Arch) -> bool:
    """Whether a gate admitting ``majors`` admits ``arch``."""
    return arch.major in set(majors)


def all_majors() -> list[int]:
    """Every major version contrib knows, lowest first (the universe gates range over)."""
    return sorted({major for major, _ in KNOWN})


def nearest_lower(arch: Arch, candidates: Iterable[Arch]) -> Arch | None:
    """The candidate closest below ``arch`` (by __CUDA_ARCH__), else the closest above."""
    pool = [c for c in candidates if c.cuda_arch != arch.cuda_arch]
    lower = [c for c in pool if c.cuda_arch < arch.cuda_arch]
    if lower:
        return max(lower, key=lambda c: c.cuda_arch)
    return min(pool, key=lambda c: c.cuda_arch) if pool else None


def arch_macros(arch: Arch | None) -> dict[str, str]:
    """Macros nvcc predefines for this pass (None: the host pass).

    ``__CUDA_ARCH_SPECIFIC__``/``__CUDA_ARCH_FEAT_SMXY_ALL`` exist for ``a``
    targets and ``__CUDA_ARCH_FAMILY_SPECIFIC__`` for ``f`` targets (CUDA 12.9+).
    """
    macros = {"__CUDACC__": "1", "__NVCC__": "1"}
    if arch is None:
        return macros
    macros["__CUDA_ARCH__"] = str(arch.cuda_arch)
    if arch.suffix == "a":
        macros["__CUDA_ARCH_SPECIFIC__"] = str(arch.cuda_arch)
        macros[f"__CUDA_ARCH_FEAT_SM{arch.major}{arch.minor}_ALL"] = "1"
    elif arch.suffix == "f":
        macros["__CUDA_ARCH_FAMILY_SPECIFIC__"] = str(arch.cuda_arch)
    return macros
