"""Compile units to PTX as the upstream builds them: the one path validate's PTX stage
and ``audit --compile`` share.

The flags come from the upstream's build code at the commit
(:mod:`contrib.analysis.buildflags`: a profile's Python build files, else the
``CMakeLists.txt`` that builds the unit, else contrib's nvcc essentials, said
so), then the unit's own (a JIT gate's ``extra_cuda_cflags``), then the
caller's (``validation.ptx_flags``); the headers and the cache are
:mod:`contrib.analysis.ptxjobs`' and :mod:`contrib.analysis.ptx_cache`'s.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from contrib.analysis.buildflags import BuildFlags, NvccFlag, essentials, merged, read_python
from contrib.analysis.cmakeflags import cmake_flags
from contrib.analysis.profiles import Profile
from contrib.analysis.ptx import Outcome
from contrib.analysis.ptx_cache import Job, compile_all, nvcc_identity
from contrib.analysis.ptxjobs import PtxRequest, jobs_for, prepare_headers
from contrib.analysis.tree import SourceTree

CMAKE = "CMakeLists.txt"


@dataclass
class Compiled:
    """What :func:`compile_units` did: each unit's job and outcome, the flags read."""

    jobs: list[Job]
    outcomes: list[Outcome]
    read: dict[str, BuildFlags]  # unit -> the flags its upstream's build passes
    dirs: list[Path]
    nvcc: str  # nvcc's identity

    def flags_from(self) -> str:
        """Where the flags came from, every origin once."""
        return "; ".join(dict.fromkeys(f.origin() for f in self.read.values())) or "no unit"

    def fallback(self) -> bool:
        """Whether some unit compiled with contrib's essentials, nothing read."""
        return any(f.fallback for f in self.read.values())


def unit_flags(tree: SourceTree, profile: Profile, units: Sequence[str]) -> dict[str, BuildFlags]:
    """The flags the upstream's build passes to each unit: the profile's Python build
    files where they hold any (the same for every unit), else the nearest
    ``CMakeLists.txt`` above the unit that sets CUDA flags, else :func:`essentials`."""
    read = read_python(tree, dict.fromkeys(s.path for s in profile.flag_sources))
    if not read.fallback:
        return {unit: read for unit in units}
    lists = sorted((p for p in tree.paths() if posixpath.basename(p) == CMAKE),
                   key=lambda p: -p.count("/"))
    return {unit: _from_cmake(tree, lists, unit) for unit in units}


def _from_cmake(tree: SourceTree, lists: list[str], unit: str) -> BuildFlags:
    for path in lists:  # deepest first
        folder = posixpath.dirname(path)
        if folder and not unit.startswith(folder + "/"):
            continue
        text = tree.read_text(path)
        flags = cmake_flags(text).for_unit(unit[len(folder) + 1 if folder else 0:]) if text else []
        if flags:
            return BuildFlags(tuple(NvccFlag(flag, path, line) for flag, line in flags))
    return essentials()


def compile_units(req: PtxRequest, nvcc: str, own: Mapping[str, Sequence[str]],
                  extra_dirs: list[str], sass: str | None = None) -> Compiled:
    """Every unit of ``req`` compiled (or read from the PTX cache) with the upstream's flags,
    its ``own`` ones and ``req.extra_flags``."""
    read = unit_flags(req.tree, req.profile, [u.path for u in req.units])
    flags_of = {u.path: merged(read[u.path], own.get(u.path, ()), req.extra_flags)
                for u in req.units}
    root, dirs, outside = prepare_headers(req, extra_dirs)
    identity = nvcc_identity(nvcc)
    jobs = jobs_for(req, flags_of, root, dirs, outside, identity, sass)
    outcomes = compile_all(nvcc, jobs, req.workdir / "ptx-out", progress=req.progress)
    return Compiled(jobs, outcomes, read, dirs, identity)
