"""Which shipped device code a GPU runs: CUDA's compatibility rules as one table.

A fat binary carries SASS (machine code for one real architecture, ``sm_XY``) and PTX
(``compute_XY``, the virtual ISA the driver compiles when the module loads).  Whether
a GPU of compute capability X.Z runs an image depends on the image's kind and suffix
alone, by NVIDIA's rules: the CUDA C++ Programming Guide's binary and PTX
compatibility, and for the ``a`` and ``f`` targets the CUDA 12.9 note "NVIDIA Blackwell
and NVIDIA CUDA 12.9 Introduce Family-Specific Architecture Features"
(https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-family-specific-architecture-features/):
plain ``sm_XY`` SASS runs on X.Z for Z >= Y; ``sm_XYa`` on X.Y only; ``sm_XYf`` on the
family from X.Y up (same major, minor >= Y); plain ``compute_XY`` PTX JIT-compiles on
every capability >= X.Y; ``compute_XYa``/``compute_XYf`` PTX as their SASS.

:data:`RULES` is that table; :func:`judge` reads an object's images against one GPU.
Real case: sglang-kernel 0.4.10's aarch64 ``infllm_ops`` carries ``sm_90`` and
``sm_120a`` SASS and no PTX, so GB10 (12.1) gets no image: ``sm_120a`` runs on 12.0
alone, and ``sm_90`` on 9.x.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from contrib.arch import Arch


class ImageKind(StrEnum):
    """What an image in a fat binary is."""

    SASS = "sass"  # machine code for one real architecture (``sm_XY``)
    PTX = "ptx"  # the virtual ISA (``compute_XY``), compiled by the driver at load


class Variant(StrEnum):
    """The suffix of a target: none, arch-specific ``a`` or family-specific ``f``."""

    PLAIN = ""
    SPECIFIC = "a"
    FAMILY = "f"


class Reach(StrEnum):
    """Which compute capabilities an image of X.Y serves."""

    EXACT = "X.Y only"
    FAMILY = "X.Z for Z >= Y"
    UPWARD = "every capability >= X.Y"


class ImageVerdict(StrEnum):
    """What one GPU gets from an object: its own SASS, PTX the driver compiles, or nothing
    ("no kernel image is available for execution on the device")."""

    NATIVE = "native"
    PTX_JIT = "ptx-jit"
    NO_IMAGE = "no-image"


# The one table: (kind, suffix) -> the capabilities an image of X.Y serves.
RULES: dict[tuple[ImageKind, Variant], Reach] = {
    (ImageKind.SASS, Variant.PLAIN): Reach.FAMILY,
    (ImageKind.SASS, Variant.SPECIFIC): Reach.EXACT,
    (ImageKind.SASS, Variant.FAMILY): Reach.FAMILY,
    (ImageKind.PTX, Variant.PLAIN): Reach.UPWARD,
    (ImageKind.PTX, Variant.SPECIFIC): Reach.EXACT,
    (ImageKind.PTX, Variant.FAMILY): Reach.FAMILY,
}

# What the driver does with PTX, said wherever a verdict is ptx-jit.
JIT_COST = ("the driver compiles the PTX when the object's module loads (its first "
            "launch under lazy loading): seconds to minutes for a large object, on every "
            "process until the result sits in the JIT cache (~/.nv/ComputeCache, sized by "
            "CUDA_CACHE_MAXSIZE); a driver older than the PTX's ISA cannot compile it")

# cuobjdump names an image ``sm_90a`` whether SASS or PTX; nvcc spells PTX ``compute_``.
_TARGET = re.compile(r"(?:sm|compute)_(?P<digits>[0-9]{2,3})(?P<suffix>[af]?)", re.ASCII)


@dataclass(frozen=True, order=True)
class Image:
    """One image of a fat binary, e.g. SASS for ``sm_120a`` or PTX for ``compute_90``."""

    kind: ImageKind
    major: int
    minor: int
    variant: Variant = Variant.PLAIN

    @classmethod
    def parse(cls, kind: ImageKind, target: str) -> Image | None:
        """``sm_120a`` (or ``compute_120a``) as an image of ``kind``; None if not a target."""
        found = _TARGET.fullmatch(target)
        if found is None:
            return None
        digits = found["digits"]
        return cls(kind, int(digits[:-1]), int(digits[-1]), Variant(found["suffix"]))

    @property
    def target(self) -> str:
        """How nvcc names it: ``sm_120a`` for SASS, ``compute_90`` for PTX."""
        prefix = "sm" if self.kind is ImageKind.SASS else "compute"
        return f"{prefix}_{self.major}{self.minor}{self.variant.value}"

    @property
    def reach(self) -> Reach:
        return RULES[(self.kind, self.variant)]

    def runs_on(self, major: int, minor: int) -> bool:
        """Whether a GPU of compute capability ``major.minor`` runs (or JITs) this image."""
        reach = self.reach
        if reach is Reach.EXACT:
            return (major, minor) == (self.major, self.minor)
        if reach is Reach.FAMILY:
            return major == self.major and minor >= self.minor
        return (major, minor) >= (self.major, self.minor)

    def __str__(self) -> str:
        return self.target


@dataclass(frozen=True)
class Judgement:
    """One object's verdict for one GPU, and the image (and so the rule) that gives it."""

    verdict: ImageVerdict
    image: Image | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"verdict": self.verdict.value,
                "image": self.image.target if self.image else None,
                "rule": self.image.reach.value if self.image else None}


# The first CUDA release whose nvcc builds each architecture (CUDA Toolkit release
# notes: Blackwell sm_100/sm_101/sm_120 in 12.8; sm_103 and sm_121 in 12.9; sm_110 in
# 13.0, where sm_101 became sm_110), and the last one for those 13.0 dropped (offline
# compilation for Volta, and the sm_101 name).  ``f`` targets start with 12.9 (the
# family-specific note above); ``sm_90a`` with 12.0.
NVCC_SINCE: dict[tuple[int, int], tuple[int, int]] = {
    (7, 0): (9, 0), (7, 2): (10, 0), (7, 5): (10, 0), (8, 0): (11, 0), (8, 6): (11, 1),
    (8, 7): (11, 4), (8, 9): (11, 8), (9, 0): (11, 8), (10, 0): (12, 8), (10, 1): (12, 8),
    (10, 3): (12, 9), (11, 0): (13, 0), (12, 0): (12, 8), (12, 1): (12, 9),
}
NVCC_UNTIL: dict[tuple[int, int], tuple[int, int]] = {(7, 0): (12, 9), (7, 2): (12, 9),
                                                      (10, 1): (12, 9)}
_VARIANT_SINCE = {Variant.PLAIN: (0, 0), Variant.SPECIFIC: (12, 0), Variant.FAMILY: (12, 9)}


def nvcc_builds(image: Image, cuda: tuple[int, int]) -> bool | None:
    """Whether the nvcc of CUDA ``cuda`` builds ``image``'s target (``compute_120f``
    needs 12.9: an older nvcc stops with "Unsupported gpu architecture"); None for an
    architecture not in :data:`NVCC_SINCE`."""
    arch = (image.major, image.minor)
    since = NVCC_SINCE.get(arch)
    if since is None:
        return None
    until = NVCC_UNTIL.get(arch, (99, 9))
    return max(since, _VARIANT_SINCE[image.variant]) <= cuda <= until


def judge(images: Iterable[Image], arch: Arch) -> Judgement:
    """What a GPU of ``arch``'s capability gets from an object carrying ``images``: the
    highest SASS it runs (native), else the highest PTX the driver can JIT for it, as
    the driver picks, else nothing."""
    runnable = sorted(i for i in images if i.runs_on(arch.major, arch.minor))
    for kind, verdict in ((ImageKind.SASS, ImageVerdict.NATIVE),
                          (ImageKind.PTX, ImageVerdict.PTX_JIT)):
        best = [i for i in runnable if i.kind is kind]
        if best:
            return Judgement(verdict, best[-1])
    return Judgement(ImageVerdict.NO_IMAGE)
