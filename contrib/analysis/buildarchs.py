"""Which architectures an upstream itself builds a CUDA unit for, read at a commit.

A patch for SM12x must leave what the upstream already ships untouched; that is
asked of the archs the upstream builds the unit for, never of a list contrib
makes up.  Where it is written, first found wins:

1. a touched JIT gate whose function builds the unit: its list before the patch
   (flashinfer's ``gen_trtllm_comm_module``,
   ``get_nvcc_flags_list(supported_major_versions=[9, 10])``);
2. any JIT build list of the tree whose function builds the unit (a patch that
   touches only a header leaves the gate as it was);
3. the ``compute_NN`` of the nearest ``CMakeLists.txt`` above the unit
   (sglang's sgl-kernel: :func:`contrib.analysis.aotops.cmake_majors`).

Each major stands for the arch its builds compile first (``sm_90a``,
``sm_100a``: :func:`contrib.arch.admitted_archs`); the variant nvcc is given is
the upstream profile's (``compute_100a``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from contrib.analysis import gates
from contrib.analysis.aotops import cmake_majors
from contrib.analysis.includes import find_units
from contrib.analysis.jitsources import built_sources
from contrib.analysis.pyparse import PARSE_ERRORS
from contrib.analysis.tree import SourceTree

JIT_WORD = gates.KEYWORD.value  # "supported_major_versions": a JIT build list


@dataclass(frozen=True)
class ArchList:
    """The majors a unit is built for, and where that is written (``file:line``)."""

    majors: tuple[int, ...]
    origin: str  # "supported_major_versions=[9, 10] in gen_x (flashinfer/jit/comm.py:191)"


class ArchLists:
    """The arch lists of one tree's units, the tree's JIT lists read once."""

    def __init__(self, tree: SourceTree, touched: Sequence[gates.TouchedGate] = ()) -> None:
        self.tree, self.touched = tree, list(touched)
        self._scans: dict[str, gates.Scan | None] = {}

    def of(self, unit: str) -> ArchList | None:
        """Where the tree says which majors build ``unit``; None where it does not."""
        for gate in self.touched:
            before = gate.before
            if before is not None and before.kind == gates.KEYWORD and \
                    unit in find_units(self.tree, gate.sources):
                return ArchList(tuple(sorted(gate.majors_before)), _where(before))
        return self._jit(unit) or self._cmake(unit)

    def _jit(self, unit: str) -> ArchList | None:
        name = posixpath.basename(unit)
        stem = name.rsplit(".", 1)[0]
        majors: set[int] = set()
        origins: list[str] = []
        for path, text in self._lists:
            found = self._scan(path, text) if stem in text else None
            if found is None:
                continue
            for gate in found.gates:
                if gate.kind != gates.KEYWORD or gate.admits is None:
                    continue
                names = built_sources(found.functions, gate.function, None, found.strings)
                if unit in find_units(self.tree, names):
                    majors |= gate.admits.majors
                    origins.append(_where(gate))
        if not origins:
            return None
        more = f" (+{len(origins) - 2} more)" if len(origins) > 2 else ""
        return ArchList(tuple(sorted(majors)), "; ".join(origins[:2]) + more)

    @cached_property
    def _lists(self) -> list[tuple[str, str]]:
        """Each Python file that holds a JIT build list, with its text."""
        texts = ((p, self.tree.read_text(p) or "") for p in self.tree.paths() if p.endswith(".py"))
        return [(path, text) for path, text in texts if JIT_WORD in text]

    def _scan(self, path: str, text: str) -> gates.Scan | None:
        """The file's gates, scanned once (read alone: a build list is a literal)."""
        if path not in self._scans:
            try:
                self._scans[path] = gates.scan(path, text)
            except PARSE_ERRORS:
                self._scans[path] = None
        return self._scans[path]

    def _cmake(self, unit: str) -> ArchList | None:
        found = cmake_majors(self.tree, unit)
        if found is None or not found[1]:
            return None
        return ArchList(found[1], f"the compute_NN of {found[0]}")


def _where(gate: gates.Gate) -> str:
    return f"`{' '.join(gate.text.split())}` in {gate.function} ({gate.file}:{gate.line})"
