"""What a gate admits: whole GPU majors, and single capabilities where the code names minors.

``supported_major_versions=[9, 10]`` admits majors; ``@supported_compute_capability([100,
103, 120])`` lists capabilities (major * 10 + minor), so it admits 12.0 and not 12.1:
flashinfer opened ``nvfp4_attention_sm120_fwd`` to 12.1 apart (``[120]`` ->
``[120, 121]``, #3897), as it did ``fmha_v2_prefill_deepseek`` (``is_sm120a_supported``,
whose body tests ``minor == 0``, widened by ``or is_sm121a_supported``, #2559).  A major
is whole when every capability of it that was read (or, for a list, that nvcc knows) is
admitted; otherwise its admitted capabilities are kept one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from contrib.arch import KNOWN, Arch

Cap = tuple[int, int]


@dataclass(frozen=True)
class Capabilities:
    """The capabilities a gate admits: ``whole`` majors, and ``single`` (major, minor)
    pairs of majors it splits.  Iterating gives the majors it admits anything of (the
    majors view older readers take); ask :meth:`admits` for one architecture."""

    whole: frozenset[int] = frozenset()
    single: frozenset[Cap] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "single",
                           frozenset(c for c in self.single if c[0] not in self.whole))

    @classmethod
    def of_majors(cls, majors: Iterable[int]) -> Capabilities:
        """Whole majors (a JIT build list, a major test)."""
        return cls(frozenset(majors))

    @classmethod
    def listed(cls, caps: Iterable[Cap]) -> Capabilities:
        """Capabilities a list names: a major is whole when every capability nvcc
        knows of it is listed (``[120, 121]`` is major 12; ``[100, 103]`` is not 10)."""
        named = frozenset(caps)
        majors = {major for major, _ in named}
        whole = frozenset(m for m in majors
                          if all((m, n) in named for a, n in KNOWN if a == m))
        return cls(whole, named)

    @classmethod
    def read(cls, truths: Iterable[tuple[Cap, bool]]) -> Capabilities:
        """Capabilities an expression was read on, each with whether it may be true
        there: a major is whole when it is true on every capability read of it."""
        seen: dict[int, list[bool]] = {}
        true: set[Cap] = set()
        for cap, truth in truths:
            seen.setdefault(cap[0], []).append(truth)
            if truth:
                true.add(cap)
        return cls(frozenset(m for m, t in seen.items() if all(t)), frozenset(true))

    def admits(self, major: int, minor: int) -> bool:
        """Whether the capability ``major.minor`` is admitted."""
        return major in self.whole or (major, minor) in self.single

    def admits_arch(self, arch: Arch) -> bool:
        """Whether ``arch`` is admitted, by its major and minor."""
        return self.admits(arch.major, arch.minor)

    def splits(self, major: int) -> bool:
        """Whether some capability of ``major`` is admitted and not all of it."""
        return major not in self.whole and any(c[0] == major for c in self.single)

    @property
    def majors(self) -> frozenset[int]:
        """Every major it admits a capability of."""
        return self.whole | {c[0] for c in self.single}

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.majors))

    def __len__(self) -> int:
        return len(self.majors)

    def __contains__(self, major: object) -> bool:
        return major in self.majors

    def numbers(self) -> str:
        """``10, 11, 12.0``: whole majors bare, single capabilities dotted, in order."""
        items = [(m, -1) for m in self.whole] + sorted(self.single)
        return ", ".join(str(m) if n < 0 else f"{m}.{n}" for m, n in sorted(items))

    def text(self) -> str:
        """``majors 9, 10``; ``majors 11, 12 and capabilities 10.0, 10.3``;
        ``capability 12.0``; ``majors none``."""
        parts = []
        if self.whole:
            parts.append("majors " + ", ".join(map(str, sorted(self.whole))))
        if self.single:
            word = "capability " if len(self.single) == 1 else "capabilities "
            parts.append(word + ", ".join(f"{m}.{n}" for m, n in sorted(self.single)))
        return " and ".join(parts) or "majors none"

    def cache(self) -> list[int | list[int]]:
        """As data: a whole major as its number, a single capability as ``[major, minor]``."""
        return [*sorted(self.whole), *([m, n] for m, n in sorted(self.single))]

    @classmethod
    def from_cache(cls, value: object) -> Capabilities | None:
        """Back from :meth:`cache`; None for anything not of that shape."""
        if not isinstance(value, list):
            return None
        whole: set[int] = set()
        single: set[Cap] = set()
        for item in value:
            if _int(item):
                whole.add(item)
            elif isinstance(item, list) and len(item) == 2 and all(_int(v) for v in item):
                single.add((item[0], item[1]))
            else:
                return None
        return cls(frozenset(whole), frozenset(single))


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
