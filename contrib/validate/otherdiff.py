"""How two builds of one unit for one arch differ, function by function, as values.

The ``others`` stage compiles each unit at the base and patched for an arch the
upstream already ships; this compares the two
(:class:`~contrib.analysis.ptxbuilds.Build`) by each function's
:class:`~contrib.analysis.ptxshape.Shape`.  Kernel entries are grouped by their
demangled name, so flashinfer's 480 instantiations of
``lamport_style_one_shot_all_reduce_norm_kernel`` are one line; device
functions and module-scope data count too (a kernel that calls a changed
``.func`` is the same entry), but only entries count as kernels.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from contrib.analysis.ptx import demangle
from contrib.analysis.ptxbuilds import Build
from contrib.analysis.ptxshape import MODULE, change


class How(StrEnum):
    """What happened to a function between the base and the patched build."""

    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"


@dataclass
class Difference:
    """A kernel (all entries of one demangled name), a device function or the module
    data that differ between base and patched for one arch."""

    arch: str
    unit: str
    name: str  # demangled kernel, ".func NAME", or MODULE
    how: How
    entries: int = 0  # how many PTX entries (instantiations) of it differ
    of: int = 0  # of how many it has
    before: int = 0  # instructions at the base (summed over the entries)
    after: int = 0
    added: Counter[str] = field(default_factory=Counter)  # opcodes gained
    removed: Counter[str] = field(default_factory=Counter)

    @property
    def kernel(self) -> bool:
        return not self.name.startswith(".func ") and self.name != MODULE

    def text(self) -> str:
        """``kernel k (csrc/a.cu): 1 of 1 entries changed, 18 -> 3 instructions (-1 add.f32, ...)``."""
        what = (f"kernel {self.name}" if self.kernel else "module-scope data" if self.name == MODULE
                else f"device function {self.name[6:]}")
        count = f"{self.entries} of {self.of} entries " if self.kernel and self.of > 1 else ""
        ops = [f"+{n} {op}" for op, n in self.added.most_common(3)] + \
            [f"-{n} {op}" for op, n in self.removed.most_common(3)]
        more = len(self.added) + len(self.removed) - len(ops)
        delta = f" ({', '.join(ops)}{f' and {more} more opcodes' if more > 0 else ''})" if ops else ""
        return (f"{what} ({self.unit}): {count}{self.how}, {self.before} -> {self.after} "
                f"instructions{delta}")

    def to_dict(self) -> dict[str, Any]:
        return {"arch": self.arch, "unit": self.unit, "name": self.name, "how": str(self.how),
                "kernel": self.kernel, "entries": self.entries, "of": self.of,
                "instructions_before": self.before, "instructions_after": self.after,
                "added": dict(sorted(self.added.items())),
                "removed": dict(sorted(self.removed.items())), "text": self.text()}


@dataclass
class Compared:
    """One unit for one arch: its kernel entries identical, and what differs."""

    unit: str
    arch: str
    identical: int = 0
    entries: int = 0  # the patched build's kernel entries (the base's where it has none)
    differences: list[Difference] = field(default_factory=list)


def compare(unit: str, arch: str, base: Build | None, patched: Build) -> Compared:
    """``patched`` against ``base`` (None: the unit is new); both compiled."""
    before = base.shapes if base is not None else {}
    after = patched.shapes
    result = Compared(unit, arch)
    grouped: dict[tuple[str, How], Difference] = {}
    names = list(dict.fromkeys([*before, *after]))
    totals = Counter(_label(n) for n in names)
    for name in names:
        old, new = before.get(name), after.get(name)
        if old is not None and new is not None and old.digest == new.digest:
            result.identical += _is_entry(name)
            continue
        how = How.ADDED if old is None else How.REMOVED if new is None else How.CHANGED
        label = _label(name)
        diff = grouped.setdefault((label, how), Difference(arch, unit, label, how, of=totals[label]))
        diff.entries += 1
        diff.before += old.instructions if old is not None else 0
        diff.after += new.instructions if new is not None else 0
        if old is not None and new is not None:
            delta = change(old, new)
            diff.added.update(delta.added)
            diff.removed.update(delta.removed)
        elif new is not None:
            diff.added.update(new.ops)
        elif old is not None:
            diff.removed.update(old.ops)
    result.entries = sum(_is_entry(n) for n in (after or before))
    result.differences = list(grouped.values())
    return result


def _is_entry(name: str) -> int:
    return int(not name.startswith(".func ") and name != MODULE)


def _label(name: str) -> str:
    return demangle(name) if _is_entry(name) else name
